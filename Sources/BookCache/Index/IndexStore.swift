import DownloadQueue
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The index, `CACHE/index.sqlite`: reads and updates safe across threads, managers and
/// processes (SQLite's locking, a busy timeout, `BEGIN IMMEDIATE` for updates) and across
/// crashes (its atomic commit, `synchronous=FULL`).
///
/// - A single-book question reads one row (``record(_:)``); an update runs in one transaction
///   (``update(_:)``) whose ``IndexTransaction`` reads and writes rows as it goes.
/// - A cache made by the previous version (`metadata.json` and its journal) is imported on first
///   open, in the transaction that creates the database; the old files are then renamed
///   `*.imported`. A new database in a cache with books but no index is filled from their sidecars.
/// - A damaged database is moved aside (`index.sqlite.corrupt-TIME`) and rebuilt from the
///   sidecars; the user is told. An index from a newer version is refused and left untouched.
///
/// Calls block (file I/O, waiting for another process's lock): make them from blocking work.
final class IndexStore: Sendable {
    let layout: CacheLayout
    let logger: Logger
    /// One connection per store for writes (and the reads that stream or run a transaction),
    /// opened on first use; SQLite connections are used by one thread at a time.
    private let connection = Mutex<SQLiteIndex?>(nil)
    /// A second connection for the reads that return a value, so they never wait behind a write
    /// that waits for another process's lock or for its commit's `fsync` (in WAL mode readers go
    /// on meanwhile): the next book's look-up does not wait for the last group's publishing. It
    /// is opened after the writer has made the database ready, and kept with the ``generation``
    /// it was opened in.
    private let reader = Mutex<(index: SQLiteIndex, generation: Int)?>(nil)
    /// Counts the databases moved aside: a reader opened before a move reads a file no longer in place.
    private let generation = Atomic<Int>(0)

    init(layout: CacheLayout, logger: Logger) {
        self.layout = layout
        self.logger = logger
    }

    /// Whether the cache has an index on disk yet (of this version or the previous one).
    var exists: Bool {
        [layout.databaseFile, layout.legacyIndexFile, layout.legacyJournalFile].contains { FileManager.default.fileExists(atPath: $0.path) }
    }

