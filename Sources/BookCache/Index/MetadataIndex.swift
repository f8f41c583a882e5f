import DownloadQueue
import Foundation
import Synchronization

/// The index: a schema version and one record per cached book, keyed by `{type}-{bookId}`.
///
/// A snapshot read from disk is not decoded whole: its records are located by a single scan and
/// each is decoded when first asked for, so looking up one book in an index of thousands stays
/// cheap. Changes sit on top of the snapshot, and the index remembers which keys a change
/// touched, so ``IndexStore`` can append just those to the journal.
struct MetadataIndex: Sendable {
    /// The schema this build writes. An index with a higher number is refused, never overwritten.
    static let currentSchemaVersion = 1

    var schemaVersion: Int
    /// The snapshot's records, decoded on demand.
    private var snapshot: SnapshotRecords?
    /// Records set (or removed, as `nil`) since the snapshot.
    private var overrides: [String: CachedBookMetadata?] = [:]
    /// Keys set or removed since the index was loaded.
    private(set) var changedKeys: Set<String> = []

    init(books: [String: CachedBookMetadata] = [:]) {
        self.schemaVersion = Self.currentSchemaVersion
        self.overrides = books.mapValues { $0 }
    }

    /// Reads a snapshot's structure; records are decoded later, when asked for.
    /// - Throws: ``SnapshotRecords/Malformed`` when the bytes are not an index.
    init(snapshot data: Data) throws {
        let records = try SnapshotRecords(data)
        self.schemaVersion = records.schemaVersion
        self.snapshot = records
    }

    subscript(id: BookID) -> CachedBookMetadata? {
        get { self[key: id.description] }
        set { self[key: id.description] = newValue }
    }

    subscript(key key: String) -> CachedBookMetadata? {
        get {
            if let override = overrides[key] { return override }
            return snapshot?.record(for: key)
        }
        set {
            guard self[key: key] != newValue else { return }
            overrides[key] = .some(newValue)
            changedKeys.insert(key)
        }
    }

    /// Every record (decoding the whole snapshot if it was not yet).
    var books: [String: CachedBookMetadata] {
        var all: [String: CachedBookMetadata] = [:]
        let records = snapshot?.allRecords() ?? []
        all.reserveCapacity(records.count + overrides.count)
        for (key, record) in records { all[key] = record }
        for (key, value) in overrides { all[key] = value }
        return all
    }

    /// Every record, sorted by key, without building a dictionary of them.
    var sortedBooks: [CachedBookMetadata] {
        var all = (snapshot?.allRecords() ?? []).filter { overrides[$0.key] == nil }
        all += overrides.compactMap { key, value in value.map { (key, $0) } }
        all.sort { $0.key < $1.key }
        return all.map(\.record)
    }

    /// How many books the index holds, without decoding them.
    var count: Int {
        var keys: Set<String> = snapshot.map { Set($0.keys) } ?? []
        for (key, value) in overrides {
            if value == nil { keys.remove(key) } else { keys.insert(key) }
        }
        return keys.count
    }

    /// Forgets which keys changed, after they have been written.
    mutating func markClean() {
        changedKeys.removeAll()
    }

    /// Applies a journal entry without marking it changed.
    mutating func apply(_ entry: IndexJournal.Entry) {
        switch entry {
        case .set(let record): overrides[record.id] = .some(record)
        case .remove(let key): overrides[key] = .some(nil)
        }
    }

    /// The snapshot as written to `metadata.json`.
    func encoded() throws -> Data {
        struct Snapshot: Encodable {
            var schemaVersion: Int
            var books: [String: CachedBookMetadata]
        }
        return try MetadataCoding.encoder().encode(Snapshot(schemaVersion: schemaVersion, books: books))
    }
}

/// The records of a snapshot, located by one scan of its bytes and decoded one at a time.
final class SnapshotRecords: Sendable {
    /// The bytes are not an index.
    struct Malformed: Error, CustomStringConvertible {
        var description: String
    }

