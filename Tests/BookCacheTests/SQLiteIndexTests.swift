import BookCacheTestSupport
import DownloadQueue
import Foundation
import Logging
import Testing

@testable import BookCache

/// The SQLite index (`index.sqlite`).
@Suite("SQLite index", .blockingInternals)
struct SQLiteIndexTests {
    func record(_ n: Int, type: BookType = .ebook, size: Int64 = 1000, accessed: Double = 0) throws -> CachedBookMetadata {
        var record = CachedBookMetadata(
            id: try BookID(type: type, bookId: "b\(n)"), title: "Title \(n) — ünïcode", coverUrl: n % 2 == 0 ? "https://x/c\(n).jpg" : nil,
            fileUrl: "https://x/\(n).epub", localPath: "\(type.folderName)/b\(n).epub", fileSize: size,
            downloadedAt: Date(timeIntervalSince1970: 1_700_000_000.25),
            lastAccessedAt: Date(timeIntervalSince1970: 1_700_000_000 + accessed),
            checksum: String(repeating: "a", count: 64), format: .epub, etag: "\"e\(n)\"", lastModified: nil)
        record.authors = ["Ann", "Bob"]
        record.warnings = n % 3 == 0 ? ["the mimetype entry is compressed"] : []
        record.syncSources = n % 2 == 0 ? ["https://feed/b", "https://feed/a"] : []
        record.coverPath = n % 2 == 0 ? "ebooks/b\(n).cover.jpg" : nil
        record.language = n % 2 == 0 ? "de-CH" : nil
        record.published = n % 2 == 0 ? "1818-01-01" : nil
        return record
    }

