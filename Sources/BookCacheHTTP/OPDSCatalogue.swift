import BookCache
import DownloadQueue
import Foundation
import Hummingbird

/// The shelf as an OPDS catalogue, for e-readers (KOReader, Moon+ Reader, Thorium, Foliate…):
/// OPDS 1.2 (Atom) under `/opds`, OPDS 2.0 (JSON) under `/opds/v2`, the same feeds in both.
///
/// The root is a navigation feed (newest, e-books, magazines, by author, pinned); the others
/// are acquisition feeds of ``pageSize`` books with a `next` link (a cursor: books cached
/// meanwhile do not shift the pages), and a search by title and author (OpenSearch in 1.2, a
/// templated link in 2.0). Each book links its file (`/opds/books/{id}/file`, with `Range`) and,
/// when the cache holds one, its cover. Every list is read a page at a time from the index.
struct OPDSCatalogue: Sendable {
    let manager: BookCacheManager

    /// Books on a page of an acquisition feed.
    static let pageSize = 50
    /// Authors on a page of the authors' feed.
    static let authorsPageSize = 100

    /// OPDS 1.2 (Atom) or 2.0 (JSON).
    enum Flavour: Sendable {
        case atom
        case json

        /// Where this flavour's feeds start.
        var root: String { self == .atom ? "/opds" : "/opds/v2" }
        var acquisitionType: String {
            self == .atom ? "application/atom+xml;profile=opds-catalog;kind=acquisition" : "application/opds+json"
        }
        var navigationType: String {
            self == .atom ? "application/atom+xml;profile=opds-catalog;kind=navigation" : "application/opds+json"
        }
    }

    /// A link of a feed or an entry.
    struct Link: Sendable {
        var rel: String
        var href: String
        var type: String
        var title: String? = nil
        var length: Int64? = nil
        var templated = false
    }

    /// A navigation entry: a title and the feed it leads to.
    struct NavigationEntry: Sendable {
        var id: String
        var title: String
        var summary: String?
        /// How many books it leads to, when known.
        var count: Int? = nil
        var href: String
        var rel: String
        var type: String
    }

    /// A feed, whatever its flavour.
    struct Feed: Sendable {
        var id: String
        var title: String
        var links: [Link]
        var navigation: [NavigationEntry] = []
        var books: [CachedBookMetadata] = []
        var isNavigation: Bool { books.isEmpty && !navigation.isEmpty }
    }

    /// An acquisition feed's selection.
    enum Selection: Sendable {
        case newest
        case type(BookType)
        case pinned
        case author(String)
        case search(String)
    }

    // MARK: - Feeds

    /// The root navigation feed.
    func root(_ flavour: Flavour, strings: [String: String]) async throws -> Feed {
        let statistics = try await manager.statistics()
        func count(_ type: BookType?) -> Int {
            if let type { return statistics.byType[type]?.count ?? 0 }
            return statistics.totalCount
        }
        let pinned = statistics.pinnedCount
        func books(_ count: Int) -> String {
            fill(text(count == 1 ? "%1$@ book" : "%1$@ books", strings), "\(count)")
        }
        let root = flavour.root
        var links = [
            Link(rel: "self", href: root, type: flavour.navigationType),
            Link(rel: "start", href: root, type: flavour.navigationType),
        ]
        links += searchLinks(flavour)
        return Feed(
            id: "urn:bookcache:root", title: "BookCache", links: links,
            navigation: [
                NavigationEntry(
                    id: "urn:bookcache:new", title: text("Newest", strings), summary: books(count(nil)), count: count(nil),
                    href: root + "/new",
                    rel: "http://opds-spec.org/sort/new", type: flavour.acquisitionType),
                NavigationEntry(
                    id: "urn:bookcache:ebooks", title: text("E-books", strings), summary: books(count(.ebook)), count: count(.ebook),
                    href: root + "/ebooks",
                    rel: "subsection", type: flavour.acquisitionType),
                NavigationEntry(
                    id: "urn:bookcache:magazines", title: text("Magazines", strings), summary: books(count(.magazine)),
                    count: count(.magazine), href: root + "/magazines", rel: "subsection", type: flavour.acquisitionType),
                NavigationEntry(
                    id: "urn:bookcache:authors", title: text("By author", strings), summary: nil, href: root + "/authors",
                    rel: "subsection", type: flavour.navigationType),
                NavigationEntry(
                    id: "urn:bookcache:pinned", title: text("Pinned", strings), summary: books(pinned), count: pinned,
                    href: root + "/pinned",
                    rel: "subsection", type: flavour.acquisitionType),
            ])
    }

