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
/// host. Nor are the caller's own headers (an API key, a cookie — every header but `Range` and
/// `If-Range`): a request that has any follows its redirects here, hop by hop, and drops them once
/// a redirect leaves the first URL's origin (curl would send them on).
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

    /// What its transfers keep unread (`nil` before the first request): for tests.
    var budget: BufferBudget? { driverState.withLock { $0.driver?.budget } }

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
        let credentials = request.credentials ?? HTTPCredentials(userInfoOf: request.url)
        guard request.headers.contains(where: { !Self.followsRedirects(headerNamed: $0.name) }) else {
            return try await transfer(url, headers: request.headers, credentials: credentials, followingRedirects: true)
        }
        var current = url
        var headers = request.headers
        for _ in 0...configuration.maxRedirects {
            let response = try await transfer(current, headers: headers, credentials: credentials, followingRedirects: false)
            guard [301, 302, 303, 307, 308].contains(response.statusCode), let location = response.header("Location") else {
                return response
            }
            response.body.cancel()
            guard let next = URL(string: location, relativeTo: current)?.absoluteURL, let scheme = next.scheme?.lowercased(),
                scheme == "http" || scheme == "https", next.host != nil
            else {
                throw DownloadError(
                    kind: .invalidResponse, url: current,
                    detail: "a redirect to \(location.prefix(200).debugDescription), which is not an http or https URL")
            }
            if !HTTPCredentials.sameOrigin(next, url) {
                headers = headers.filter { Self.followsRedirects(headerNamed: $0.name) }
            }
            current = HTTPCredentials.removingUserInfo(from: next)
        }
        throw DownloadError(kind: .tooManyRedirects, url: current, detail: "more than \(configuration.maxRedirects) redirects")
    }

    /// Headers that go on after a redirect to another origin: the downloader's own.
    static func followsRedirects(headerNamed name: String) -> Bool {
        let lowered = name.lowercased()
        return lowered == "range" || lowered == "if-range"
    }

    /// One transfer: libcurl follows its redirects, or stops at the first.
    private func transfer(
        _ url: URL, headers: [(name: String, value: String)], credentials: HTTPCredentials?, followingRedirects: Bool
    ) async throws -> TransportResponse {
        let driver = try self.driver
        let transfer = CurlTransfer(
            url: url, headers: headers, credentials: credentials.flatMap { $0.applies(to: url) ? $0 : nil }, configuration: configuration,
            budget: driver.budget, followsRedirects: followingRedirects)
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
