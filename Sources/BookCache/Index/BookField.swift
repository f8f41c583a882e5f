import Foundation

/// One field of a book's record (``CachedBookMetadata``) and how it is kept: its name (the
/// index's column, the key in the sidecar and in `list --json`), the kind of its value, and
/// what a refresh of the book keeps of the old record.
///
/// ``all`` is the one home of the record's shape: the index's table, its binds and reads, the
/// upgrade of an index made before a field, the sidecar's coding, the JSON writer and the
/// refresh rule are made from it. A new field is a property of the record and a line in
/// ``all``; one that older indexes lack is marked ``addedLater`` (and is optional or a list),
/// so the first writable open adds its column and a read-only one reads it as absent.
final class BookField: Sendable {
    /// The value's kind, and how it is read from and written to the record. (Closures, not key
    /// paths: a key path kept in a table is projected at run time, which made `list --json` of
    /// 100,000 books 1.8 times slower.)
    enum Kind: Sendable {
        case text(_ get: @Sendable (CachedBookMetadata) -> String, _ set: @Sendable (inout CachedBookMetadata, String) -> Void)
        case optionalText(_ get: @Sendable (CachedBookMetadata) -> String?, _ set: @Sendable (inout CachedBookMetadata, String?) -> Void)
        case integer(_ get: @Sendable (CachedBookMetadata) -> Int64, _ set: @Sendable (inout CachedBookMetadata, Int64) -> Void)
        /// Seconds since 1970 in the index; ISO 8601 with milliseconds in JSON.
        case date(_ get: @Sendable (CachedBookMetadata) -> Date, _ set: @Sendable (inout CachedBookMetadata, Date) -> Void)
        /// 0 or 1 in the index; `false` when a sidecar leaves it out.
        case flag(_ get: @Sendable (CachedBookMetadata) -> Bool, _ set: @Sendable (inout CachedBookMetadata, Bool) -> Void)
        /// A JSON list in the index; left out of JSON when empty.
        case list(_ get: @Sendable (CachedBookMetadata) -> [String], _ set: @Sendable (inout CachedBookMetadata, [String]) -> Void)
        case type(_ get: @Sendable (CachedBookMetadata) -> BookType, _ set: @Sendable (inout CachedBookMetadata, BookType) -> Void)
        case format(_ get: @Sendable (CachedBookMetadata) -> BookFormat, _ set: @Sendable (inout CachedBookMetadata, BookFormat) -> Void)
    }

    /// What a refresh (the book downloaded again) keeps of the record it replaces.
    enum OnRefresh: Sendable {
        /// The new download's value.
        case replaced
        /// The old record's value: what the user decided, or the book's place in LRU order.
        case kept
        /// The old record's value when the new download has none (nil or empty).
        case keptWhenMissing
    }

    let name: String
    let kind: Kind
    let onRefresh: OnRefresh
    /// A column the index's first release did not have: added on the first writable open of an
    /// older index, read as absent from one that cannot be written.
    let addedLater: Bool
    /// Kept in a table of its own (the sync sources, with their order), not a column of `book`.
    let ownTable: Bool

    // A class: the hot loop (a million rows read, walking ``columns`` unretained) passes one
    // reference, not a copy of the name and both closures with their reference counts.
    private init(name: String, kind: Kind, onRefresh: OnRefresh = .replaced, addedLater: Bool = false, ownTable: Bool = false) {
        self.name = name
        self.kind = kind
        self.onRefresh = onRefresh
        self.addedLater = addedLater
        self.ownTable = ownTable
    }

