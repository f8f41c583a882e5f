import Foundation

/// The index in SQLite (`CACHE/index.sqlite`): one row per book, its sync sources in a table of
/// their own, per-type totals kept by triggers, and a covering index for least-recently-used
/// order, so a single-book command reads one row and a plan reads only the books it evicts.
final class SQLiteIndex {
    /// `PRAGMA user_version` of the schema below.
    static let schemaVersion: Int64 = 1

    /// The tables and triggers; the book table's columns are ``BookField/columns``.
    static let schema = """
        CREATE TABLE IF NOT EXISTS book (
            \(BookField.columns.map(\.declaration).joined(separator: ", "))
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS book_source (
            book TEXT NOT NULL REFERENCES book(id) ON DELETE CASCADE, source TEXT NOT NULL, position INTEGER NOT NULL,
            PRIMARY KEY (book, source)
        ) WITHOUT ROWID;
        CREATE TABLE IF NOT EXISTS totals (
            bookType TEXT PRIMARY KEY NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL,
            pinnedCount INTEGER NOT NULL, pinnedBytes INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE TRIGGER IF NOT EXISTS book_added AFTER INSERT ON book BEGIN
            INSERT INTO totals VALUES (NEW.bookType, 1, NEW.fileSize, NEW.pinned, NEW.pinned * NEW.fileSize)
            ON CONFLICT(bookType) DO UPDATE SET count = count + 1, bytes = bytes + NEW.fileSize,
                pinnedCount = pinnedCount + NEW.pinned, pinnedBytes = pinnedBytes + NEW.pinned * NEW.fileSize;
        END;
        CREATE TRIGGER IF NOT EXISTS book_removed AFTER DELETE ON book BEGIN
            UPDATE totals SET count = count - 1, bytes = bytes - OLD.fileSize, pinnedCount = pinnedCount - OLD.pinned,
                pinnedBytes = pinnedBytes - OLD.pinned * OLD.fileSize WHERE bookType = OLD.bookType;
        END;
        CREATE TRIGGER IF NOT EXISTS book_changed AFTER UPDATE OF bookType, fileSize, pinned ON book BEGIN
            UPDATE totals SET count = count - 1, bytes = bytes - OLD.fileSize, pinnedCount = pinnedCount - OLD.pinned,
                pinnedBytes = pinnedBytes - OLD.pinned * OLD.fileSize WHERE bookType = OLD.bookType;
            INSERT INTO totals VALUES (NEW.bookType, 1, NEW.fileSize, NEW.pinned, NEW.pinned * NEW.fileSize)
            ON CONFLICT(bookType) DO UPDATE SET count = count + 1, bytes = bytes + NEW.fileSize,
                pinnedCount = pinnedCount + NEW.pinned, pinnedBytes = pinnedBytes + NEW.pinned * NEW.fileSize;
        END;
        """

    /// The secondary indexes; made after a new database is populated (one sort each, rather than
    /// a million inserts in random order).
    static let indexes = """
        CREATE INDEX IF NOT EXISTS book_type ON book(bookType);
        CREATE INDEX IF NOT EXISTS book_lru ON book(pinned, lastAccessedAt, id, fileSize);
        CREATE INDEX IF NOT EXISTS source_book ON book_source(source);
        """ + shelfIndexes

    /// The orders a shelf page is read in most (newest, recently read, by title), so a page is a walk of
    /// an index from the cursor, not a sort of every book; and the file's URL, so a URL cached
    /// under one id is found when it is asked for under another. Added to an index made before
    /// them the first time it is opened for writing (older versions keep them up to date
    /// unknowingly).
    static let shelfIndexes = """
        CREATE INDEX IF NOT EXISTS book_new ON book(downloadedAt, id);
        CREATE INDEX IF NOT EXISTS book_title ON book(title COLLATE NOCASE, id);
        CREATE INDEX IF NOT EXISTS book_read ON book(lastAccessedAt, id);
        CREATE INDEX IF NOT EXISTS book_url ON book(fileUrl);
        """