    /// The record of one book, or `nil`; one row read.
    func record(_ id: BookID) throws(BookCacheError) -> CachedBookMetadata? {
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return nil }
        return try withReader { index throws(SQLiteError) in try index.record(id.description) }
    }

    /// The record of `id`, and — when it has none and `url` is given — the cached book of the
    /// same type whose file came from `url` (the same URL but for its login, fragment and the
    /// case of its scheme and host): both in one use of the index.
    func record(
        _ id: BookID, orSameURLAs url: URL?
    ) throws(BookCacheError) -> (own: CachedBookMetadata?, sameURL: CachedBookMetadata?) {
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return (nil, nil) }
        let key = url.map(BookDownloadRequest.identityKey(for:))
        return try withReader { index throws(SQLiteError) in
            if let own = try index.record(id.description) { return (own, nil) }
            guard let url, let key else { return (nil, nil) }
            let found = try index.records(fileURL: url.absoluteString, or: key, type: id.type)
            return (nil, found.sorted { $0.id < $1.id }.first { URL(string: $0.fileUrl).map(BookDownloadRequest.identityKey(for:)) == key })
        }
    }

    /// Every record, in id order; empty when there is no cache yet.
    func allRecords() throws(BookCacheError) -> [CachedBookMetadata] {
        // A cache that was never created has nothing in it; reading must not create it.
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return [] }
        return try withIndex { index throws(SQLiteError) in
            var all: [CachedBookMetadata] = []
            try index.forEachRecord { all.append($0) }
            return all
        }
    }

    /// Calls `body` with every record (or every one of a type) in id order, one row at a time,
    /// so memory does not grow with the cache.
    func forEachRecord(ofType type: BookType?, _ body: (CachedBookMetadata) -> Void) throws(BookCacheError) {
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return }
        try withIndex { index throws(SQLiteError) in try index.forEachRecord(ofType: type) { body($0) } }
    }

    /// A page of books the query finds (up to one more than its limit), after `cursor`.
    func shelf(_ query: ShelfQuery, after cursor: ShelfCursor?) throws(BookCacheError) -> [CachedBookMetadata] {
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return [] }
        return try withReader { index throws(SQLiteError) in try index.shelf(query, after: cursor) }
    }

    /// Authors and their number of books, by name.
    func authors(ofType type: BookType?, offset: Int, limit: Int) throws(BookCacheError) -> [(name: String, books: Int)] {
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return [] }
        return try withReader { index throws(SQLiteError) in try index.authors(ofType: type, offset: offset, limit: limit) }
    }

    /// Books and bytes per type, and the pinned ones: one row per type, kept by the database.
    func totals() throws(BookCacheError) -> [BookType: (count: Int, bytes: Int64, pinnedCount: Int, pinnedBytes: Int64)] {
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return [:] }
        return try withReader { index throws(SQLiteError) in try index.totals() }
    }

    /// Runs `change` in one transaction holding the write lock; commits when it returns,
    /// rolls back (changing nothing) when it throws.
    func update(_ change: (IndexTransaction) throws(BookCacheError) -> Void) throws(BookCacheError) {
        try transaction(writing: true, change)
    }

    /// Runs `look` in a read transaction: it sees one moment of the index, and changes nothing.
    func reading(_ look: (IndexTransaction) throws(BookCacheError) -> Void) throws(BookCacheError) {
        guard FileManager.default.fileExists(atPath: layout.root.path) else {
            return
        }
        try transaction(writing: false, look)
    }

    private func transaction(writing: Bool, _ body: (IndexTransaction) throws(BookCacheError) -> Void) throws(BookCacheError) {
        let outcome: Result<Void, BookCacheError> = try withIndex { index throws(SQLiteError) in
            let transaction = IndexTransaction(index: index, writable: writing)
            do throws(IndexTransactionError<BookCacheError>) {
                try index.database.within(writing: writing) { () throws(BookCacheError) in
                    try body(transaction)
                    if let failure = transaction.failure { throw Self.translate(failure, layout: layout) }
                }
                return .success(())
            } catch {
                switch error {
                case .database(let failure): throw failure
                case .body(let failure):
                    // A damaged database seen by a read inside the body is damage, not the body's fault.
                    if let damage = transaction.failure, damage.isDamage { throw damage }
                    return .failure(failure)
                }
            }
        }
        try outcome.get()
    }

    // MARK: - The connection

    /// Runs `body` with the open index; on damage, moves the database aside, rebuilds it from
    /// the sidecars and runs `body` once more.
    private func withIndex<T: Sendable>(_ body: (SQLiteIndex) throws(SQLiteError) -> T) throws(BookCacheError) -> T {
        let layout = self.layout
        return try connection.withLock { (slot: inout SQLiteIndex?) throws(BookCacheError) -> T in
            for attempt in 0..<2 {
                do throws(SQLiteError) {
                    let index: SQLiteIndex
                    if let opened = slot {
                        index = opened
                    } else {
                        index = try open()
                        slot = index
                    }
                    return try body(index)
                } catch  where error.isDamage && attempt == 0 {
                    slot = nil
                    try moveAside(problem: error.description)
                } catch {
                    slot = nil
                    throw Self.translate(error, layout: layout)
                }
            }
            throw BookCacheError.indexUnusable(layout.databaseFile.path, "is damaged again after a rebuild; move it away and try again")
        }
    }

    /// Runs `body`, a read that returns a value, on the reader connection. Anything amiss there
    /// (a damaged or missing database) is left to the writer's connection, which runs `body` again
    /// and moves aside and rebuilds as ``withIndex(_:)`` does.
    private func withReader<T: Sendable>(_ body: (SQLiteIndex) throws(SQLiteError) -> T) throws(BookCacheError) -> T {
        let current = generation.load(ordering: .acquiring)
        let open = reader.withLock { $0.map { $0.generation == current ? $0.index : nil } ?? nil }
        if open == nil {
            // The writer makes the database ready first: creates, imports, rebuilds or upgrades it.
            try withIndex { _ throws(SQLiteError) in }
        }
        let answer: T? = reader.withLock { slot -> T? in
            do throws(SQLiteError) {
                let index: SQLiteIndex
                if let kept = slot, kept.generation == current {
                    index = kept.index
                } else {
                    // Never made here: a database deleted meanwhile is not replaced by an empty one.
                    index = try SQLiteIndex(path: layout.databaseFile.path, creating: false)
                    slot = (index, current)
                }
                return try body(index)
            } catch {
                slot = nil
                return nil
            }
        }
        if let answer { return answer }
        return try withIndex(body)
    }

    private func open() throws(SQLiteError) -> SQLiteIndex {
        let path = layout.databaseFile.path
        if !FileManager.default.fileExists(atPath: path) {
            // A log left beside a deleted database belongs to that database: replayed into a new
            // one it would bring back pages of the old.
            for suffix in ["-wal", "-shm"] { unlink(path + suffix) }
        }
        SecretFiles.restrict(in: layout)
        return try SQLiteIndex(path: path) { (insert) throws(SQLiteError) in
            try populate(insert)
        }
    }

    /// Fills a new database: with the previous version's index when the cache has one, else
    /// with the sidecars beside the books (streamed, one record at a time).
    private func populate(_ insert: (CachedBookMetadata) throws(SQLiteError) -> Void) throws(SQLiteError) {
        let legacy = LegacyJSONIndex(layout: layout, logger: logger)
        if legacy.exists {
            // Under the previous version's lock, so a process of that version still running
            // cannot change it half-way through the import. `nil`: damaged, rebuild instead.
            let importing = "import \(layout.legacyIndexFile.path)"
            let imported: [CachedBookMetadata]?
            do {
                imported = try FileLock(url: layout.settingsLockFile).withLock { () throws -> [CachedBookMetadata]? in
                    let books: [CachedBookMetadata]
                    do throws(LegacyJSONIndex.Problem) {
                        books = try legacy.records()
                    } catch .newerSchema(let version) {
                        throw SQLiteError(
                            .newerSchema(version), operation: importing,
                            message: "the index is from a newer version of bookcache (schema \(version))")
                    } catch .damaged(let problem) {
                        let moved = try legacy.moveAside()
                        logger.warning(
                            "the index of the previous version is damaged: moved aside, the index is rebuilt from the books on disk",
                            metadata: ["problem": "\(problem)", "damagedCopies": "\(moved.joined(separator: ", "))"])
                        return nil
                    } catch .unreadable(let problem) {
                        throw SQLiteError(.unreadableImport, operation: importing, message: problem)
                    }
                    try legacy.markImported()
                    return books
                }
            } catch let error as SQLiteError {
                throw error
            } catch {
                throw SQLiteError(.importFailed, operation: importing, message: "\(error)")
            }
            if let imported {
                for record in imported { try insert(record) }
                logger.notice("imported the index of the previous version", metadata: ["books": "\(imported.count)"])
                return
            }
        }
        let scanner = SidecarScanner(layout: layout, logger: logger)
        guard scanner.hasSidecars() else { return }
        let count = try scanner.forEachRecord(insert)
        logger.warning("the index was missing and has been rebuilt from the books on disk", metadata: ["books": "\(count)"])
    }

    /// Moves a damaged database (and its log) aside, so the next open rebuilds it from sidecars.
    private func moveAside(problem: String) throws(BookCacheError) {
        generation.add(1, ordering: .releasing)
        let stamp = Int(Date().timeIntervalSince1970)
        var moved: [String] = []
        for suffix in ["", "-wal", "-shm"] {
            let file = URL(filePath: layout.databaseFile.path + suffix, directoryHint: .notDirectory)
            guard FileManager.default.fileExists(atPath: file.path) else { continue }
            let aside = URL(filePath: layout.databaseFile.path + ".corrupt-\(stamp)" + suffix, directoryHint: .notDirectory)
            do {
                try FileSystem.moveAtomically(from: file, to: aside)
                moved.append(aside.path)
            } catch {
                throw .cacheDirectoryUnusable(layout.root.path, "cannot move the damaged index aside (\(error))")
            }
        }
        logger.warning(
            "the index was damaged and is rebuilt from the books on disk",
            metadata: ["problem": "\(problem)", "damagedCopies": "\(moved.joined(separator: ", "))"])
    }

    static func translate(_ error: SQLiteError, layout: CacheLayout) -> BookCacheError {
        let cannotOpen = BookCacheError.cacheDirectoryUnusable(
            layout.root.path, "the index cannot be opened (\(error.message)); check the folder's permissions")
        switch error.reason {
        case .newerSchema:
            var error = BookCacheError.indexUnusable(
                layout.databaseFile.path, "was written by a newer BookCache; upgrade BookCache — the index was left untouched")
            error.remedy = .upgrade
            return error
        case .unreadableImport:
            return cannotOpen
        case .invalidRow, .importFailed:
            return .indexUnusable(layout.databaseFile.path, "\(error)")
        case .sqlite(let code):
            switch code.primary {
            case .readOnly:
                return .cacheDirectoryUnusable(
                    layout.root.path, "it is on a read-only filesystem, or this user may not write to it; nothing was changed")
            case .cannotOpen:
                return cannotOpen
            case .full:
                return .cacheDirectoryUnusable(layout.root.path, "the disk is full; nothing was changed")
            case .busy, .locked:
                return .indexUnusable(layout.databaseFile.path, "another process held it for too long (\(error.message)); try again")
            default:
                return .indexUnusable(layout.databaseFile.path, "\(error)")
            }
        }
    }
}

