import DownloadQueue
import Foundation
import Logging

/// Rebuilds the index from the sidecar written beside each cached book.
struct SidecarScanner {
    let layout: CacheLayout
    let logger: Logger

    /// Whether a record's file is on disk, where the layout puts it, with the recorded size.
    func fileMatches(_ record: CachedBookMetadata) -> Bool {
        guard let id = try? record.bookID, record.localPath == layout.relativePath(for: id, format: record.format) else { return false }
        return FileSystem.fileSize(atPath: layout.root.path + "/" + record.localPath) == record.fileSize
    }

    /// Whether any type folder holds a sidecar.
    func hasSidecars() -> Bool {
        BookType.allCases.contains { type in
            sidecarNames(in: layout.folder(for: type)).first != nil
        }
    }

    /// The sidecar file names in a folder; none when the folder does not exist yet.
    private func sidecarNames(in folder: URL) -> [String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else {
            if FileManager.default.fileExists(atPath: folder.path) {
                logger.warning("cannot list a cache folder", metadata: ["folder": "\(folder.path)"])
            }
            return []
        }
        // In name order, which is id order: a rebuild inserts rows in key order, so SQLite
        // appends pages instead of rewriting them (a million books: 218 s before, in directory order).
        return names.filter { $0.hasSuffix(CacheLayout.sidecarSuffix) }.sorted()
    }

    /// Reads every `*.meta.json` in the type folders and passes on, in id order, the records
    /// whose file exists with the recorded size; the others are logged and skipped. Sidecars are
    /// read and decoded on every core, a few thousand at a time, so memory stays flat.
    /// - Returns: How many records were passed on.
    @discardableResult
    func forEachRecord<E: Error>(_ body: (CachedBookMetadata) throws(E) -> Void) throws(E) -> Int {
        var count = 0
        for type in BookType.allCases {
            let folder = layout.folder(for: type).path
            let names = sidecarNames(in: layout.folder(for: type))
            let lanes = names.count > 1000 ? Lanes.available : 1
            for chunkStart in stride(from: 0, to: names.count, by: 4096) {
                let chunk = Array(names[chunkStart..<min(names.count, chunkStart + 4096)])
                let per = (chunk.count + lanes - 1) / lanes
                let decoded = Lanes.map(lanes) { lane in
                    chunk[min(chunk.count, lane * per)..<min(chunk.count, (lane + 1) * per)].map { name in
                        self.readSidecar(folder + "/" + name)
                    }
                }
                for record in decoded.joined() {
                    guard let record else { continue }
                    try body(record)
                    count += 1
                }
            }
        }
        return count
    }

    /// A sidecar's record when it decodes and its book file is there with the recorded size;
    /// otherwise `nil`, logged.
    private func readSidecar(_ sidecar: String) -> CachedBookMetadata? {
        let record: CachedBookMetadata
        do {
            guard let data = FileManager.default.contents(atPath: sidecar) else {
                throw FileSystem.CallError(operation: "read", path: sidecar, code: errno)
            }
            let decoded = try MetadataCoding.decoder().decode(CachedBookMetadata.self, from: data)
            record = CacheLayout.confined(decoded, id: try decoded.bookID)
        } catch {
            logger.warning("skipping an unreadable sidecar", metadata: ["sidecar": "\(sidecar)", "error": "\(error)"])
            return nil
        }
        guard fileMatches(record) else {
            logger.warning("skipping a sidecar whose book file is missing or changed", metadata: ["sidecar": "\(sidecar)"])
            return nil
        }
        return record
    }
}
