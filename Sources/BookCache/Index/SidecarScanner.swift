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

    /// Reads every `*.meta.json` in the type folders and keeps the records whose file exists
    /// with the recorded size.
    func rebuildIndex() -> MetadataIndex {
        var index = MetadataIndex()
        let decoder = MetadataCoding.decoder()
        for type in BookType.allCases {
            let folder = layout.folder(for: type)
            for name in sidecarNames(in: folder) {
                let sidecar = folder.appendingPathComponent(name)
                do {
                    let record = try decoder.decode(CachedBookMetadata.self, from: Data(contentsOf: sidecar))
                    let id = try record.bookID
                    guard fileMatches(record) else {
                        logger.warning("skipping a sidecar whose book file is missing or changed", metadata: ["sidecar": "\(sidecar.path)"])
                        continue
                    }
                    index[id] = record
                } catch {
                    logger.warning("skipping an unreadable sidecar", metadata: ["sidecar": "\(sidecar.path)", "error": "\(error)"])
                }
            }
        }
        return index
    }
}
