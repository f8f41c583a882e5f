import CSQLite
import DownloadQueue
import Foundation

/// A failed SQLite call: the operation, SQLite's result code and message.
struct SQLiteError: Error, CustomStringConvertible {
    /// What went wrong.
    enum Reason: Hashable {
        /// SQLite failed with this result code.
        case sqlite(SQLiteResultCode)
        /// The database was made by a newer BookCache (its schema version); it must be left untouched.
        case newerSchema(Int)
        /// A row does not hold what it must (a missing column, an unknown type, id or state).
        case invalidRow
        /// The previous version's index could not be read (permissions, I/O).
        case unreadableImport
        /// Importing the previous version's index failed otherwise (its lock).
        case importFailed
    }

    let reason: Reason
    let operation: String
    let message: String

    init(_ reason: Reason, operation: String, message: String) {
        self.reason = reason
        self.operation = operation
        self.message = message
    }

    /// SQLite's result code, when SQLite failed.
    var code: SQLiteResultCode? {
        if case .sqlite(let code) = reason { code } else { nil }
    }

    var description: String {
        guard let code else { return "\(operation): \(message)" }
        let extended = code.rawValue == code.primary.rawValue ? "" : ", extended \(code.rawValue)"
        return "\(operation): \(message) (SQLite \(code.primary.rawValue)\(extended))"
    }

    /// The database file is damaged or is not a database.
    var isDamage: Bool { code.map { [.corrupt, .notADatabase].contains($0.primary) } ?? false }
    /// Another process held the lock past the busy timeout.
    var isBusy: Bool { code.map { [.busy, .locked].contains($0.primary) } ?? false }
}

/// SQLite's result codes by name, primary and extended (as GRDB's `ResultCode`). Connections
/// report extended codes; ``primary`` is the primary code of one (`SQLITE_IOERR_FSYNC` is an
/// ``ioError``), which is what the code matches on.
struct SQLiteResultCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    let rawValue: Int32

    init(rawValue: Int32) {
        self.rawValue = rawValue
    }

    /// The primary code (the low byte).
    var primary: SQLiteResultCode { SQLiteResultCode(rawValue: rawValue & 0xFF) }

    /// SQLite's English text for the code.
    var description: String { String(cString: sqlite3_errstr(rawValue)) }

    static let error = Self(rawValue: SQLITE_ERROR)
    static let busy = Self(rawValue: SQLITE_BUSY)
    static let locked = Self(rawValue: SQLITE_LOCKED)
    static let readOnly = Self(rawValue: SQLITE_READONLY)
    static let ioError = Self(rawValue: SQLITE_IOERR)
    static let corrupt = Self(rawValue: SQLITE_CORRUPT)
    static let full = Self(rawValue: SQLITE_FULL)
    static let cannotOpen = Self(rawValue: SQLITE_CANTOPEN)
    static let constraint = Self(rawValue: SQLITE_CONSTRAINT)
    static let notADatabase = Self(rawValue: SQLITE_NOTADB)
    /// `SQLITE_BUSY_SNAPSHOT`: a read transaction's snapshot is too old to write from.
    static let busySnapshot = Self(rawValue: SQLITE_BUSY | (2 << 8))
    /// `SQLITE_READONLY_DBMOVED`: the file was renamed or deleted while open.
    static let readOnlyDatabaseMoved = Self(rawValue: SQLITE_READONLY | (4 << 8))
    /// `SQLITE_IOERR_FSYNC`: the disk did not confirm a write.
    static let ioErrorFsync = Self(rawValue: SQLITE_IOERR | (4 << 8))
}

/// One connection to an SQLite database, used from one thread at a time (the index store's
/// blocking work): prepared statements are cached by their SQL text.
///
/// Opened in WAL mode with a busy timeout, so several processes read while one writes and a writer
/// waits for another instead of failing; `synchronous=FULL`, so a commit survives power loss.
final class SQLiteDatabase {
    private let handle: OpaquePointer
    private var statements: [String: SQLiteStatement] = [:]

