import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A real HTTP/1.1 server on `127.0.0.1` with an ephemeral port, for tests and the demo.
///
/// It serves files from memory (and optionally a directory) with `ETag`, `Last-Modified` and
/// `Range`/`If-Range`, and has routes and scripted faults for the ways servers misbehave:
///
/// | path | answer |
/// | --- | --- |
/// | `/NAME` | the file, 200 or 206 |
/// | `/status/CODE` | that status with a short body (`?retry-after=N` adds the header) |
/// | `/redirect/N/NAME` | N hops of 302, then `/NAME` |
/// | `/redirect-loop` | 302 to itself |
/// | `/chunked/NAME` | the file with chunked transfer encoding |
/// | `/drop/BYTES/NAME` | the full `Content-Length`, then the connection closes after BYTES |
/// | `/html/NAME` | an HTML error page with status 200 |
///
/// ``enqueueFault(_:for:)`` scripts the next answers for a path, one fault per request.
public final class TestHTTPServer: Sendable {
    /// A scripted misbehaviour for one request.
    public enum Fault: Sendable, Hashable {
        /// Answer with this status (and `Retry-After`, when given) instead of the file.
        case status(Int, retryAfter: String? = nil)
        /// Send the head with the full length, then close after this many body bytes.
        case dropAfter(bytes: Int)
        /// Send the head with the full length and this many body bytes, then reset the
        /// connection (TCP RST, as a failing middlebox does).
        case resetAfter(bytes: Int)
        /// Ignore any `Range` header and send the whole file with 200.
        case ignoreRange
        /// Send the file chunked (no `Content-Length`), then close after this many bytes.
        case chunkedDropAfter(bytes: Int)
        /// Answer 206 with the bytes from `offset` on, whatever range was asked for.
        case partialFrom(offset: Int)
        /// Announce `Content-Length: length` whatever the file's size, and send the file.
        case contentLength(String)
        /// Send `extra` bytes of junk after the announced body.
        case trailingJunk(extra: Int)
        /// Send the head and a few bytes, then nothing more (the connection stays open).
        case stall
        /// Send the head and this many body bytes, then nothing more (the connection stays open).
        case stallAfter(bytes: Int)
        /// Redirect (302) to this location.
        case redirect(to: String)
    }

    /// One request as the server saw it.
    public struct LoggedRequest: Sendable, Hashable {
        /// The path, without the query.
        public var path: String
        /// The request headers, names lowercased.
        public var headers: [String: String]
        /// The whole URL, when the request was sent to this server as a proxy (absolute form,
        /// `GET http://host/path`); `nil` for an ordinary request.
        public var proxiedURL: String?
    }

    private struct State {
        var files: [String: Data] = [:]
        var etags: [String: String] = [:]
        var faults: [String: [Fault]] = [:]
        var log: [LoggedRequest] = []
        var inFlight = 0
        var maxInFlight = 0
        var connections = 0
        var heldPaths: Set<String> = []
        var holdUntilConcurrent: Int?
        var slowBodies: (chunk: Int, pause: TimeAmount)?
        var held: [EventLoopPromise<Void>] = []
        var arrivalWaiters = CountWaiters()
        var closed = 0
        var closeWaiters = CountWaiters()
        var basicAuth: (pathPrefix: String, authorization: String)?
    }

    private let state = Mutex(State())
    private let directory: URL?
    private let channel: Mutex<(any Channel)?> = Mutex(nil)

    /// The port the server listens on; valid after ``start()``.
    public var port: Int { channel.withLock { $0?.localAddress?.port ?? 0 } }

    /// The server's base URL, such as `http://127.0.0.1:54321`.
    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Creates a server; call ``start()`` next.
    /// - Parameter directory: A folder whose files are served too (below the in-memory ones).
    public init(directory: URL? = nil) {
        self.directory = directory
    }

