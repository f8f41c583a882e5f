import CCurl
import Foundation
import Synchronization

/// An ``HTTPTransport`` on libcurl's multi interface: one thread drives every transfer, and each
/// transfer's bytes flow into its ``ResponseBody`` with backpressure (a body read slowly pauses
/// its transfer instead of filling memory).
///
/// It sends one `GET`, follows up to ``Configuration/maxRedirects``
/// redirects to `http` and `https` only, has a connect timeout and an idle-read timeout (no byte
/// for that long) but no total timeout, and never decompresses. A login
/// (``TransportRequest/credentials``) is answered with whatever the server asks for (Basic or
/// Digest), only on the host it is for: libcurl does not send it on after a redirect to another
/// host.
///
/// Proxies, a rate limit, a netrc file and trusted certificate authorities are set in its
/// ``Configuration``, with curl's meanings; HTTP/2 is used when a TLS server offers it, and
/// connections are reused across transfers.
public final class CurlTransport: HTTPTransport, Sendable {
    /// How the transport connects: timeouts, redirects, proxy, TLS trust, a rate limit and a
    /// netrc file. These are curl's options of the same names.
    public struct Configuration: Sendable {
        /// How long a connection may take to open (curl's `--connect-timeout`).
        public var connectTimeout: Duration
        /// How long a response may go without a byte before it fails as timed out.
        public var idleReadTimeout: Duration
        /// The most redirects followed.
        public var maxRedirects: Int
        /// The proxy for every request, such as `http://proxy:3128` (curl's `--proxy`); `""`
        /// uses none. `nil` reads `http_proxy`, `https_proxy`, `all_proxy` and `no_proxy` from
        /// the environment, as curl does (only the lower-case `http_proxy`).
        public var proxy: String?
        /// Hosts reached without the proxy, comma-separated, `*` for all (curl's `--noproxy`);
        /// `nil` reads `no_proxy` from the environment.
        public var noProxy: String?
        /// The most bytes per second one transfer receives (curl's `--limit-rate`); `nil` for no limit.
        public var maxReceiveBytesPerSecond: Int64?
        /// A PEM file of certificate authorities to trust instead of the system's (curl's `--cacert`).
        public var caFile: String?
        /// A netrc file whose logins are answered to their own hosts when they ask (curl's
        /// `--netrc-file`); a login in the request or its URL comes first.
        public var netrcFile: String?

        /// Creates a configuration: 10 s to connect, 30 s idle, 10 redirects, the environment's
        /// proxy, the system's certificate authorities, no rate limit and no netrc by default.
        public init(
            connectTimeout: Duration = .seconds(10), idleReadTimeout: Duration = .seconds(30), maxRedirects: Int = 10,
            proxy: String? = nil, noProxy: String? = nil, maxReceiveBytesPerSecond: Int64? = nil, caFile: String? = nil,
            netrcFile: String? = nil
        ) {
            self.connectTimeout = connectTimeout
            self.idleReadTimeout = idleReadTimeout
            self.maxRedirects = maxRedirects
            self.proxy = proxy
            self.noProxy = noProxy
            self.maxReceiveBytesPerSecond = maxReceiveBytesPerSecond
            self.caFile = caFile
            self.netrcFile = netrcFile
        }
    }

    /// A transport shared by the whole process, with the default configuration.
    public static let shared = CurlTransport()

    private let configuration: Configuration
    /// Made on the first request, so a transport that never sends costs no thread.
    private let driverState = Mutex<(driver: CurlDriver?, shutDown: Bool)>((nil, false))

    /// Creates a transport. Its driver thread starts with the first request.
    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Stops the driver thread once its transfers are cancelled. Do not call it on ``shared``.
    public func shutdown() {
        let driver = driverState.withLock { state in
            state.shutDown = true
            return state.driver
        }
        driver?.submit(.stop)
    }