    /// Opens the database at `path`, creating it if needed unless `creating` is off.
    /// - Parameters:
    ///   - path: The file.
    ///   - creating: Whether a missing file is made (off, opening it fails instead).
    ///   - busyTimeout: How long a call waits for another connection's lock.
    init(path: String, creating: Bool = true, busyTimeout: Duration = .seconds(30)) throws(SQLiteError) {
        if Self.onReadOnlyFilesystem(path) {
            // Nothing can change the file: read it through the log files that are there (asked
            // for read-write, SQLite would fail to open the shared-memory file for writing).
            handle = try Self.openReadOnly(path)
            isReadOnly = true
            configure(busyTimeout: busyTimeout)
            return
        }
        handle = try Self.open(path, flags: SQLITE_OPEN_READWRITE | (creating ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX)
        configure(busyTimeout: busyTimeout)
        do {
            try execute("PRAGMA journal_mode=WAL")
            try execute("PRAGMA synchronous=FULL")
            try execute("PRAGMA foreign_keys=ON")
        } catch {
            statements.removeAll()
            sqlite3_close_v2(handle)
            throw error
        }
    }

    /// Whether the database could only be opened for reading (a read-only filesystem).
    private(set) var isReadOnly = false

    private static func open(_ path: String, flags: Int32) throws(SQLiteError) -> OpaquePointer {
        BlockingWork.assertMayBlock("opening the index")
        var opened: OpaquePointer?
        let result = sqlite3_open_v2(path, &opened, flags, nil)
        guard result == SQLITE_OK, let opened else {
            let message = opened.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(opened)
            throw SQLiteError(
                .sqlite(SQLiteResultCode(rawValue: opened.map(sqlite3_extended_errcode) ?? result)), operation: "open \(path)",
                message: message)
        }
        return opened
    }

    private static func openReadOnly(_ path: String) throws(SQLiteError) -> OpaquePointer {
        do {
            let handle = try open(path, flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX)
            try probe(handle)
            return handle
        } catch {
            return try open("file:\(path)?immutable=1", flags: SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX)
        }
    }

    private static func onReadOnlyFilesystem(_ path: String) -> Bool {
        var info = statvfs()
        let folder = (path as NSString).deletingLastPathComponent
        return statvfs(folder, &info) == 0 && (info.f_flag & UInt(ST_RDONLY)) != 0
    }

    /// Reads the schema once, so a connection that cannot read fails here.
    private static func probe(_ handle: OpaquePointer) throws(SQLiteError) {
        let result = sqlite3_exec(handle, "SELECT count(*) FROM sqlite_master", nil, nil, nil)
        guard result == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(handle))
            sqlite3_close_v2(handle)
            throw SQLiteError(.sqlite(SQLiteResultCode(rawValue: result)), operation: "read", message: message)
        }
    }

    private func configure(busyTimeout: Duration) {
        let (seconds, attoseconds) = busyTimeout.components
        // Results carry extended codes (SQLITE_IOERR_FSYNC, not just SQLITE_IOERR).
        sqlite3_extended_result_codes(handle, 1)
        sqlite3_busy_timeout(handle, Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        sqlite3_exec(handle, "PRAGMA foreign_keys=ON", nil, nil, nil)
        // fold(text): for searches that ignore case and accents in every script, not ASCII's alone.
        sqlite3_create_function_v2(
            handle, "bookcache_fold", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS, nil, foldFunction, nil, nil, nil)
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// Runs SQL that returns no rows (one or more statements).
    func execute(_ sql: String) throws(SQLiteError) {
        BlockingWork.assertMayBlock("SQL on the index")
        var error: UnsafeMutablePointer<CChar>?
        let result = sqlite3_exec(handle, sql, nil, nil, &error)
        if result != SQLITE_OK {
            let message = error.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(error)
            throw SQLiteError(.sqlite(SQLiteResultCode(rawValue: result)), operation: sql.prefix(60).description, message: message)
        }
    }

    /// A prepared statement for `sql`, reset and with its bindings cleared. A caller that stops
    /// stepping before the end resets it (`defer { statement.reset() }`): a statement left
    /// mid-result keeps a read transaction open, which blocks checkpoints and makes this
    /// connection's next write fail at once with `SQLITE_BUSY` instead of waiting.
    func statement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var prepared: OpaquePointer?
        let result = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &prepared, nil)
        guard result == SQLITE_OK, let prepared else {
            throw SQLiteError(
                .sqlite(SQLiteResultCode(rawValue: result)), operation: "prepare \(sql.prefix(60))",
                message: String(cString: sqlite3_errmsg(handle)))
        }
        let statement = SQLiteStatement(prepared, database: handle)
        statements[sql] = statement
        return statement
    }

    /// Runs `body` in a transaction that takes the write lock at once (`BEGIN IMMEDIATE`), so two
    /// writers never both read and then fail to upgrade; commits when it returns, rolls back when
    /// it throws.
    func writing<T, E: Error>(_ body: () throws(E) -> T) throws(IndexTransactionError<E>) -> T {
        do {
            try execute("BEGIN IMMEDIATE")
        } catch {
            throw .database(error)
        }
        let value: T
        do {
            value = try body()
        } catch {
            rollBack()
            throw .body(error)
        }
        do {
            try execute("COMMIT")
        } catch {
            rollBack()
            throw .database(error)
        }
        return value
    }

    /// How many rows the last `INSERT`, `UPDATE` or `DELETE` of this connection changed.
    func changes() -> Int {
        Int(sqlite3_changes(handle))
    }

    private func rollBack() {
        // A failed ROLLBACK leaves nothing more to undo: SQLite has rolled back already.
        sqlite3_exec(handle, "ROLLBACK", nil, nil, nil)
    }
}