    /// Binds to `127.0.0.1` (or `host`; port 0 picks a free one) and starts serving.
    /// - Parameters:
    ///   - host: The address to listen on, such as `::1`.
    ///   - port: The port; 0 for any free one.
    public func start(host: String = "127.0.0.1", port: Int = 0) async throws {
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { [self] channel in
                state.withLock { $0.connections += 1 }
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline(withErrorHandling: true)
                    try channel.pipeline.syncOperations.addHandler(RequestHandler(server: self))
                }
            }
        let bound = try await bootstrap.bind(host: host, port: port).get()
        channel.withLock { $0 = bound }
    }

    /// A loopback port free now, for a server of another kind (calibre, nginx) to listen on: a
    /// server is started, its port noted, and it is stopped.
    public static func freePort() async throws -> Int {
        let server = TestHTTPServer()
        try await server.start()
        let port = server.port
        try await server.shutdown()
        return port
    }

    /// A loopback base URL where connections are refused, for "the network is down" tests.
    public static func unreachableBaseURL() async throws -> String {
        "http://127.0.0.1:\(try refusingPort.get())"
    }

    /// A loopback port bound by a socket that never listens, held for the life of the test
    /// process: connecting to it is refused, and no other test's server can be given it (a
    /// server started and stopped to free a port could see the port handed to the next one).
    private static let refusingPort: Result<Int, any Error> = {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return .failure(POSIXError(.init(rawValue: errno) ?? .EIO)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            let code = errno
            close(fd)
            return .failure(POSIXError(.init(rawValue: code) ?? .EIO))
        }
        return .success(Int(UInt16(bigEndian: address.sin_port)))
    }()

    /// Stops listening.
    public func shutdown() async throws {
        let bound = channel.withLock { $0 }
        try await bound?.close()
    }

    /// Serves `data` at `/NAME` with a fresh `ETag`.
    /// - Parameters:
    ///   - data: The body.
    ///   - name: The path without the leading slash.
    ///   - etag: The `ETag` to send; derived from the content when `nil`.
    public func setFile(_ data: Data, at name: String, etag: String? = nil) {
        state.withLock {
            $0.files["/" + name] = data
            $0.etags["/" + name] =
                etag ?? "\"\(String(UInt32(truncatingIfNeeded: data.hashValue &* 31 &+ data.count), radix: 16))-\(data.count)\""
        }
    }

    /// The `ETag` served for a file set with ``setFile(_:at:etag:)``.
    public func etag(for name: String) -> String? {
        state.withLock { $0.etags["/" + name] }
    }

    /// Removes a file.
    public func removeFile(at name: String) {
        state.withLock {
            $0.files["/" + name] = nil
            $0.etags["/" + name] = nil
        }
    }

    /// Scripts the next answer for a path; faults are used in order, one per request.
    /// - Parameters:
    ///   - fault: What to do instead of serving normally.
    ///   - path: The request path, such as `/alice.epub`.
    public func enqueueFault(_ fault: Fault, for path: String) {
        state.withLock { $0.faults[path, default: []].append(fault) }
    }

    /// Every request received so far, in order.
    public var requests: [LoggedRequest] { state.withLock { $0.log } }

    /// How many requests were made for `path`.
    public func requestCount(for path: String) -> Int {
        state.withLock { $0.log.filter { $0.path == path }.count }
    }

    /// How many connections clients opened.
    public var connectionCount: Int { state.withLock { $0.connections } }

    /// The most requests that were being answered at the same time.
    public var maxConcurrentRequests: Int { state.withLock { $0.maxInFlight } }

    // MARK: - Handling

    fileprivate struct Reply {
        var status: HTTPResponseStatus
        var headers: HTTPHeaders
        var body: Data
        var chunked = false
        var dropAfter: Int?
        /// Close with a reset (SO_LINGER 0) instead of a FIN.
        var reset = false
        /// Write the body as raw bytes after the head, whatever Content-Length says.
        var rawLength = false
        /// Send the head and this many bytes of the body, then nothing.
        var stallAfter: Int?
    }

    /// Holds every request to `path` until ``releaseHeld()``.
    public func holdRequests(to path: String) {
        state.withLock { _ = $0.heldPaths.insert(path) }
    }

    /// Holds every request until `count` are in flight together, then answers them all; so a
    /// client that sends more than `count` at once is seen doing so.
    public func holdUntilConcurrent(_ count: Int) {
        state.withLock { $0.holdUntilConcurrent = count }
    }

    /// Sends every plain file body in chunks of `chunk` bytes with a pause between them, so a
    /// client is caught mid-body (for kill and interrupt tests).
    public func slowBodies(chunk: Int, pause: Duration) {
        state.withLock { $0.slowBodies = (chunk, TimeAmount(pause)) }
    }

    fileprivate var slowness: (chunk: Int, pause: TimeAmount)? {
        state.withLock { $0.slowBodies }
    }

    /// Answers every held request and stops holding.
    public func releaseHeld() {
        let promises = state.withLock { state -> [EventLoopPromise<Void>] in
            state.heldPaths.removeAll()
            state.holdUntilConcurrent = nil
            defer { state.held.removeAll() }
            return state.held
        }
        for promise in promises { promise.succeed() }
    }

    /// Waits until the server has received at least `count` requests in all.
    /// - Returns: `true` then; `false` when the waiting task was cancelled first (say, because the
    ///   client it waited for ended before sending them).
    @discardableResult
    public func waitForRequests(count: Int) async -> Bool {
        await waitUntil(count, of: .requests)
    }

    /// Waits until the server has received at least `count` requests in all, or `client` has ended
    /// first: a client that fails early, or needs fewer requests, must not leave a test waiting for
    /// ever.
    /// - Returns: `true` when the requests came; `false` when the client ended first.
    @discardableResult
    public func waitForRequests(count: Int, from client: RunningProcess) async -> Bool {
        let arrival = Task { await waitForRequests(count: count) }
        Task {
            _ = await client.wait()
            arrival.cancel()
        }
        return await arrival.value
    }

    /// Waits until at least `count` connections in all have closed (by either side).
    /// - Returns: `true` then; `false` when the waiting task was cancelled first (a test's time limit).
    @discardableResult
    public func waitForClosedConnections(count: Int) async -> Bool {
        await waitUntil(count, of: .closedConnections)
    }

    /// What a test can wait for.
    private enum Counter {
        case requests, closedConnections

        var value: KeyPath<State, Int> { self == .requests ? \.log.count : \.closed }
        var waiters: WritableKeyPath<State, CountWaiters> { self == .requests ? \.arrivalWaiters : \.closeWaiters }
    }

    /// Waits until `counter` reaches `count`, or the task is cancelled.
    private func waitUntil(_ count: Int, of counter: Counter) async -> Bool {
        let id = UUID()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let ready = state.withLock { state -> Bool? in
                    if state[keyPath: counter.value] >= count { return true }
                    if Task.isCancelled { return false }
                    state[keyPath: counter.waiters].add(id: id, count: count, continuation)
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            state.withLock { $0[keyPath: counter.waiters].remove(id: id) }?.resume(returning: false)
        }
    }

    fileprivate func connectionClosed() {
        let ready = state.withLock { state in
            state.closed += 1
            return state.closeWaiters.reached(state.closed)
        }
        for continuation in ready { continuation.resume(returning: true) }
    }

    /// Logs a request and decides when it may be answered.
    fileprivate func admit(path: String, headers: HTTPHeaders, proxiedURL: String?, eventLoop: any EventLoop) -> EventLoopFuture<Void> {
        var dict: [String: String] = [:]
        for (name, value) in headers { dict[name.lowercased()] = value }
        let promise = eventLoop.makePromise(of: Void.self)
        let (release, arrived) = state.withLock { state -> ([EventLoopPromise<Void>], [CheckedContinuation<Bool, Never>]) in
            state.log.append(LoggedRequest(path: path, headers: dict, proxiedURL: proxiedURL))
            state.inFlight += 1
            state.maxInFlight = max(state.maxInFlight, state.inFlight)
            let ready = state.arrivalWaiters.reached(state.log.count)
            if state.heldPaths.contains(path) {
                state.held.append(promise)
                return ([], ready)
            }
            if let count = state.holdUntilConcurrent {
                state.held.append(promise)
                if state.held.count >= count {
                    defer { state.held.removeAll() }
                    return (state.held, ready)
                }
                return ([], ready)
            }
            return ([promise], ready)
        }
        for continuation in arrived { continuation.resume(returning: true) }
        for waiting in release { waiting.succeed() }
        return promise.futureResult
    }

    fileprivate func end() {
        state.withLock { $0.inFlight -= 1 }
    }

    /// Answers requests below `pathPrefix` with `401` and a Basic challenge unless they carry
    /// this user's `Authorization`.
    public func requireBasicAuth(user: String, password: String, below pathPrefix: String = "/") {
        let token = "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
        state.withLock { $0.basicAuth = (pathPrefix, token) }
    }

    fileprivate func reply(to uri: String, headers: HTTPHeaders) -> Reply {
        let (path, query) = Self.split(uri)
        if let auth = state.withLock({ $0.basicAuth }), path.hasPrefix(auth.pathPrefix),
            headers.first(name: "Authorization") != auth.authorization
        {
            var reply = Self.statusReply(401)
            reply.headers.replaceOrAdd(name: "WWW-Authenticate", value: #"Basic realm="bookcache test""#)
            return reply
        }
        let fault = state.withLock { state -> Fault? in
            guard var queue = state.faults[path], !queue.isEmpty else { return nil }
            let next = queue.removeFirst()
            state.faults[path] = queue
            return next
        }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        switch fault {
        case .status(let code, let retryAfter):
            return Self.statusReply(code, retryAfter: retryAfter)
        case .dropAfter(let bytes):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: true) else { return Self.statusReply(404) }
            reply.dropAfter = bytes
            return reply
        case .resetAfter(let bytes):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: true) else { return Self.statusReply(404) }
            reply.dropAfter = bytes
            reply.reset = true
            return reply
        case .ignoreRange:
            return fileReply(path: path, requestHeaders: headers, honourRange: false) ?? Self.statusReply(404)
        case .contentLength(let value):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: false) else { return Self.statusReply(404) }
            reply.headers.replaceOrAdd(name: "Content-Length", value: value)
            reply.rawLength = true
            return reply
        case .trailingJunk(let extra):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: false) else { return Self.statusReply(404) }
            reply.body.append(Data(repeating: 0x41, count: extra))
            reply.rawLength = true
            return reply
        case .stall:
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: false) else { return Self.statusReply(404) }
            reply.stallAfter = 16
            return reply
        case .stallAfter(let bytes):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: false) else { return Self.statusReply(404) }
            reply.stallAfter = bytes
            return reply
        case .redirect(let location):
            var reply = Self.statusReply(302)
            reply.headers.replaceOrAdd(name: "Location", value: location)
            return reply
        case .partialFrom(let offset):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: false), offset < reply.body.count else {
                return Self.statusReply(404)
            }
            let total = reply.body.count
            reply.status = .partialContent
            reply.body = reply.body.subdata(in: offset..<total)
            reply.headers.replaceOrAdd(name: "Content-Range", value: "bytes \(offset)-\(total - 1)/\(total)")
            reply.headers.replaceOrAdd(name: "Content-Length", value: "\(total - offset)")
            return reply
        case .chunkedDropAfter(let bytes):
            guard var reply = fileReply(path: path, requestHeaders: headers, honourRange: false) else { return Self.statusReply(404) }
            reply.chunked = true
            reply.headers.remove(name: "Content-Length")
            reply.dropAfter = bytes
            return reply
        case nil:
            break
        }
        if parts.first == "status", parts.count == 2, let code = Int(parts[1]) {
            return Self.statusReply(code, retryAfter: query["retry-after"])
        }
        if parts.first == "redirect-loop" {
            var reply = Self.statusReply(302)
            reply.headers.replaceOrAdd(name: "Location", value: "/redirect-loop")
            return reply
        }
        if parts.first == "redirect", parts.count >= 3, let hops = Int(parts[1]) {
            let rest = parts[2...].joined(separator: "/")
            var reply = Self.statusReply(302)
            reply.headers.replaceOrAdd(name: "Location", value: hops > 1 ? "/redirect/\(hops - 1)/\(rest)" : "/\(rest)")
            return reply
        }
        if parts.first == "chunked", parts.count >= 2 {
            guard var reply = fileReply(path: "/" + parts[1...].joined(separator: "/"), requestHeaders: headers, honourRange: false) else {
                return Self.statusReply(404)
            }
            reply.chunked = true
            reply.headers.remove(name: "Content-Length")
            return reply
        }
        if parts.first == "drop", parts.count >= 3, let bytes = Int(parts[1]) {
            guard var reply = fileReply(path: "/" + parts[2...].joined(separator: "/"), requestHeaders: headers, honourRange: false) else {
                return Self.statusReply(404)
            }
            reply.dropAfter = bytes
            return reply
        }
        if parts.first == "html" {
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/html; charset=utf-8")
            let body = Data("<!DOCTYPE html><html><head><title>Sign in</title></head><body>Please sign in.</body></html>\n".utf8)
            return Reply(status: .ok, headers: headers, body: body)
        }
        return fileReply(path: path, requestHeaders: headers, honourRange: true) ?? Self.statusReply(404)
    }

    private func fileReply(path: String, requestHeaders: HTTPHeaders, honourRange: Bool) -> Reply? {
        var (data, etag) = state.withLock { ($0.files[path], $0.etags[path]) }
        if data == nil, let directory, !path.contains("..") {
            let url = directory.appendingPathComponent(String(path.dropFirst()))
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                let contents = try? Data(contentsOf: url)
            {
                data = contents
                etag = "\"\(contents.count)-\(String(UInt32(truncatingIfNeeded: contents.hashValue), radix: 16))\""
            }
        }
        guard let data, let etag else { return nil }
        if requestHeaders.first(name: "If-None-Match") == etag
            || (requestHeaders.first(name: "If-None-Match") == nil
                && requestHeaders.first(name: "If-Modified-Since") == "Mon, 01 Jan 2024 00:00:00 GMT")
        {
            var reply = Self.statusReply(304)
            reply.body = Data()
            reply.headers.replaceOrAdd(name: "Content-Length", value: "0")
            reply.headers.add(name: "ETag", value: etag)
            return reply
        }
        var headers = HTTPHeaders()
        headers.add(name: "ETag", value: etag)
        headers.add(name: "Last-Modified", value: "Mon, 01 Jan 2024 00:00:00 GMT")
        headers.add(name: "Accept-Ranges", value: "bytes")
        headers.add(
            name: "Content-Type",
            value: path.hasSuffix(".pdf")
                ? "application/pdf" : path.hasSuffix(".html") ? "text/html; charset=utf-8" : "application/epub+zip")
        if honourRange, let range = requestHeaders.first(name: "Range"), range.hasPrefix("bytes=") {
            let ifRange = requestHeaders.first(name: "If-Range")
            if ifRange == nil || ifRange == etag {
                let spec = range.dropFirst("bytes=".count).split(separator: "-", omittingEmptySubsequences: false)
                if spec.count == 2, let start = Int(spec[0]) {
                    let end = Int(spec[1]).map { min($0, data.count - 1) } ?? (data.count - 1)
                    guard start < data.count, start <= end else {
                        var reply = Self.statusReply(416)
                        reply.headers.add(name: "Content-Range", value: "bytes */\(data.count)")
                        return reply
                    }
                    headers.add(name: "Content-Range", value: "bytes \(start)-\(end)/\(data.count)")
                    headers.add(name: "Content-Length", value: "\(end - start + 1)")
                    return Reply(status: .partialContent, headers: headers, body: data.subdata(in: start..<(end + 1)))
                }
            }
        }
        headers.add(name: "Content-Length", value: "\(data.count)")
        return Reply(status: .ok, headers: headers, body: data)
    }

    private static func statusReply(_ code: Int, retryAfter: String? = nil) -> Reply {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "text/plain")
        if let retryAfter { headers.add(name: "Retry-After", value: retryAfter) }
        let body = Data("status \(code)\n".utf8)
        headers.add(name: "Content-Length", value: "\(body.count)")
        return Reply(status: HTTPResponseStatus(statusCode: code), headers: headers, body: body)
    }

    private static func split(_ uri: String) -> (String, [String: String]) {
        guard let question = uri.firstIndex(of: "?") else { return (uri, [:]) }
        var query: [String: String] = [:]
        for pair in uri[uri.index(after: question)...].split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1).map(String.init)
            query[kv[0]] = kv.count > 1 ? kv[1] : ""
        }
        return (String(uri[..<question]), query)
    }
}