    let schemaVersion: Int
    private let data: Data
    private let ranges: [String: Range<Int>]
    /// The bytes of the whole `books` object, for decoding every record in one pass.
    private let booksRange: Range<Int>?
    private let decoded = Mutex<[String: CachedBookMetadata]>([:])
    /// Every record, once ``allRecords()`` has decoded them.
    private let decodedAll = Mutex<[(key: String, record: CachedBookMetadata)]?>(nil)

    var keys: Dictionary<String, Range<Int>>.Keys { ranges.keys }

    init(_ data: Data) throws {
        self.data = data
        var version: Int?
        var ranges: [String: Range<Int>] = [:]
        var booksRange: Range<Int>?
        try data.withUnsafeBytes { raw in
        var scanner = JSONScanner(bytes: raw, base: data.startIndex)
        try scanner.object { key, scanner in
            switch key {
            case "schemaVersion":
                version = try scanner.integer()
            case "books":
                scanner.skipWhitespace()
                let start = scanner.position
                try scanner.object { bookKey, scanner in
                    ranges[bookKey] = try scanner.skipValue()
                }
                booksRange = (scanner.base + start)..<(scanner.base + scanner.position)
            default:
                _ = try scanner.skipValue()
            }
        }
        try scanner.end()
        }
        guard let version else { throw Malformed(description: "no schemaVersion") }
        self.schemaVersion = version
        self.ranges = ranges
        self.booksRange = booksRange
    }

    /// One record, decoded on first use; `nil` when absent or undecodable.
    func record(for key: String) -> CachedBookMetadata? {
        if let hit = decoded.withLock({ $0[key] }) { return hit }
        guard let range = ranges[key], let record = decode(range) else { return nil }
        decoded.withLock { $0[key] = record }
        return record
    }

    /// Every record, in no particular order; ones that cannot be decoded are left out (verify
    /// reports their files as strays). Decoded once, then kept.
    func allRecords() -> [(key: String, record: CachedBookMetadata)] {
        if let all = decodedAll.withLock({ $0 }) { return all }
        let known = decoded.withLock { $0 }
        let entries = Array(ranges)
        // Large indexes are decoded on every core: each lane takes a slice of the records.
        let lanes = entries.count > 2000 ? min(Lanes.available, 8) : 1
        let per = (entries.count + lanes - 1) / max(lanes, 1)
        let all = Lanes.map(lanes) { lane in
            var part: [(key: String, record: CachedBookMetadata)] = []
            part.reserveCapacity(per)
            for position in (lane * per)..<min(entries.count, (lane + 1) * per) {
                let (key, range) = entries[position]
                if let record = known[key] ?? self.decode(range) { part.append((key, record)) }
            }
            return part
        }.flatMap { $0 }
        decodedAll.withLock { $0 = all }
        return all
    }

    /// Decodes one record: the direct scanner first (several times faster than `JSONDecoder`
    /// for the records this library writes), `JSONDecoder` for anything it does not expect.
    private func decode(_ range: Range<Int>) -> CachedBookMetadata? {
        let fast = data.withUnsafeBytes { raw -> CachedBookMetadata? in
            let slice = UnsafeRawBufferPointer(rebasing: raw[(range.lowerBound - data.startIndex)..<(range.upperBound - data.startIndex)])
            var scanner = JSONScanner(bytes: slice, base: 0)
            return try? CachedBookMetadata.scan(&scanner)
        }
        if let fast { return fast }
        return try? MetadataCoding.decoder().decode(CachedBookMetadata.self, from: data[range])
    }
}

/// A minimal JSON scanner over raw bytes: enough to walk objects, read keys and integers, and
/// skip values while checking that strings, escapes and brackets are well-formed. Positions are
/// offsets in the buffer; ranges it returns are shifted by `base` (the `Data`'s start index).
struct JSONScanner {
    let bytes: UnsafeRawBufferPointer
    let base: Int
    var position = 0

    init(bytes: UnsafeRawBufferPointer, base: Int) {
        self.bytes = bytes
        self.base = base
    }

    private func fail(_ what: String) -> SnapshotRecords.Malformed {
        SnapshotRecords.Malformed(description: "\(what) at byte \(position)")
    }