/// Why a transaction failed: SQLite itself, or the work done in it.
enum IndexTransactionError<E: Error>: Error {
    case database(SQLiteError)
    case body(E)
}

/// A prepared statement: bind values, step through rows, read typed columns.
final class SQLiteStatement {
    let handle: OpaquePointer
    private let database: OpaquePointer

    init(_ handle: OpaquePointer, database: OpaquePointer) {
        self.handle = handle
        self.database = database
    }

    deinit {
        sqlite3_finalize(handle)
    }

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    /// SQLite copies bound text before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ text: String?, at index: Int32) {
        if let text {
            sqlite3_bind_text(handle, index, text, -1, Self.transient)
        } else {
            sqlite3_bind_null(handle, index)
        }
    }

    func bind(_ value: Int64, at index: Int32) {
        sqlite3_bind_int64(handle, index, value)
    }

    func bind(_ value: Double, at index: Int32) {
        sqlite3_bind_double(handle, index, value)
    }

    /// Binds a number, or NULL.
    func bind(_ value: Int64?, at index: Int32) {
        if let value { bind(value, at: index) } else { sqlite3_bind_null(handle, index) }
    }

    /// Binds a number, or NULL.
    func bind(_ value: Double?, at index: Int32) {
        if let value { bind(value, at: index) } else { sqlite3_bind_null(handle, index) }
    }

    /// Steps once: `true` with a row to read, `false` when done.
    func step() throws(SQLiteError) -> Bool {
        // Every statement of the index and the job store steps here: where it may run is checked
        BlockingWork.assertMayBlock("a statement on the index")
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let result:
            throw SQLiteError(
                .sqlite(SQLiteResultCode(rawValue: result)), operation: "step \(String(cString: sqlite3_sql(handle)).prefix(60))",
                message: String(cString: sqlite3_errmsg(database)))
        }
    }

    /// Runs a statement that returns no rows.
    func run() throws(SQLiteError) {
        while try step() {}
    }

    func text(_ column: Int32) -> String? {
        guard let bytes = sqlite3_column_text(handle, column) else { return nil }
        return String(cString: bytes)
    }

    func int64(_ column: Int32) -> Int64 {
        sqlite3_column_int64(handle, column)
    }

    func double(_ column: Int32) -> Double {
        sqlite3_column_double(handle, column)
    }

    func isNull(_ column: Int32) -> Bool {
        sqlite3_column_type(handle, column) == SQLITE_NULL
    }
}

/// `bookcache_fold(text)`: the text without case and accents (NULL stays NULL), as
/// ``SQLiteDatabase/fold(_:)`` makes a search's words.
private let foldFunction: @convention(c) (OpaquePointer?, Int32, UnsafeMutablePointer<OpaquePointer?>?) -> Void = {
    context, count, values in
    guard count == 1, let value = values?[0], let text = sqlite3_value_text(value) else {
        sqlite3_result_null(context)
        return
    }
    let length = Int(sqlite3_value_bytes(value))
    let bytes = UnsafeBufferPointer(start: text, count: length)
    // ASCII (most titles and names) is lowercased here, byte by byte: ICU's folding, for every
    // row of a search, took 4 µs a value.
    if !bytes.contains(where: { $0 >= 0x80 }) {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: max(length, 1)) { folded in
            for index in 0..<length {
                let byte = bytes[index]
                folded[index] = CChar(bitPattern: (0x41...0x5A).contains(byte) ? byte + 0x20 : byte)
            }
            sqlite3_result_text(context, folded.baseAddress, Int32(length), unsafeBitCast(-1, to: sqlite3_destructor_type.self))
        }
        return
    }
    let folded = SQLiteDatabase.fold(String(decoding: bytes, as: UTF8.self))
    sqlite3_result_text(context, folded, -1, unsafeBitCast(-1, to: sqlite3_destructor_type.self))
}

extension SQLiteDatabase {
    /// `text` without case and accents ("Émile" and "emile" alike, "Straße" as "strasse").
    static func fold(_ text: String) -> String {
        text.folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil)
    }
}