    @Test("the reads' connection never makes an index: one deleted while the store is open is not replaced by an empty one")
    func readerNeverCreates() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = CacheLayout(root: dir.url)
        for type in BookType.allCases {
            try FileManager.default.createDirectory(at: layout.folder(for: type), withIntermediateDirectories: true)
        }
        let store = IndexStore(layout: layout, logger: Logger(label: "test"))
        let book = try record(1)
        // Only the writer's connection is open when the index is deleted behind the store's back.
        try store.update { $0[key: book.id] = book }
        for suffix in ["", "-wal", "-shm"] { unlink(layout.databaseFile.path + suffix) }
        _ = try store.record(try book.bookID)
        _ = try store.totals()
        // An empty index in its place would hide every book (its sidecars are rebuilt only into a missing one).
        #expect(!FileManager.default.fileExists(atPath: layout.databaseFile.path))
    }

    @Test("the field table holds every stored property of the record once; a field added later can be absent")
    func fieldTable() throws {
        let properties = Mirror(reflecting: try record(2)).children.compactMap(\.label)
        #expect(BookField.all.map(\.name).sorted() == properties.sorted())
        #expect(BookField.all.first?.name == "id")
        for field in BookField.all where field.addedLater {
            switch field.kind {
            case .optionalText, .list: break
            default: Issue.record("\(field.name) was added later, so older records lack it: it must be optional or a list")
            }
        }
    }

    @Test("a sidecar written by hand has the fields the record's Codable form has, and reads back as the record")
    func sidecarBytes() throws {
        var full = try record(2)
        full.pinned = true
        full.outdated = true
        full.lastModified = "Tue, 24 Nov 2026 02:00:00 GMT"
        full.title = "A \"quoted\" title\twith a tab, \u{1} and a back\\slash"
        var bare = try record(1)
        (bare.authors, bare.warnings, bare.etag) = ([], [], nil)
        for book in [full, bare] {
            let written = Data(BookListJSON.sidecar(book))
            let byHand = try #require(try JSONSerialization.jsonObject(with: written) as? NSDictionary)
            let byEncoder = try #require(
                try JSONSerialization.jsonObject(with: MetadataCoding.encoder(pretty: true).encode(book)) as? NSDictionary)
            #expect(byHand == byEncoder)
            #expect(try MetadataCoding.decoder().decode(CachedBookMetadata.self, from: written) == book)
        }
    }

    /// Drops the columns of the fields added after the first release, as an index made before them.
    func dropLaterColumns(_ index: SQLiteIndex) throws {
        for field in BookField.columns where field.addedLater {
            try index.database.execute("ALTER TABLE book DROP COLUMN \(field.name)")
        }
    }

    /// `record` as read from an index made before the later fields.
    func withoutLaterFields(_ record: CachedBookMetadata) -> CachedBookMetadata {
        var old = record
        for field in BookField.columns where field.addedLater {
            switch field.kind {
            case .optionalText(_, let set): set(&old, nil)
            case .list(_, let set): set(&old, [])
            default: break
            }
        }
        return old
    }

    @Test("an index made before the later fields gets their columns on its first writable open; its books read with none")
    func laterColumnsAdded() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path("index.sqlite").path
        do {
            let index = try SQLiteIndex(path: path)
            try index.put(try record(2))
            try dropLaterColumns(index)
        }
        let reopened = try SQLiteIndex(path: path)
        let old = withoutLaterFields(try record(2))
        #expect(try reopened.record(old.id) == old)
        let new = try record(4)
        try reopened.put(new)
        #expect(try reopened.record(new.id) == new)
    }

    @Test(
        "an index made before the later fields, on a read-only disk, is read as it is: its books without them",
        .enabled(if: SmallFilesystem.isAvailable, "needs root to mount a small tmpfs"))
    func laterColumnsMissingReadOnly() throws {
        let disk = try SmallFilesystem(bytes: 4 << 20)
        defer { disk.unmount() }
        let path = disk.url.appendingPathComponent("index.sqlite").path
        do {
            let index = try SQLiteIndex(path: path)
            try index.put(try record(2))
            try dropLaterColumns(index)
            try index.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        try disk.remountReadOnly()
        let reopened = try SQLiteIndex(path: path)
        #expect(reopened.database.isReadOnly)
        let old = withoutLaterFields(try record(2))
        #expect(try reopened.record(old.id) == old)
        var listed: [CachedBookMetadata] = []
        try reopened.forEachRecord { listed.append($0) }
        #expect(listed == [old])
    }

    @Test("every field comes back as it was put, sync sources in order; removal takes them with it")
    func roundTrip() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let index = try SQLiteIndex(path: dir.path("index.sqlite").path)
        for n in 0..<6 {
            let original = try record(n)
            try index.put(original)
            #expect(try index.record(original.id) == original)
        }
        var changed = try record(2)
        changed.pinned = true
        changed.syncSources = ["https://feed/c"]
        try index.put(changed)
        #expect(try index.record(changed.id) == changed)
        #expect(try index.remove(changed.id))
        #expect(try index.record(changed.id) == nil)
        #expect(try !index.remove(changed.id))
        var all: [String] = []
        try index.forEachRecord { all.append($0.id) }
        #expect(all == ["ebook-b0", "ebook-b1", "ebook-b3", "ebook-b4", "ebook-b5"])
    }

    @Test("a list column that is not a JSON list is damage, not an empty list")
    func damagedListColumn() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let index = try SQLiteIndex(path: dir.path("index.sqlite").path)
        let original = try record(1)
        try index.put(original)
        try index.database.execute("UPDATE book SET authors = 'Ann, Bob' WHERE id = '\(original.id)'")
        let error = #expect(throws: SQLiteError.self) { try index.record(original.id) }
        #expect(error?.message.contains("authors") == true, "\(error?.message ?? "")")
        #expect(error?.reason == .invalidRow)
    }

    @Test("totals per type follow inserts, size changes, pins and removals")
    func totals() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let index = try SQLiteIndex(path: dir.path("index.sqlite").path)
        try index.put(try record(1, size: 100))
        try index.put(try record(2, size: 200))
        try index.put(try record(3, type: .magazine, size: 50))
        var bigger = try record(1, size: 150)
        bigger.pinned = true
        try index.put(bigger)
        try index.remove("ebook-b2")
        let totals = try index.totals()
        #expect(totals[.ebook]?.count == 1 && totals[.ebook]?.bytes == 150)
        #expect(totals[.ebook]?.pinnedCount == 1 && totals[.ebook]?.pinnedBytes == 150)
        #expect(totals[.magazine]?.count == 1 && totals[.magazine]?.bytes == 50)
    }

    @Test("least recently used first, pinned books never, and the reader stops when it has enough")
    func leastRecentlyUsed() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let index = try SQLiteIndex(path: dir.path("index.sqlite").path)
        for (n, accessed) in [(1, 30.0), (2, 10.0), (3, 20.0), (4, 5.0)] { try index.put(try record(n, accessed: accessed)) }
        var pinned = try record(4, accessed: 5)
        pinned.pinned = true
        try index.put(pinned)
        var seen: [String] = []
        try index.leastRecentlyUsed { record in
            seen.append(record.id)
            return seen.count < 2
        }
        #expect(seen == ["ebook-b2", "ebook-b3"])
    }

    @Test("a new database is populated in one transaction, and another connection sees all of it")
    func importAll() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path("index.sqlite").path
        let records = try (0..<500).map { try record($0) }
        _ = try SQLiteIndex(path: path, populate: { insert throws(SQLiteError) in for record in records { try insert(record) } })
        var count = 0
        try SQLiteIndex(path: path).forEachRecord { _ in count += 1 }
        #expect(count == 500)
        #expect(FileSystem.fileSize(URL(fileURLWithPath: path + "-wal")) ?? 0 == 0, "the log is folded into the database")
    }

    @Test("two connections writing at once lose nothing: the second waits for the first's lock")
    func concurrentWriters() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let path = dir.path("index.sqlite").path
        _ = try SQLiteIndex(path: path)
        let records = try (0..<400).map { try record($0) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for half in 0..<2 {
                let mine = records.enumerated().filter { $0.offset % 2 == half }.map(\.element)
                group.addTask {
                    try await BlockingWork.run { () throws(IndexTransactionError<SQLiteError>) in
                        let index: SQLiteIndex
                        do throws(SQLiteError) { index = try SQLiteIndex(path: path) } catch { throw .database(error) }
                        for record in mine {
                            try index.database.writing { () throws(SQLiteError) in try index.put(record) }
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        var count = 0
        try SQLiteIndex(path: path).forEachRecord { _ in count += 1 }
        #expect(count == 400)
    }

    @Test("a file that is not a database is damage; an index from a newer version is refused and left alone")
    func damageAndNewer() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let garbage = dir.path("garbage.sqlite")
        try Data(repeating: 0x42, count: 8192).write(to: garbage)
        let error = #expect(throws: SQLiteError.self) { try SQLiteIndex(path: garbage.path) }
        #expect(error?.isDamage == true)

        let newer = dir.path("newer.sqlite").path
        let database = try SQLiteDatabase(path: newer)
        try database.execute("PRAGMA user_version = 99")
        let refused = #expect(throws: SQLiteError.self) { try SQLiteIndex(path: newer) }
        #expect(refused?.message.contains("newer version") == true)
        #expect(refused?.reason == .newerSchema(99), "a schema error of its own, not a message to match")
        #expect(error?.code?.primary == .notADatabase)
    }

    @Test("SQLite's result codes by name: extended codes keep their primary, and errors carry the extended one")
    func resultCodes() throws {
        #expect(SQLiteResultCode.ioErrorFsync.primary == .ioError)
        #expect(SQLiteResultCode.busySnapshot.primary == .busy)
        #expect(SQLiteResultCode.readOnlyDatabaseMoved.primary == .readOnly)
        #expect(SQLiteResultCode.corrupt.description == "database disk image is malformed")
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let database = try SQLiteDatabase(path: dir.path("codes.sqlite").path)
        try database.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        try database.execute("INSERT INTO t (name) VALUES ('a')")
        let duplicate = #expect(throws: SQLiteError.self) { try database.execute("INSERT INTO t (name) VALUES ('a')") }
        // SQLITE_CONSTRAINT_UNIQUE (2067): the extended code, whose primary is SQLITE_CONSTRAINT
        #expect(duplicate?.code?.rawValue == 2067)
        #expect(duplicate?.code?.primary == .constraint)
        #expect(duplicate?.isDamage == false && duplicate?.isBusy == false)
    }

    @Test("the store refuses an index from a newer version with a clear message, and leaves it untouched")
    func storeRefusesNewer() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = CacheLayout(root: dir.url)
        let store = IndexStore(layout: layout, logger: Logger(label: "test"))
        let one = try record(1)
        try store.update { $0[key: one.id] = one }
        let database = try SQLiteDatabase(path: layout.databaseFile.path)
        try database.execute("PRAGMA user_version = 99; PRAGMA wal_checkpoint(TRUNCATE)")
        let before = try Data(contentsOf: layout.databaseFile)
        let error = #expect(throws: BookCacheError.self) { try IndexStore(layout: layout, logger: Logger(label: "test")).allRecords() }
        #expect(error?.message.contains("newer BookCache") == true, "\(error?.message ?? "")")
        #expect(try Data(contentsOf: layout.databaseFile) == before)
    }

    @Test("a cache of the previous version is imported on first open, nothing lost, and its files renamed")
    func importsPreviousVersion() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = CacheLayout(root: dir.url)
        let records = try (0..<20).map { try record($0) }
        try LegacyFiles.write(records, to: layout)
        let store = IndexStore(layout: layout, logger: Logger(label: "test"))
        #expect(try store.allRecords() == records.sorted { $0.id < $1.id })
        #expect(!FileManager.default.fileExists(atPath: layout.legacyIndexFile.path))
        #expect(FileManager.default.fileExists(atPath: layout.legacyIndexFile.path + ".imported"))
        #expect(try IndexStore(layout: layout, logger: Logger(label: "test")).record(BookID(parsing: "ebook-b7")) == records[7])
    }
}
