import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A cached book's file as an HTTP response: the whole file, or one byte range (`Range:
/// bytes=A-B`, `bytes=A-`, `bytes=-N`) with `206`; `416` for a range outside the file. With
/// `If-Range`, the range is served only when its entity tag is the file's (strong comparison,
/// RFC 9110 §13.1.5); otherwise the whole file, `200`. `HEAD` gets the same head without a
/// body. The file is opened before the response is sent, so an eviction meanwhile cannot cut it
/// short.
///
/// Given the request's connection, the bytes go to the socket with `sendfile(2)`
/// (``FileRegionHandler``); without one, or where that handler is not on the connection, they are
/// read with `pread` into the buffers NIO writes.
enum BookFile {
    /// What a request for a book's file is answered: its status and head, and the file's bytes
    /// to send (`length` 0: none). Decided once, for the route and for ``FastFileRoute``.
    struct Answer {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var offset: Int64 = 0
        var length: Int64 = 0
    }

    /// The answer to a request for `book`'s `file` with these `Range` and `If-Range` values:
    /// the head the file route sends, every header included (the front door's too), but `Date`.
    static func answer(file: OpenFile, book: CachedBookMetadata, range: String?, ifRange: String?, headOnly: Bool) -> Answer {
        let size = file.size
        let etag = "\"\(book.checksum)\""
        var answer = Answer(
            status: .ok,
            headers: [
                .contentType: book.format == .pdf ? "application/pdf" : "application/epub+zip",
                .acceptRanges: "bytes", .cacheControl: "no-store", .eTag: etag,
                .contentDisposition: APIServer.attachment(book), .contentSecurityPolicy: "sandbox; default-src 'none'",
            ])
        ServiceHeaders.secure(&answer.headers)
        var first: Int64 = 0
        var last = size - 1
        // An If-Range that is not this file's strong entity tag (a weak tag or a date, since no
        // Last-Modified is sent, never is) asks for the whole file.
        let rangeApplies = ifRange.map { HTTPText.trimmed($0[...]) == etag } ?? true
        if let range, rangeApplies, let parsed = parse(range, size: size) {
            guard let (from, to) = parsed else {
                answer.status = .rangeNotSatisfiable
                answer.headers[.contentRange] = "bytes */\(size)"
                answer.headers[.contentLength] = "0"
                return answer
            }
            (first, last) = (from, to)
            answer.status = .partialContent
            answer.headers[.contentRange] = "bytes \(first)-\(last)/\(size)"
        }
        let length = max(0, last - first + 1)
        answer.headers[.contentLength] = String(length)
        if !headOnly { (answer.offset, answer.length) = (first, length) }
        return answer
    }

    /// The route's response to a request for `book`'s `file` (see ``answer(file:book:range:ifRange:headOnly:)``).
    static func response(
        file: OpenFile, book: CachedBookMetadata, range: String?, ifRange: String? = nil, headOnly: Bool = false,
        channel: (any Channel)? = nil
    ) -> Response {
        var answer = answer(file: file, book: book, range: range, ifRange: ifRange, headOnly: headOnly)
        guard answer.length > 0 else {
            file.close()
            return Response(status: answer.status, headers: answer.headers)
        }
        let (start, length) = (answer.offset, answer.length)
        // On a connection with the handler the file is handed over; elsewhere it is read below.
        if let channel, let handOver = FileRegionHandler.handOver(for: channel) {
            let number = handOver.put(FileRegionHandler.Send(file: file, offset: start, length: length))
            answer.headers[FileRegionHandler.marker] = String(number)
            return Response(status: answer.status, headers: answer.headers)
        }
        return Response(
            status: answer.status, headers: answer.headers,
            body: ResponseBody(contentLength: Int(length)) { writer in
                defer { file.close() }
                var offset = start
                var remaining = length
                while remaining > 0 {
                    let count = Int(min(remaining, Int64(OpenFile.chunkBytes)))
                    let at = offset
                    let chunk = try await BlockingWork.run { () throws -> ByteBuffer in try file.read(at: at, count: count) }
                    guard chunk.readableBytes > 0 else { break }
                    offset += Int64(chunk.readableBytes)
                    remaining -= Int64(chunk.readableBytes)
                    try await writer.write(chunk)
                }
                try await writer.finish(nil)
            })
    }

    /// The range asked for: `nil` when the header is not a single byte range (then the whole
    /// file is sent, as RFC 9110 allows); `.some(nil)` when it lies outside the file.
    static func parse(_ header: String, size: Int64) -> (Int64, Int64)?? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = HTTPText.trimmed(header.dropFirst(6))
        let parts = spec.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
        guard parts.count == 2 else { return nil }
        if parts[0].isEmpty {
            guard let suffix = Int64(parts[1]), suffix > 0 else { return .some(nil) }
            return size == 0 ? .some(nil) : .some((max(0, size - suffix), size - 1))
        }
        guard let from = Int64(parts[0]) else { return nil }
        let to = parts[1].isEmpty ? size - 1 : (Int64(parts[1]) ?? -1)
        guard from < size, to >= from else { return .some(nil) }
        return .some((from, min(to, size - 1)))
    }
}

/// A book's file, open for one response: read with `pread` from blocking-work threads, one read at
/// a time, straight into the buffers NIO writes (no `Data` in between).
// Unchecked: reads are sequential (each awaited before the next); a lock orders close after the last.
final class OpenFile: @unchecked Sendable {
    /// Bytes read in one hop to a blocking-work thread: a 1 MiB book is two.
    static let chunkBytes = 512 << 10

