import Foundation

/// Settings kept with a cache in `config.json`, set with `bookcache config set KEY VALUE`.
///
/// | key | meaning |
/// | --- | --- |
/// | `max-size` | the size budget; least-recently-used books are evicted to stay under it |
/// | `keep` | the most books kept ("at most N books offline") |
/// | `reserve` | free space to leave on the filesystem when a book's size is known |
public struct CacheSettings: Codable, Sendable, Hashable {
    /// The size budget in bytes.
    public var maxSize: Int64?
    /// The most books kept.
    public var keep: Int?
    /// Free space to leave, in bytes.
    public var reserve: Int64?

    /// Empty settings: no budget, no count limit, the default reserve.
    public init(maxSize: Int64? = nil, keep: Int? = nil, reserve: Int64? = nil) {
        self.maxSize = maxSize
        self.keep = keep
        self.reserve = reserve
    }

    /// The keys `config` accepts.
    public static let keys = ["max-size", "keep", "reserve"]

    /// Sets a key from its text form (`2GiB`, `50`).
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidArgument``.
    public mutating func set(_ key: String, to text: String) throws(BookCacheError) {
        switch key {
        case "max-size": maxSize = try ByteSize(parsing: text).bytes
        case "reserve": reserve = try ByteSize(parsing: text).bytes
        case "keep": keep = try Self.parseCount(text)
        default: throw Self.unknown(key)
        }
    }

    /// Removes a key, returning it to its default.
    public mutating func unset(_ key: String) throws(BookCacheError) {
        switch key {
        case "max-size": maxSize = nil
        case "reserve": reserve = nil
        case "keep": keep = nil
        default: throw Self.unknown(key)
        }
    }

    /// The text form of a key's value, or `nil` when it is not set.
    public func value(of key: String) throws(BookCacheError) -> String? {
        switch key {
        case "max-size": return maxSize.map { ByteSize(bytes: $0).exactDescription }
        case "reserve": return reserve.map { ByteSize(bytes: $0).exactDescription }
        case "keep": return keep.map(String.init)
        default: throw Self.unknown(key)
        }
    }

    /// A count typed by a person: a whole number from 0 to 10,000,000.
    public static func parseCount(_ text: String) throws(BookCacheError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), (0...10_000_000).contains(value) else {
            throw .invalidArgument("invalid count '\(text.debugEscaped)': use a whole number from 0 to 10000000")
        }
        return value
    }

    private static func unknown(_ key: String) -> BookCacheError {
        .invalidArgument("unknown setting '\(key.debugEscaped)'; the settings are \(keys.joined(separator: ", "))")
    }
}

extension ByteSize {
    /// The size in the largest binary unit that divides it exactly (`2GiB`), else in bytes.
    public var exactDescription: String {
        for (unit, factor) in [("TiB", Int64(1) << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(unit)"
        }
        for (unit, factor) in [("TB", Int64(1_000_000_000_000)), ("GB", 1_000_000_000), ("MB", 1_000_000), ("KB", 1000)] where bytes >= factor && bytes % factor == 0 {
            return "\(bytes / factor)\(unit)"
        }
        return "\(bytes)B"
    }
}