    private var driver: CurlDriver {
        get throws(DownloadError) {
            try driverState.withLock { state throws(DownloadError) in
                if let driver = state.driver { return driver }
                guard !state.shutDown else {
                    throw DownloadError(kind: .cancelled, url: URL(string: "about:blank")!, detail: "the transport was shut down")
                }
                let driver = CurlDriver()
                state.driver = driver
                return driver
            }
        }
    }

    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let url = HTTPCredentials.removingUserInfo(from: request.url)
        // The last line of defence against a header that would end early and smuggle another
        // (HTTPHeader refuses them where they enter; this catches any built another way).
        if let bad = request.headers.first(where: { !HTTPHeader.isSendable(name: $0.name, value: $0.value) }) {
            throw DownloadError(
                kind: .invalidRequest, url: url,
                detail:
                    "the request header '\(bad.name.debugDescription.prefix(40))' has a control character or is not a token; nothing was sent"
            )
        }
        let credentials = (request.credentials ?? HTTPCredentials(userInfoOf: request.url)).flatMap { $0.applies(to: url) ? $0 : nil }
        let transfer = CurlTransfer(url: url, headers: request.headers, credentials: credentials, configuration: configuration)
        let driver = try self.driver
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<CurlTransfer.Head, any Error>) in
                transfer.start(head: continuation)
                driver.submit(.add(transfer))
            }
        } onCancel: {
            driver.submit(.cancel(transfer))
        }
        return TransportResponse(
            statusCode: head.status, headers: head.headers, finalURL: head.url,
            body: ResponseBody(CurlBody(transfer: transfer, driver: driver), cancel: { driver.submit(.cancel(transfer)) }))
    }
}

/// The body of a curl transfer, read once.
private struct CurlBody: AsyncSequence, Sendable {
    typealias Element = [UInt8]
    let transfer: CurlTransfer
    let driver: CurlDriver

    func makeAsyncIterator() -> Iterator { Iterator(transfer: transfer, driver: driver) }

    struct Iterator: AsyncIteratorProtocol {
        let transfer: CurlTransfer
        let driver: CurlDriver

        mutating func next() async throws -> [UInt8]? {
            let transfer = self.transfer
            let driver = self.driver
            return try await withTaskCancellationHandler {
                try await transfer.nextBuffer(unpause: { driver.submit(.unpause(transfer)) })
            } onCancel: {
                driver.submit(.cancel(transfer))
            }
        }
    }
}