    /// The record's fields; the first is the key. The index's columns are in this order.
    static let all: [BookField] = [
        BookField(name: "id", kind: .text({ $0.id }, { $0.id = $1 })),
        BookField(name: "bookType", kind: .type({ $0.bookType }, { $0.bookType = $1 })),
        BookField(name: "bookId", kind: .text({ $0.bookId }, { $0.bookId = $1 })),
        BookField(name: "title", kind: .text({ $0.title }, { $0.title = $1 })),
        BookField(name: "coverUrl", kind: .optionalText({ $0.coverUrl }, { $0.coverUrl = $1 })),
        BookField(name: "fileUrl", kind: .text({ $0.fileUrl }, { $0.fileUrl = $1 })),
        BookField(name: "localPath", kind: .text({ $0.localPath }, { $0.localPath = $1 })),
        BookField(name: "fileSize", kind: .integer({ $0.fileSize }, { $0.fileSize = $1 })),
        BookField(name: "downloadedAt", kind: .date({ $0.downloadedAt }, { $0.downloadedAt = $1 })),
        BookField(name: "lastAccessedAt", kind: .date({ $0.lastAccessedAt }, { $0.lastAccessedAt = $1 }), onRefresh: .kept),
        BookField(name: "checksum", kind: .text({ $0.checksum }, { $0.checksum = $1 })),
        BookField(name: "format", kind: .format({ $0.format }, { $0.format = $1 })),
        BookField(name: "etag", kind: .optionalText({ $0.etag }, { $0.etag = $1 })),
        BookField(name: "lastModified", kind: .optionalText({ $0.lastModified }, { $0.lastModified = $1 })),
        BookField(name: "pinned", kind: .flag({ $0.pinned }, { $0.pinned = $1 }), onRefresh: .kept),
        BookField(name: "outdated", kind: .flag({ $0.outdated }, { $0.outdated = $1 })),
        BookField(name: "coverPath", kind: .optionalText({ $0.coverPath }, { $0.coverPath = $1 }), onRefresh: .keptWhenMissing),
        BookField(name: "authors", kind: .list({ $0.authors }, { $0.authors = $1 }), onRefresh: .keptWhenMissing),
        BookField(name: "warnings", kind: .list({ $0.warnings }, { $0.warnings = $1 })),
        BookField(
            name: "language", kind: .optionalText({ $0.language }, { $0.language = $1 }), onRefresh: .keptWhenMissing, addedLater: true),
        BookField(
            name: "published", kind: .optionalText({ $0.published }, { $0.published = $1 }), onRefresh: .keptWhenMissing, addedLater: true),
        BookField(name: "syncSources", kind: .list({ $0.syncSources }, { $0.syncSources = $1 }), onRefresh: .kept, ownTable: true),
    ]

    /// The fields that are columns of the index's `book` table, in its order.
    static let columns = all.filter { !$0.ownTable }

    /// The column's declaration in `CREATE TABLE`.
    var declaration: String {
        switch kind {
        case .text, .type, .format: name == Self.all[0].name ? "\(name) TEXT PRIMARY KEY NOT NULL" : "\(name) TEXT NOT NULL"
        case .optionalText, .list: "\(name) TEXT"
        case .integer: "\(name) INTEGER NOT NULL"
        case .date: "\(name) REAL NOT NULL"
        case .flag: "\(name) INTEGER NOT NULL DEFAULT 0"
        }
    }

    /// Whether the record has a value to write (JSON leaves out absent optionals and empty lists).
    func isPresent(in record: CachedBookMetadata) -> Bool {
        switch kind {
        case .optionalText(let get, _): get(record) != nil
        case .list(let get, _): !get(record).isEmpty
        case .text, .integer, .date, .flag, .type, .format: true
        }
    }

    /// Sets `record`'s value from `previous` as ``onRefresh`` says.
    func refresh(_ record: inout CachedBookMetadata, from previous: CachedBookMetadata) {
        guard onRefresh == .kept || (onRefresh == .keptWhenMissing && !isPresent(in: record)) else { return }
        switch kind {
        case .text(let get, let set): set(&record, get(previous))
        case .optionalText(let get, let set): set(&record, get(previous))
        case .integer(let get, let set): set(&record, get(previous))
        case .date(let get, let set): set(&record, get(previous))
        case .flag(let get, let set): set(&record, get(previous))
        case .list(let get, let set): set(&record, get(previous))
        case .type(let get, let set): set(&record, get(previous))
        case .format(let get, let set): set(&record, get(previous))
        }
    }

    // MARK: - Sidecar and JSON coding (Codable)

