import BookCacheTestSupport
import Foundation
import Testing

/// `bookcache sync` of a catalogue whose later page cannot be read: what the pages read list is
/// cached, the unread page is reported (text and `--json`), and the status is the page's.
@Suite("sync with an unreadable later page")
struct PartialSyncCLITests {
    /// An OPDS 1.2 acquisition feed of `books`, with a `next` link when given.
    func feed(_ server: TestHTTPServer, books: [String], next: String?) -> Data {
        let entries = books.map { name in
            """
            <entry><title>\(name)</title><id>urn:test:\(name)</id><updated>2026-11-25T00:00:00Z</updated>
            <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="\(server.baseURL)/\(name).epub"/></entry>
            """
        }
        let nextLink =
            next.map {
                #"<link rel="next" type="application/atom+xml;profile=opds-catalog;kind=acquisition" href="\#(server.baseURL)/\#($0)"/>"#
            } ?? ""
        return Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <feed xmlns="http://www.w3.org/2005/Atom"><id>urn:test</id><title>Test</title><updated>2026-11-25T00:00:00Z</updated>
            \(nextLink)\(entries.joined())</feed>
            """.utf8)
    }

    @Test("page 2 answers 404: page 1's books cached, the page named on stderr and in --json, exit 69; again, nothing removed")
    func unreadablePage() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            server.setFile(feed(server, books: ["alice", "pride"], next: "page2.xml"), at: "page1.xml")
            let cache = dir.path("cache").path
            let text = try await ProcessRunner.run(
                "bookcache", ["sync", "\(server.baseURL)/page1.xml", "--first", "5", "--cache-dir", cache], environment: ["LANG": "C"])
            #expect(text.status == 69, "\(text.stdout)\(text.stderr)")
            #expect(text.stdout.contains("cached ebook-"), "\(text.stdout)")
            #expect(text.stderr.contains("a page of the catalogue cannot be read (\(server.baseURL)/page2.xml)"), "\(text.stderr)")
            #expect(
                text.stdout.contains("2 of 2 cached (2 new, 0 already cached), 0 failed, 0 removed, 1 page could not be read"),
                "\(text.stdout)")

            let json = try await ProcessRunner.run(
                "bookcache", ["sync", "\(server.baseURL)/page1.xml", "--first", "5", "--json", "--cache-dir", cache],
                environment: ["LANG": "C"])
            #expect(json.status == 69)
            let object = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
            let pages = try #require(object["unreadPages"] as? [[String: Any]])
            #expect(pages.first?["url"] as? String == "\(server.baseURL)/page2.xml")
            #expect(pages.first?["kind"] as? String == "downloadFailed", "\(pages)")
            #expect((pages.first?["error"] as? String)?.contains("404") == true, "\(pages)")
            #expect(object["synced"] as? Int == 2)
            #expect((object["removed"] as? [String])?.isEmpty == true)

            // Page 1 now lists only one of the two: with page 2 still unreadable, the other stays.
            server.setFile(feed(server, books: ["alice"], next: "page2.xml"), at: "page1.xml")
            let again = try await ProcessRunner.run(
                "bookcache", ["sync", "\(server.baseURL)/page1.xml", "--first", "5", "--json", "--cache-dir", cache],
                environment: ["LANG": "C"])
            let after = try #require(try JSONSerialization.jsonObject(with: Data(again.stdout.utf8)) as? [String: Any])
            #expect((after["removed"] as? [String])?.isEmpty == true, "\(after)")
            let list = try await ProcessRunner.run("bookcache", ["list", "--json", "--cache-dir", cache])
            let books = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
            #expect(books.count == 2)
        }
    }
}
