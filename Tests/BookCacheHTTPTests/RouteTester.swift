import BookCache
import BookCacheTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOEmbedded

@testable import BookCacheHTTP

/// The service's routes called in process: the router `bookcache serve` runs (every middleware
/// and route collection), a request made here, its response read whole — no socket, no process.
/// The connection is a testing channel, so a book's file is read by the route itself rather than
/// sent with `sendfile` (the spawned-process tests cover that path).
struct RouteTester {
    let directory: TemporaryDirectory
    let manager: BookCacheManager
    let service: DownloadService
    let access: ServiceAccess
    let responder: any HTTPResponder<ServiceRequestContext>
    /// The `Host` every request names (the service's own address).
    static let host = "127.0.0.1:8787"

    init() throws {
        directory = try TemporaryDirectory("routes")
        let root = directory.path("cache")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let logger = Logger(label: "routes")
        manager = BookCacheManager(configuration: .init(rootDirectory: root))
        service = DownloadService(manager: manager, logger: logger)
        access = try ServiceAccess(tokenFile: root.appendingPathComponent("service.token"))
        let server = APIServer(service: service, access: access, options: .init(), logger: logger)
        let streams = EventStreams(service: service, limits: .init(), logger: logger)
        let router = server.router(allowedHosts: HostList(APIServer.allowedHosts(host: "127.0.0.1", port: 8787)), streams: streams)
        responder = router.buildResponder()
    }

    /// Runs `body` with the routes of a new, empty cache, and removes the cache after.
    static func with(_ body: (RouteTester) async throws -> Void) async throws {
        let routes = try RouteTester()
        defer { routes.directory.remove() }
        try await body(routes)
    }

    /// A response, its body read whole.
    struct Answer {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: Data
        var text: String { String(decoding: body, as: UTF8.self) }
        var json: [String: Any] { ((try? JSONSerialization.jsonObject(with: body)) as? [String: Any]) ?? [:] }
        /// The error's `kind` in the API's JSON error body.
        var errorKind: String? { (json["error"] as? [String: Any])?["kind"] as? String }
    }

    /// Sends a request as a client would: with the token unless `token` is false, to ``host``.
    func send(
        _ method: HTTPRequest.Method, _ path: String, token: Bool = true, headers: HTTPFields = [:], body: String? = nil,
        host: String = RouteTester.host
    ) async throws -> Answer {
        var fields = headers
        if token { fields[.authorization] = "Bearer \(access.token)" }
        if let body {
            fields[.contentType] = fields[.contentType] ?? "application/json"
            fields[.contentLength] = String(body.utf8.count)
        }
        let request = Request(
            head: HTTPRequest(method: method, scheme: nil, authority: host, path: path, headerFields: fields),
            body: RequestBody(buffer: ByteBuffer(string: body ?? "")))
        let context = ServiceRequestContext(source: .init(channel: NIOAsyncTestingChannel(), logger: Logger(label: "route")))
        let response = try await responder.respond(to: request, context: context)
        let collector = Collector()
        try await response.body.write(collector)
        return Answer(status: response.status, headers: response.headers, body: collector.bytes)
    }

    /// Caches `data` as `id` through the library (from the loopback server `server`).
    func cache(_ name: String, id: String, from server: TestHTTPServer) async throws {
        _ = try await manager.download(try BookDownloadRequest(url: "\(server.baseURL)/\(name)", id: BookID(parsing: id)))
    }

    /// Collects a response body.
    final class Collector: ResponseBodyWriter, @unchecked Sendable {
        var bytes = Data()
        func write(_ buffer: ByteBuffer) async throws { bytes.append(contentsOf: buffer.readableBytesView) }
        func finish(_ trailingHeaders: HTTPFields?) async throws {}
    }
}
