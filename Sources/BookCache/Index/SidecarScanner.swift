import Foundation
import Logging

/// Rebuilds the index from the sidecar written beside each cached book.
struct SidecarScanner {
    let layout: CacheLayout
    let logger: Logger

    /// Whether a record's file is on disk, where the layout puts it, with the recorded size.
    func fileMatches(_ record: CachedBookMetadata) -> Bool {
        guard let id = try? record.bookID, record.localPath == layout.relativePath(for: id, format: record.format) else { return false }
        return FileSystem.fileSize(layout.url(forRelativePath: record.localPath)) == record.fileSize
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
        return names.filter { $0.hasSuffix(CacheLayout.sidecarSuffix) }
    }

    /// Reads every `*.meta.json` in the type folders, one at a time, and passes on the records
    /// whose file exists with the recorded size; the others are logged and skipped.
    /// - Returns: How many records were passed on.
    @discardableResult
    func forEachRecord<E: Error>(_ body: (CachedBookMetadata) throws(E) -> Void) throws(E) -> Int {
        let decoder = MetadataCoding.decoder()
        var count = 0
        for type in BookType.allCases {
            let folder = layout.folder(for: type)
            for name in sidecarNames(in: folder) {
                let sidecar = folder.appendingPathComponent(name)
                let record: CachedBookMetadata
                do {
                    record = try decoder.decode(CachedBookMetadata.self, from: Data(contentsOf: sidecar))
                    _ = try record.bookID
                } catch {
                    logger.warning("skipping an unreadable sidecar", metadata: ["sidecar": "\(sidecar.path)", "error": "\(error)"])
                    continue
                }
                guard fileMatches(record) else {
                    logger.warning("skipping a sidecar whose book file is missing or changed", metadata: ["sidecar": "\(sidecar.path)"])
                    continue
                }
                try body(record)
                count += 1
            }
        }
        return count
    }
}
