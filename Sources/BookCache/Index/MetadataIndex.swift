import Foundation

/// The index: a schema version and one record per cached book, keyed by `{type}-{bookId}`.
///
/// It remembers which records a change touched, so ``IndexStore`` can append just those to the
/// journal instead of rewriting the whole index.
struct MetadataIndex: Codable, Sendable {
    /// The schema this build writes. An index with a higher number is refused, never overwritten.
    static let currentSchemaVersion = 1

    var schemaVersion: Int
    private(set) var books: [String: CachedBookMetadata]
    /// Keys set or removed since the index was loaded.
    private(set) var changedKeys: Set<String> = []

    private enum CodingKeys: String, CodingKey {
        case schemaVersion
        case books
    }

    init(books: [String: CachedBookMetadata] = [:]) {
        self.schemaVersion = Self.currentSchemaVersion
        self.books = books
    }

    subscript(id: BookID) -> CachedBookMetadata? {
        get { books[id.description] }
        set { self[key: id.description] = newValue }
    }

    subscript(key key: String) -> CachedBookMetadata? {
        get { books[key] }
        set {
            guard books[key] != newValue else { return }
            books[key] = newValue
            changedKeys.insert(key)
        }
    }

    /// Forgets which keys changed, after they have been written.
    mutating func markClean() {
        changedKeys.removeAll()
    }

    /// Applies a journal entry without marking it changed.
    mutating func apply(_ entry: IndexJournal.Entry) {
        switch entry {
        case .set(let record): books[record.id] = record
        case .remove(let key): books[key] = nil
        }
    }
}

/// The JSON coders used for the index, sidecars and `list --json`: ISO-8601 dates with
/// fractional seconds (so LRU order survives a round trip), sorted keys.
public enum MetadataCoding {
    /// An encoder for metadata: ISO-8601 dates, sorted keys.
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(date.formatted(Self.dateStyle))
        }
        return encoder
    }

    /// A decoder for metadata; accepts ISO-8601 dates with or without fractional seconds.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let string = try container.decode(String.self)
            if let date = try? Self.dateStyle.parse(string) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(string) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO-8601 date: \(string)")
        }
        return decoder
    }

    private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)
}
