import BookCacheTestSupport
import Foundation
import Testing

/// One URL, one book: a book's URL asked for under another id — by hand, by a sync source, by
/// another source — is the book already cached, fetched once; a source that drops it removes it
/// only when no other reason to keep it remains.
@Suite("one URL, one book")
struct OneURLOneBookCLITests {
    /// An OPDS 1.2 feed listing `books` (file name and the feed's own id for it).
    func feed(_ server: TestHTTPServer, _ books: [(file: String, id: String)]) -> Data {
        let entries = books.map { book in
            """
            <entry><title>\(book.file)</title><id>urn:test:\(book.id)</id><updated>2026-11-25T00:00:00Z</updated>
            <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="\(server.baseURL)/\(book.file)"/></entry>
            """
        }
        return Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <feed xmlns="http://www.w3.org/2005/Atom"><id>urn:test</id><title>Test</title><updated>2026-11-25T00:00:00Z</updated>
            \(entries.joined())</feed>
            """.utf8)
    }

    func run(_ arguments: [String], _ cache: String) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache])
    }

    func books(_ cache: String) async throws -> [[String: Any]] {
        let list = try await run(["list", "--json"], cache)
        return try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
    }

    @Test(
        "a book downloaded by hand and then listed by a source under the feed's id is the same book: fetched once, kept when the source drops it"
    )
    func handThenSource() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            let hand = try await run(["download", "\(server.baseURL)/alice.epub", "--json"], cache)
            try #require(hand.status == 0, "\(hand.stderr)")
            let handID = try #require(try await books(cache).first?["id"] as? String)

            server.setFile(feed(server, [("alice.epub", "alice-in-feed")]), at: "feed.xml")
            let sync = try await run(["sync", "\(server.baseURL)/feed.xml", "--first", "5", "--json"], cache)
            #expect(sync.status == 0, "\(sync.stdout)\(sync.stderr)")
            let report = try #require(try JSONSerialization.jsonObject(with: Data(sync.stdout.utf8)) as? [String: Any])
            let items = try #require(report["items"] as? [[String: Any]])
            #expect(items.first?["id"] as? String == handID, "\(items)")
            #expect(items.first?["status"] as? String == "already-cached", "\(items)")
            #expect(try await books(cache).count == 1)
            #expect(server.requestCount(for: "/alice.epub") == 1, "fetched once")

            // The source drops it: the hand download keeps it
            server.setFile(feed(server, [("pride.epub", "pride")]), at: "feed.xml")
            let again = try await run(["sync", "\(server.baseURL)/feed.xml", "--first", "5", "--json"], cache)
            #expect(again.status == 0)
            let ids = Set(try await books(cache).compactMap { $0["id"] as? String })
            #expect(ids.contains(handID) && ids.count == 2, "\(ids)")
        }
    }

    @Test("two sources listing one URL under their own ids share one book; it goes only when the last source drops it")
    func twoSources() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            server.setFile(feed(server, [("pride.epub", "p-one")]), at: "one.xml")
            server.setFile(feed(server, [("pride.epub", "p-two"), ("alice.epub", "a-two")]), at: "two.xml")
            for source in ["one.xml", "two.xml"] {
                let sync = try await run(["sync", "\(server.baseURL)/\(source)", "--first", "5"], cache)
                #expect(sync.status == 0, "\(sync.stderr)")
            }
            var shelf = try await books(cache)
            #expect(shelf.count == 2, "\(shelf.map { $0["id"] ?? "" })")
            #expect(server.requestCount(for: "/pride.epub") == 1)
            let pride = try #require(shelf.first { ($0["fileUrl"] as? String)?.hasSuffix("/pride.epub") == true })
            #expect(Set(pride["syncSources"] as? [String] ?? []) == ["\(server.baseURL)/one.xml", "\(server.baseURL)/two.xml"])

            // Source one drops it: source two still keeps it
            server.setFile(feed(server, []), at: "one.xml")
            #expect(try await run(["sync", "\(server.baseURL)/one.xml", "--first", "5"], cache).status == 0)
            shelf = try await books(cache)
            #expect(shelf.contains { ($0["fileUrl"] as? String)?.hasSuffix("/pride.epub") == true }, "kept by source two")
            // Source two drops it: it goes
            server.setFile(feed(server, [("alice.epub", "a-two")]), at: "two.xml")
            #expect(try await run(["sync", "\(server.baseURL)/two.xml", "--first", "5"], cache).status == 0)
            shelf = try await books(cache)
            #expect(!shelf.contains { ($0["fileUrl"] as? String)?.hasSuffix("/pride.epub") == true }, "no reason left")
        }
    }

    @Test(
        "a book a source brought, downloaded by hand (its URL, no id given), is that book and becomes the user's; a given id is a book of its own"
    )
    func sourceThenHand() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            server.setFile(feed(server, [("alice.epub", "a-feed")]), at: "feed.xml")
            #expect(try await run(["sync", "\(server.baseURL)/feed.xml", "--first", "5"], cache).status == 0)
            let hand = try await run(["download", "\(server.baseURL)/alice.epub"], cache)
            #expect(hand.status == 0, "\(hand.stderr)")
            #expect(server.requestCount(for: "/alice.epub") == 1)
            let shelf = try await books(cache)
            #expect(shelf.count == 1)
            let sources = shelf.first?["syncSources"] as? [String]
            #expect(sources == nil || sources == [], "the user's now: \(sources ?? [])")
            // The source drops it: it stays
            server.setFile(feed(server, []), at: "feed.xml")
            #expect(try await run(["sync", "\(server.baseURL)/feed.xml", "--first", "5"], cache).status == 0)
            #expect(try await books(cache).count == 1)
            // The same URL under an id the user gives is a book of its own (the caller named it)
            #expect(try await run(["download", "\(server.baseURL)/alice.epub", "--id", "my-copy"], cache).status == 0)
            #expect(try await books(cache).count == 2)
        }
    }
}
