import Crypto
import Foundation
import Logging
import NIOCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Streams one HTTP response body into a file, hashing it with SHA-256 on the way.
///
/// One call is one attempt: no retries. The file is created (or truncated) at the destination
/// path; on failure it is removed, so a failed attempt leaves nothing behind.
public struct FileDownloader: Sendable {
    /// The transport that sends requests.
    public let transport: any HTTPTransport
    private let logger: Logger

    /// Creates a downloader.
    /// - Parameters:
    ///   - transport: The HTTP stack to use.
    ///   - logger: Where to log; the library never prints.
    public init(transport: any HTTPTransport, logger: Logger) {
        self.transport = transport
        self.logger = logger
    }

    /// Downloads `url` into the file at `destination`.
    ///
    /// - Parameters:
    ///   - url: An absolute `http` or `https` URL.
    ///   - destination: The file to create or overwrite; its folder must exist.
    ///   - maxBytes: Refuse bodies larger than this many bytes, announced or actual.
    ///   - checkHead: Called with the response head before any byte is written; throw to refuse.
    ///   - onProgress: Called as bytes arrive.
    /// - Returns: The file's size, SHA-256 and the server's validators.
    /// - Throws: ``DownloadError`` for every failure; the destination is removed first.
    public func download(
        from url: URL,
        to destination: String,
        maxBytes: Int64 = .max,
        checkHead: @Sendable (ResponseHead) throws -> Void = { _ in },
        onProgress: @Sendable (DownloadProgress) -> Void = { _ in }
    ) async throws -> DownloadedFile {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw DownloadError(kind: .invalidURL, url: url, detail: "only absolute http and https URLs can be downloaded")
        }
        let response = try await transport.send(TransportRequest(url: url))
        let finalURL = response.finalURL
        guard response.statusCode == 200 else {
            throw DownloadError(
                kind: .httpStatus,
                url: finalURL,
                statusCode: response.statusCode,
                retryAfter: response.header("Retry-After").flatMap { RetryAfter.parse($0) }
            )
        }
        let expected = response.contentLength
        if let expected, expected > maxBytes {
            throw DownloadError(
                kind: .bodyTooLong, url: finalURL,
                detail: "the server announced \(expected) bytes, more than the limit of \(maxBytes)")
        }
        do {
            try checkHead(ResponseHead(statusCode: 200, expectedLength: expected, contentType: response.header("Content-Type")))
        } catch {
            throw DownloadError(kind: .refused, url: finalURL, underlying: error, detail: "\(error)")
        }

        let file = try OutputFile(path: destination, url: finalURL)
        var hasher = SHA256()
        var received: Int64 = 0
        do {
            onProgress(DownloadProgress(receivedBytes: 0, totalBytes: expected))
            for try await buffer in response.body {
                try Task.checkCancellation()
                received += Int64(buffer.readableBytes)
                if received > maxBytes || (expected.map { received > $0 } ?? false) {
                    throw DownloadError(
                        kind: .bodyTooLong, url: finalURL,
                        detail: "received more than \(expected ?? maxBytes) bytes")
                }
                try buffer.withUnsafeReadableBytes { bytes in
                    hasher.update(bufferPointer: bytes)
                    try file.write(bytes)
                }
                onProgress(DownloadProgress(receivedBytes: received, totalBytes: expected))
            }
            try Task.checkCancellation()
            if let expected, received != expected {
                throw DownloadError(
                    kind: .bodyCutShort, url: finalURL,
                    detail: "received \(received) of \(expected) bytes")
            }
            try file.syncAndClose()
        } catch {
            file.discard()
            throw DownloadError.classifying(error, url: finalURL)
        }
        let digest = hasher.finalize().map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
        logger.debug("downloaded", metadata: ["url": "\(URLRedaction.redacted(finalURL))", "bytes": "\(received)"])
        return DownloadedFile(
            path: destination,
            byteCount: received,
            sha256: digest,
            etag: response.header("ETag"),
            lastModified: response.header("Last-Modified"),
            contentType: response.header("Content-Type"),
            finalURL: URLRedaction.redacted(finalURL)
        )
    }
}

/// A file opened for writing with plain POSIX calls, so every failure keeps its `errno`.
final class OutputFile: @unchecked Sendable {
    // Used by one task at a time: the download that created it.
    private var fd: Int32
    private let path: String
    private let url: URL

    init(path: String, url: URL) throws {
        self.path = path
        self.url = url
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw DownloadError(kind: .fileSystem, url: url, errnoCode: errno, detail: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        self.fd = fd
    }

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let written = Glibc_write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw DownloadError(kind: .fileSystem, url: url, errnoCode: code, detail: "writing \(path): \(String(cString: strerror(code)))")
            }
            offset += written
        }
    }

    func syncAndClose() throws {
        if fsync(fd) != 0 {
            let code = errno
            throw DownloadError(kind: .fileSystem, url: url, errnoCode: code, detail: "flushing \(path): \(String(cString: strerror(code)))")
        }
        let result = close(fd)
        fd = -1
        if result != 0 {
            let code = errno
            throw DownloadError(kind: .fileSystem, url: url, errnoCode: code, detail: "closing \(path): \(String(cString: strerror(code)))")
        }
    }

    /// Closes and removes the file after a failed attempt.
    func discard() {
        if fd >= 0 {
            close(fd)
            fd = -1
        }
        unlink(path)
    }

    deinit {
        if fd >= 0 { close(fd) }
    }
}

@inline(__always)
private func Glibc_write(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
        return Glibc.write(fd, buffer, count)
    #else
        return Darwin.write(fd, buffer, count)
    #endif
}
