/// Identifies a cached book: its type and the caller's book id, written `ebook-123`.
///
/// A book id is 1–128 characters of `A–Z a–z 0–9 . _ -`, does not start with `.`, and does not
/// contain `..`, so it is always a safe file name. Invalid ids are refused before any I/O.
public struct BookID: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    /// The type, which decides the folder.
    public let type: BookType
    /// The caller's id within the type, such as `123`.
    public let bookId: String

    /// The longest book id accepted.
    public static let maxLength = 128

    /// Creates an id after checking `bookId`.
    /// - Parameters:
    ///   - type: The book's type.
    ///   - bookId: The caller's id.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidIdentifier``.
    public init(type: BookType, bookId: String) throws(BookCacheError) {
        if let problem = Self.problem(with: bookId) {
            throw .invalidIdentifier(bookId, reason: problem)
        }
        self.type = type
        self.bookId = bookId
    }

    /// Parses the full form, `ebook-123` or `magazine-2024-05`.
    /// - Parameter string: `{type}-{bookId}`.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidIdentifier``.
    public init(parsing string: String) throws(BookCacheError) {
        guard let dash = string.firstIndex(of: "-") else {
            throw .invalidIdentifier(string, reason: "expected TYPE-ID such as ebook-123 or magazine-2024-05")
        }
        let typeName = String(string[..<dash])
        guard let type = BookType(rawValue: typeName) else {
            throw .invalidIdentifier(
                string, reason: "unknown type '\(typeName)'; use ebook-ID or magazine-ID")
        }
        try self.init(type: type, bookId: String(string[string.index(after: dash)...]))
    }

    /// The full form, `{type}-{bookId}`.
    public var description: String { "\(type.rawValue)-\(bookId)" }

    public static func < (lhs: BookID, rhs: BookID) -> Bool { lhs.description < rhs.description }

    /// Whether `byte` may appear in a book id: `A–Z a–z 0–9 . _ -`.
    static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default: false
        }
    }

    /// Why `bookId` is not acceptable, or `nil` when it is.
    static func problem(with bookId: String) -> String? {
        if bookId.isEmpty { return "the book id is empty" }
        if bookId.utf8.count > maxLength { return "the book id is longer than \(maxLength) characters" }
        if !bookId.utf8.allSatisfy(isAllowed),
            let scalar = bookId.unicodeScalars.first(where: { !$0.isASCII || !isAllowed(UInt8($0.value)) })
        {
            return "'\(scalar.escaped(asASCII: true))' is not allowed; use only A-Z a-z 0-9 . _ -"
        }
        if bookId.utf8.first == UInt8(ascii: ".") { return "the book id must not start with '.'" }
        if zip(bookId.utf8, bookId.utf8.dropFirst()).contains(where: { $0 == UInt8(ascii: ".") && $1 == UInt8(ascii: ".") }) {
            return "the book id must not contain '..'"
        }
        return nil
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let string = try container.decode(String.self)
        do {
            try self.init(parsing: string)
        } catch {
            throw DecodingError.dataCorruptedError(in: container, debugDescription: error.description)
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}
