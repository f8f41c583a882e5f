import Foundation

/// Why a download failed.
///
/// A struct rather than an enum so new kinds can be added without breaking callers: match on
/// ``kind`` (`error.kind == .httpStatus`). ``isRetryable`` says whether trying again may help.
public struct DownloadError: Error, Sendable, CustomStringConvertible {
    /// The category of a ``DownloadError``.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The server answered with a status that is not a success (see ``DownloadError/statusCode``).
        public static let httpStatus = Kind("httpStatus")
        /// No connection could be made: refused, unreachable, DNS failure, or connect timeout.
        public static let connectionFailed = Kind("connectionFailed")
        /// The server sent no data for longer than the idle-read timeout.
        public static let timedOut = Kind("timedOut")
        /// The body ended before the advertised length, or the connection dropped mid-body.
        public static let bodyCutShort = Kind("bodyCutShort")
        /// The body was longer than the advertised length or a given size limit.
        public static let bodyTooLong = Kind("bodyTooLong")
        /// The server answered in a way the protocol does not allow (such as a wrong `Content-Range`).
        public static let invalidResponse = Kind("invalidResponse")
        /// More redirects than allowed, or a redirect cycle.
        public static let tooManyRedirects = Kind("tooManyRedirects")
        /// The URL is not an absolute `http` or `https` URL.
        public static let invalidURL = Kind("invalidURL")
        /// The request cannot be sent as given (a header with a control character in it); not retried.
        public static let invalidRequest = Kind("invalidRequest")
        /// Writing the file failed (see ``DownloadError/errnoCode``; `ENOSPC` means the disk is full).
        public static let fileSystem = Kind("fileSystem")
        /// The caller's response-head check refused the response (for example: not enough space).
        public static let refused = Kind("refused")
        /// The download was cancelled.
        public static let cancelled = Kind("cancelled")
        /// The server's TLS certificate is not trusted, or the certificate authorities given
        /// cannot be read. Not retried: trust the server's authority (`--cacert`) or fix its certificate.
        public static let untrustedServer = Kind("untrustedServer")
        /// Any other failure of the HTTP stack.
        public static let transport = Kind("transport")
    }

    /// The category of failure.
    public var kind: Kind
    /// The URL being fetched, with any credentials removed.
    public var url: String
    /// The HTTP status code, for ``Kind/httpStatus``.
    public var statusCode: Int?
    /// The server's `Retry-After`, when it sent one.
    public var retryAfter: Duration?
    /// The `errno` value, for ``Kind/fileSystem``.
    public var errnoCode: Int32?
    /// What went wrong underneath, when known.
    public var underlying: (any Error)?
    /// A short extra explanation.
    public var detail: String?
    /// How many attempts were made before giving up (1 when there was no retry).
    public var attempts: Int = 1
    /// The size of the partial file kept for the next attempt to resume from (0 when nothing
    /// was kept). An attempt that leaves more than any before it made progress, and does not use
    /// up a retry (see ``RetryPolicy``).
    public var keptBytes: Int64 = 0

    /// Creates an error.
    /// - Parameters:
    ///   - kind: The category of failure.
    ///   - url: The URL being fetched; credentials are removed before it is stored.
    ///   - statusCode: The HTTP status, for ``Kind/httpStatus``.
    ///   - retryAfter: The server's `Retry-After`.
    ///   - errnoCode: The `errno`, for ``Kind/fileSystem``.
    ///   - underlying: The cause.
    ///   - detail: A short extra explanation.
    public init(
        kind: Kind,
        url: URL,
        statusCode: Int? = nil,
        retryAfter: Duration? = nil,
        errnoCode: Int32? = nil,
        underlying: (any Error)? = nil,
        detail: String? = nil
    ) {
        self.kind = kind
        self.url = URLRedaction.redacted(url)
        self.statusCode = statusCode
        self.retryAfter = retryAfter
        self.errnoCode = errnoCode
        self.underlying = underlying
        self.detail = detail
    }

    /// Whether another attempt may succeed: connection problems, timeouts, bodies cut short,
    /// 408, 429 and 5xx. Never for other 4xx, invalid URLs, refused responses, disk errors
    /// or cancellation.
    public var isRetryable: Bool {
        switch kind {
        case .connectionFailed, .timedOut, .bodyCutShort, .transport, .invalidResponse:
            return true
        case .httpStatus:
            return statusCode.map(Self.isRetryable(status:)) ?? false
        default:
            return false
        }
    }

    /// Whether an HTTP status says "try again later": 408, 429 and 5xx.
    public static func isRetryable(status: Int) -> Bool {
        status == 408 || status == 429 || (500...599).contains(status)
    }

    public var description: String {
        var text: String
        switch kind {
        case .httpStatus:
            text = "HTTP \(statusCode.map(String.init) ?? "error") from \(url)"
        case .connectionFailed:
            text = "could not connect to \(url)"
        case .timedOut:
            text = "timed out waiting for data from \(url)"
        case .bodyCutShort:
            text = "the download of \(url) was cut short"
        case .bodyTooLong:
            text = "\(url) sent more data than it announced"
        case .invalidResponse:
            text = "invalid response from \(url)"
        case .tooManyRedirects:
            text = "too many redirects (or a redirect loop) from \(url)"
        case .invalidURL:
            text = "invalid URL \(url)"
        case .invalidRequest:
            text = "invalid request for \(url)"
        case .fileSystem:
            if let code = errnoCode {
                text = "could not write the download of \(url): \(String(cString: strerror(code)))"
            } else {
                text = "could not write the download of \(url)"
            }
        case .refused:
            text = "refused \(url)"
        case .cancelled:
            text = "the download of \(url) was cancelled"
        case .untrustedServer:
            text = "the server of \(url) could not be trusted"
        default:
            text = "the download of \(url) failed"
        }
        // The cause is said in `detail`, in plain words; `underlying` keeps the library's error
        // for callers who want it, but its text is not shown.
        if let detail { text += ": \(detail)" }
        if attempts > 1 {
            text += "; gave up after \(attempts) attempts"
        }
        return text
    }
}

extension DownloadError: LocalizedError {
    public var errorDescription: String? { description }
}

extension DownloadError {
    /// A ``DownloadError`` as it is, cancellation as ``Kind/cancelled``, and anything else as a
    /// ``Kind/transport`` failure that keeps its cause.
    static func classifying(_ error: any Error, url: URL) -> DownloadError {
        if let error = error as? DownloadError { return error }
        if error is CancellationError { return DownloadError(kind: .cancelled, url: url) }
        return DownloadError(kind: .transport, url: url, underlying: error, detail: "\(error)")
    }
}
