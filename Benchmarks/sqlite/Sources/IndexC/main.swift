import CSQLite
import Foundation
import IndexShared

/// The small wrapper issue 15 would keep: a connection, prepared statements, typed columns.
final class Database {
    let handle: OpaquePointer

    init(path: String) {
        var db: OpaquePointer?
        guard sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil) == SQLITE_OK, let db else {
            fatalError("cannot open \(path)")
        }
        handle = db
        sqlite3_busy_timeout(db, 5000)
        execute("PRAGMA synchronous=\(ProcessInfo.processInfo.environment["SYNC"] ?? "FULL")")
    }

    deinit { sqlite3_close_v2(handle) }

    func execute(_ sql: String) {
        var error: UnsafeMutablePointer<CChar>?
        if sqlite3_exec(handle, sql, nil, nil, &error) != SQLITE_OK {
            fatalError("\(sql): \(String(cString: error!))")
        }
    }

    func prepare(_ sql: String) -> Statement {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil) == SQLITE_OK, let statement else {
            fatalError("\(sql): \(String(cString: sqlite3_errmsg(handle)))")
        }
        return Statement(statement)
    }
}

final class Statement {
    let handle: OpaquePointer
    init(_ handle: OpaquePointer) { self.handle = handle }
    deinit { sqlite3_finalize(handle) }

    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func bind(_ values: [Any?]) {
        sqlite3_reset(handle)
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            switch value {
            case nil: sqlite3_bind_null(handle, index)
            case let text as String: sqlite3_bind_text(handle, index, text, -1, Self.transient)
            case let number as Int: sqlite3_bind_int64(handle, index, Int64(number))
            case let number as Double: sqlite3_bind_double(handle, index, number)
            default: fatalError("unsupported value")
            }
        }
    }

    /// Steps once; true while there is a row.
    func step() -> Bool {
        let result = sqlite3_step(handle)
        if result == SQLITE_ROW { return true }
        if result == SQLITE_DONE { return false }
        fatalError("step: \(result)")
    }

    func value(_ column: Int32) -> Any? {
        switch sqlite3_column_type(handle, column) {
        case SQLITE_NULL: return nil
        case SQLITE_INTEGER: return sqlite3_column_int64(handle, column)
        case SQLITE_FLOAT: return sqlite3_column_double(handle, column)
        default: return String(cString: sqlite3_column_text(handle, column))
        }
    }

    var columnCount: Int32 { sqlite3_column_count(handle) }
}

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { usage() }
let db = Database(path: arguments[2])
let placeholders = Array(repeating: "?", count: columnNames.count).joined(separator: ",")
switch arguments[1] {
case "create":
    db.execute(schema)
    let count = Int(arguments[3])!
    db.execute("BEGIN")
    let insert = db.prepare("INSERT INTO book (\(columns)) VALUES (\(placeholders))")
    for n in 0..<count {
        insert.bind(row(n))
        _ = insert.step()
    }
    db.execute("COMMIT")
    db.execute(checkpoint)
case "get":
    let get = db.prepare("SELECT \(columns) FROM book WHERE id = ?")
    get.bind([arguments[3]])
    var out: [UInt8] = []
    if get.step() { jsonLine((0..<get.columnCount).map(get.value), names: columnNames, into: &out) }
    FileHandle.standardOutput.write(Data(out))
case "touch":
    db.execute("BEGIN IMMEDIATE")
    let touch = db.prepare("UPDATE book SET lastAccessedAt = ? WHERE id = ?")
    touch.bind([Date().timeIntervalSince1970, arguments[3]])
    _ = touch.step()
    db.execute("COMMIT")
case "insert":
    db.execute("BEGIN IMMEDIATE")
    var values = row(Int.random(in: 10_000_000..<20_000_000))
    values[0] = arguments[3]
    let insert = db.prepare("INSERT OR REPLACE INTO book (\(columns)) VALUES (\(placeholders))")
    insert.bind(values)
    _ = insert.step()
    db.execute("COMMIT")
case "plan":
    let plan = db.prepare(evictionPlan)
    plan.bind([])
    let needed = Int64(arguments[3])!
    var freed: Int64 = 0
    var count = 0
    while freed < needed, plan.step() {
        freed += sqlite3_column_int64(plan.handle, 1)
        count += 1
    }
    print(count, freed)
case "stats":
    let query = db.prepare(stats)
    while query.step() { print((0..<query.columnCount).map { "\(query.value($0) ?? "null")" }.joined(separator: " ")) }
case "list":
    // Typed columns straight into the output buffer, no boxing: what the index would do.
    let all = db.prepare("SELECT \(columns) FROM book ORDER BY id")
    var out = JSONBytes()
    let count = all.columnCount
    while all.step() {
        out.raw("{")
        for column in 0..<count {
            out.key(columnNames[Int(column)], first: column == 0)
            switch sqlite3_column_type(all.handle, column) {
            case SQLITE_NULL: out.raw("null")
            case SQLITE_INTEGER: out.integer(sqlite3_column_int64(all.handle, column))
            case SQLITE_FLOAT: out.raw(String(sqlite3_column_double(all.handle, column)))
            default: out.text(sqlite3_column_text(all.handle, column))
            }
        }
        out.raw("}\n")
        if out.bytes.count > 1 << 20 {
            FileHandle.standardOutput.write(Data(out.bytes))
            out.bytes.removeAll(keepingCapacity: true)
        }
    }
    FileHandle.standardOutput.write(Data(out.bytes))
default:
    usage()
}
