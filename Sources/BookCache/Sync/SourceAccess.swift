import DownloadQueue
import Foundation

/// What a catalogue's owner asks to be sent to its host: a login and extra headers (a bearer
/// token). Both go only to the catalogue's own origin (scheme, host and port): its pages and the
/// books it serves itself, never books it links on another host.
struct SourceAccess: Sendable {
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

    /// Gives a book on the catalogue's own origin the login and headers.
    func apply(to request: inout BookDownloadRequest) {
        guard applies(to: request.url) else { return }
        request.credentials = credentials
        request.headers = headers
    }

    func applies(to url: URL) -> Bool {
        guard let origin else { return false }
        return HTTPCredentials.sameOrigin(origin, url)
    }
}
