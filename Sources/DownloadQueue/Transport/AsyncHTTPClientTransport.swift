import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// The live ``HTTPTransport``, built on AsyncHTTPClient.
///
/// It follows up to ten redirects (never in a cycle), never decompresses, and uses an
/// idle-read timeout rather than a total one, so large books on slow links still finish.
/// Connection failures are reported at once; retrying is the caller's decision.
public final class AsyncHTTPClientTransport: HTTPTransport {
    /// Timeouts and limits for the transport.
    public struct Configuration: Sendable {
        /// How long to wait for a TCP (and TLS) connection.
        public var connectTimeout: Duration
        /// How long a response may go without delivering a byte before it fails.
        public var idleReadTimeout: Duration
        /// How many redirects to follow before failing.
        public var maxRedirects: Int
        /// Connections kept per host; keep it at least the queue's concurrency.
        public var connectionsPerHost: Int

        /// Creates a configuration.
        /// - Parameters:
        ///   - connectTimeout: Connect timeout; 10 seconds by default.
        ///   - idleReadTimeout: Idle-read timeout; 30 seconds by default.
        ///   - maxRedirects: Redirects to follow; 10 by default.
        ///   - connectionsPerHost: Pooled connections per host; 16 by default.
        public init(
            connectTimeout: Duration = .seconds(10),
            idleReadTimeout: Duration = .seconds(30),
            maxRedirects: Int = 10,
            connectionsPerHost: Int = 16
        ) {
            self.connectTimeout = connectTimeout
            self.idleReadTimeout = idleReadTimeout
            self.maxRedirects = maxRedirects
            self.connectionsPerHost = connectionsPerHost
        }
    }

    private let client: HTTPClient
    private let ownsClient: Bool
    private let logger: Logger

    /// A process-wide transport with the default configuration. It is never shut down.
    public static let shared = AsyncHTTPClientTransport(configuration: Configuration(), logger: nil, owned: false)

    /// Creates a transport with its own HTTP client. Call ``shutdown()`` when done with it.
    /// - Parameters:
    ///   - configuration: Timeouts and limits.
    ///   - logger: Where the client logs background activity; silent when `nil`.
    public convenience init(configuration: Configuration, logger: Logger? = nil) {
        self.init(configuration: configuration, logger: logger, owned: true)
    }

    private init(configuration: Configuration, logger: Logger?, owned: Bool) {
        var config = HTTPClient.Configuration(
            redirectConfiguration: .follow(max: configuration.maxRedirects, allowCycles: false),
            timeout: .init(
                connect: TimeAmount(configuration.connectTimeout),
                read: TimeAmount(configuration.idleReadTimeout)
            ),
            decompression: .disabled
        )
        config.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = configuration.connectionsPerHost
        config.connectionPool.retryConnectionEstablishment = false
        let logger = logger ?? Logger(label: "bookcache.transport", factory: { _ in SwiftLogNoOpLogHandler() })
        self.client = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: config,
            backgroundActivityLogger: logger
        )
        self.ownsClient = owned
        self.logger = logger
    }

    /// Shuts the underlying client down. Do not call it on ``shared``.
    public func shutdown() async throws {
        guard ownsClient else { return }
        try await client.shutdown()
    }

    deinit {
        if ownsClient {
            // An owned client must be shut down before it goes; do it in the background rather
            // than trap, so a forgotten shutdown() costs a log line and not a crash.
            let client = self.client
            Task { try? await client.shutdown() }
        }
    }

    /// Sends the request; a `401` from the host that `request.credentials` are for is answered
    /// once, with Digest or Basic as its `WWW-Authenticate` asks. Credentials written into the URL
    /// (`user:password@`) are taken out of it and answered the same way.
    public func send(_ request: TransportRequest) async throws -> TransportResponse {
        let url = HTTPCredentials.removingUserInfo(from: request.url)
        let credentials = request.credentials ?? HTTPCredentials(userInfoOf: request.url)
        var response = try await execute(url, headers: request.headers)
        var finalURL = response.url ?? url
        if response.status == .unauthorized, let credentials, credentials.applies(to: finalURL),
            let authorization = credentials.authorization(answering: response.headers["WWW-Authenticate"], for: finalURL)
        {
            await discard(response.body)
            response = try await execute(finalURL, headers: request.headers + [("Authorization", authorization)])
            finalURL = response.url ?? finalURL
        }
        let headers = response.headers.map { (name: $0.name, value: $0.value) }
        let body = ResponseBody(TranslatingBody(base: response.body, url: finalURL))
        return TransportResponse(
            statusCode: Int(response.status.code),
            headers: headers,
            finalURL: finalURL,
            body: body
        )
    }

    private func execute(_ url: URL, headers: [(name: String, value: String)]) async throws -> HTTPClientResponse {
        var httpRequest = HTTPClientRequest(url: url.absoluteString)
        httpRequest.method = .GET
        for header in headers {
            httpRequest.headers.add(name: header.name, value: header.value)
        }
        do {
            return try await client.execute(httpRequest, deadline: .distantFuture, logger: logger)
        } catch {
            throw DownloadError.classifying(error, url: url)
        }
    }

    /// Reads and drops a small body (a `401` page), so its connection can be reused.
    private func discard(_ body: HTTPClientResponse.Body) async {
        do {
            _ = try await body.collect(upTo: 64 << 10)
        } catch {
            logger.debug("the body of a 401 could not be read; its connection is closed", metadata: ["error": "\(error)"])
        }
    }
}

