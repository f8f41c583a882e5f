import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// `bookcache serve`: the HTTP API (`/api/v1`) and the web page (`/`) in front of a
/// ``DownloadService``, which runs beside the server until SIGTERM or SIGINT.
public struct APIServer: Sendable {
    /// Where and how the server listens.
    public struct Options: Sendable {
        /// The address to listen on; loopback by default.
        public var host: String
        /// The port; 0 picks a free one.
        public var port: Int
        /// The largest request body accepted, in bytes.
        public var maxBodyBytes: Int
        /// Connections open at once; more wait in the listen backlog until one closes. Keep it
        /// below the open-file limit (`bookcache serve` raises the soft limit to the hard one and
        /// stays 256 below it).
        public var maxConnections: Int
        /// How long a connection may wait for a request's head to arrive whole — idle between
        /// requests, or sending it slowly — before it is closed.
        public var idleTimeout: Duration
        /// How long a request's body may take to arrive whole (`408` after).
        public var bodyTimeout: Duration
        /// Event streams (`/api/v1/events`) open at once; another is answered `503`.
        public var maxEventStreams: Int
        /// More names (or addresses) the service answers to in `Host`, beside its listening
        /// address and the loopback names: the machine's name or LAN address, so other devices
        /// (e-readers) reach it. Each is matched with the port.
        public var hostNames: [String]

        /// Creates options.
        public init(
            host: String = "127.0.0.1", port: Int = 8787, maxBodyBytes: Int = 8 << 20, maxConnections: Int = 1024,
            idleTimeout: Duration = .seconds(30), bodyTimeout: Duration = .seconds(30), maxEventStreams: Int = 512,
            hostNames: [String] = []
        ) {
            self.hostNames = hostNames
            self.host = host
            self.port = port
            self.maxBodyBytes = maxBodyBytes
            self.maxConnections = maxConnections
            self.idleTimeout = idleTimeout
            self.bodyTimeout = bodyTimeout
            self.maxEventStreams = maxEventStreams
        }
    }

    let service: DownloadService
    let access: ServiceAccess
    let options: Options
    let logger: Logger

    /// Creates a server.
    /// - Parameters:
    ///   - service: The queue and schedule it serves.
    ///   - access: The token and login sessions.
    ///   - options: The address and limits.
    ///   - logger: Where requests and the service log.
    public init(service: DownloadService, access: ServiceAccess, options: Options, logger: Logger) {
        self.service = service
        self.access = access
        self.options = options
        self.logger = logger
    }

