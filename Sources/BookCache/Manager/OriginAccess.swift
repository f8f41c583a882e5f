import DownloadQueue
import Foundation

/// A login and extra headers (a bearer token) for one origin (scheme, host and port): a
/// catalogue's, given to its pages and the books it serves itself, or a book's, given to its
/// cover when the cover is on the same origin — never to another host.
struct OriginAccess: Sendable {
    var credentials: HTTPCredentials?
    var headers: [HTTPHeader]
    /// The origin they are for; `nil` for a source read from a file, whose books get neither.
    var origin: URL?

    /// The transport request for a page of the catalogue.
    func request(for url: URL) -> TransportRequest {
        let mine = applies(to: url)
        return TransportRequest(
            url: url, headers: mine ? headers.map { ($0.name, $0.value) } : [], credentials: mine ? credentials : nil)
    }

    /// Gives a book on this origin the login and headers.
    func apply(to request: inout BookDownloadRequest) {
        guard applies(to: request.url) else { return }
        request.credentials = credentials
        request.headers = headers
    }

    /// Gives a job on this origin the login and headers.
    func apply(to job: inout DownloadRequest) {
        guard applies(to: job.url) else { return }
        job.credentials = credentials
        job.headers = headers
    }

    func applies(to url: URL) -> Bool {
        guard let origin else { return false }
        return HTTPCredentials.sameOrigin(origin, url)
    }
}