    /// A page of an acquisition feed, after the cursor `after` (the first page when `nil`).
    /// - Throws: ``APIError/badRequest(_:)`` for a cursor no page gave.
    func books(_ selection: Selection, after: String?, _ flavour: Flavour, strings: [String: String]) async throws -> Feed {
        var query = ShelfQuery(order: .newest, limit: Self.pageSize, after: after)
        let root = flavour.root
        let (path, parameters, id, title): (String, [(String, String)], String, String) =
            switch selection {
            case .newest: ("/new", [], "urn:bookcache:new", text("Newest", strings))
            case .type(let type):
                type == .ebook
                    ? ("/ebooks", [], "urn:bookcache:ebooks", text("E-books", strings))
                    : ("/magazines", [], "urn:bookcache:magazines", text("Magazines", strings))
            case .pinned: ("/pinned", [], "urn:bookcache:pinned", text("Pinned", strings))
            case .author(let name):
                ("/author", [("name", name)], "urn:bookcache:author:" + Self.percentEncoded(name), name)
            case .search(let terms):
                (
                    "/search", [(flavour == .atom ? "q" : "query", terms)], "urn:bookcache:search:" + Self.percentEncoded(terms),
                    fill(text("Search: %1$@", strings), terms)
                )
            }
        switch selection {
        case .newest: break
        case .type(let type): query.type = type
        case .pinned: query.pinnedOnly = true
        case .author(let name): query.author = name
        case .search(let terms): query.search = terms
        }
        let manager = self.manager
        let asked = query
        let read = await BlockingWork.run { () -> Result<ShelfPage, BookCacheError> in
            Result { () throws(BookCacheError) in try manager.blockingShelf(asked) }
        }
        let page: ShelfPage
        switch read {
        case .success(let found): page = found
        case .failure(let error) where error.kind == .invalidArgument:
            throw APIError.badRequest("\(error.message); follow the feed's next link as given")
        case .failure(let error): throw error
        }
        let selfHref = Self.href(root + path, parameters + (after.map { [("after", $0)] } ?? []))
        var links = [
            Link(rel: "self", href: selfHref, type: flavour.acquisitionType),
            Link(rel: "start", href: root, type: flavour.navigationType),
            Link(rel: "up", href: root, type: flavour.navigationType),
        ]
        if let next = page.next {
            links.append(Link(rel: "next", href: Self.href(root + path, parameters + [("after", next)]), type: flavour.acquisitionType))
        }
        links += searchLinks(flavour)
        return Feed(id: id, title: title, links: links, books: page.books)
    }

    /// A page of the authors' navigation feed, from `offset`.
    func authors(offset: Int, _ flavour: Flavour, strings: [String: String]) async throws -> Feed {
        let manager = self.manager
        // One more than a page, to tell whether another follows
        let found = try await BlockingWork.run { () throws(BookCacheError) -> [(name: String, books: Int)] in
            try manager.blockingAuthors(offset: offset, limit: Self.authorsPageSize + 1)
        }
        let root = flavour.root
        var links = [
            Link(
                rel: "self", href: Self.href(root + "/authors", offset > 0 ? [("offset", "\(offset)")] : []), type: flavour.navigationType),
            Link(rel: "start", href: root, type: flavour.navigationType),
            Link(rel: "up", href: root, type: flavour.navigationType),
        ]
        if found.count > Self.authorsPageSize {
            links.append(
                Link(
                    rel: "next", href: Self.href(root + "/authors", [("offset", "\(offset + Self.authorsPageSize)")]),
                    type: flavour.navigationType))
        }
        links += searchLinks(flavour)
        let entries = found.prefix(Self.authorsPageSize).map { author in
            NavigationEntry(
                id: "urn:bookcache:author:" + Self.percentEncoded(author.name), title: author.name,
                summary: fill(text(author.books == 1 ? "%1$@ book" : "%1$@ books", strings), "\(author.books)"), count: author.books,
                href: Self.href(root + "/author", [("name", author.name)]), rel: "subsection", type: flavour.acquisitionType)
        }
        return Feed(id: "urn:bookcache:authors", title: text("By author", strings), links: links, navigation: Array(entries))
    }

    private func searchLinks(_ flavour: Flavour) -> [Link] {
        switch flavour {
        case .atom:
            [
                Link(rel: "search", href: "/opds/search.xml", type: "application/opensearchdescription+xml"),
                Link(rel: "search", href: "/opds/search?q={searchTerms}", type: flavour.acquisitionType),
            ]
        case .json:
            [Link(rel: "search", href: "/opds/v2/search{?query}", type: flavour.acquisitionType, templated: true)]
        }
    }

    private func text(_ key: String, _ strings: [String: String]) -> String { strings[key] ?? key }

    /// `template` with its one placeholder, `%1$@`, replaced by `value`.
    private func fill(_ template: String, _ value: String) -> String { template.replacingOccurrences(of: "%1$@", with: value) }

    // MARK: - Links

    /// `path` with its query parameters, percent-encoded.
    static func href(_ path: String, _ parameters: [(String, String)]) -> String {
        guard !parameters.isEmpty else { return path }
        return path + "?" + parameters.map { "\($0.0)=\(percentEncoded($0.1))" }.joined(separator: "&")
    }

    /// Every byte but the unreserved ones percent-encoded (so `+`, `&`, `=` and `#` survive a query).
    static func percentEncoded(_ value: String) -> String {
        var encoded = ""
        for byte in value.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                encoded += String(format: "%%%02X", byte)
            }
        }
        return encoded
    }

    /// Where a book's file and cover are served.
    static func fileHref(_ book: CachedBookMetadata) -> String { "/opds/books/\(book.id)/file" }
    static func coverHref(_ book: CachedBookMetadata) -> String { "/opds/books/\(book.id)/cover" }

    static func mediaType(_ format: BookFormat) -> String { format == .pdf ? "application/pdf" : "application/epub+zip" }

    /// A cover's media type, from the extension the cover fetcher gave it after sniffing it.
    static func imageType(_ path: String) -> String? {
        switch (path as NSString).pathExtension.lowercased() {
        case "jpg", "jpeg": "image/jpeg"
        case "png": "image/png"
        case "gif": "image/gif"
        case "webp": "image/webp"
        default: nil
        }
    }
}
