import Foundation

/// One page of the cached books, filtered and sorted by the index: what a shelf, a catalogue
/// feed or an app's list shows a screenful at a time, at any size of cache.
///
/// Pages are read with a cursor, not an offset: ``ShelfPage/next`` names the last book of a page,
/// and the next page starts after it in the query's order, so books cached or removed meanwhile
/// neither repeat a book nor skip one that was there all along.
///
/// ```swift
/// var query = ShelfQuery(order: .newest, limit: 50)
/// query.search = "austen"
/// let first = try await manager.shelf(query)
/// query.after = first.next
/// let second = try await manager.shelf(query)
/// ```
public struct ShelfQuery: Sendable, Hashable {
    /// The order of a shelf's books; every order ends ties by id, so it is total.
    public enum Order: String, Sendable, Hashable, CaseIterable {
        /// Most recently cached first.
        case newest
        /// Most recently opened (or asked for) first.
        case recentlyRead
        /// By title, A to Z, ignoring ASCII case.
        case title
        /// Largest first.
        case size
    }

    /// Only books of this type; all types when `nil`.
    public var type: BookType?
    /// Only pinned books.
    public var pinnedOnly: Bool
    /// Only books a check found outdated (the server has a newer copy).
    public var outdatedOnly = false
    /// Only books with this author, exactly as the catalogue named them.
    public var author: String?
    /// Words every one of which appears in the title or an author's name, ignoring case and
    /// accents ("emile" finds "Émile"); no filter when `nil` or blank. At most ``maxSearchWords`` words are used.
    public var search: String?
    /// The order.
    public var order: Order
    /// The most books on a page, 1 to ``maxLimit``.
    public var limit: Int
    /// Where the page starts: the ``ShelfPage/next`` of the page before, or `nil` for the first.
    public var after: String?

    /// The most books one page holds.
    public static let maxLimit = 500
    /// The most search words used; more are ignored.
    public static let maxSearchWords = 8
    /// The longest cursor taken: a title-order cursor carries the whole title (base64 of its
    /// JSON), so a long title makes a long cursor.
    package static let maxCursorBytes = 64 << 10

    /// Creates a query.
    /// - Parameters:
    ///   - type: Only books of this type; all when `nil`.
    ///   - pinnedOnly: Only pinned books.
    ///   - author: Only books with this author.
    ///   - search: Words to find in titles and authors.
    ///   - order: The order.
    ///   - limit: The most books on a page (clamped to 1...``maxLimit``).
    ///   - after: The cursor of the previous page, or `nil`.
    public init(
        type: BookType? = nil, pinnedOnly: Bool = false, author: String? = nil, search: String? = nil, order: Order = .newest,
        limit: Int = 50, after: String? = nil
    ) {
        self.type = type
        self.pinnedOnly = pinnedOnly
        self.author = author
        self.search = search
        self.order = order
        self.limit = min(max(limit, 1), Self.maxLimit)
        self.after = after
    }

    /// The search's words, at most ``maxSearchWords``.
    var searchWords: [String] {
        guard let search else { return [] }
        return search.split(whereSeparator: { $0.isWhitespace }).prefix(Self.maxSearchWords).map(String.init)
    }
}

/// A page of books a ``ShelfQuery`` found.
public struct ShelfPage: Sendable, Hashable {
    /// The books, in the query's order.
    public var books: [CachedBookMetadata]
    /// The cursor of the next page (set it as the next query's ``ShelfQuery/after``); `nil` when
    /// this page is the last.
    public var next: String?
}

/// A cursor: the sort key and id of the last book of a page, written so it survives a URL's
/// query string (base64url of a JSON pair).
struct ShelfCursor: Equatable {
    enum Key: Equatable {
        case number(Double)
        case text(String)
    }

    var key: Key
    var id: String

    init(key: Key, id: String) {
        self.key = key
        self.id = id
    }

    /// The cursor of `book`'s place in `order`.
    init(after book: CachedBookMetadata, in order: ShelfQuery.Order) {
        switch order {
        case .newest: key = .number(book.downloadedAt.timeIntervalSince1970)
        case .recentlyRead: key = .number(book.lastAccessedAt.timeIntervalSince1970)
        case .title: key = .text(book.title)
        case .size: key = .number(Double(book.fileSize))
        }
        id = book.id
    }

    var encoded: String {
        let data: Data
        do {
            data =
                switch key {
                case .number(let value): try JSONEncoder().encode(NumberPair(key: value, id: id))
                case .text(let value): try JSONEncoder().encode([value, id])
                }
        } catch {
            // A Double that is not finite cannot come from the index's columns
            preconditionFailure("a shelf cursor could not be encoded: \(error)")
        }
        return data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Reads a cursor; `nil` when `text` is not one this type wrote for `order`.
    init?(_ text: String, for order: ShelfQuery.Order) {
        guard text.utf8.count <= ShelfQuery.maxCursorBytes else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.utf8.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64) else { return nil }
        if order == .title {
            guard let pair = try? JSONDecoder().decode([String].self, from: data), pair.count == 2 else { return nil }
            key = .text(pair[0])
            id = pair[1]
        } else {
            guard let pair = try? JSONDecoder().decode(NumberPair.self, from: data) else { return nil }
            key = .number(pair.key)
            id = pair.id
        }
    }

    /// `[number, id]` in JSON.
    private struct NumberPair: Codable {
        var key: Double
        var id: String

        init(key: Double, id: String) {
            self.key = key
            self.id = id
        }

        init(from decoder: any Decoder) throws {
            var container = try decoder.unkeyedContainer()
            key = try container.decode(Double.self)
            id = try container.decode(String.self)
            guard container.isAtEnd else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "more than two values")
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.unkeyedContainer()
            try container.encode(key)
            try container.encode(id)
        }
    }
}
