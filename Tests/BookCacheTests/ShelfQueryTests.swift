import BookCacheTestSupport
import DownloadQueue
import Foundation
import Logging
import Testing

@testable import BookCache

/// `BookCacheManager.shelf`: pages read by cursor from the index, with filters, in every order.
@Suite("Shelf pages")
struct ShelfQueryTests {
    /// A cache with `count` records put straight into its index (no files: the shelf reads only
    /// the index). Titles repeat in case-differing pairs, so the title order has ties.
    func cache(_ count: Int) async throws -> (BookCacheManager, TemporaryDirectory) {
        let dir = try TemporaryDirectory()
        let manager = BookCacheManager(configuration: .init(rootDirectory: dir.url))
        let records = try (0..<count).map(Self.record)
        try await update(dir) { transaction in
            for record in records { transaction[key: record.id] = record }
        }
        return (manager, dir)
    }

    /// The index of the cache in `dir`, as a second process would open it.
    func index(_ dir: TemporaryDirectory) -> IndexStore {
        IndexStore(layout: CacheLayout(root: dir.url), logger: Logger(label: "test"))
    }

    /// Every record in the index of the cache in `dir`.
    func all(_ dir: TemporaryDirectory) async throws -> [CachedBookMetadata] {
        let store = index(dir)
        return try await BlockingWork.run { () throws(BookCacheError) in try store.allRecords() }
    }

    /// Changes the index of the cache in `dir` in one transaction.
    func update(_ dir: TemporaryDirectory, _ change: @escaping @Sendable (IndexTransaction) -> Void) async throws {
        let store = index(dir)
        try await BlockingWork.run { () throws(BookCacheError) in try store.update { transaction in change(transaction) } }
    }