    static let columns = BookField.columns.map(\.name).joined(separator: ", ")

    /// The columns a record is read from: ``columns``, or, in an index made before a field was
    /// added that this process may not change (read-only), a null in the missing one's place.
    private(set) var readColumns = SQLiteIndex.columns

    let database: SQLiteDatabase

    /// Opens the index at `path`. A new database gets its tables and, in the same transaction,
    /// the records `populate` inserts one at a time through the function it is given (an older
    /// index imported, or sidecars read), so two processes opening a new cache at once populate
    /// it once, and a rebuild does not hold every record in memory.
    /// With `creating` off, a missing file is not made (opening fails): for a second connection
    /// to an index another one made ready.
    /// - Throws: ``SQLiteError``; ``SQLiteError/isDamage`` when the file is not a usable database.
    init(
        path: String, creating: Bool = true,
        populate: (_ insert: (CachedBookMetadata) throws(SQLiteError) -> Void) throws(SQLiteError) -> Void = { _ in }
    ) throws(SQLiteError) {
        database = try SQLiteDatabase(path: path, creating: creating)
        let version = try Self.userVersion(database)
        guard version <= Self.schemaVersion else {
            throw SQLiteError(
                .newerSchema(Int(version)), operation: "open \(path)",
                message: "the index is from a newer version of bookcache (schema \(version))")
        }
        guard !database.isReadOnly else {
            if version == Self.schemaVersion {
                let missing = Set(try missingColumns().map(\.name))
                readColumns = BookField.columns.map { missing.contains($0.name) ? "NULL" : $0.name }.joined(separator: ", ")
            }
            return
        }
        guard version < Self.schemaVersion else {
            try upgradeInPlace()
            return
        }
        var populated = 0
        do {
            try database.writing { () throws(SQLiteError) in
                // Another process may have made it while this one waited for the lock.
                guard try Self.userVersion(database) < Self.schemaVersion else { return }
                try database.execute(Self.schema)
                // A large import fits in SQLite's page cache (64 MiB, allocated only as used)
                // instead of spilling pages to the log and reading them back.
                try database.execute("PRAGMA cache_size = -65536")
                defer {
                    do { try database.execute("PRAGMA cache_size = -2000") } catch {
                        // Only the cache's size; the connection is closed with the command anyway.
                    }
                }
                try populate { (record) throws(SQLiteError) in
                    try put(record)
                    populated += 1
                }
                try database.execute(Self.indexes)
                try database.execute("PRAGMA user_version = \(Self.schemaVersion)")
            }
        } catch {
            switch error {
            case .database(let failure), .body(let failure): throw failure
            }
        }
        // After a large import, fold the log into the database so the next process opens it at once.
        if populated > 0 { try database.execute("PRAGMA wal_checkpoint(TRUNCATE)") }
    }

    /// The fields added after the index's first release (``BookField/addedLater``) whose column
    /// the book table lacks.
    private func missingColumns() throws(SQLiteError) -> [BookField] {
        let check = try database.statement("SELECT name FROM pragma_table_info('book')")
        defer { check.reset() }
        var present: Set<String> = []
        while try check.step() { present.insert(check.text(0) ?? "") }
        return BookField.columns.filter { $0.addedLater && !present.contains($0.name) }
    }