    /// Runs the server and the service until SIGTERM or SIGINT: then it stops accepting
    /// requests, stops the downloads (their partial files are kept and their jobs queued for the
    /// next start) and returns.
    /// - Parameter onRunning: Called with the port once the server listens.
    public func run(onRunning: @escaping @Sendable (Int) async -> Void) async throws {
        let router = Router(context: ServiceRequestContext.self)
        let allowed = HostList(Self.allowedHosts(host: options.host, port: options.port, names: options.hostNames))
        // Every request, routed or not: its Host and the spelling of its target.
        router.add(middleware: FrontDoorMiddleware(allowedHosts: allowed))
        let streams = EventStreams(service: service, limits: .init(maxStreams: options.maxEventStreams), logger: logger)
        addRoutes(to: router, streams: streams)
        let runner = QueueRunner(service: service, logger: logger)
        let idle = options.idleTimeout.components
        let app = Application(
            router: router,
            server: .http1(configuration: .init(idleTimeout: .seconds(idle.seconds) + .nanoseconds(idle.attoseconds / 1_000_000_000))),
            configuration: .init(
                address: .hostname(options.host, port: options.port), serverName: nil,
                availableConnectionsDelegate: MaximumAvailableConnections(options.maxConnections, logger: logger)),
            services: [runner, streams],
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? options.port
                allowed.set(Self.allowedHosts(host: options.host, port: port, names: options.hostNames))
                await onRunning(port)
            },
            logger: logger)
        try await app.runService()
    }

    /// `Host` values the service answers to: its address and the loopback names, with the port.
    static func allowedHosts(host: String, port: Int, names more: [String] = []) -> Set<String> {
        var names: Set<String> = ["localhost", "127.0.0.1", "[::1]"]
        for name in [host] + more { names.insert(name.contains(":") && !name.hasPrefix("[") ? "[\(name)]" : name) }
        return Set(names.map { "\($0.lowercased()):\(port)" })
    }

    // MARK: - Routes

    private func addRoutes(to router: Router<ServiceRequestContext>, streams: EventStreams) {
        let service = self.service
        let manager = service.manager
        let access = self.access
        let maxBody = options.maxBodyBytes
        let bodyTimeout = options.bodyTimeout

        // The only routes open without the token or a session: the page (which holds no data
        // until it is logged in), the login link and the proof that this is the token's holder.

        router.get("/") { request, _ in
            // In the browser's language; the answer varies with it.
            let language = BookCacheLanguage(acceptLanguage: request.headers[.acceptLanguage])
            return Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                    .contentLanguage: language.rawValue, .vary: "Accept-Language",
                    .contentSecurityPolicy: "default-src 'self'; style-src 'self' 'unsafe-inline'; script-src 'self' 'unsafe-inline'",
                    .init("X-Frame-Options")!: "DENY",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: WebPage.html(language))))
        }
        router.get("/login") { request, _ in
            guard let code = request.uri.queryParameters.get("code"), let session = access.redeem(code) else {
                return Response(
                    status: .unauthorized, headers: [.contentType: "text/plain; charset=utf-8"],
                    body: ResponseBody(
                        byteBuffer: ByteBuffer(
                            string:
                                "This login link was used already, is older than 5 minutes, or is unknown. Run `bookcache serve --login-link` for a new one.\n"
                        )))
            }
            return Response(
                status: .seeOther,
                headers: [
                    .location: "/", .cacheControl: "no-store",
                    .setCookie: "\(ServiceAccess.cookieName)=\(session); Path=/; HttpOnly; SameSite=Strict",
                ])
        }

        // The service proves it holds the token before a client sends it (ServiceAccess.proof).
        router.get("/api/v1/proof") { request, _ -> Response in
            guard let nonce = request.uri.queryParameters.get("nonce"), let proof = ServiceAccess.proof(token: access.token, nonce: nonce)
            else {
                return APIResponse.error(.badRequest, kind: "invalidNonce", "nonce must be 64 lowercase hex digits")
            }
            struct Proof: Encodable { var proof: String }
            return APIResponse.json(Proof(proof: proof))
        }

        // The catalogue for e-readers: its own door (a reader login, or the token or a session).
        addOPDSRoutes(to: router, readers: ReaderLogins(cacheRoot: manager.layout.root))

        // Default deny: everything below, and every path no route matches, needs the token or
        // a session, decided on the route the router matched — never on how the path is spelled.
        router.add(middleware: RequireAccessMiddleware(access: access))
        // Handlers throw; the middleware answers each error with its status and JSON body.
        let api = router.group("api/v1").add(middleware: APIErrorMiddleware())
        api.post("login-links") { request, _ -> Response in
            // A new one-time link for the page (`bookcache serve --login-link`).
            let host = request.head.authority ?? "127.0.0.1"
            struct Link: Encodable { var url: String }
            return APIResponse.json(Link(url: "http://\(host)/login?code=\(access.newLoginCode())"), status: .created)
        }
        api.post("jobs") { request, _ -> Response in
            let body = try await Self.body(of: request, upTo: maxBody, within: bodyTimeout, "send the jobs in several requests")
            let jobs = try await service.submit(body)
            struct Accepted: Encodable { var jobs: [APIJob] }
            return APIResponse.json(Accepted(jobs: jobs.map(APIJob.init)), status: .accepted)
        }
        api.get("jobs") { request, _ -> Response in
            let limit = request.uri.queryParameters.get("limit").flatMap { Int($0) }
            return APIResponse.json(try await JobListing(of: service, limit: limit))
        }
        api.get("jobs/:id") { request, context -> Response in
            let id = context.parameters.get("id") ?? ""
            // ?wait=SECONDS (at most 60): answer once the job has ended, or when the time is up.
            let wait = request.uri.queryParameters.get("wait").flatMap { Int($0) }.map { min(max($0, 0), 60) }
            let found = if let wait { try await service.waitForEnd(of: id, timeout: .seconds(wait)) } else { try await service.job(id) }
            guard let job = found else { throw APIError.notFound("no job \(id)") }
            return APIResponse.json(APIJob(job: job))
        }
        api.post("jobs/:id/retry") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            guard let job = try await service.retry(id) else { throw APIError.notFound("no job \(id)") }
            return APIResponse.json(APIJob(job: job))
        }
        api.delete("jobs/:id") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            guard let job = try await service.cancel(id) else { throw APIError.notFound("no job \(id)") }
            return APIResponse.json(APIJob(job: job))
        }

        api.get("books") { request, _ -> Response in
            // With any of limit, after, sort, q, author, type or status: one page of the shelf,
            // `{"books": [...], "next": CURSOR}`, read from the index. Without: every book.
            if let query = try Self.shelfQuery(request) {
                let buffer = try await BlockingWork.run { () throws(BookCacheError) -> ByteBuffer in
                    let page = try manager.shelf(query)
                    var buffer = ByteBuffer(string: #"{"books": "#)
                    var writer = BookListJSON.Writer { bytes in buffer.writeBytes(bytes) }
                    for book in page.books { writer.add(book) }
                    writer.finish()
                    // A cursor is base64url: nothing in it needs escaping in a JSON string
                    buffer.writeString(page.next.map { #", "next": "\#($0)"}"# } ?? #", "next": null}"#)
                    return buffer
                }
                return Response(
                    status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                    body: ResponseBody(byteBuffer: buffer))
            }
            // `{"books": [...]}`, the array as `list --json` writes it: read row by row and written
            // by hand on a blocking-work thread (JSONEncoder took 2.3 s and 536 MiB for 100,000).
            let buffer = try await BlockingWork.run { () throws(BookCacheError) -> ByteBuffer in
                var buffer = ByteBuffer(string: #"{"books": "#)
                var writer = BookListJSON.Writer { bytes in buffer.writeBytes(bytes) }
                try manager.forEachBook { writer.add($0) }
                writer.finish()
                buffer.writeString("}")
                return buffer
            }
            return Response(
                status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: buffer))
        }
        api.delete("books") { _, _ -> Response in
            // Clear all: every book of the cache (the page asks first).
            let removed = try await manager.clear()
            for id in removed { service.bookRemoved(id.description) }
            struct Cleared: Encodable { var removed: Int }
            return APIResponse.json(Cleared(removed: removed.count))
        }
        api.delete("jobs") { _, _ -> Response in
            // Clear finished: forget the jobs that have ended; queued and running ones stay.
            struct Cleared: Encodable { var removed: Int }
            return APIResponse.json(Cleared(removed: try await service.removeEndedJobs()))
        }
        api.get("stats") { _, _ -> Response in
            APIResponse.json(try await manager.statistics())
        }
        api.get("books/:id") { _, context -> Response in
            APIResponse.json(APIBook(book: try await Self.book(context, in: manager)))
        }
        api.delete("books/:id") { _, context -> Response in
            let id = try BookID(parsing: context.parameters.get("id") ?? "")
            guard try await manager.delete(id) else { throw APIError.notFound(kind: "notCached", "\(id) is not cached") }
            service.bookRemoved(id.description)
            struct Deleted: Encodable { var deleted: String }
            return APIResponse.json(Deleted(deleted: id.description))
        }
        api.post("books/:id/refresh") { _, context -> Response in
            // Fetched again as a job (the page's Refresh): the cached copy stays readable until
            // the new one is validated.
            let jobs = try await service.refresh(try await Self.book(context, in: manager))
            struct Accepted: Encodable { var jobs: [APIJob] }
            return APIResponse.json(Accepted(jobs: jobs.map(APIJob.init)), status: .accepted)
        }
        for (method, pinned) in [(HTTPRequest.Method.put, true), (.delete, false)] {
            api.on("books/:id/pin", method: method) { _, context -> Response in
                let id = try BookID(parsing: context.parameters.get("id") ?? "")
                if pinned { try await manager.pin(id) } else { try await manager.unpin(id) }
                return APIResponse.json(APIBook(book: try await Self.book(context, in: manager)))
            }
        }
        for method in [HTTPRequest.Method.get, .head] {
            api.on("books/:id/file", method: method) { request, context -> Response in
                try await Self.fileResponse(request, context, manager: manager)
            }
            api.on("books/:id/cover", method: method) { _, context -> Response in
                try await Self.coverResponse(try await Self.book(context, in: manager), manager: manager, headOnly: method == .head)
            }
        }

        api.get("sources") { _, _ -> Response in
            struct Sources: Encodable { var sources: [ScheduledSource] }
            return APIResponse.json(Sources(sources: try await service.sources()))
        }
        api.post("sources") { request, _ -> Response in
            struct NewSource: Decodable {
                var source: String
                var keep: Int
                var type: BookType?
                var formats: [BookFormat]?
                var section: String?
                var every: String?
            }
            let body = try await Self.body(of: request, upTo: 64 * 1024, within: bodyTimeout, "a source is a small JSON object")
            let new: NewSource
            do {
                new = try JSONDecoder().decode(NewSource.self, from: body)
            } catch {
                throw APIError.badRequest("send {\"source\": URL, \"keep\": N, \"every\": \"4h\"} (\(error))")
            }
            let every = try new.every.map { text throws(BookCacheError) in try TimeSpan(parsing: text).seconds } ?? 4 * 3600
            let source = try await service.addSource(
                new.source, keep: new.keep, type: new.type ?? .ebook, formats: new.formats ?? [.epub, .pdf], section: new.section,
                every: every)
            return APIResponse.json(source.redacted, status: .created)
        }
        api.delete("sources/:id") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            guard try await service.removeSource(id) else { throw APIError.notFound("no source \(id)") }
            struct Removed: Encodable { var removed: String }
            return APIResponse.json(Removed(removed: id))
        }

        api.get("events") { _, context -> Response in
            // The mailbox is opened before the snapshot is read, so no change falls between them.
            // A client that falls behind is disconnected at once: a write waiting for it to read
            // would otherwise hold its buffers for as long as it does not.
            let channel = context.channel
            guard let mailbox = streams.open(onDrop: { channel.close(promise: nil) }) else {
                throw APIError.unavailable("\(options.maxEventStreams) event streams are open already; try again shortly", retryAfter: 5)
            }
            let snapshot: String
            do {
                // The newest jobs and the counts, as GET /api/v1/jobs?limit=200 answers them, so a
                // client that (re)connects knows where it stands.
                snapshot = ServerSentEvent.encode(name: "snapshot", try await JobListing(of: service, limit: 200))
            } catch {
                streams.close(mailbox)
                throw error
            }
            return Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    defer { streams.close(mailbox) }
                    // A small send buffer: a client that does not read holds 64 KiB of the kernel's
                    // memory, not megabytes, and falls behind (and is dropped) that much sooner.
                    let smallBuffer: EventLoopFuture<Void> = channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: 64 * 1024)
                    try await smallBuffer.get()
                    try await writer.write(ByteBuffer(string: "retry: 2000\n: connected\n\n" + snapshot))
                    // What came in meanwhile goes out as one write, at most 20 a second per client:
                    // a burst of events costs each client a few writes, not one per event.
                    while let batch = await mailbox.next() {
                        var buffer = ByteBuffer()
                        buffer.reserveCapacity(batch.reduce(0) { $0 + $1.readableBytes })
                        for var part in batch { buffer.writeBuffer(&part) }
                        try await writer.write(buffer)
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    try await writer.finish(nil)
                })
        }
    }
}