/// One transfer: its easy handle (touched only on the driver thread) and the state its caller reads.
// Unchecked: the easy handle is touched on the driver thread only; what callers read is behind `state`'s Mutex.
final class CurlTransfer: @unchecked Sendable {
    struct Head: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var url: URL
    }

    private struct State {
        var head: CheckedContinuation<Head, any Error>?
        var headers: [(name: String, value: String)] = []
        var buffered: [[UInt8]] = []
        var bufferedBytes = 0
        var paused = false
        var finished = false
        var failure: (any Error)?
        var reader: CheckedContinuation<[UInt8]?, any Error>?
    }

    let url: URL
    let requestHeaders: [(name: String, value: String)]
    let credentials: HTTPCredentials?
    let configuration: CurlTransport.Configuration
    // Set and used on the driver thread only.
    var handle: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    private let state = Mutex(State())

    /// A body read slower than it arrives pauses the transfer past this many buffered bytes.
    static let pauseAbove = 4 << 20

    init(url: URL, headers: [(name: String, value: String)], credentials: HTTPCredentials?, configuration: CurlTransport.Configuration) {
        self.url = url
        self.requestHeaders = headers
        self.credentials = credentials
        self.configuration = configuration
    }

    func start(head: CheckedContinuation<Head, any Error>) {
        state.withLock { $0.head = head }
    }

    // MARK: Driver thread

    /// A header line of some response; a status line starts a new response (after a redirect
    /// or a `401` answered with a login), so only the last response's headers are kept.
    func received(headerLine: String) {
        let line = headerLine.trimmingCharacters(in: .whitespacesAndNewlines)
        state.withLock { state in
            if line.hasPrefix("HTTP/") {
                state.headers = []
            } else if let colon = line.firstIndex(of: ":") {
                let name = String(line[..<colon]).trimmingCharacters(in: .whitespaces)
                let value = String(line[line.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
                state.headers.append((name, value))
            }
        }
    }

    /// Body bytes. Returns `false` when the transfer must pause (the bytes are then not taken:
    /// libcurl hands them over again once it is unpaused). `head` reads the response's status
    /// and URL; it is called for the first bytes only.
    func received(body bytes: UnsafeRawBufferPointer, head readHead: () -> (status: Int, url: URL?)) -> Bool {
        // The bytes are copied once: to the waiting reader, or into the buffer.
        let (head, reader, buffer, accepted):
            (CheckedContinuation<Head, any Error>?, CheckedContinuation<[UInt8]?, any Error>?, [UInt8]?, Bool) =
                state.withLock { state in
                    let head = state.head
                    state.head = nil
                    if state.reader == nil && state.bufferedBytes >= Self.pauseAbove {
                        state.paused = true
                        return (head, nil, nil, false)
                    }
                    let buffer = [UInt8](bytes)
                    if let reader = state.reader {
                        state.reader = nil
                        return (head, reader, buffer, true)
                    }
                    state.buffered.append(buffer)
                    state.bufferedBytes += buffer.count
                    return (head, nil, nil, true)
                }
        if let head {
            let info = readHead()
            head.resume(returning: makeHead(status: info.status, effectiveURL: info.url))
        }
        if let reader, let buffer { reader.resume(returning: buffer) }
        return accepted
    }

    /// The transfer ended: `error` is nil on success.
    func finished(status: Int, effectiveURL: URL?, error: DownloadError?) {
        let (head, reader): (CheckedContinuation<Head, any Error>?, CheckedContinuation<[UInt8]?, any Error>?) = state.withLock { state in
            state.finished = true
            state.failure = error
            let head = state.head
            state.head = nil
            let reader = state.buffered.isEmpty ? state.reader : nil
            if reader != nil { state.reader = nil }
            return (head, reader)
        }
        if let head {
            if let error {
                head.resume(throwing: error)
            } else {
                head.resume(returning: makeHead(status: status, effectiveURL: effectiveURL))
            }
        }
        if let reader {
            if let error { reader.resume(throwing: error) } else { reader.resume(returning: nil) }
        }
    }

    private func makeHead(status: Int, effectiveURL: URL?) -> Head {
        Head(status: status, headers: state.withLock { $0.headers }, url: effectiveURL ?? url)
    }

    func resumeIfPaused() -> Bool {
        state.withLock { state in
            guard state.paused else { return false }
            state.paused = false
            return true
        }
    }

    // MARK: Reader

    func nextBuffer(unpause: @Sendable () -> Void) async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
            enum Action {
                case give([UInt8]?)
                case fail(any Error)
                case wait(unpause: Bool)
            }
            let action: Action = state.withLock { state in
                if !state.buffered.isEmpty {
                    let buffer = state.buffered.removeFirst()
                    state.bufferedBytes -= buffer.count
                    return .give(buffer)
                }
                if state.finished {
                    if let failure = state.failure { return .fail(failure) }
                    return .give(nil)
                }
                state.reader = continuation
                return .wait(unpause: state.paused)
            }
            switch action {
            case .give(let buffer): continuation.resume(returning: buffer)
            case .fail(let error): continuation.resume(throwing: error)
            case .wait(let paused): if paused { unpause() }
            }
        }
    }
}

/// Runs libcurl's multi interface on a thread of its own: transfers are added, cancelled and
/// unpaused through a command queue, and `curl_multi_poll` sleeps until there is work.
// Unchecked: the multi handle is used on the driver thread only; commands reach it through a Mutex-guarded queue.
final class CurlDriver: @unchecked Sendable {
    enum Command {
        case add(CurlTransfer)
        case cancel(CurlTransfer)
        case unpause(CurlTransfer)
        case stop
    }

    // The multi handle is used on the driver thread only, except curl_multi_wakeup, which is
    // thread-safe.
    private let multi: UnsafeMutableRawPointer
    private let commands = Mutex<(queue: [Command], stopped: Bool)>(([], false))
    private var running: [UnsafeMutableRawPointer: CurlTransfer] = [:]

    init() {
        curl_global_init(3)  // CURL_GLOBAL_ALL
        guard let multi = curl_multi_init() else { fatalError("libcurl could not make a multi handle (out of memory)") }
        self.multi = multi
        let thread = Thread { [self] in run() }
        thread.name = "bookcache.curl"
        thread.start()
    }

    func submit(_ command: Command) {
        let multi = self.multi
        commands.withLock { commands in
            // Once stopped, the multi handle is gone: nothing more is taken. The wake-up happens
            // under the lock, so the driver cannot free the handle in between.
            guard !commands.stopped else { return }
            if case .stop = command { commands.stopped = true }
            commands.queue.append(command)
            curl_multi_wakeup(multi)
        }
    }

