import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore

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
    static func response(
        file: OpenFile, book: CachedBookMetadata, range: String?, ifRange: String? = nil, headOnly: Bool = false,
        channel: (any Channel)? = nil
    ) -> Response {
        let size = file.size
        var headers: HTTPFields = [
            .contentType: book.format == .pdf ? "application/pdf" : "application/epub+zip",
            .acceptRanges: "bytes", .cacheControl: "no-store",
            .eTag: "\"\(book.checksum)\"",
        ]
        var status = HTTPResponse.Status.ok
        var first: Int64 = 0
        var last = size - 1
        let etag = "\"\(book.checksum)\""
        // An If-Range that is not this file's strong entity tag (a weak tag or a date, since no
        // Last-Modified is sent, never is) asks for the whole file.
        let rangeApplies = ifRange.map { HTTPText.trimmed($0[...]) == etag } ?? true
        if let range, rangeApplies, let parsed = parse(range, size: size) {
            guard let (from, to) = parsed else {
                file.close()
                headers[.contentRange] = "bytes */\(size)"
                return Response(status: .rangeNotSatisfiable, headers: headers)
            }
            (first, last) = (from, to)
            status = .partialContent
            headers[.contentRange] = "bytes \(first)-\(last)/\(size)"
        }
        let length = max(0, last - first + 1)
        headers[.contentLength] = String(length)
        if headOnly {
            file.close()
            return Response(status: status, headers: headers)
        }
        let start = first
        // On a connection with the handler the file is handed over; elsewhere it is read below.
        if let channel, length > 0, let handOver = FileRegionHandler.handOver(for: channel) {
            let number = handOver.put(FileRegionHandler.Send(file: file, offset: start, length: length))
            headers[FileRegionHandler.marker] = String(number)
            return Response(status: status, headers: headers)
        }
        return Response(
            status: status, headers: headers,
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
    let size: Int64

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
        self.size = Int64(info.st_size)
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
