import Foundation

/// The schema both variants use: one row per book, its sync sources in a table of their own.
public let schema = """
    PRAGMA journal_mode=WAL;
    CREATE TABLE IF NOT EXISTS book (
        id TEXT PRIMARY KEY NOT NULL, type TEXT NOT NULL, bookId TEXT NOT NULL, title TEXT NOT NULL, coverUrl TEXT,
        fileUrl TEXT NOT NULL, localPath TEXT NOT NULL, fileSize INTEGER NOT NULL, downloadedAt REAL NOT NULL,
        lastAccessedAt REAL NOT NULL, checksum TEXT NOT NULL, format TEXT NOT NULL, etag TEXT, lastModified TEXT,
        pinned INTEGER NOT NULL DEFAULT 0, outdated INTEGER NOT NULL DEFAULT 0, coverPath TEXT, authors TEXT, warnings TEXT
    ) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS book_type ON book(type);
    CREATE INDEX IF NOT EXISTS book_lru ON book(pinned, lastAccessedAt, id, fileSize);
    CREATE TABLE IF NOT EXISTS totals (
        type TEXT PRIMARY KEY NOT NULL, count INTEGER NOT NULL, bytes INTEGER NOT NULL,
        pinnedCount INTEGER NOT NULL, pinnedBytes INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TRIGGER IF NOT EXISTS book_added AFTER INSERT ON book BEGIN
        INSERT INTO totals VALUES (NEW.type, 1, NEW.fileSize, NEW.pinned, NEW.pinned * NEW.fileSize)
        ON CONFLICT(type) DO UPDATE SET count = count + 1, bytes = bytes + NEW.fileSize,
            pinnedCount = pinnedCount + NEW.pinned, pinnedBytes = pinnedBytes + NEW.pinned * NEW.fileSize;
    END;
    CREATE TRIGGER IF NOT EXISTS book_removed AFTER DELETE ON book BEGIN
        UPDATE totals SET count = count - 1, bytes = bytes - OLD.fileSize, pinnedCount = pinnedCount - OLD.pinned,
            pinnedBytes = pinnedBytes - OLD.pinned * OLD.fileSize WHERE type = OLD.type;
    END;
    CREATE TRIGGER IF NOT EXISTS book_changed AFTER UPDATE OF type, fileSize, pinned ON book BEGIN
        UPDATE totals SET count = count - 1, bytes = bytes - OLD.fileSize, pinnedCount = pinnedCount - OLD.pinned,
            pinnedBytes = pinnedBytes - OLD.pinned * OLD.fileSize WHERE type = OLD.type;
        INSERT INTO totals VALUES (NEW.type, 1, NEW.fileSize, NEW.pinned, NEW.pinned * NEW.fileSize)
        ON CONFLICT(type) DO UPDATE SET count = count + 1, bytes = bytes + NEW.fileSize,
            pinnedCount = pinnedCount + NEW.pinned, pinnedBytes = pinnedBytes + NEW.pinned * NEW.fileSize;
    END;
    CREATE TABLE IF NOT EXISTS book_source (book TEXT NOT NULL, source TEXT NOT NULL, PRIMARY KEY (book, source)) WITHOUT ROWID;
    CREATE INDEX IF NOT EXISTS source_book ON book_source(source);
    """

/// The eviction plan: unpinned books, least recently used first, read from a covering index; the
/// caller stops once enough bytes are freed, so a plan costs the books it evicts, not the cache.
public let evictionPlan = "SELECT id, fileSize FROM book WHERE pinned = 0 ORDER BY lastAccessedAt, id"

/// Counts and bytes per type, kept by triggers: one row per type, whatever the cache's size.
public let stats = "SELECT type, count, bytes, pinnedCount, pinnedBytes FROM totals ORDER BY type"

/// After a bulk load, the write-ahead log folded into the database, so the next process opens it at once.
public let checkpoint = "PRAGMA wal_checkpoint(TRUNCATE)"

public let columns = "id, type, bookId, title, coverUrl, fileUrl, localPath, fileSize, downloadedAt, lastAccessedAt, checksum, format, etag, lastModified, pinned, outdated, coverPath, authors, warnings"

/// A generated book row: the values in `columns` order (nil for NULL).
public func row(_ n: Int) -> [Any?] {
    let id = "book\(n)"
    let type = n % 10 == 0 ? "magazine" : "ebook"
    let size = 100_000 + (n * 7919) % 5_000_000
    return [
        "\(type)-\(id)", type, id, "Title number \(n)", n % 3 == 0 ? "https://example.org/covers/\(n).jpg" : nil,
        "https://example.org/books/\(n).epub", "\(type)s/\(id).epub", size, 1_700_000_000.0 + Double(n),
        1_700_000_000.0 + Double((n * 104_729) % 1_000_000), String(repeating: "ab", count: 32), "epub",
        "\"etag-\(n)\"", nil, n % 97 == 0 ? 1 : 0, 0, nil, "[\"Author \(n % 1000)\"]", nil,
    ]
}

/// Writes one record as a JSON line, as `list --json` would stream it.
public func jsonLine(_ values: [Any?], names: [String], into out: inout [UInt8]) {
    out.append(UInt8(ascii: "{"))
    for (index, value) in values.enumerated() {
        if index > 0 { out.append(UInt8(ascii: ",")) }
        out += Array("\"\(names[index])\":".utf8)
        switch value {
        case nil: out += Array("null".utf8)
        case let text as String:
            out.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        case let number as Int64: out += Array(String(number).utf8)
        case let number as Int: out += Array(String(number).utf8)
        case let number as Double: out += Array(String(number).utf8)
        default: out += Array("null".utf8)
        }
    }
    out += Array("}\n".utf8)
}

public let columnNames = columns.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }

public func usage() -> Never {
    FileHandle.standardError.write(Data("usage: create N DB | get DB ID | touch DB ID | insert DB ID | plan DB BYTES | stats DB | list DB\n".utf8))
    exit(64)
}

/// Appends JSON text to a byte buffer without boxing values: what a `list --json` over SQLite rows
/// would do, column by column.
public struct JSONBytes {
    public var bytes: [UInt8] = []
    public init() { bytes.reserveCapacity(1 << 20) }

    public mutating func key(_ name: String, first: Bool) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "\""))
        bytes += name.utf8
        bytes += "\":".utf8
    }

    /// A UTF-8 C string from SQLite, escaped.
    public mutating func text(_ pointer: UnsafePointer<UInt8>?) {
        guard var p = pointer else {
            bytes += "null".utf8
            return
        }
        bytes.append(UInt8(ascii: "\""))
        while p.pointee != 0 {
            let byte = p.pointee
            if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { bytes.append(UInt8(ascii: "\\")) }
            if byte < 0x20 {
                bytes += "\\u00".utf8
                bytes.append(hexDigit(byte >> 4))
                bytes.append(hexDigit(byte & 0xF))
            } else {
                bytes.append(byte)
            }
            p += 1
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public mutating func integer(_ value: Int64) {
        var value = value
        if value == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        if value < 0 {
            bytes.append(UInt8(ascii: "-"))
            value = -value
        }
        var digits: [UInt8] = []
        while value > 0 {
            digits.append(UInt8(ascii: "0") + UInt8(value % 10))
            value /= 10
        }
        bytes += digits.reversed()
    }

    public mutating func raw(_ text: String) { bytes += text.utf8 }

    private func hexDigit(_ value: UInt8) -> UInt8 { value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10 }
}
