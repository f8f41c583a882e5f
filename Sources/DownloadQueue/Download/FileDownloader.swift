import CBookCacheShims
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Streams one HTTP response body into a file, hashing it with SHA-256 on the way, and resumes
/// an interrupted one.
///
/// One call is one attempt: no retries. With `resume` on, a partial file and the validator kept
/// beside it (`FILE.resume`) let the next attempt send `Range: bytes=N-` with `If-Range`:
/// - `206` whose `Content-Range` starts at N: the body is appended, and the SHA-256 covers the
///   whole file (the prefix is re-hashed from disk).
/// - `200` (the server ignored the range, or the validator changed): the file starts over.
/// - `416`: the partial is dropped and the file is requested whole.
/// - a `206` for another range: the partial is dropped and the attempt fails as retryable.
///
/// When an attempt fails, the partial is kept if it can be resumed (retryable failure or
/// cancellation, with a validator); otherwise it is removed.
package struct FileDownloader: Sendable {
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

    /// Downloads `url` into the file at `destination`: ``open(from:to:maxBytes:resume:credentials:headers:)``
    /// then ``receive(_:onProgress:)``.
    ///
    /// - Parameters:
    ///   - url: An absolute `http` or `https` URL.
    ///   - destination: The file to create, resume or overwrite; its folder must exist.
    ///   - maxBytes: Refuse bodies larger than this many bytes, announced or actual.
    ///   - resume: Continue a partial file left by an earlier attempt, and keep this one's
    ///     partial file when it fails in a way a later attempt can resume.
    ///   - credentials: Credentials for the URL's host, answered to its `401` only.
    ///   - headers: Extra headers sent with each request, before the downloader's own `Range`.
    ///   - onProgress: Called as bytes arrive.
    /// - Returns: The file's size, SHA-256 and the server's validators.
    /// - Throws: ``DownloadError`` for every failure.
    public func download(
        from url: URL,
        to destination: String,
        maxBytes: Int64 = .max,
        resume: Bool = false,
        credentials: HTTPCredentials? = nil,
        headers: [HTTPHeader] = [],
        onProgress: @Sendable (DownloadProgress) -> Void = { _ in }
    ) async throws(DownloadError) -> DownloadedFile {
        let opened = try await open(
            from: url, to: destination, maxBytes: maxBytes, resume: resume, credentials: credentials, headers: headers)
        return try await receive(opened, onProgress: onProgress)
    }

    /// Sends the request — with `Range`/`If-Range` when a partial file can be resumed — and
    /// returns once the response head has arrived and was accepted, before any byte is written.
    ///
    /// The caller reads the head (``OpenedDownload/head``: the length still to come) and then
    /// either calls ``receive(_:onProgress:)`` or ``OpenedDownload/cancel()``.
    /// - Parameters: As ``download(from:to:maxBytes:resume:credentials:headers:onProgress:)``.
    /// - Returns: The open response.
    /// - Throws: ``DownloadError``: a status other than 200 (or 206 for the range asked for), an
    ///   announced length over `maxBytes`, or the transport's failure.
    public func open(
        from url: URL,
        to destination: String,
        maxBytes: Int64 = .max,
        resume: Bool = false,
        credentials: HTTPCredentials? = nil,
        headers extraHeaders: [HTTPHeader] = []
    ) async throws(DownloadError) -> OpenedDownload {
        guard let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil else {
            throw DownloadError(kind: .invalidURL, url: url, detail: "only absolute http and https URLs can be downloaded")
        }
        let given = extraHeaders.map { (name: $0.name, value: $0.value) }
        // Whether the partial file can be resumed is read from the disk, off the cooperative pool.
        let partial: (size: Int64, validator: String)? = await BlockingWork.run {
            if resume, let record = ResumeRecord.load(for: destination), record.url == url.absoluteString,
                let size = Self.fileSize(destination), size > 0
            {
                return (size, record.validator)
            }
            Self.discard(destination)
            return nil
        }
        var offset = partial?.size ?? 0
        var headers = given
        if let partial {
            headers += [("Range", "bytes=\(partial.size)-"), ("If-Range", partial.validator)]
        }

        var response = try await send(TransportRequest(url: url, headers: headers, credentials: credentials))
        if response.statusCode == 416 && offset > 0 {
            // The partial no longer fits the file on the server: start over, whole.
            logger.debug("range not satisfiable; starting over", metadata: ["url": "\(URLRedaction.redacted(url))"])
            response.body.cancel()
            Self.discard(destination)
            offset = 0
            response = try await send(TransportRequest(url: url, headers: given, credentials: credentials))
        }
        let finalURL = response.finalURL
        let expectedBody: Int64?
        switch response.statusCode {
        case 200:
            offset = 0
            expectedBody = response.contentLength
        case 206 where offset > 0:
            guard let range = response.header("Content-Range").flatMap(ContentRange.init), range.start == offset,
                response.contentLength.map({ $0 == range.end - range.start + 1 }) ?? true
            else {
                response.body.cancel()
                Self.discard(destination)
                throw DownloadError(
                    kind: .invalidResponse, url: finalURL,
                    detail:
                        "the server answered a request for bytes \(offset)- with Content-Range \(response.header("Content-Range") ?? "(none)"); starting over"
                )
            }
            expectedBody = range.end - range.start + 1
        default:
            response.body.cancel()
            throw DownloadError(
                kind: response.statusCode == 206 ? .invalidResponse : .httpStatus,
                url: finalURL,
                statusCode: response.statusCode,
                retryAfter: response.header("Retry-After").flatMap { RetryAfter.parse($0) },
                detail: response.statusCode == 206 ? "partial content that was not asked for" : nil
            )
        }
        let expectedTotal = expectedBody.map { $0 + offset }
        if let expectedTotal, expectedTotal > maxBytes {
            response.body.cancel()
            Self.discard(destination)
            throw DownloadError(
                kind: .bodyTooLong, url: finalURL,
                detail: "the server announced \(expectedTotal) bytes, more than the limit of \(maxBytes)")
        }
        return OpenedDownload(
            head: ResponseHead(
                statusCode: response.statusCode, expectedLength: expectedTotal, remainingLength: expectedBody,
                contentType: response.header("Content-Type")),
            response: response, requestedURL: url, destination: destination, offset: offset, maxBytes: maxBytes, resume: resume)
    }

    /// Streams an open response's body into its file, hashing it on the way, and makes the file
    /// durable (`fsync`). Writes happen on blocking-work threads while the transport receives
    /// the next bytes.
    ///
    /// When it fails, the partial file is kept if a later attempt can resume it (a retryable
    /// failure or cancellation, with a validator); otherwise it is removed.
    /// - Parameters:
    ///   - opened: What ``open(from:to:maxBytes:resume:credentials:headers:)`` returned.
    ///   - onProgress: Called as bytes arrive.
    /// - Returns: The file's size, SHA-256 and the server's validators.
    /// - Throws: ``DownloadError`` for every failure.
    public func receive(
        _ opened: OpenedDownload,
        onProgress: @Sendable (DownloadProgress) -> Void = { _ in }
    ) async throws(DownloadError) -> DownloadedFile {
        let response = opened.response
        let finalURL = response.finalURL
        let destination = opened.destination
        let offset = opened.offset
        let maxBytes = opened.maxBytes
        let expectedTotal = opened.head.expectedLength
        let etag = response.header("ETag")
        let lastModified = response.header("Last-Modified")
        let validator = ResumeRecord.validator(etag: etag, lastModified: lastModified)
        let resumable = opened.resume && validator != nil
        var received = offset
        let hasher = HashBox()
        // The resume record is written once a meaningful amount has arrived (or when an attempt
        // fails), not for every small book: one file fewer to create per download.
        var recordSaved = offset > 0
        let record = validator.map { ResumeRecord(url: opened.requestedURL.absoluteString, validator: $0, totalLength: expectedTotal) }
        let file: OutputFile
        do {
            file = try await BlockingWork.run { () throws(DownloadError) -> OutputFile in
                do {
                    let file = try OutputFile(path: destination, url: finalURL, append: offset > 0)
                    // At offset 0, `open` has already removed any earlier partial and its record.
                    if offset > 0 { try Self.hashPrefix(of: destination, length: offset, into: hasher, url: finalURL) }
                    return file
                } catch {
                    Self.discard(destination)
                    throw DownloadError.classifying(error, url: finalURL)
                }
            }
        } catch {
            response.body.cancel()
            throw error
        }
        var batch: [[UInt8]] = []
        var batchBytes = 0
        // A failed write leaves the file in an unknown state: it is not kept for resume.
        var writeFailed = false
        do {
            onProgress(DownloadProgress(receivedBytes: received, totalBytes: expectedTotal))
            for try await buffer in response.body {
                try Task.checkCancellation()
                received += Int64(buffer.count)
                if received > maxBytes || (expectedTotal.map { received > $0 } ?? false) {
                    throw DownloadError(
                        kind: .bodyTooLong, url: finalURL,
                        detail: "received more than the \(expectedTotal ?? maxBytes) bytes announced")
                }
                batch.append(buffer)
                batchBytes += buffer.count
                if batchBytes >= Self.batchBytes {
                    let full = batch
                    batch.removeAll(keepingCapacity: true)
                    batchBytes = 0
                    let saveRecord = resumable && !recordSaved && received - offset >= Self.recordAfterBytes ? record : nil
                    do {
                        try await BlockingWork.run {
                            try Self.hashAndWrite(full, hasher: hasher, file: file)
                            try saveRecord?.save(for: destination)
                        }
                    } catch {
                        writeFailed = true
                        throw error
                    }
                    if saveRecord != nil { recordSaved = true }
                }
                onProgress(DownloadProgress(receivedBytes: received, totalBytes: expectedTotal))
            }
            try Task.checkCancellation()
            if let expectedTotal, received != expectedTotal {
                throw DownloadError(
                    kind: .bodyCutShort, url: finalURL,
                    detail: "received \(received) of \(expectedTotal) bytes")
            }
            let last = batch
            batch.removeAll()
            // A record is there only if this attempt resumed from one or saved one.
            let recordExists = recordSaved
            do {
                try await BlockingWork.run {
                    try Self.hashAndWrite(last, hasher: hasher, file: file)
                    try file.syncAndClose()
                    if recordExists { ResumeRecord.remove(for: destination) }
                }
            } catch {
                writeFailed = true
                throw error
            }
        } catch {
            response.body.cancel()
            var failure = DownloadError.classifying(error, url: finalURL)
            // What already arrived is kept on disk, so a resume starts after it.
            let rest = batch
            let keepable = resumable && !writeFailed && (failure.isRetryable || failure.kind == .cancelled) && failure.kind != .bodyTooLong
            let alreadySaved = recordSaved
            let kept = await BlockingWork.run { () -> Bool in
                let flushed = (try? Self.hashAndWrite(rest, hasher: hasher, file: file)) != nil
                file.close()
                var saved = alreadySaved
                if keepable && flushed && !saved, let record {
                    do {
                        try record.save(for: destination)
                        saved = true
                    } catch {
                        // Without its record the partial cannot be resumed; it is removed below.
                    }
                }
                let keep = keepable && flushed && saved
                if !keep { Self.discard(destination) }
                return keep
            }
            if kept {
                logger.debug("keeping the partial file for resume", metadata: ["bytes": "\(received)", "path": "\(destination)"])
                failure.keptBytes = received
            }
            throw failure
        }
        logger.debug(
            "downloaded",
            metadata: ["url": "\(URLRedaction.redacted(finalURL))", "bytes": "\(received)", "resumedAt": "\(offset)"])
        return DownloadedFile(
            path: destination,
            byteCount: received,
            sha256: hasher.value.finalize(),
            etag: etag,
            lastModified: lastModified,
            contentType: response.header("Content-Type"),
            finalURL: URLRedaction.redacted(finalURL),
            resumedFrom: offset
        )
    }

    private func send(_ request: TransportRequest) async throws(DownloadError) -> TransportResponse {
        do {
            return try await transport.send(request)
        } catch {
            throw DownloadError.classifying(error, url: request.url)
        }
    }

    /// Bytes gathered before they are hashed and written in one hop to a blocking-work thread.
    static let batchBytes = 1 << 20
    /// Bytes that must arrive before a resume record is written.
    static let recordAfterBytes: Int64 = 1 << 20

    /// Hashes and writes a batch of buffers. (Hashing on one core while writing on another
    /// gained nothing measurable in a 7-round A/B on the libcurl transport, so it went.)
    static func hashAndWrite(_ batch: [[UInt8]], hasher: HashBox, file: OutputFile) throws {
        for buffer in batch {
            try buffer.withUnsafeBytes { bytes in
                hasher.update(bytes)
                try file.write(bytes)
            }
        }
    }

    /// Removes a partial file and its resume record.
    public static func discard(_ destination: String) {
        unlink(destination)
        ResumeRecord.remove(for: destination)
    }

    static func fileSize(_ path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    private static func hashPrefix(of path: String, length: Int64, into hasher: HashBox, url: URL) throws {
        let fd = systemOpen(path, O_RDONLY | O_CLOEXEC, 0)
        guard fd >= 0 else { throw DownloadError(kind: .fileSystem, url: url, errnoCode: errno, detail: "reading \(path)") }
        defer { close(fd) }
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var remaining = length
        while remaining > 0 {
            let n = read(fd, buffer.baseAddress, Int(min(Int64(chunk), remaining)))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                throw DownloadError(
                    kind: .fileSystem, url: url, errnoCode: n < 0 ? errno : EIO, detail: "the partial file \(path) is shorter than expected"
                )
            }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            remaining -= Int64(n)
        }
    }

    /// Lowercase hexadecimal of a digest, as checksums are written.
    public static func hex<D: Sequence>(_ digest: D) -> String where D.Element == UInt8 {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(64)
        for byte in digest {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// The running SHA-256 of a download; used by one blocking-work call at a time, each awaited
/// before the next.
// Unchecked: one blocking-work call at a time updates it, each awaited before the next.
final class HashBox: @unchecked Sendable {
    let value = SHA256Hasher()

    func update(_ bytes: UnsafeRawBufferPointer) {
        value.update(bytes)
    }
}

/// A response whose head has arrived and been accepted, its body not yet read: the value
/// ``FileDownloader/open(from:to:maxBytes:resume:credentials:headers:)`` returns, for the caller
/// to decide on (is there room for ``head``'s length?) before ``FileDownloader/receive(_:onProgress:)``.
package struct OpenedDownload: Sendable {
    /// What the response says about the body: status, lengths, type.
    public let head: ResponseHead
    let response: TransportResponse
    let requestedURL: URL
    let destination: String
    let offset: Int64
    let maxBytes: Int64
    let resume: Bool

    /// Drops the response without reading its body; the transfer stops. A partial file being
    /// resumed is left as it was.
    public func cancel() {
        response.body.cancel()
    }
}