    mutating func skipWhitespace() {
        while position < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) { position += 1 }
    }

    mutating func expect(_ byte: UInt8) throws {
        skipWhitespace()
        guard position < bytes.count, bytes[position] == byte else { throw fail("expected '\(Character(UnicodeScalar(byte)))'") }
        position += 1
    }

    /// Walks an object, calling `body` with each key; `body` must consume the value.
    mutating func object(_ body: (String, inout JSONScanner) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "}") {
            position += 1
            return
        }
        while true {
            let key = try string()
            try expect(UInt8(ascii: ":"))
            skipWhitespace()
            try body(key, &self)
            skipWhitespace()
            guard position < bytes.count else { throw fail("unterminated object") }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
                continue
            }
            if bytes[position] == UInt8(ascii: "}") {
                position += 1
                return
            }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func string() throws -> String {
        skipWhitespace()
        let start = position
        try skipString()
        let inner = UnsafeRawBufferPointer(rebasing: bytes[(start + 1)..<(position - 1)])
        if !inner.contains(UInt8(ascii: "\\")) { return String(decoding: inner, as: UTF8.self) }
        return try unescape(inner)
    }

    /// The text of a string's contents with its escapes resolved (an ETag's quotes, say).
    private func unescape(_ inner: UnsafeRawBufferPointer) throws -> String {
        var out: [UInt8] = []
        out.reserveCapacity(inner.count)
        var index = 0
        func hex4() throws -> UInt32 {
            guard index + 4 <= inner.count else { throw fail("short \\u escape") }
            var value: UInt32 = 0
            for byte in inner[index..<(index + 4)] {
                let digit: UInt8
                switch byte {
                case 0x30...0x39: digit = byte - 0x30
                case 0x41...0x46: digit = byte - 0x41 + 10
                case 0x61...0x66: digit = byte - 0x61 + 10
                default: throw fail("bad \\u escape")
                }
                value = value << 4 | UInt32(digit)
            }
            index += 4
            return value
        }
        while index < inner.count {
            let byte = inner[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                continue
            }
            guard index < inner.count else { throw fail("unterminated escape") }
            let escape = inner[index]
            index += 1
            switch escape {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var value = try hex4()
                if (0xD800..<0xDC00).contains(value) {
                    // A high surrogate must be followed by an escaped low one.
                    guard index + 2 <= inner.count, inner[index] == UInt8(ascii: "\\"), inner[index + 1] == UInt8(ascii: "u") else {
                        throw fail("lone surrogate")
                    }
                    index += 2
                    let low = try hex4()
                    guard (0xDC00..<0xE000).contains(low) else { throw fail("lone surrogate") }
                    value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00)
                }
                guard let scalar = Unicode.Scalar(value) else { throw fail("lone surrogate") }
                UTF8.encode(scalar) { out.append($0) }
            default:
                throw fail("bad escape")
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    mutating func integer() throws -> Int {
        skipWhitespace()
        let start = position
        while position < bytes.count, bytes[position] == UInt8(ascii: "-") || (bytes[position] >= 0x30 && bytes[position] <= 0x39) {
            position += 1
        }
        guard let value = Int(String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)) else {
            throw fail("expected an integer")
        }
        return value
    }

    private mutating func skipString() throws {
        guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw fail("expected a string") }
        position += 1
        while position < bytes.count {
            let byte = bytes[position]
            if byte == UInt8(ascii: "\\") {
                position += 2
                continue
            }
            position += 1
            if byte == UInt8(ascii: "\"") { return }
            if byte < 0x20 { throw fail("control character in a string") }
        }
        throw fail("unterminated string")
    }

    /// Skips one value (checking its brackets and strings) and returns its byte range.
    mutating func skipValue() throws -> Range<Int> {
        skipWhitespace()
        let start = position
        guard position < bytes.count else { throw fail("expected a value") }
        switch bytes[position] {
        case UInt8(ascii: "\""):
            try skipString()
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while position < bytes.count {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\"") {
                    try skipString()
                    continue
                }
                position += 1
                if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "[") { depth += 1 }
                if byte == UInt8(ascii: "}") || byte == UInt8(ascii: "]") {
                    depth -= 1
                    if depth == 0 { return (base + start)..<(base + position) }
                }
                if depth > 64 { throw fail("nested too deeply") }
            }
            throw fail("unterminated value")
        default:
            while position < bytes.count, ![UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x0A, 0x0D, 0x09].contains(bytes[position]) {
                position += 1
            }
            guard position > start else { throw fail("expected a value") }
        }
        return (base + start)..<(base + position)
    }

    mutating func end() throws {
        skipWhitespace()
        guard position == bytes.count else { throw fail("trailing bytes") }
    }
}

