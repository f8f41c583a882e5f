import Foundation
import GRDB
import IndexShared

let arguments = CommandLine.arguments
guard arguments.count >= 3 else { usage() }
var configuration = Configuration()
configuration.busyMode = .timeout(5)
let sync = ProcessInfo.processInfo.environment["SYNC"] ?? "FULL"
configuration.prepareDatabase { db in try db.execute(sql: "PRAGMA synchronous=\(sync)") }
let queue = try DatabaseQueue(path: arguments[2], configuration: configuration)
let placeholders = Array(repeating: "?", count: columnNames.count).joined(separator: ",")

func values(_ row: Row) -> [Any?] {
    (0..<row.count).map { index -> Any? in
        switch row[index] as DatabaseValue? {
        case .none: return nil
        case .some(let value):
            switch value.storage {
            case .null: return nil
            case .int64(let number): return number
            case .double(let number): return number
            case .string(let text): return text
            case .blob: return nil
            }
        }
    }
}

func databaseValues(_ values: [Any?]) -> StatementArguments {
    StatementArguments(values.map { value -> (any DatabaseValueConvertible)? in
        switch value {
        case let text as String: return text
        case let number as Int: return number
        case let number as Double: return number
        default: return nil
        }
    })
}

switch arguments[1] {
case "create":
    try queue.write { db in
        try db.execute(sql: schema)
        let insert = try db.makeStatement(sql: "INSERT INTO book (\(columns)) VALUES (\(placeholders))")
        for n in 0..<Int(arguments[3])! { try insert.execute(arguments: databaseValues(row(n))) }
    }
    try queue.writeWithoutTransaction { db in try db.execute(sql: checkpoint) }
case "get":
    var out: [UInt8] = []
    try queue.read { db in
        if let row = try Row.fetchOne(db, sql: "SELECT \(columns) FROM book WHERE id = ?", arguments: [arguments[3]]) {
            jsonLine(values(row), names: columnNames, into: &out)
        }
    }
    FileHandle.standardOutput.write(Data(out))
case "touch":
    try queue.write { db in
        try db.execute(sql: "UPDATE book SET lastAccessedAt = ? WHERE id = ?", arguments: [Date().timeIntervalSince1970, arguments[3]])
    }
case "insert":
    var row = row(Int.random(in: 10_000_000..<20_000_000))
    row[0] = arguments[3]
    try queue.write { db in
        try db.execute(sql: "INSERT OR REPLACE INTO book (\(columns)) VALUES (\(placeholders))", arguments: databaseValues(row))
    }
case "plan":
    let needed = Int64(arguments[3])!
    let (count, freed) = try queue.read { db -> (Int, Int64) in
        let cursor = try Row.fetchCursor(db, sql: evictionPlan)
        var freed: Int64 = 0
        var count = 0
        while freed < needed, let row = try cursor.next() {
            freed += row[1] as Int64
            count += 1
        }
        return (count, freed)
    }
    print(count, freed)
case "stats":
    try queue.read { db in
        for row in try Row.fetchAll(db, sql: stats) { print(values(row).map { "\($0 ?? "null")" }.joined(separator: " ")) }
    }
case "list":
    // Typed columns from GRDB's rows into the output buffer, as the C variant does.
    try queue.read { db in
        var out = JSONBytes()
        let cursor = try Row.fetchCursor(db, sql: "SELECT \(columns) FROM book ORDER BY id")
        while let row = try cursor.next() {
            out.raw("{")
            for column in 0..<row.count {
                out.key(columnNames[column], first: column == 0)
                switch (row[column] as DatabaseValue).storage {
                case .null, .blob: out.raw("null")
                case .int64(let value): out.integer(value)
                case .double(let value): out.raw(String(value))
                case .string(let text): text.withCString { out.text(UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self)) }
                }
            }
            out.raw("}\n")
            if out.bytes.count > 1 << 20 {
                FileHandle.standardOutput.write(Data(out.bytes))
                out.bytes.removeAll(keepingCapacity: true)
            }
        }
        FileHandle.standardOutput.write(Data(out.bytes))
    }
default:
    usage()
}