    private func run() {
        var stopping = false
        while !stopping {
            for command in commands.withLock({ commands in
                defer { commands.queue = [] }; return commands.queue
            }) {
                switch command {
                case .stop:
                    stopping = true
                    for transfer in running.values { finish(transfer, result: nil, cancelled: true) }
                case .add(let transfer): add(transfer)
                case .cancel(let transfer): finish(transfer, result: nil, cancelled: true)
                case .unpause(let transfer):
                    // 0 is CURLPAUSE_CONT.
                    if let handle = transfer.handle, transfer.resumeIfPaused() { curl_easy_pause(handle, 0) }
                }
            }
            var active: Int32 = 0
            curl_multi_perform(multi, &active)
            var left: Int32 = 0
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let handle = message.pointee.easy_handle,
                    let transfer = running[handle]
                else { continue }
                finish(transfer, result: bc_message_result(message), cancelled: false)
            }
            if !stopping { curl_multi_poll(multi, nil, 0, 1000, nil) }
        }
        curl_multi_cleanup(multi)
    }

    private func add(_ transfer: CurlTransfer) {
        guard let handle = curl_easy_init() else {
            transfer.finished(
                status: 0, effectiveURL: nil,
                error: DownloadError(kind: .transport, url: transfer.url, detail: "libcurl could not make a handle"))
            return
        }
        let context = Unmanaged.passUnretained(transfer).toOpaque()
        bc_setopt_string(handle, CURLOPT_URL, transfer.url.absoluteString)
        bc_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        bc_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 1)
        bc_setopt_long(handle, CURLOPT_MAXREDIRS, transfer.configuration.maxRedirects)
        bc_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        bc_setopt_string(handle, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        bc_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, Int(transfer.configuration.connectTimeout.wholeMilliseconds))
        bc_setopt_long(handle, CURLOPT_LOW_SPEED_LIMIT, 1)
        bc_setopt_long(handle, CURLOPT_LOW_SPEED_TIME, max(1, Int(transfer.configuration.idleReadTimeout.wholeMilliseconds / 1000)))
        bc_setopt_pointer(handle, CURLOPT_WRITEDATA, context)
        bc_setopt_pointer(handle, CURLOPT_HEADERDATA, context)
        bc_setopt_callback(handle, CURLOPT_WRITEFUNCTION, curlWrite)
        bc_setopt_callback(handle, CURLOPT_HEADERFUNCTION, curlHeader)
        var list: UnsafeMutablePointer<curl_slist>?
        for header in transfer.requestHeaders {
            list = curl_slist_append(list, "\(header.name): \(header.value)")
        }
        if let list { bc_setopt_list(handle, CURLOPT_HTTPHEADER, list) }
        transfer.headerList = list
        let configuration = transfer.configuration
        if let credentials = transfer.credentials {
            bc_setopt_string(handle, CURLOPT_USERNAME, credentials.user)
            bc_setopt_string(handle, CURLOPT_PASSWORD, credentials.password)
        }
        if let netrc = configuration.netrcFile {
            bc_setopt_long(handle, CURLOPT_NETRC, 1)  // CURL_NETRC_OPTIONAL: the request's own login first
            bc_setopt_string(handle, CURLOPT_NETRC_FILE, netrc)
        }
        if transfer.credentials != nil || configuration.netrcFile != nil {
            // Basic or Digest, as the server's 401 asks: never the password before it asks.
            bc_setopt_long(handle, CURLOPT_HTTPAUTH, 1 | 2)  // CURLAUTH_BASIC | CURLAUTH_DIGEST
        }
        if let proxy = configuration.proxy { bc_setopt_string(handle, CURLOPT_PROXY, proxy) }
        if let noProxy = configuration.noProxy { bc_setopt_string(handle, CURLOPT_NOPROXY, noProxy) }
        if let rate = configuration.maxReceiveBytesPerSecond { bc_setopt_off(handle, CURLOPT_MAX_RECV_SPEED_LARGE, curl_off_t(rate)) }
        if let caFile = configuration.caFile { bc_setopt_string(handle, CURLOPT_CAINFO, caFile) }
        // HTTP/2 when a TLS server offers it (ALPN), HTTP/1.1 otherwise, as curl does.
        bc_setopt_long(handle, CURLOPT_HTTP_VERSION, 4)  // CURL_HTTP_VERSION_2TLS
        transfer.handle = handle
        running[handle] = transfer
        curl_multi_add_handle(multi, handle)
    }

    private func finish(_ transfer: CurlTransfer, result: CURLcode?, cancelled: Bool) {
        guard let raw = transfer.handle, running.removeValue(forKey: raw) != nil else { return }
        let (status, effective) = headInfo(raw)
        let error: DownloadError?
        if cancelled {
            error = DownloadError(kind: .cancelled, url: transfer.url)
        } else if let result, result != CURLE_OK {
            error = Self.error(
                result, url: effective ?? transfer.url, connected: bc_getinfo_long(raw, CURLINFO_PRIMARY_PORT) != 0 && status != 0,
                systemError: Int32(bc_getinfo_long(raw, CURLINFO_OS_ERRNO)))
        } else {
            error = nil
        }
        curl_multi_remove_handle(multi, raw)
        curl_easy_cleanup(raw)
        curl_slist_free_all(transfer.headerList)
        transfer.handle = nil
        transfer.headerList = nil
        transfer.finished(status: status, effectiveURL: effective, error: error)
    }

    static func error(_ code: CURLcode, url: URL, connected: Bool, systemError: Int32) -> DownloadError {
        let detail = String(cString: curl_easy_strerror(code)).lowercased()
        switch code {
        case CURLE_RECV_ERROR where systemError == ECONNRESET, CURLE_SEND_ERROR where systemError == ECONNRESET:
            return DownloadError(kind: .bodyCutShort, url: url, detail: "the connection was reset")
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST:
            return DownloadError(kind: .connectionFailed, url: url, detail: detail)
        case CURLE_OPERATION_TIMEDOUT:
            return connected
                ? DownloadError(kind: .timedOut, url: url, detail: "no data received within the idle-read timeout")
                : DownloadError(kind: .connectionFailed, url: url, detail: "connect timed out")
        case CURLE_PARTIAL_FILE, CURLE_RECV_ERROR, CURLE_GOT_NOTHING, CURLE_SEND_ERROR:
            return DownloadError(kind: .bodyCutShort, url: url, detail: detail)
        case CURLE_PEER_FAILED_VERIFICATION:
            return DownloadError(
                kind: .untrustedServer, url: url,
                detail:
                    "its TLS certificate is not signed by an authority this system trusts; for a private authority give its certificate as the transport's CA file"
            )
        case CURLE_SSL_CACERT_BADFILE:
            return DownloadError(kind: .untrustedServer, url: url, detail: "the certificate authorities file cannot be read or is not PEM")
        case CURLE_COULDNT_RESOLVE_PROXY:
            return DownloadError(
                kind: .connectionFailed, url: url,
                detail: "the proxy's host name could not be resolved (check --proxy, the proxy setting, or $http_proxy / $https_proxy)")
        case CURLE_TOO_MANY_REDIRECTS:
            return DownloadError(kind: .tooManyRedirects, url: url, detail: detail)
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return DownloadError(kind: .invalidURL, url: url, detail: detail)
        case CURLE_WEIRD_SERVER_REPLY, CURLE_BAD_CONTENT_ENCODING:
            return DownloadError(kind: .invalidResponse, url: url, detail: detail)
        default:
            return DownloadError(kind: .transport, url: url, detail: detail)
        }
    }
}