extension CachedBookMetadata {
    /// Reads a record straight from JSON bytes. Throws on anything unexpected (the caller then
    /// falls back to `JSONDecoder`), so it never guesses.
    static func scan(_ scanner: inout JSONScanner) throws -> CachedBookMetadata {
        var strings: [String: String] = [:]
        var fileSize: Int64?
        var pinned = false
        var outdated = false
        var syncSources: [String] = []
        var authors: [String] = []
        var warnings: [String] = []
        try scanner.object { key, scanner in
            switch key {
            case "fileSize": fileSize = Int64(try scanner.integer())
            case "pinned": pinned = try scanner.boolean()
            case "outdated": outdated = try scanner.boolean()
            case "syncSources": syncSources = try scanner.stringArray()
            case "authors": authors = try scanner.stringArray()
            case "warnings": warnings = try scanner.stringArray()
            default:
                if scanner.peekNull() {
                    _ = try scanner.skipValue()
                } else {
                    strings[key] = try scanner.string()
                }
            }
        }
        struct Missing: Error {}
        func required(_ key: String) throws -> String {
            guard let value = strings[key] else { throw Missing() }
            return value
        }
        guard let type = BookType(rawValue: try required("bookType")), let format = BookFormat(rawValue: try required("format")),
            let fileSize, let downloaded = MetadataCoding.parseUTC(try required("downloadedAt")),
            let accessed = MetadataCoding.parseUTC(try required("lastAccessedAt"))
        else { throw Missing() }
        let id = try BookID(type: type, bookId: try required("bookId"))
        guard id.description == (try required("id")) else { throw Missing() }
        var record = CachedBookMetadata(
            id: id, title: try required("title"), coverUrl: strings["coverUrl"], fileUrl: try required("fileUrl"),
            localPath: try required("localPath"), fileSize: fileSize, downloadedAt: downloaded, lastAccessedAt: accessed,
            checksum: try required("checksum"), format: format, etag: strings["etag"], lastModified: strings["lastModified"])
        record.pinned = pinned
        record.outdated = outdated
        record.coverPath = strings["coverPath"]
        record.syncSources = syncSources
        record.authors = authors
        record.warnings = warnings
        return record
    }
}

extension JSONScanner {
    mutating func peekNull() -> Bool {
        skipWhitespace()
        return position + 4 <= bytes.count && bytes[position] == UInt8(ascii: "n")
    }

    mutating func boolean() throws -> Bool {
        skipWhitespace()
        if position + 4 <= bytes.count, bytes[position] == UInt8(ascii: "t") {
            position += 4
            return true
        }
        if position + 5 <= bytes.count, bytes[position] == UInt8(ascii: "f") {
            position += 5
            return false
        }
        throw SnapshotRecords.Malformed(description: "expected a boolean at byte \(position)")
    }

    mutating func stringArray() throws -> [String] {
        try expect(UInt8(ascii: "["))
        var values: [String] = []
        skipWhitespace()
        if position < bytes.count, bytes[position] == UInt8(ascii: "]") {
            position += 1
            return values
        }
        while true {
            values.append(try string())
            skipWhitespace()
            guard position < bytes.count else { throw SnapshotRecords.Malformed(description: "unterminated array") }
            let byte = bytes[position]
            position += 1
            if byte == UInt8(ascii: "]") { return values }
            guard byte == UInt8(ascii: ",") else { throw SnapshotRecords.Malformed(description: "expected ',' or ']'") }
        }
    }
}
