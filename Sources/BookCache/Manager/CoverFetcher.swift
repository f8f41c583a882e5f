import DownloadQueue
import Foundation
import Logging

/// Fetches a book's cover at low priority and stores it beside the book
/// (`ebooks/123.cover.jpg`). A cover that fails (unreachable, not an image, too large) is
/// logged and skipped: it never fails the book.
struct CoverFetcher: Sendable {
    let layout: CacheLayout
    let store: IndexStore
    let queue: DownloadQueue
    let logger: Logger

    /// The largest cover accepted.
    static let maxBytes: Int64 = 20 << 20

    func fetch(for id: BookID, from url: URL, access: OriginAccess) async {
        let partial = layout.partialCoverFile(for: id)
        do {
            var job = DownloadRequest(url: url, destination: partial.path, priority: .low, maxBytes: Self.maxBytes, resume: false)
            access.apply(to: &job)
            _ = try await queue.download(job)
            guard let ext = try Self.imageExtension(of: partial) else {
                FileDownloader.discard(partial.path)
                logger.warning("the cover is not an image; skipped", metadata: ["id": "\(id)", "url": "\(URLRedaction.redacted(url))"])
                return
            }
            let relative = layout.relativeCoverPath(for: id, extension: ext)
            let (layout, store) = (self.layout, self.store)
            try await BlockingWork.run { () throws(BookCacheError) in
                try store.update { index throws(BookCacheError) in
                    // The book may have been deleted or evicted meanwhile: then the cover goes too.
                    guard var record = index[id] else {
                        FileDownloader.discard(partial.path)
                        return
                    }
                    do {
                        if let old = record.coverPath, old != relative {
                            try FileSystem.removeFile(layout.url(forRelativePath: old))
                        }
                        try FileSystem.moveAtomically(from: partial, to: layout.url(forRelativePath: relative))
                        record.coverPath = relative
                        try layout.writeSidecar(record)
                    } catch {
                        throw .cacheDirectoryUnusable(layout.root.path, "cannot store the cover of \(id) (\(error))")
                    }
                    index[id] = record
                }
            }
            logger.info("cached the cover", metadata: ["id": "\(id)", "path": "\(relative)"])
        } catch {
            FileDownloader.discard(partial.path)
            logger.warning("could not fetch the cover; the book is fine", metadata: ["id": "\(id)", "error": "\(error)"])
        }
    }

    /// The extension for an image file, from its first bytes; `nil` when it is not an image.
    static func imageExtension(of url: URL) throws -> String? {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        let head = [UInt8](try handle.read(upToCount: 12) ?? Data())
        if head.starts(with: [0xFF, 0xD8, 0xFF]) { return "jpg" }
        if head.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return "png" }
        if head.starts(with: Array("GIF8".utf8)) { return "gif" }
        if head.count >= 12, head.starts(with: Array("RIFF".utf8)), Array(head[8..<12]) == Array("WEBP".utf8) { return "webp" }
        return nil
    }
}