    private let fd: Int32
    private let lock = NSLock()
    private var closed = false
    /// The file's size when it was opened.
    var size: Int64 { identity.size }
    /// Which file this is: a book published again is a new file (a rename over the old), so a
    /// different identity.
    let identity: Identity

    /// A file's device, inode, size and modification time.
    struct Identity: Equatable, Sendable {
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: Int64
        let modifiedNanoseconds: Int
    }

    /// Opens the file at `path` (an absolute path).
    init(_ path: String) throws {
        // An error names the file, never its folder.
        let name = { String(path.split(separator: "/").last ?? "") }
        // A link where a book's file was is not followed: only files in the cache are sent.
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            let code = errno
            throw FileSystem.CallError(operation: "open", path: name(), code: code)
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            let code = errno
            Self.close(fd)
            throw FileSystem.CallError(operation: "stat", path: name(), code: code == 0 ? EINVAL : code)
        }
        self.fd = fd
        self.identity = Identity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size), modified: Int64(info.st_mtim.tv_sec),
            modifiedNanoseconds: Int(info.st_mtim.tv_nsec))
    }

    /// Up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(at offset: Int64, count: Int) throws -> ByteBuffer {
        try lock.withLock {
            var buffer = ByteBufferAllocator().buffer(capacity: count)
            try buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: count) { bytes in
                var total = 0
                while total < count {
                    let n = pread(fd, bytes.baseAddress! + total, count - total, off_t(offset) + off_t(total))
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw FileSystem.CallError(operation: "read", path: "a book's file", code: errno)
                    }
                    if n == 0 { break }
                    total += n
                }
                return total
            }
            return buffer
        }
    }

    /// The open descriptor, now the caller's to close; `nil` when the file was closed (or taken).
    func takeDescriptor() -> Int32? {
        lock.withLock {
            guard !closed else { return nil }
            closed = true
            return fd
        }
    }

    func close() {
        lock.withLock {
            guard !closed else { return }
            closed = true
            Self.close(fd)
        }
    }

    deinit {
        close()
    }

    private static func close(_ fd: Int32) {
        #if canImport(Glibc)
            _ = Glibc.close(fd)
        #else
            _ = Darwin.close(fd)
        #endif
    }
}

/// The books whose files were served in the last second, with the file each was served from, so a
/// file asked for again and again does not cost a call to the index each time (a hop to the
/// index's thread and back). An entry is used only while it is at most ``freshness`` old and only
/// for the same file (device, inode, size and modification time: a book published again, by this
/// process or another, is a new file); otherwise the index is asked, as it is at least once a
/// second for a book being read. So the access is still recorded (at most once a minute a book,
/// ``BookCacheManager/accessResolution``), and a book deleted is gone at once (its file cannot be
/// opened). What an entry can show for up to a second is a title changed without a new file, in
/// the file's name.
final class ServedBooks: Sendable {
    /// How long an entry is used.
    static let freshness = Duration.seconds(1)
    /// The most entries kept; all are forgotten when full.
    static let maxEntries = 4096

    private struct Entry {
        let book: CachedBookMetadata
        let file: OpenFile.Identity
        let at: ContinuousClock.Instant
        /// Asked as a read, so its access was recorded then (a `HEAD` records none).
        let read: Bool
    }

    private let entries = Mutex<[BookID: Entry]>([:])
    let layout: CacheLayout

    init(layout: CacheLayout) {
        self.layout = layout
    }

    /// The book `id` names and its file, opened, when the index named them in the last second (for
    /// a read, in a read: one that recorded the access) and the file is still the one it named;
    /// `nil` otherwise (then ask ``open(_:in:reading:)``). Opens a file on the calling thread (one
    /// `open` and `fstat`, as nginx does on its event loop).
    func fresh(_ id: BookID, reading: Bool) -> (CachedBookMetadata, OpenFile)? {
        guard let entry = entries.withLock({ $0[id] }), ContinuousClock.now - entry.at < Self.freshness, entry.read || !reading
        else { return nil }
        let file: OpenFile
        do {
            file = try OpenFile(layout.path(forRelativePath: entry.book.localPath))
        } catch {
            // Gone, or not a file we send: the index says what is cached now.
            return nil
        }
        guard file.identity == entry.file else {
            file.close()
            return nil
        }
        return (entry.book, file)
    }

    /// The cached book `id` names, and its file opened for a response: ``fresh(_:reading:)``, else asked of
    /// the index (which records the access when `reading`).
    /// - Throws: ``APIError`` (`notCached`, 404) when the book is not cached or its file cannot be
    ///   opened.
    func open(_ id: BookID, in manager: BookCacheManager, reading: Bool) async throws -> (CachedBookMetadata, OpenFile) {
        if let found = fresh(id, reading: reading) { return found }
        let now = ContinuousClock.now
        let found = reading ? try await manager.read(id) : try await manager.metadata(for: id)
        guard let book = found else { throw APIError.notFound(kind: "notCached", "\(id) is not cached") }
        let file: OpenFile
        do {
            file = try OpenFile(layout.path(forRelativePath: book.localPath))
        } catch {
            throw APIError.notFound(kind: "notCached", "\(book.id)'s file cannot be read (\(error)); run bookcache verify")
        }
        entries.withLock { entries in
            if entries.count >= Self.maxEntries { entries.removeAll() }
            entries[id] = Entry(book: book, file: file.identity, at: now, read: reading)
        }
        return (book, file)
    }
}