    /// A field's name as a coding key.
    struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Reads the field from a sidecar: flags missing read as `false`, lists as empty.
    func decode(from container: KeyedDecodingContainer<Key>, into record: inout CachedBookMetadata) throws {
        let key = Key(stringValue: name)
        switch kind {
        case .text(_, let set): set(&record, try container.decode(String.self, forKey: key))
        case .optionalText(_, let set): set(&record, try container.decodeIfPresent(String.self, forKey: key))
        case .integer(_, let set): set(&record, try container.decode(Int64.self, forKey: key))
        case .date(_, let set): set(&record, try container.decode(Date.self, forKey: key))
        case .flag(_, let set): set(&record, try container.decodeIfPresent(Bool.self, forKey: key) ?? false)
        case .list(_, let set): set(&record, try container.decodeIfPresent([String].self, forKey: key) ?? [])
        case .type(_, let set): set(&record, try container.decode(BookType.self, forKey: key))
        case .format(_, let set): set(&record, try container.decode(BookFormat.self, forKey: key))
        }
    }

    /// Writes the field when it is present (see ``isPresent(in:)``).
    func encode(_ record: CachedBookMetadata, to container: inout KeyedEncodingContainer<Key>) throws {
        guard isPresent(in: record) else { return }
        let key = Key(stringValue: name)
        switch kind {
        case .text(let get, _): try container.encode(get(record), forKey: key)
        case .optionalText(let get, _): try container.encodeIfPresent(get(record), forKey: key)
        case .integer(let get, _): try container.encode(get(record), forKey: key)
        case .date(let get, _): try container.encode(get(record), forKey: key)
        case .flag(let get, _): try container.encode(get(record), forKey: key)
        case .list(let get, _): try container.encode(get(record), forKey: key)
        case .type(let get, _): try container.encode(get(record), forKey: key)
        case .format(let get, _): try container.encode(get(record), forKey: key)
        }
    }

    // MARK: - The index's row

    /// Binds the field's value to parameter `index` of `statement`.
    func bind(_ record: CachedBookMetadata, to statement: SQLiteStatement, at index: Int32) {
        switch kind {
        case .text(let get, _): statement.bind(get(record), at: index)
        case .optionalText(let get, _): statement.bind(get(record), at: index)
        case .integer(let get, _): statement.bind(get(record), at: index)
        case .date(let get, _): statement.bind(get(record).timeIntervalSince1970, at: index)
        case .flag(let get, _): statement.bind(Int64(get(record) ? 1 : 0), at: index)
        case .list(let get, _): statement.bind(Self.encodeList(get(record)), at: index)
        case .type(let get, _): statement.bind(get(record).rawValue, at: index)
        case .format(let get, _): statement.bind(get(record).rawValue, at: index)
        }
    }

    /// Reads the field from column `column` of the row `statement` is on.
    /// - Throws: ``SQLiteError`` (`invalidRow`) for a required value missing, a type or format
    ///   this version does not know, or a list that is not a JSON list (damage, not an empty list).
    func read(_ row: SQLiteStatement, column: Int32, into record: inout CachedBookMetadata) throws(SQLiteError) {
        func required() throws(SQLiteError) -> String {
            guard let text = row.text(column) else {
                throw SQLiteError(.invalidRow, operation: "read a record", message: "\(name) is missing")
            }
            return text
        }
        func invalid(_ value: String) -> SQLiteError {
            SQLiteError(
                .invalidRow, operation: "read a record", message: "the record \(row.text(0) ?? "?") has an invalid \(name) '\(value)'")
        }
        switch kind {
        case .text(_, let set): set(&record, try required())
        case .optionalText(_, let set): set(&record, row.text(column))
        case .integer(_, let set): set(&record, row.int64(column))
        case .date(_, let set): set(&record, Date(timeIntervalSince1970: row.double(column)))
        case .flag(_, let set): set(&record, row.int64(column) != 0)
        case .list(_, let set): set(&record, try Self.decodeList(row.text(column), name))
        case .type(_, let set):
            let text = try required()
            guard let type = BookType(rawValue: text) else { throw invalid(text) }
            set(&record, type)
        case .format(_, let set):
            let text = try required()
            guard let format = BookFormat(rawValue: text) else { throw invalid(text) }
            set(&record, format)
        }
    }

    private static func encodeList(_ list: [String]) -> String? {
        guard !list.isEmpty, let data = try? JSONEncoder().encode(list) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    private static func decodeList(_ text: String?, _ name: String) throws(SQLiteError) -> [String] {
        guard let text else { return [] }
        do {
            return try JSONDecoder().decode([String].self, from: Data(text.utf8))
        } catch {
            throw SQLiteError(.invalidRow, operation: "read a record", message: "its \(name) are not a list (\(error))")
        }
    }
}