/// Maps AsyncHTTPClient's body errors to ``DownloadError`` as they surface.
private struct TranslatingBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer
    let base: HTTPClientResponse.Body
    let url: URL

    func makeAsyncIterator() -> Iterator {
        Iterator(base: base.makeAsyncIterator(), url: url)
    }

    struct Iterator: AsyncIteratorProtocol {
        var base: HTTPClientResponse.Body.AsyncIterator
        let url: URL

        mutating func next() async throws -> ByteBuffer? {
            do {
                return try await base.next()
            } catch {
                throw DownloadError.classifying(error, url: url)
            }
        }
    }
}

extension HTTPClientError {
    /// The error's name without the type, such as `remoteConnectionClosed`.
    fileprivate var shortDescription: String {
        let text = "\(self)"
        return text.hasPrefix("HTTPClientError.") ? String(text.dropFirst("HTTPClientError.".count)) : text
    }
}

extension DownloadError {
    /// Sorts an error from the HTTP stack into connection failures, timeouts and other
    /// transport failures.
    static func classifying(_ error: any Error, url: URL) -> DownloadError {
        if let error = error as? DownloadError { return error }
        if error is CancellationError { return DownloadError(kind: .cancelled, url: url) }
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout, .socksHandshakeTimeout, .tlsHandshakeTimeout:
                return DownloadError(kind: .connectionFailed, url: url, underlying: error, detail: "connect timed out")
            case .readTimeout:
                return DownloadError(kind: .timedOut, url: url, underlying: error, detail: "no data received within the idle-read timeout")
            case .redirectLimitReached, .redirectCycleDetected:
                return DownloadError(kind: .tooManyRedirects, url: url, underlying: error)
            case .invalidURL, .emptyHost, .emptyScheme:
                return DownloadError(kind: .invalidURL, url: url, underlying: error)
            case .cancelled:
                return DownloadError(kind: .cancelled, url: url)
            case .remoteConnectionClosed:
                return DownloadError(kind: .bodyCutShort, url: url, underlying: error, detail: "the server closed the connection")
            default:
                return DownloadError(kind: .transport, url: url, underlying: error, detail: "the HTTP exchange failed (\(error.shortDescription))")
            }
        }
        if let error = error as? NIOConnectionError {
            let causes = error.connectionErrors.map { failure in
                (failure.error as? IOError).map { String(cString: strerror($0.errnoCode)) } ?? "\(failure.error)"
            }
            let resolvedNothing = error.dnsAError != nil || error.dnsAAAAError != nil
            let detail = causes.isEmpty ? (resolvedNothing ? "the host name could not be resolved" : "no address could be reached") : Array(Set(causes)).sorted().joined(separator: ", ").lowercased()
            return DownloadError(kind: .connectionFailed, url: url, underlying: error, detail: detail)
        }
        if error is SocketAddressError {
            return DownloadError(kind: .connectionFailed, url: url, underlying: error, detail: "the host name could not be resolved")
        }
        if let ioError = error as? IOError {
            let reason = String(cString: strerror(ioError.errnoCode)).lowercased()
            switch ioError.errnoCode {
            case ECONNREFUSED, ENETUNREACH, EHOSTUNREACH, ETIMEDOUT:
                return DownloadError(kind: .connectionFailed, url: url, underlying: error, detail: reason)
            case ECONNRESET, EPIPE, ECONNABORTED:
                return DownloadError(kind: .bodyCutShort, url: url, underlying: error, detail: "the connection was reset")
            default:
                return DownloadError(kind: .transport, url: url, underlying: error, detail: reason)
            }
        }
        if error is HTTPParserError {
            return DownloadError(kind: .bodyCutShort, url: url, underlying: error, detail: "the response ended early or was malformed")
        }
        return DownloadError(kind: .transport, url: url, underlying: error, detail: "\(error)")
    }
}