/// One transaction on the index: reads rows as they are asked for, writes them as they are set.
/// A failed read or write is kept and ends the transaction (rolled back) when the body returns.
final class IndexTransaction {
    private let index: SQLiteIndex
    private let writable: Bool
    /// The first SQLite failure inside the transaction.
    private(set) var failure: SQLiteError?

    init(index: SQLiteIndex, writable: Bool) {
        self.index = index
        self.writable = writable
    }

    /// Runs `body` inside a savepoint: when it throws, what it changed in the index is undone and
    /// the rest of the transaction goes on (one book of a group failing leaves the others).
    func savepoint<T>(_ body: () throws(BookCacheError) -> T) throws(BookCacheError) -> T {
        precondition(writable, "a reading transaction does not change the index")
        run("SAVEPOINT one")
        do {
            let value = try body()
            run("RELEASE one")
            return value
        } catch {
            run("ROLLBACK TO one")
            run("RELEASE one")
            throw error
        }
    }

    /// A statement whose failure ends the transaction (kept in ``failure``).
    private func run(_ sql: String) {
        do {
            try index.database.execute(sql)
        } catch {
            failure = failure ?? error
        }
    }

    subscript(id: BookID) -> CachedBookMetadata? {
        get { self[key: id.description] }
        set { self[key: id.description] = newValue }
    }