/// The status and URL of the response a handle is on (the last one, after redirects).
private func headInfo(_ handle: UnsafeMutableRawPointer) -> (status: Int, url: URL?) {
    let url = bc_getinfo_string(handle, CURLINFO_EFFECTIVE_URL).flatMap { URL(string: String(cString: $0)) }
    return (Int(bc_getinfo_long(handle, CURLINFO_RESPONSE_CODE)), url)
}

private func transferFrom(_ user: UnsafeMutableRawPointer?) -> CurlTransfer? {
    user.map { Unmanaged<CurlTransfer>.fromOpaque($0).takeUnretainedValue() }
}

/// libcurl's write callback: body bytes of the final response.
private let curlWrite: bc_curl_data_callback = { data, size, count, user in
    guard let transfer = transferFrom(user), let data else { return 0 }
    let length = size * count
    guard let handle = transfer.handle else { return 0 }
    let accepted = transfer.received(body: UnsafeRawBufferPointer(start: data, count: length), head: { headInfo(handle) })
    return accepted ? length : bc_write_pause()
}

/// libcurl's header callback: one header line at a time, status lines included.
private let curlHeader: bc_curl_data_callback = { data, size, count, user in
    guard let transfer = transferFrom(user), let data else { return 0 }
    let length = size * count
    transfer.received(headerLine: String(decoding: UnsafeRawBufferPointer(start: data, count: length), as: UTF8.self))
    return length
}

extension Duration {
    fileprivate var wholeMilliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }
}