extension RequestHandler {
    /// Writes `body` a chunk at a time with pauses, then ends the response.
    fileprivate func writeSlowly(_ body: Data, offset: Int, chunk: Int, pause: TimeAmount, context: ChannelHandlerContext, keepAlive: Bool)
    {
        let server = self.server
        let end = min(offset + chunk, body.count)
        var buffer = context.channel.allocator.buffer(capacity: end - offset)
        buffer.writeBytes(body[offset..<end])
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        let channel = context.channel
        if end == body.count {
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
                server.end()
                if !keepAlive { channel.close(promise: nil) }
            }
            return
        }
        let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.scheduleTask(in: pause) {
            let (handler, context) = bound.value
            guard context.channel.isActive else {
                server.end()
                return
            }
            handler.writeSlowly(body, offset: end, chunk: chunk, pause: pause, context: context, keepAlive: keepAlive)
        }
    }
}

private final class RequestHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    private let server: TestHTTPServer
    private var head: HTTPRequestHead?

    init(server: TestHTTPServer) {
        self.server = server
    }

    func channelInactive(context: ChannelHandlerContext) {
        server.connectionClosed()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
        case .body:
            break
        case .end:
            guard let head else { return }
            self.head = nil
            // A request in absolute form is one sent to this server as a proxy: it answers it as
            // if it were the named host, and logs the whole URL.
            var uri = head.uri
            var proxiedURL: String?
            if let scheme = uri.range(of: "://"), uri.hasPrefix("http") {
                proxiedURL = uri
                let rest = uri[scheme.upperBound...]
                uri = rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
            }
            let path = uri.split(separator: "?", maxSplits: 1).first.map(String.init) ?? uri
            let server = self.server
            let bound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            let target = uri
            server.admit(path: path, headers: head.headers, proxiedURL: proxiedURL, eventLoop: context.eventLoop).whenSuccess {
                let (handler, context) = bound.value
                let reply = server.reply(to: target, headers: head.headers)
                handler.respond(context: context, request: head, reply: reply)
            }
        }
    }

    private func respond(context: ChannelHandlerContext, request: HTTPRequestHead, reply: TestHTTPServer.Reply) {
        let server = self.server
        var response = HTTPResponseHead(version: request.version, status: reply.status, headers: reply.headers)
        if !request.isKeepAlive { response.headers.replaceOrAdd(name: "Connection", value: "close") }
        context.write(wrapOutboundOut(.head(response)), promise: nil)
        if let stallAfter = reply.stallAfter {
            var buffer = context.channel.allocator.buffer(capacity: stallAfter)
            buffer.writeBytes(reply.body.prefix(stallAfter))
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
            return
        }
        if reply.rawLength {
            // Bypass the encoder's framing: the head promised one length, the wire carries another.
            var buffer = context.channel.allocator.buffer(capacity: reply.body.count)
            buffer.writeBytes(reply.body)
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).whenComplete { _ in
                server.end()
                channel.close(promise: nil)
            }
            return
        }
        if let limit = reply.dropAfter, reply.chunked {
            let step = max(1, limit / 3)
            var offset = 0
            let channel = context.channel
            while offset < limit {
                var buffer = context.channel.allocator.buffer(capacity: step)
                let end = min(offset + step, limit)
                buffer.writeBytes(reply.body[offset..<end])
                if end < limit {
                    context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
                } else {
                    context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).whenComplete { _ in
                        server.end()
                        channel.close(promise: nil)
                    }
                }
                offset = end
            }
            return
        }
        if let limit = reply.dropAfter {
            var buffer = context.channel.allocator.buffer(capacity: limit)
            buffer.writeBytes(reply.body.prefix(limit))
            let channel = context.channel
            let reset = reply.reset
            context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(buffer)))).whenComplete { _ in
                server.end()
                if reset, let socket = channel as? any SocketOptionProvider {
                    // SO_LINGER with a zero timeout makes close() send RST instead of FIN.
                    socket.setSoLinger(linger(l_onoff: 1, l_linger: 0)).whenComplete { _ in
                        channel.close(promise: nil)
                    }
                } else {
                    channel.close(promise: nil)
                }
            }
            return
        }
        if reply.chunked {
            // Several parts, so the client sees a real chunked stream.
            let step = max(1, reply.body.count / 4)
            var offset = 0
            while offset < reply.body.count {
                var buffer = context.channel.allocator.buffer(capacity: step)
                buffer.writeBytes(reply.body[offset..<min(offset + step, reply.body.count)])
                context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
                offset += step
            }
        } else if let slow = server.slowness, !reply.body.isEmpty {
            writeSlowly(reply.body, offset: 0, chunk: slow.chunk, pause: slow.pause, context: context, keepAlive: request.isKeepAlive)
            return
        } else if !reply.body.isEmpty {
            var buffer = context.channel.allocator.buffer(capacity: reply.body.count)
            buffer.writeBytes(reply.body)
            context.write(wrapOutboundOut(.body(.byteBuffer(buffer))), promise: nil)
        }
        let keepAlive = request.isKeepAlive
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in
            server.end()
            if !keepAlive { channel.close(promise: nil) }
        }
    }
}

/// Tasks waiting for a count (requests received, connections closed) to reach theirs.
private struct CountWaiters {
    private var waiting: [(id: UUID, count: Int, continuation: CheckedContinuation<Bool, Never>)] = []

    mutating func add(id: UUID, count: Int, _ continuation: CheckedContinuation<Bool, Never>) {
        waiting.append((id, count, continuation))
    }

    /// Removes the waiter `id` (its task was cancelled) and returns its continuation.
    mutating func remove(id: UUID) -> CheckedContinuation<Bool, Never>? {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return nil }
        return waiting.remove(at: index).continuation
    }

    /// Removes and returns the waiters whose count `value` has reached.
    mutating func reached(_ value: Int) -> [CheckedContinuation<Bool, Never>] {
        defer { waiting.removeAll { value >= $0.count } }
        return waiting.filter { value >= $0.count }.map(\.continuation)
    }
}
