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
    /// The books whose files were served in the last second (both file routes and the fast one).
    let servedBooks: ServedBooks
    /// The e-readers' logins.
    let readers: ReaderLogins

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
        self.servedBooks = ServedBooks(layout: service.manager.layout)
        self.readers = ReaderLogins(cacheRoot: service.manager.layout.root)
    }

    /// Runs the server and the service until SIGTERM or SIGINT: then it stops accepting
    /// requests, stops the downloads (their partial files are kept and their jobs queued for the
    /// next start) and returns.
    /// - Parameter onRunning: Called with the port once the server listens.
    public func run(onRunning: @escaping @Sendable (Int) async -> Void) async throws {
        let allowed = HostList(Self.allowedHosts(host: options.host, port: options.port, names: options.hostNames))
        let streams = EventStreams(service: service, limits: .init(maxStreams: options.maxEventStreams), logger: logger)
        let router = router(allowedHosts: allowed, streams: streams)
        let runner = QueueRunner(service: service, logger: logger)
        let idle = options.idleTimeout.components
        let door = FastFileRoute.Door(
            allowedHosts: allowed, access: access, readers: readers, manager: service.manager, served: servedBooks, dates: HTTPDates())
        let app = Application(
            router: router,
            server: HTTPServerBuilder { responder in
                ServiceHTTP1Channel(
                    base: HTTP1Channel(
                        responder: responder,
                        configuration: .init(
                            additionalChannelHandlers: [FileRegionHandler()],
                            idleTimeout: .seconds(idle.seconds) + .nanoseconds(idle.attoseconds / 1_000_000_000))),
                    door: door)
            },
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

    /// Every route and middleware of the service, as ``run(onRunning:)`` serves them (and the
    /// in-process route tests call them).
    func router(allowedHosts allowed: HostList, streams: EventStreams) -> Router<ServiceRequestContext> {
        let router = Router(context: ServiceRequestContext.self)
        // Every request, routed or not: its Host and the spelling of its target.
        router.add(middleware: FrontDoorMiddleware(allowedHosts: allowed))
        addRoutes(to: router, streams: streams)
        return router
    }

    private func addRoutes(to router: Router<ServiceRequestContext>, streams: EventStreams) {
        // One collection per resource (Routes/). Open without the token or a session: the page,
        // the login link and the proof.
        router.addRoutes(pageRoutes())
        // The catalogue for e-readers: its own door (a reader login, or the token or a session).
        addOPDSRoutes(to: router, readers: readers)
        // Default deny: everything below, and every path no route matches, needs the token or
        // a session, decided on the route the router matched — never on how the path is spelled.
        router.add(middleware: RequireAccessMiddleware(access: access))
        // Handlers throw; the middleware answers each error with its status and JSON body.
        router.group("api/v1").add(middleware: APIErrorMiddleware())
            .addRoutes(jobRoutes()).addRoutes(bookRoutes()).addRoutes(sourceRoutes()).addRoutes(eventRoutes(streams))
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
