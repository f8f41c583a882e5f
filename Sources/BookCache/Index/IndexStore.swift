import Foundation
import Logging

/// Reads and updates `metadata.json` safely across threads, managers and processes.
///
/// - Reads take no lock: the file is only ever replaced by an atomic rename, so a reader sees
///   a whole old index or a whole new one.
/// - Updates are read-modify-write under ``FileLock``, reading the file afresh each time, so no
///   process's update is lost.
/// - An unreadable index is moved aside and rebuilt from the sidecars beside each book; an
///   index from a newer schema is refused and left untouched.
struct IndexStore: Sendable {
    let layout: CacheLayout
    let logger: Logger

    private var lock: FileLock { FileLock(url: layout.indexLockFile) }

    /// The current index; empty when there is none yet.
    func read() throws(BookCacheError) -> MetadataIndex {
        switch try load() {
        case .loaded(let index): return index
        case .missing:
            // A deleted index with books still on disk is rebuilt; an empty cache stays untouched.
            guard SidecarScanner(layout: layout, logger: logger).hasSidecars() else { return MetadataIndex() }
            return try update { _ in }
        case .unreadable:
            // Rebuild under the lock; another process may have done it already.
            return try update { _ in }
        }
    }

    /// Applies `change` to the freshest index under the lock and writes the result atomically.
    /// - Returns: The index as written.
    @discardableResult
    func update(_ change: (inout MetadataIndex) throws(BookCacheError) -> Void) throws(BookCacheError) -> MetadataIndex {
        do {
            return try lock.withLock { () throws(BookCacheError) -> MetadataIndex in
                var index: MetadataIndex
                switch try load() {
                case .loaded(let loaded): index = loaded
                case .missing: index = rebuildMissing()
                case .unreadable(let problem): index = try rebuild(after: problem)
                }
                let before = index.books
                try change(&index)
                if index.books != before || !FileManager.default.fileExists(atPath: layout.indexFile.path) {
                    try write(index)
                }
                return index
            }
        } catch let error as BookCacheError {
            throw error
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot lock the index (\(error))")
        }
    }

    private enum LoadResult {
        case loaded(MetadataIndex)
        case missing
        case unreadable(String)
    }

    private func load() throws(BookCacheError) -> LoadResult {
        let data: Data
        do {
            data = try Data(contentsOf: layout.indexFile)
        } catch {
            if !FileManager.default.fileExists(atPath: layout.indexFile.path) { return .missing }
            throw .indexUnusable(layout.indexFile.path, "cannot be read (\(error)); check its permissions")
        }
        struct Header: Decodable { var schemaVersion: Int }
        let decoder = MetadataCoding.decoder()
        if let header = try? decoder.decode(Header.self, from: data), header.schemaVersion > MetadataIndex.currentSchemaVersion {
            throw .indexUnusable(
                layout.indexFile.path,
                "was written by a newer BookCache (schema \(header.schemaVersion); this one reads \(MetadataIndex.currentSchemaVersion)); upgrade bookcache — the index was left untouched")
        }
        do {
            return .loaded(try decoder.decode(MetadataIndex.self, from: data))
        } catch {
            return .unreadable(String(describing: error))
        }
    }

    private func write(_ index: MetadataIndex) throws(BookCacheError) {
        do {
            let data = try MetadataCoding.encoder().encode(index)
            try FileSystem.writeAtomically(data, to: layout.indexFile)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot write the index (\(error))")
        }
    }

    /// Rebuilds an index that is missing while sidecars remain. Called under the lock.
    private func rebuildMissing() -> MetadataIndex {
        let index = SidecarScanner(layout: layout, logger: logger).rebuildIndex()
        if !index.books.isEmpty {
            logger.warning(
                "the index was missing and has been rebuilt from the books on disk",
                metadata: ["books": "\(index.books.count)", "index": "\(layout.indexFile.path)"])
        }
        return index
    }

    /// Moves a damaged index aside and rebuilds one from the sidecars. Called under the lock.
    private func rebuild(after problem: String) throws(BookCacheError) -> MetadataIndex {
        let stamp = Int(Date().timeIntervalSince1970)
        let aside = layout.root.appendingPathComponent("metadata.json.corrupt-\(stamp)")
        do {
            try FileSystem.moveAtomically(from: layout.indexFile, to: aside)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot move the damaged index aside (\(error))")
        }
        let index = SidecarScanner(layout: layout, logger: logger).rebuildIndex()
        logger.warning(
            "the index was unreadable and has been rebuilt from the books on disk",
            metadata: [
                "problem": "\(problem)", "books": "\(index.books.count)", "damagedCopy": "\(aside.path)",
            ])
        return index
    }
}