    static func record(_ n: Int) throws -> CachedBookMetadata {
        let type: BookType = n % 3 == 0 ? .magazine : .ebook
        var record = CachedBookMetadata(
            id: try BookID(type: type, bookId: String(format: "b%04d", n)),
            title: (n % 2 == 0 ? "the " : "The ") + ["Garden", "Ocean", "50% off_sale", "Émile"][n % 4] + " \(n / 8)",
            coverUrl: nil, fileUrl: "https://x/\(n).epub", localPath: "\(type.folderName)/b\(n).epub", fileSize: Int64(1000 + n % 7),
            downloadedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double(n / 3)),
            lastAccessedAt: Date(timeIntervalSince1970: 1_700_000_000 + Double((n * 7919) % 101)),
            checksum: String(repeating: "a", count: 64), format: .epub, etag: nil, lastModified: nil)
        record.authors = n % 5 == 0 ? ["Jane Austen"] : ["Mary Shelley", "Ann \(n % 4)"]
        record.pinned = n % 10 == 0
        return record
    }

    /// Every page of `query`, joined.
    func allPages(_ manager: BookCacheManager, _ query: ShelfQuery) async throws -> [CachedBookMetadata] {
        var query = query
        var books: [CachedBookMetadata] = []
        var pages = 0
        while true {
            let page = try await manager.shelf(query)
            #expect(page.books.count <= query.limit)
            books += page.books
            pages += 1
            guard let next = page.next else { break }
            #expect(page.books.count == query.limit, "only a full page has a next")
            query.after = next
            #expect(pages < 1000)
        }
        return books
    }

    @Test("every order, read page by page, is the whole filtered set in the order a sort of all records gives, ties broken by id")
    func ordersAndPaging() async throws {
        let (manager, dir) = try await cache(203)
        defer { dir.remove() }
        let all = try await all(dir)
        let expectations: [(ShelfQuery.Order, (CachedBookMetadata, CachedBookMetadata) -> Bool)] = [
            (.newest, { ($0.downloadedAt, $0.id) > ($1.downloadedAt, $1.id) }),
            (.recentlyRead, { ($0.lastAccessedAt, $0.id) > ($1.lastAccessedAt, $1.id) }),
            (.size, { ($0.fileSize, $0.id) > ($1.fileSize, $1.id) }),
            (
                .title,
                { (a, b) in
                    let (x, y) = (Self.asciiLower(a.title), Self.asciiLower(b.title))
                    return x != y ? x.lexicographicallyPrecedes(y) : a.id < b.id
                }
            ),
        ]
        for (order, before) in expectations {
            for limit in [1, 7, 50, 500] {
                let paged = try await allPages(manager, ShelfQuery(order: order, limit: limit))
                #expect(paged.map(\.id) == all.sorted(by: before).map(\.id), "\(order) by \(limit)")
            }
        }
    }

    /// SQLite's NOCASE: ASCII letters only.
    static func asciiLower(_ text: String) -> [UInt8] {
        text.utf8.map { (65...90).contains($0) ? $0 + 32 : $0 }
    }

    @Test("filters: type, pinned, an author exactly, search words in title or authors (case and accents ignored; % and _ taken literally)")
    func filters() async throws {
        let (manager, dir) = try await cache(203)
        defer { dir.remove() }
        let all = try await all(dir)
        func ids(_ query: ShelfQuery) async throws -> Set<String> { Set(try await allPages(manager, query).map(\.id)) }
        #expect(try await ids(ShelfQuery(type: .magazine, limit: 13)) == Set(all.filter { $0.bookType == .magazine }.map(\.id)))
        #expect(try await ids(ShelfQuery(pinnedOnly: true)) == Set(all.filter(\.pinned).map(\.id)))
        #expect(try await ids(ShelfQuery(author: "Jane Austen", limit: 9)) == Set(all.filter { $0.authors == ["Jane Austen"] }.map(\.id)))
        #expect(try await ids(ShelfQuery(author: "Jane")).isEmpty, "an author is matched whole")
        #expect(
            try await ids(ShelfQuery(search: "  GARDEN  shelley ", order: .title, limit: 4))
                == Set(all.filter { $0.title.lowercased().contains("garden") && $0.authors.contains("Mary Shelley") }.map(\.id)))
        #expect(try await ids(ShelfQuery(search: "50%")) == Set(all.filter { $0.title.contains("50%") }.map(\.id)))
        #expect(try await ids(ShelfQuery(search: "f_s")) == Set(all.filter { $0.title.contains("f_s") }.map(\.id)))
        #expect(try await ids(ShelfQuery(search: "%")).count == all.filter { $0.title.contains("%") }.count)
        #expect(try await ids(ShelfQuery(search: "o_a")).isEmpty, "_ is no wildcard")
        let emile = Set(all.filter { $0.title.contains("Émile") }.map(\.id))
        #expect(!emile.isEmpty)
        for spelling in ["Émile", "émile", "EMILE", "emile"] {
            #expect(try await ids(ShelfQuery(search: spelling)) == emile, "\(spelling)")
        }
        #expect(
            try await ids(ShelfQuery(type: .ebook, pinnedOnly: true, author: "Jane Austen", search: "ocean"))
                == Set(
                    all.filter { $0.bookType == .ebook && $0.pinned && $0.authors == ["Jane Austen"] && $0.title.contains("Ocean") }.map(
                        \.id)))
        let authors = try await manager.authors()
        #expect(authors.map(\.name) == ["Ann 0", "Ann 1", "Ann 2", "Ann 3", "Jane Austen", "Mary Shelley"])
        #expect(authors.first { $0.name == "Jane Austen" }?.books == all.filter { $0.authors == ["Jane Austen"] }.count)
        #expect(try await manager.authors(offset: 4, limit: 1).map(\.name) == ["Jane Austen"])
    }

    @Test("a cursor stays valid while books are added and removed: no book that was there all along is skipped or repeated")
    func cursorStability() async throws {
        let (manager, dir) = try await cache(100)
        defer { dir.remove() }
        for order in ShelfQuery.Order.allCases {
            var query = ShelfQuery(order: order, limit: 10)
            var seen: [String] = []
            var added = 1000
            let before = Set(try await all(dir).map(\.id))
            var removed: Set<String> = []
            while true {
                let page = try await manager.shelf(query)
                seen += page.books.map(\.id)
                // Between pages: a new book (anywhere in the order) and one not yet seen removed
                let new = try Self.record(added)
                let victim = before.subtracting(seen).subtracting(removed).sorted().first
                if let victim { removed.insert(victim) }
                try await update(dir) { transaction in
                    transaction[key: new.id] = new
                    if let victim { transaction[key: victim] = nil }
                }
                added += 1
                guard let next = page.next else { break }
                query.after = next
            }
            #expect(Set(seen).count == seen.count, "\(order): a book repeated")
            #expect(before.subtracting(removed).isSubset(of: Set(seen)), "\(order): a book that stayed was skipped")
            let extra = try (1000..<added).map { try Self.record($0).id }
            let restored = try removed.map { try Self.record(Int($0.dropFirst($0.hasPrefix("ebook-") ? 7 : 10))!) }
            try await update(dir) { transaction in
                for id in extra { transaction[key: id] = nil }
                for record in restored { transaction[key: record.id] = record }
            }
        }
    }

    @Test("a page that ends on a very long title (5,000 characters) still gives a cursor the next page takes")
    func longTitleCursor() async throws {
        let (manager, dir) = try await cache(4)
        defer { dir.remove() }
        var long = try Self.record(100)
        long.title = "A" + String(repeating: "é", count: 5000)
        let longTitled = long
        try await update(dir) { transaction in transaction[key: longTitled.id] = longTitled }
        let first = try await manager.shelf(ShelfQuery(order: .title, limit: 1))
        #expect(first.books.map(\.id) == [long.id])
        let next = try #require(first.next)
        let second = try await manager.shelf(ShelfQuery(order: .title, limit: 1, after: next))
        #expect(second.books.count == 1 && second.books[0].id != long.id)
    }

    @Test("a cursor of another order, or not a cursor at all, is refused with invalidArgument")
    func badCursors() async throws {
        let (manager, dir) = try await cache(20)
        defer { dir.remove() }
        let titleCursor = try #require(try await manager.shelf(ShelfQuery(order: .title, limit: 5)).next)
        let newestCursor = try #require(try await manager.shelf(ShelfQuery(order: .newest, limit: 5)).next)
        #expect(try await manager.shelf(ShelfQuery(order: .title, limit: 5, after: titleCursor)).books.count == 5)
        for (order, cursor) in [
            (ShelfQuery.Order.newest, titleCursor), (.title, newestCursor), (.size, "x"), (.newest, ""), (.newest, "W3RydWUsImEiXQ"),
            (.title, String(repeating: "A", count: 5000)),
        ] {
            let error = await #expect(throws: BookCacheError.self) { try await manager.shelf(ShelfQuery(order: order, after: cursor)) }
            #expect(error?.kind == .invalidArgument, "\(order) \(cursor.prefix(20))")
        }
        #expect(
            try await BookCacheManager(configuration: .init(rootDirectory: dir.url.appendingPathComponent("none"))).shelf(ShelfQuery())
                .books
                .isEmpty)
    }
}
