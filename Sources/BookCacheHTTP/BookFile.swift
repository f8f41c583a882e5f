import BookCache
import DownloadQueue
import Foundation
import Hummingbird

/// A cached book's file as an HTTP response: the whole file, or one byte range (`Range:
/// bytes=A-B`, `bytes=A-`, `bytes=-N`) with `206`; `416` for a range outside the file. With
/// `If-Range`, the range is served only when its entity tag is the file's (strong comparison,
/// RFC 9110 §13.1.5); otherwise the whole file, `200`. `HEAD` gets the same head without a
/// body. The file is opened before the response is sent, so an eviction meanwhile cannot cut it
/// short.
enum BookFile {
    static func response(for url: URL, book: CachedBookMetadata, range: String?, ifRange: String? = nil, headOnly: Bool = false) -> Response
    {
        let handle: FileHandle
        let size: Int64
        do {
            handle = try FileHandle(forReadingFrom: url)
            size = Int64(try handle.seekToEnd())
        } catch {
            return APIResponse.error(.notFound, kind: "notCached", "\(book.id)'s file cannot be read (\(error)); run bookcache verify")
        }
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
        let rangeApplies = ifRange.map { $0.trimmingCharacters(in: .whitespaces) == etag } ?? true
        if let range, rangeApplies, let parsed = parse(range, size: size) {
            guard let (from, to) = parsed else {
                try? handle.close()
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
            try? handle.close()
            return Response(status: status, headers: headers)
        }
        let start = first
        let box = HandleBox(handle)
        return Response(
            status: status, headers: headers,
            body: ResponseBody(contentLength: Int(length)) { writer in
                defer { box.close() }
                var offset = start
                var remaining = length
                while remaining > 0 {
                    let count = Int(min(remaining, 256 * 1024))
                    let at = offset
                    let chunk = try await BlockingWork.run { () throws -> Data in try box.read(at: at, count: count) }
                    guard !chunk.isEmpty else { break }
                    try await writer.write(ByteBuffer(bytes: chunk))
                    offset += Int64(chunk.count)
                    remaining -= Int64(chunk.count)
                }
                try await writer.finish(nil)
            })
    }

    /// The range asked for: `nil` when the header is not a single byte range (then the whole
    /// file is sent, as RFC 9110 allows); `.some(nil)` when it lies outside the file.
    static func parse(_ header: String, size: Int64) -> (Int64, Int64)?? {
        guard header.hasPrefix("bytes="), !header.contains(",") else { return nil }
        let spec = header.dropFirst(6).trimmingCharacters(in: .whitespaces)
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

/// A file handle read from blocking-work threads, one read at a time.
// Unchecked: one read at a time, each awaited before the next; a lock orders close after the last.
final class HandleBox: @unchecked Sendable {
    // Reads are sequential (each awaited before the next), so the handle is never used by two
    // threads at once; the lock only orders `close` after the last read.
    private let handle: FileHandle
    private let lock = NSLock()

    init(_ handle: FileHandle) {
        self.handle = handle
    }

    func read(at offset: Int64, count: Int) throws -> Data {
        try lock.withLock {
            try handle.seek(toOffset: UInt64(offset))
            return try handle.read(upToCount: count) ?? Data()
        }
    }

    func close() {
        lock.withLock { try? handle.close() }
    }
}