    /// Brings an index made by an earlier release of schema 1 up to this one, in one write
    /// transaction when anything is missing: the columns of fields added since, and the shelf's
    /// indexes (one sort each; a second for a million books). Older versions name their columns
    /// and keep the indexes up to date unknowingly, so they still open it. A read of the schema
    /// otherwise.
    private func upgradeInPlace() throws(SQLiteError) {
        let check = try database.statement(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name IN ('book_new', 'book_title', 'book_read', 'book_url')")
        let indexes = try check.step() ? check.int64(0) : 0
        check.reset()
        let missing = try missingColumns()
        guard indexes < 4 || !missing.isEmpty else { return }
        do {
            try database.writing { () throws(SQLiteError) in
                // Another process may have done it while this one waited for the lock.
                for field in try missingColumns() {
                    try database.execute("ALTER TABLE book ADD COLUMN \(field.declaration)")
                }
                try database.execute(Self.shelfIndexes)
            }
        } catch {
            switch error {
            case .database(let failure), .body(let failure): throw failure
            }
        }
    }

    private static func userVersion(_ database: SQLiteDatabase) throws(SQLiteError) -> Int64 {
        let statement = try database.statement("PRAGMA user_version")
        defer { statement.reset() }
        guard try statement.step() else { return 0 }
        return statement.int64(0)
    }

    // MARK: - Reading

    /// The record of one book, or `nil`.
    func record(_ id: String) throws(SQLiteError) -> CachedBookMetadata? {
        let statement = try database.statement("SELECT \(readColumns) FROM book WHERE id = ?")
        defer { statement.reset() }
        statement.bind(id, at: 1)
        guard try statement.step() else { return nil }
        var record = try Self.record(from: statement)
        record.syncSources = try sources(of: id)
        return record
    }

    /// The records of `type` whose file URL is `url` or `spelling` (its identity key).
    func records(fileURL url: String, or spelling: String, type: BookType) throws(SQLiteError) -> [CachedBookMetadata] {
        // `+bookType`: the URL's index, not the type's (which, without statistics, SQLite took,
        // scanning every book of the type for each download)
        let statement = try database.statement("SELECT \(readColumns) FROM book WHERE fileUrl IN (?1, ?2) AND +bookType = ?3")
        defer { statement.reset() }
        statement.bind(url, at: 1)
        statement.bind(spelling, at: 2)
        statement.bind(type.rawValue, at: 3)
        return try records(of: statement)
    }

    /// Every record (or every one of a type), in id order, one at a time.
    func forEachRecord(ofType type: BookType? = nil, _ body: (CachedBookMetadata) throws(SQLiteError) -> Void) throws(SQLiteError) {
        let statement = try database.statement(
            type == nil ? "SELECT \(readColumns) FROM book ORDER BY id" : "SELECT \(readColumns) FROM book WHERE bookType = ? ORDER BY id"
        )
        defer { statement.reset() }
        if let type { statement.bind(type.rawValue, at: 1) }
        // Every book's sources in one pass, rather than one query per book.
        var sourcesByBook: [String: [String]] = [:]
        let sourceRows = try database.statement("SELECT book, source FROM book_source ORDER BY book, position")
        while try sourceRows.step() {
            sourcesByBook[sourceRows.text(0) ?? "", default: []].append(sourceRows.text(1) ?? "")
        }
        while try statement.step() {
            var record = try Self.record(from: statement)
            record.syncSources = sourcesByBook[record.id] ?? []
            try body(record)
        }
    }

    /// The records a sync source brought, in id order, found through the source's index.
    func forEachRecord(fromSource source: String, _ body: (CachedBookMetadata) throws(SQLiteError) -> Void) throws(SQLiteError) {
        let statement = try database.statement(
            "SELECT \(readColumns) FROM book WHERE id IN (SELECT book FROM book_source WHERE source = ?) ORDER BY id")
        defer { statement.reset() }
        statement.bind(source, at: 1)
        while try statement.step() {
            var record = try Self.record(from: statement)
            record.syncSources = try sources(of: record.id)
            try body(record)
        }
    }

    /// Books and bytes per type, and the pinned ones, from the totals the triggers keep.
    func totals() throws(SQLiteError) -> [BookType: (count: Int, bytes: Int64, pinnedCount: Int, pinnedBytes: Int64)] {
        let statement = try database.statement("SELECT bookType, count, bytes, pinnedCount, pinnedBytes FROM totals")
        var totals: [BookType: (count: Int, bytes: Int64, pinnedCount: Int, pinnedBytes: Int64)] = [:]
        while try statement.step() {
            guard let type = statement.text(0).flatMap(BookType.init(rawValue:)) else { continue }
            totals[type] = (Int(statement.int64(1)), statement.int64(2), Int(statement.int64(3)), statement.int64(4))
        }
        return totals
    }

    /// Unpinned books' records, least recently used first, until `body` returns `false`: one
    /// statement stepped in the LRU index's order, so a plan costs the books it looks at (not a
    /// lookup of each by id).
    func leastRecentlyUsed(_ body: (CachedBookMetadata) throws(SQLiteError) -> Bool) throws(SQLiteError) {
        let statement = try database.statement("SELECT \(readColumns) FROM book WHERE pinned = 0 ORDER BY lastAccessedAt, id")
        // A reader that stops early must not keep its read transaction open.
        defer { statement.reset() }
        while try statement.step() {
            var record = try Self.record(from: statement)
            record.syncSources = try sources(of: record.id)
            guard try body(record) else { return }
        }
    }

    /// Up to `query.limit + 1` records of a shelf page (one more than the page, to tell whether
    /// another follows), starting after `cursor`. The filters and the order are SQL, so a page
    /// costs the rows the index looks at, not a read of every record.
    func shelf(_ query: ShelfQuery, after cursor: ShelfCursor?) throws(SQLiteError) -> [CachedBookMetadata] {
        var conditions: [String] = []
        var texts: [(Int32, String)] = []
        var numbers: [(Int32, Double)] = []
        var next: Int32 = 1
        func text(_ value: String) -> String {
            texts.append((next, value))
            next += 1
            return "?\(next - 1)"
        }
        func number(_ value: Double) -> String {
            numbers.append((next, value))
            next += 1
            return "?\(next - 1)"
        }
        // `+bookType`: walk the order's index, filtering, rather than sort every book of the type
        if let type = query.type { conditions.append("+bookType = \(text(type.rawValue))") }
        if query.pinnedOnly { conditions.append("pinned = 1") }
        if query.outdatedOnly { conditions.append("outdated = 1") }
        if let author = query.author {
            conditions.append("EXISTS (SELECT 1 FROM json_each(book.authors) WHERE json_each.value = \(text(author)))")
        }
        for word in query.searchWords {
            let parameter = text(SQLiteDatabase.fold(word))
            conditions.append("(instr(bookcache_fold(title), \(parameter)) > 0 OR instr(bookcache_fold(authors), \(parameter)) > 0)")
        }
        let column: String
        let descending: Bool
        switch query.order {
        case .newest: (column, descending) = ("downloadedAt", true)
        case .recentlyRead: (column, descending) = ("lastAccessedAt", true)
        case .size: (column, descending) = ("fileSize", true)
        case .title: (column, descending) = ("title COLLATE NOCASE", false)
        }
        if let cursor {
            let key: String =
                switch cursor.key {
                case .number(let value): number(value)
                case .text(let value): text(value)
                }
            let id = text(cursor.id)
            // A row value, which SQLite reads as a range of the order's index
            conditions.append("(\(column), id) \(descending ? "<" : ">") (\(key), \(id))")
        }
        let direction = descending ? "DESC" : "ASC"
        let filter = conditions.isEmpty ? "" : " WHERE " + conditions.joined(separator: " AND ")
        let statement = try database.statement(
            "SELECT \(readColumns) FROM book\(filter) ORDER BY \(column) \(direction), id \(direction) LIMIT \(query.limit + 1)")
        defer { statement.reset() }
        for (index, value) in texts { statement.bind(value, at: index) }
        for (index, value) in numbers { statement.bind(value, at: index) }
        return try records(of: statement)
    }

    /// Every record `statement` (selecting ``columns``) steps to, with its sync sources.
    private func records(of statement: SQLiteStatement) throws(SQLiteError) -> [CachedBookMetadata] {
        var records: [CachedBookMetadata] = []
        while try statement.step() {
            var record = try Self.record(from: statement)
            record.syncSources = try sources(of: record.id)
            records.append(record)
        }
        return records
    }

    /// Authors of the cached books (of one type, or all) with their number of books, by name
    /// (ignoring ASCII case), `limit` from `offset`.
    func authors(ofType type: BookType?, offset: Int, limit: Int) throws(SQLiteError) -> [(name: String, books: Int)] {
        let filter = type == nil ? "" : " WHERE bookType = ?1"
        let statement = try database.statement(
            """
            SELECT json_each.value AS name, count(*) FROM book, json_each(book.authors)\(filter)
            GROUP BY name ORDER BY name COLLATE NOCASE, name LIMIT \(limit) OFFSET \(offset)
            """)
        defer { statement.reset() }
        if let type { statement.bind(type.rawValue, at: 1) }
        var authors: [(name: String, books: Int)] = []
        while try statement.step() {
            authors.append((statement.text(0) ?? "", Int(statement.int64(1))))
        }
        return authors
    }

    // MARK: - Writing (inside a transaction)

    private static let upsert = """
        INSERT INTO book (\(columns)) VALUES (\(BookField.columns.map { _ in "?" }.joined(separator: ", ")))
        ON CONFLICT(id) DO UPDATE SET \(BookField.columns.dropFirst().map { "\($0.name) = excluded.\($0.name)" }.joined(separator: ", "))
        """

    /// Inserts or replaces a record and its sync sources.
    func put(_ record: CachedBookMetadata) throws(SQLiteError) {
        let upsert = try database.statement(Self.upsert)
        for (position, field) in BookField.columns.enumerated() { field.bind(record, to: upsert, at: Int32(position + 1)) }
        try upsert.run()
        let clear = try database.statement("DELETE FROM book_source WHERE book = ?")
        clear.bind(record.id, at: 1)
        try clear.run()
        for (position, source) in record.syncSources.enumerated() {
            let add = try database.statement("INSERT OR IGNORE INTO book_source (book, source, position) VALUES (?, ?, ?)")
            add.bind(record.id, at: 1)
            add.bind(source, at: 2)
            add.bind(Int64(position), at: 3)
            try add.run()
        }
    }

    /// Removes a record (its sync sources go with it).
    /// - Returns: Whether there was one.
    @discardableResult
    func remove(_ id: String) throws(SQLiteError) -> Bool {
        let delete = try database.statement("DELETE FROM book WHERE id = ?")
        delete.bind(id, at: 1)
        try delete.run()
        return database.changes() > 0
    }

    // MARK: - Rows

    /// The record the row holds (``columns``; its sync sources are read apart). Its id is made
    /// again from its type and book id, and its paths by the layout: the stored ones are not trusted.
    private static func record(from row: SQLiteStatement) throws(SQLiteError) -> CachedBookMetadata {
        var record = CachedBookMetadata()
        for column in BookField.columns.indices {
            // Unretained (the table lives as long as the process): a million rows read
            unowned(unsafe) let field = BookField.columns[column]
            try field.read(row, column: Int32(column), into: &record)
        }
        let id: BookID
        do {
            id = try BookID(type: record.bookType, bookId: record.bookId)
        } catch {
            throw SQLiteError(.invalidRow, operation: "read a record", message: "the record \(record.id) has an invalid id")
        }
        record.id = id.description
        return CacheLayout.confined(record, id: id)
    }

    private func sources(of id: String) throws(SQLiteError) -> [String] {
        let statement = try database.statement("SELECT source FROM book_source WHERE book = ? ORDER BY position")
        statement.bind(id, at: 1)
        var sources: [String] = []
        while try statement.step() { sources.append(statement.text(0) ?? "") }
        return sources
    }
}
