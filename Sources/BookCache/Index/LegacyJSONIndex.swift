import DownloadQueue
import Foundation
import Logging

/// The index of BookCache before the SQLite index, read once to import a cache made by that
/// version: `metadata.json` (a snapshot, `{"schemaVersion": 1, "books": {ID: record, …}}`) plus
/// `metadata.journal` (the changes since, one `{"set": record}` or `{"remove": ID}` per line).
///
/// Nothing here writes that format any more. What it reads:
/// - the snapshot and every complete journal line, applied in order; a torn last line (a writer
///   killed mid-write) is ignored, as that version ignored it;
/// - a record that does not decode is left out (logged with its key): its book's sidecar brings
///   it back in the next rebuild, and `verify` reports its file meanwhile;
/// - a snapshot from a newer schema is refused (``Problem/newerSchema``), a snapshot or journal
///   that is not JSON is ``Problem/damaged`` — the caller moves it aside and rebuilds from the
///   sidecars.
struct LegacyJSONIndex {
    /// The newest snapshot schema this reads.
    static let schemaVersion = 1

    let layout: CacheLayout
    let logger: Logger

    /// Why the previous index could not be imported.
    enum Problem: Error, CustomStringConvertible {
        /// The snapshot is from a newer BookCache; it must be left untouched.
        case newerSchema(Int)
        /// A file is not a readable index.
        case damaged(String)
        /// A file could not be read at all (permissions, I/O).
        case unreadable(String)

        var description: String {
            switch self {
            case .newerSchema(let version):
                "metadata.json is from a newer BookCache (schema \(version); this one reads \(LegacyJSONIndex.schemaVersion))"
            case .damaged(let detail), .unreadable(let detail): detail
            }
        }
    }

    /// Whether the cache has an index of the previous version.
    var exists: Bool {
        FileManager.default.fileExists(atPath: layout.legacyIndexFile.path)
            || FileManager.default.fileExists(atPath: layout.legacyJournalFile.path)
    }

    /// Every record of the previous index, sorted by id.
    func records() throws(Problem) -> [CachedBookMetadata] {
        var books: [String: CachedBookMetadata] = [:]
        if let data = try Self.contents(of: layout.legacyIndexFile) {
            let snapshot: Snapshot
            do {
                snapshot = try MetadataCoding.decoder().decode(Snapshot.self, from: data)
            } catch {
                throw .damaged("metadata.json is unreadable (\(error))")
            }
            guard snapshot.schemaVersion <= Self.schemaVersion else { throw .newerSchema(snapshot.schemaVersion) }
            for (key, entry) in snapshot.books {
                switch entry {
                case .record(let record): books[key] = record
                case .undecodable(let reason):
                    logger.warning(
                        "left out a record of the previous index that does not decode", metadata: ["id": "\(key)", "error": "\(reason)"])
                }
            }
        }
        if let journal = try Self.contents(of: layout.legacyJournalFile) {
            let decoder = MetadataCoding.decoder()
            var start = journal.startIndex
            // Only complete lines: a line without its newline was being written when its writer died.
            while let newline = journal[start...].firstIndex(of: 0x0A) {
                defer { start = newline + 1 }
                let line = journal[start..<newline]
                guard !line.isEmpty else { continue }
                let change: JournalLine
                do {
                    change = try decoder.decode(JournalLine.self, from: line)
                } catch {
                    throw .damaged("metadata.journal is damaged at byte \(start - journal.startIndex) (\(error))")
                }
                if let record = change.set {
                    books[record.id] = record
                } else if let key = change.remove {
                    books[key] = nil
                } else {
                    throw .damaged("metadata.journal is damaged at byte \(start - journal.startIndex) (neither set nor remove)")
                }
            }
        }
        // Its paths are not trusted: the layout makes them.
        return books.values.map { record in
            guard let id = try? record.bookID else { return record }
            return CacheLayout.confined(record, id: id)
        }.sorted { $0.id < $1.id }
    }

    /// Renames the imported files to `*.imported`, so they are not imported again.
    func markImported() throws {
        for file in [layout.legacyIndexFile, layout.legacyJournalFile] where FileManager.default.fileExists(atPath: file.path) {
            try FileSystem.moveAtomically(from: file, to: file.appendingPathExtension("imported"))
        }
    }

    /// Renames the files to `*.corrupt-TIME`, after a ``Problem/damaged`` import.
    /// - Returns: Where they went.
    func moveAside() throws -> [String] {
        let stamp = Int(Date().timeIntervalSince1970)
        var moved: [String] = []
        for file in [layout.legacyIndexFile, layout.legacyJournalFile] where FileManager.default.fileExists(atPath: file.path) {
            let aside = URL(filePath: file.path + ".corrupt-\(stamp)", directoryHint: .notDirectory)
            try FileSystem.moveAtomically(from: file, to: aside)
            moved.append(aside.path)
        }
        return moved
    }

    // MARK: - Format

    private struct Snapshot: Decodable {
        var schemaVersion: Int
        var books: [String: Entry]
    }

    /// A record of the snapshot, or why it does not decode (one bad record does not lose the rest).
    private enum Entry: Decodable {
        case record(CachedBookMetadata)
        case undecodable(String)

        init(from decoder: any Decoder) {
            do {
                self = .record(try CachedBookMetadata(from: decoder))
            } catch {
                self = .undecodable("\(error)")
            }
        }
    }

    private struct JournalLine: Decodable {
        var set: CachedBookMetadata?
        var remove: String?
    }

    private static func contents(of file: URL) throws(Problem) -> Data? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        do {
            return try Data(contentsOf: file, options: .mappedIfSafe)
        } catch {
            throw .unreadable("\(file.path) cannot be read (\(error)); check its permissions")
        }
    }
}