extension APIServer {
    /// A request's body, at most `limit` bytes, arrived within `timeout`; `hint` says what to
    /// do with a larger one.
    /// - Throws: ``APIError/tooLarge(_:)`` (413) for a larger body, ``APIError/requestTimeout(_:)`` (408) for a slower
    ///   one; a broken connection as it is.
    static func body(of request: Request, upTo limit: Int, within timeout: Duration, _ hint: String) async throws -> Data {
        try await withThrowingTaskGroup(of: Data.self) { group in
            group.addTask {
                var request = request
                do {
                    return Data(try await request.collectBody(upTo: limit).readableBytesView)
                } catch is NIOTooManyBytesError {
                    throw APIError.tooLarge("the body is larger than \(limit) bytes; \(hint)")
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw APIError.requestTimeout("the body did not arrive within \(timeout); send it at once")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// The shelf query of `GET /books?limit=&after=&sort=&q=&author=&type=&status=`; `nil` when
    /// none of them is given (the whole listing).
    /// - Throws: ``APIError/badRequest(_:)`` for a value that is not one of those documented.
    static func shelfQuery(_ request: Request) throws -> ShelfQuery? {
        let names = ["limit", "after", "sort", "q", "author", "type", "status"]
        guard try names.contains(where: { try parameter($0, of: request) != nil }) else { return nil }
        var query = ShelfQuery(limit: 50)
        if let text = try parameter("limit", of: request) {
            guard let limit = Int(text), (1...ShelfQuery.maxLimit).contains(limit) else {
                throw APIError.badRequest("limit must be a number from 1 to \(ShelfQuery.maxLimit)")
            }
            query.limit = limit
        }
        if let sort = try parameter("sort", of: request) {
            guard let order = ShelfQuery.Order(rawValue: sort) else {
                throw APIError.badRequest("sort must be one of \(ShelfQuery.Order.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.order = order
        }
        if let type = try parameter("type", of: request) {
            guard let bookType = BookType(rawValue: type) else { throw APIError.badRequest("type must be ebook or magazine") }
            query.type = bookType
        }
        switch try parameter("status", of: request) {
        case nil, "all": break
        case "pinned": query.pinnedOnly = true
        case "outdated": query.outdatedOnly = true
        default: throw APIError.badRequest("status must be all, pinned or outdated")
        }
        query.search = try parameter("q", of: request)
        query.author = try parameter("author", of: request).flatMap { $0.isEmpty ? nil : $0 }
        query.after = try parameter("after", of: request).flatMap { $0.isEmpty ? nil : $0 }
        return query
    }

    /// The file of the book the route's `:id` names, as ``BookFile`` serves it, saved (or handed
    /// to the phone's reader) as `Title.epub`. A `GET` is a read and records the access (as
    /// `bookcache path` does); a `HEAD` is not.
    static func fileResponse(_ request: Request, _ context: ServiceRequestContext, manager: BookCacheManager) async throws -> Response {
        let book = try await book(context, in: manager)
        let headOnly = request.method == .head
        let url = headOnly ? manager.layout.url(forRelativePath: book.localPath) : try await manager.open(try book.bookID)
        var response = BookFile.response(
            for: url, book: book, range: request.headers[.range], ifRange: request.headers[.ifRange], headOnly: headOnly)
        response.headers[.contentDisposition] = attachment(book)
        response.headers[.contentSecurityPolicy] = "sandbox; default-src 'none'"
        return response
    }

    /// A book's cached cover, with its media type; 404 when it has none.
    static func coverResponse(_ book: CachedBookMetadata, manager: BookCacheManager, headOnly: Bool) async throws -> Response {
        guard let path = book.coverPath, let type = OPDSCatalogue.imageType(path) else {
            throw APIError.notFound(kind: "noCover", "\(book.id) has no cached cover")
        }
        let url = manager.layout.url(forRelativePath: path)
        let image: ByteBuffer
        do {
            // A cover is small (20 MiB at most when fetched): read whole, and a larger file is no cover
            // of ours. The error names the file, not its folder.
            image = try await BlockingWork.run { () throws -> ByteBuffer in
                let file = try OpenFile(url)
                defer { file.close() }
                guard file.size <= 32 << 20 else { throw FileSystem.CallError(operation: "read", path: url.lastPathComponent, code: EFBIG) }
                return try file.read(at: 0, count: Int(file.size))
            }
        } catch {
            throw APIError.notFound(kind: "noCover", "\(book.id)'s cover cannot be read (\(error)); run bookcache verify")
        }
        return Response(
            status: .ok,
            headers: [
                .contentType: type, .contentLength: "\(image.readableBytes)", .cacheControl: "private, max-age=86400",
                .contentSecurityPolicy: "sandbox; default-src 'none'",
            ],
            body: headOnly ? ResponseBody() : ResponseBody(byteBuffer: image))
    }

    /// The cached book the route's `:id` names; 404 when it is not cached.
    static func book(_ context: ServiceRequestContext, in manager: BookCacheManager) async throws -> CachedBookMetadata {
        let id = try BookID(parsing: context.parameters.get("id") ?? "")
        guard let book = try await manager.metadata(for: id) else { throw APIError.notFound(kind: "notCached", "\(id) is not cached") }
        return book
    }
}

/// Keeps the allowed `Host` values, which are known only once an ephemeral port is bound.
final class HostList: Sendable {
    private let hosts: Mutex<Set<String>>

    init(_ hosts: Set<String>) {
        self.hosts = Mutex(hosts)
    }

    func set(_ hosts: Set<String>) {
        self.hosts.withLock { $0 = hosts }
    }

    func contains(_ host: String) -> Bool {
        hosts.withLock { $0.contains(host) }
    }

    var all: Set<String> { hosts.withLock { $0 } }
}

/// Runs the download service as one of the application's services: cancelled on graceful
/// shutdown, which stops its downloads and queues their jobs for the next start.
struct QueueRunner: Service {
    let service: DownloadService
    let logger: Logger

    func run() async throws {
        try await cancelWhenGracefulShutdown {
            try await service.run()
        }
        logger.info("the download service stopped; unfinished jobs stay queued")
    }
}

/// The context of every request: Hummingbird's basic one, plus the connection's channel, so an
/// event stream whose client falls behind can be closed at once.
struct ServiceRequestContext: RequestContext {
    var coreContext: CoreRequestContextStorage
    /// The request's connection.
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }
}
