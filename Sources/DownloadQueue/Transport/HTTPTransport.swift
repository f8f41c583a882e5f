import Foundation

/// The seam between the download logic and an HTTP stack.
///
/// ``CurlTransport`` (libcurl) is the live implementation. A transport sends one `GET`,
/// follows redirects, and hands back the final response head with a streaming body. It does
/// not retry, does not decompress, and does not interpret status codes: that is the
/// downloader's job, so every transport behaves the same.
public protocol HTTPTransport: Sendable {
    /// Sends a request and returns the response head once it has arrived.
    ///
    /// - Parameter request: What to fetch, with any extra headers (such as `Range`).
    /// - Returns: The final response (after redirects) whose body is read by iterating it.
    /// - Throws: ``DownloadError`` of the kind that says what failed: ``DownloadError/Kind/connectionFailed``
    ///   when no connection could be made, ``DownloadError/Kind/timedOut``, ``DownloadError/Kind/untrustedServer``,
    ///   ``DownloadError/Kind/invalidRequest`` for a header that cannot be sent, ``DownloadError/Kind/transport``
    ///   for any other failure.
    func send(_ request: TransportRequest) async throws -> TransportResponse
}

/// A `GET` request handed to an ``HTTPTransport``.
public struct TransportRequest: Sendable {
    /// The absolute `http` or `https` URL.
    public var url: URL
    /// Extra request headers, in order.
    public var headers: [(name: String, value: String)]
    /// Credentials to answer a `401` from their own host with (Basic or Digest).
    public var credentials: HTTPCredentials?

    /// Creates a request.
    /// - Parameters:
    ///   - url: The absolute `http` or `https` URL.
    ///   - headers: Extra request headers, in order.
    ///   - credentials: Credentials for the URL's host, answered to its challenge only.
    public init(url: URL, headers: [(name: String, value: String)] = [], credentials: HTTPCredentials? = nil) {
        self.url = url
        self.headers = headers
        self.credentials = credentials
    }
}

/// The head of a response and its streaming body.
public struct TransportResponse: Sendable {
    /// The HTTP status code, such as 200 or 206.
    public var statusCode: Int
    /// Response headers; look them up with ``header(_:)``.
    public var headers: [(name: String, value: String)]
    /// The URL that answered, after redirects.
    public var finalURL: URL
    /// The body, as a sequence of buffers. Iterate it once.
    public var body: ResponseBody

    /// Creates a response.
    /// - Parameters:
    ///   - statusCode: The HTTP status code.
    ///   - headers: Response headers.
    ///   - finalURL: The URL that answered, after redirects.
    ///   - body: The streaming body.
    public init(statusCode: Int, headers: [(name: String, value: String)], finalURL: URL, body: ResponseBody) {
        self.statusCode = statusCode
        self.headers = headers
        self.finalURL = finalURL
        self.body = body
    }

    /// The first value of a header, compared case-insensitively.
    /// - Parameter name: The header name, such as `ETag`.
    /// - Returns: The value, or `nil` when the header is absent.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
    }

    /// The `Content-Length` header as a number, if present and valid.
    public var contentLength: Int64? {
        header("Content-Length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 >= 0 ? $0 : nil }
    }
}

/// A response body: an asynchronous sequence of byte buffers, read once.
public struct ResponseBody: AsyncSequence, Sendable {
    public typealias Element = [UInt8]

    private let makeNext: @Sendable () -> (@Sendable () async throws -> [UInt8]?)
    private let abandon: @Sendable () -> Void

    /// Wraps any sendable sequence of byte buffers.
    /// - Parameters:
    ///   - sequence: The underlying body.
    ///   - cancel: Stops the transfer behind the body when it will not be read (see ``cancel()``).
    public init<Base: AsyncSequence & Sendable>(_ sequence: Base, cancel: @escaping @Sendable () -> Void = {})
    where Base.Element == [UInt8] {
        self.makeNext = {
            let box = IteratorBox(sequence.makeAsyncIterator())
            return { try await box.next() }
        }
        self.abandon = cancel
    }

    /// Stops the transfer behind a body that will not be read, or not to its end, so it does not
    /// hold a connection (a transfer whose reader stops pauses once its buffer is full).
    public func cancel() {
        abandon()
    }

    /// Reads the whole body into memory.
    /// - Parameters:
    ///   - maxBytes: The most bytes accepted.
    ///   - url: The URL, for errors.
    /// - Throws: ``DownloadError`` of kind ``DownloadError/Kind/bodyTooLong`` past `maxBytes`.
    public func collect(maxBytes: Int, url: URL) async throws -> Data {
        var data = Data()
        for try await buffer in self {
            guard data.count + buffer.count <= maxBytes else {
                throw DownloadError(kind: .bodyTooLong, url: url, detail: "more than \(maxBytes) bytes")
            }
            data.append(contentsOf: buffer)
        }
        return data
    }

    /// Creates an iterator over the body's buffers.
    public func makeAsyncIterator() -> Iterator {
        Iterator(next: makeNext())
    }

    /// Iterates a ``ResponseBody``.
    public struct Iterator: AsyncIteratorProtocol {
        fileprivate let next: @Sendable () async throws -> [UInt8]?

        /// The next buffer, or `nil` at the end of the body.
        public mutating func next() async throws -> [UInt8]? {
            try await next()
        }
    }
}

/// Holds an iterator so a closure can advance it. A body is iterated by one task at a time,
/// which is what makes the unchecked conformance sound.
// Unchecked: a body is iterated by one task at a time.
private final class IteratorBox<Base: AsyncIteratorProtocol>: @unchecked Sendable where Base.Element == [UInt8] {
    private var base: Base

    init(_ base: Base) {
        self.base = base
    }

    func next() async throws -> [UInt8]? {
        try await base.next()
    }
}