    subscript(key key: String) -> CachedBookMetadata? {
        get {
            do {
                return try index.record(key)
            } catch {
                failure = failure ?? error
                return nil
            }
        }
        set {
            precondition(writable, "a reading transaction does not change the index")
            do {
                if let record = newValue { try index.put(record) } else { try index.remove(key) }
            } catch {
                failure = failure ?? error
            }
        }
    }

    /// An eviction plan read from the index in least-recently-used order: the totals, then
    /// only as many unpinned books as the plan takes.
    func plan(
        limits: EvictionPlanner.Limits, incomingBytes: Int64 = 0, incomingCount: Int = 0, protected: Set<String>
    ) -> EvictionPlanner.Plan {
        do {
            let totals = try index.totals().values
            var planning = EvictionPlanner.Planning(
                total: totals.reduce(0) { $0 + $1.bytes } + incomingBytes, count: totals.reduce(0) { $0 + $1.count } + incomingCount,
                limits: limits)
            try index.leastRecentlyUsed { record throws(SQLiteError) in
                protected.contains(record.id) || planning.consider(record)
            }
            return planning.plan
        } catch {
            failure = failure ?? error
            return EvictionPlanner.Plan(victims: [], freedBytes: 0, satisfied: false)
        }
    }

    /// The records of one type, or all when `nil` (reads them all).
    func records(ofType type: BookType?) -> [CachedBookMetadata] {
        collect { (body) throws(SQLiteError) in try index.forEachRecord(ofType: type, body) }
    }

    /// The records a sync source brought, read through the source's index.
    func records(fromSource source: String) -> [CachedBookMetadata] {
        collect { (body) throws(SQLiteError) in try index.forEachRecord(fromSource: source, body) }
    }

    private func collect(_ read: ((CachedBookMetadata) throws(SQLiteError) -> Void) throws(SQLiteError) -> Void) -> [CachedBookMetadata] {
        var all: [CachedBookMetadata] = []
        do {
            try read { all.append($0) }
        } catch {
            failure = failure ?? error
        }
        return all
    }
}

extension SQLiteDatabase {
    /// Runs `body` in a write transaction (`BEGIN IMMEDIATE`, committed) or a read one
    /// (`BEGIN`, rolled back).
    func within<E: Error>(writing: Bool, _ body: () throws(E) -> Void) throws(IndexTransactionError<E>) {
        if writing {
            try self.writing(body)
        } else {
            do {
                try execute("BEGIN")
            } catch {
                throw .database(error)
            }
            defer {
                do { try execute("ROLLBACK") } catch {
                    // Nothing was written; a failed rollback of a read transaction changes nothing.
                }
            }
            do { try body() } catch { throw .body(error) }
        }
    }
}
