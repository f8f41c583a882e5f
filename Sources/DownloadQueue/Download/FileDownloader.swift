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
/// One call is one attempt: no retries. With `resume` on, a partial file and the record kept
/// beside it (`FILE.resume`, a ``ResumeRecord``) let the next attempt send `Range: bytes=N-` with
/// `If-Range`, where N is the length the record vouches for: the bytes synced before it was
/// written. The partial file is cut back to N and those bytes are hashed and checked against the
/// record before the request is sent; a partial that disagrees (torn by a power cut, changed, a
/// link) is dropped and the file is requested whole. Then:
/// - `206` whose `Content-Range` starts at N: the body is appended, and the SHA-256 covers the
///   whole file.
/// - `200` (the server ignored the range, or the validator changed): the file starts over.
/// - `416`: the partial is dropped and the file is requested whole.
/// - a `206` for another range: the partial is dropped and the attempt fails as retryable.
///
/// While the body arrives, the partial file is synced and the record rewritten now and then
/// (after 1 MiB, then each time the file has doubled, at most every 64 MiB, while at least 1 MiB
/// is still to come), so a power cut costs at most that much of a large book and a small book pays
/// no sync for it; when an attempt fails, the partial is synced and its record
/// written if it can be resumed (retryable failure or cancellation, with a validator); otherwise
/// it is removed. The partial file is never opened through a link.
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
        let partial = await resumablePartial(destination, of: url, resume: resume)
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
            response: response, requestedURL: url, destination: destination, offset: offset,
            prefix: offset > 0 ? partial?.hasher : nil, maxBytes: maxBytes, resume: resume)
    }

    /// The partial file at `destination` when it can be resumed — `resume` is asked, its resume
    /// record is for `url` and the bytes it vouches for match the record's hash — read from the
    /// disk off the cooperative pool; otherwise `nil`, and whatever is there is discarded (a
    /// mismatch is logged).
    private func resumablePartial(_ destination: String, of url: URL, resume: Bool) async -> (
        size: Int64, validator: String, hasher: HashBox
    )? {
        let logger = self.logger
        return await BlockingWork.run {
            guard resume, let record = ResumeRecord.load(for: destination), record.url == url.absoluteString else {
                Self.discard(destination)
                return nil
            }
            switch Self.checkPartial(destination, against: record) {
            case .success(let hasher):
                return (record.length, record.validator, hasher)
            case .failure(let problem):
                logger.notice(
                    "the partial file does not match its resume record; starting over",
                    metadata: ["path": "\(destination)", "problem": "\(problem.reason)"])
                Self.discard(destination)
                return nil
            }
        }
    }

    /// Streams an open response's body into its file, hashing it on the way, and makes the file
    /// durable (`fsync`). Writes happen on blocking-work threads while the transport receives
    /// the next bytes; past the body's first ``alongsideFrom`` bytes the hashing runs on another
    /// such thread beside the writing (``HashBox``), and so may the observer's reading.
    ///
    /// When it fails, the partial file is kept if a later attempt can resume it (a retryable
    /// failure or cancellation, with a validator); otherwise it is removed.
    /// - Parameters:
    ///   - opened: What ``open(from:to:maxBytes:resume:credentials:headers:)`` returned.
    ///   - observer: Given every batch once it is written, with its offset.
    ///   - onProgress: Called as bytes arrive.
    /// - Returns: The file's size, SHA-256 and the server's validators.
    /// - Throws: ``DownloadError`` for every failure.
    public func receive(
        _ opened: OpenedDownload,
        observer: (any BodyObserver)? = nil,
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
        // The hash of the prefix was taken when it was checked, in `open`.
        let hasher = opened.prefix ?? HashBox()
        // A record exists when this attempt resumed from one or saved one.
        var recordSaved = offset > 0
        var nextCheckpoint = Self.checkpoint(after: offset)
        let record = validator.map {
            ResumeRecord(url: opened.requestedURL.absoluteString, validator: $0, totalLength: expectedTotal, length: 0, sha256: "")
        }
        let file: OutputFile
        do {
            file = try await BlockingWork.run { () throws(DownloadError) -> OutputFile in
                do {
                    // At offset 0 the file starts over (nothing to resume, or a 200 to a Range): an
                    // earlier record would name bytes the new file does not hold.
                    if offset == 0 { ResumeRecord.remove(for: destination) }
                    return try OutputFile(path: destination, url: finalURL, append: offset > 0)
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
        var digest = ""
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
                if batchBytes >= Self.batchBytes(after: received) {
                    let full = batch
                    let start = received - Int64(batchBytes)
                    batch.removeAll(keepingCapacity: true)
                    batchBytes = 0
                    // Once the batch is written the file holds every byte received.
                    // Not near the end: a book that will be whole in another megabyte is not worth a sync.
                    let worthIt = received >= nextCheckpoint && (expectedTotal.map { $0 - received >= Self.recordAfterBytes } ?? true)
                    let checkpoint = resumable && worthIt ? record : nil
                    let written = received
                    do {
                        try await BlockingWork.run {
                            try Self.hashAndWrite(full, hasher: hasher, file: file)
                            observer?.observe(full, at: start)
                            try checkpoint.map {
                                try Self.saveCheckpoint($0, length: written, hasher: hasher, file: file, for: destination)
                            }
                        }
                    } catch {
                        writeFailed = true
                        throw error
                    }
                    if checkpoint != nil {
                        recordSaved = true
                        nextCheckpoint = Self.checkpoint(after: written)
                    }
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
            let recordExists = recordSaved
            let start = received - Int64(batchBytes)
            do {
                digest = try await BlockingWork.run {
                    try Self.hashAndWrite(last, hasher: hasher, file: file)
                    observer?.observe(last, at: start)
                    try file.syncAndClose()
                    if recordExists { ResumeRecord.remove(for: destination) }
                    // The last batches may still be hashing alongside; the sync went meanwhile.
                    return hasher.finalize()
                }
            } catch {
                writeFailed = true
                throw error
            }
        } catch {
            response.body.cancel()
            var failure = DownloadError.classifying(error, url: finalURL)
            // What already arrived is synced and vouched for by the record, so a resume starts after it.
            let rest = batch
            let keepable = resumable && !writeFailed && (failure.isRetryable || failure.kind == .cancelled) && failure.kind != .bodyTooLong
            let (alreadySaved, length) = (recordSaved, received)
            let kept = await BlockingWork.run { () -> Bool in
                let flushed = (try? Self.hashAndWrite(rest, hasher: hasher, file: file)) != nil
                var saved = false
                if keepable && flushed, let record {
                    do {
                        try Self.saveCheckpoint(record, length: length, hasher: hasher, file: file, for: destination)
                        saved = true
                    } catch {
                        // An earlier record, if any, still vouches for what it names.
                    }
                }
                file.close()
                let keep = keepable && flushed && (saved || alreadySaved)
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
            sha256: digest,
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

    /// Bytes gathered before they are hashed and written in one hop to a blocking-work thread,
    /// once `received` bytes have arrived: 256 KiB for a body's first 4 MiB, then 1 MiB. Small
    /// books keep little in memory while many transfers run at once (a batch of 1 MiB books at 8
    /// transfers: private memory 17.2 → 15.6 MiB), and a large one pays few hops (256 KiB all the
    /// way made a 1 GiB book 10% slower in a 7-round A/B).
    static func batchBytes(after received: Int64) -> Int {
        received < 4 << 20 ? 1 << 18 : 1 << 20
    }
    /// Bytes that must arrive before a resume record is written.
    static let recordAfterBytes: Int64 = 1 << 20
    /// The most bytes received between two checkpoints of a large download.
    static let checkpointGap: Int64 = 64 << 20

    /// Where the next checkpoint falls once `synced` bytes are vouched for: after 1 MiB, then at
    /// twice the length, at most 64 MiB further — a few syncs for a large book, none for a small one.
    static func checkpoint(after synced: Int64) -> Int64 {
        max(recordAfterBytes, min(synced * 2, synced + checkpointGap))
    }

    /// Syncs the partial file, then writes the record naming its first `length` bytes (all it
    /// holds now) and their hash: the order that lets a power cut lose only what no record names.
    static func saveCheckpoint(_ template: ResumeRecord, length: Int64, hasher: HashBox, file: OutputFile, for destination: String) throws {
        try file.sync()
        var record = template
        record.length = length
        record.sha256 = hasher.digestSoFar()
        try record.save(for: destination)
    }

    /// Writes a batch of buffers, then hashes them (here, or alongside: ``HashBox``).
    static func hashAndWrite(_ batch: [[UInt8]], hasher: HashBox, file: OutputFile) throws {
        try file.write(batch)
        hasher.add(batch)
    }

    /// Where a body's bytes start to be read alongside the writing — hashed (``HashBox``), or read
    /// by a ``BodyObserver`` that chooses to — rather than on the writer's thread: past its first
    /// 8 MiB. A small book's hash costs less than the hop to another thread; a large book's
    /// SHA-256 on the writer's thread made the writer the transfer's bottleneck (a 1 GiB book,
    /// 7 alternating rounds: B/A 0.82 with the hashing alongside).
    package static let alongsideFrom: Int64 = 8 << 20

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

    /// Why a partial file cannot be resumed.
    struct PartialProblem: Error {
        let reason: String
    }

    /// Checks a partial file against its record: a regular file of this user's (not a link),
    /// at least as long as the record says, whose first ``ResumeRecord/length`` bytes have the
    /// record's hash. It is cut back to that length (what follows was never vouched for).
    /// - Returns: The hash of the kept bytes, to go on with.
    static func checkPartial(_ path: String, against record: ResumeRecord) -> Result<HashBox, PartialProblem> {
        let fd = systemOpen(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0)
        guard fd >= 0 else { return .failure(PartialProblem(reason: "cannot open it: \(String(cString: strerror(errno)))")) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid() else {
            return .failure(PartialProblem(reason: "it is not a regular file of this user's"))
        }
        guard Int64(info.st_size) >= record.length else {
            return .failure(PartialProblem(reason: "it holds \(info.st_size) bytes, fewer than the \(record.length) its record names"))
        }
        let hasher = HashBox()
        let chunk = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var remaining = record.length
        while remaining > 0 {
            let n = read(fd, buffer.baseAddress, Int(min(Int64(chunk), remaining)))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                return .failure(PartialProblem(reason: "reading it failed: \(String(cString: strerror(n < 0 ? errno : EIO)))"))
            }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            remaining -= Int64(n)
        }
        guard hasher.digestSoFar() == record.sha256 else {
            return .failure(PartialProblem(reason: "its first \(record.length) bytes are not the ones its record vouches for"))
        }
        guard ftruncate(fd, off_t(record.length)) == 0 else {
            return .failure(PartialProblem(reason: "cannot cut it back to \(record.length) bytes: \(String(cString: strerror(errno)))"))
        }
        return .success(hasher)
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

/// The running SHA-256 of a download. A body's first ``FileDownloader/alongsideFrom`` bytes are
/// hashed on the caller's thread; later batches on another blocking-work thread (a ``Handoff``)
/// while the caller writes the next. ``digestSoFar()`` and ``finalize()`` wait for them, and so
/// block: call them as blocking work.
// Unchecked: used by one blocking-work call at a time, each awaited before the next; the
// handoff's consumer touches only `value`, and the digests are read after `finish()`.
final class HashBox: @unchecked Sendable {
    private let value = SHA256Hasher()
    /// Bytes given so far.
    private var length: Int64 = 0
    /// Whether a batch went to the thread alongside.
    private var handedOver = false
    private lazy var alongside = Handoff<[[UInt8]]>(depth: 2) { [value] in Self.hash($0, into: value) }

    /// Hashes `bytes` here (a partial file's prefix, read back).
    func update(_ bytes: UnsafeRawBufferPointer) {
        value.update(bytes)
        length += Int64(bytes.count)
    }

    /// Hashes a batch here, or hands it to the thread alongside.
    func add(_ batch: [[UInt8]]) {
        let start = length
        length += batch.reduce(Int64(0)) { $0 + Int64($1.count) }
        guard start >= FileDownloader.alongsideFrom else { return Self.hash(batch, into: value) }
        handedOver = true
        alongside.put(batch)
    }

    private static func hash(_ batch: [[UInt8]], into value: SHA256Hasher) {
        for buffer in batch { buffer.withUnsafeBytes { value.update($0) } }
    }

    /// The digest of every byte given so far, once they are hashed; the hash goes on.
    func digestSoFar() -> String {
        settle()
        return value.digestSoFar()
    }

    /// The digest of every byte given, once they are hashed; no more may be given.
    func finalize() -> String {
        settle()
        return value.finalize()
    }

    private func settle() {
        BlockingWork.assertMayBlock("a download's digest (it waits for the hashing alongside)")
        if handedOver { alongside.finish() }
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
    /// The hash of the first `offset` bytes, taken when the partial file was checked.
    let prefix: HashBox?
    let maxBytes: Int64
    let resume: Bool

    /// Drops the response without reading its body; the transfer stops. A partial file being
    /// resumed is left as it was.
    public func cancel() {
        response.body.cancel()
    }
}
