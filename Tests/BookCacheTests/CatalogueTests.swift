import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// Sync against real catalogue feeds (Feedbooks' OPDS test catalog, kept in `Fixtures/feeds`),
/// served on loopback with their hosts rewritten, and the catalogue rules each of them tests.
@Suite("Real catalogues")
struct CatalogueTests {
    let alice: Data
    let pride: Data
    init() throws {
        alice = try Fixtures.data("alice.epub")
        pride = try Fixtures.data("pride.epub")
    }

    static let feeds = Fixtures.books.deletingLastPathComponent().appendingPathComponent("feeds/feedbooks-opds-test-catalog")

    /// Serves the Feedbooks feeds at their own paths, with every absolute link pointed at `server`,
    /// and small books at the paths the feeds link to.
    func serveFeedbooks(_ server: TestHTTPServer) throws {
        let files = [
            "catalog/root.xml", "catalog/links/new.xml", "catalog/acquisition/main.xml", "catalog/acquisition/page2.xml",
            "catalog/acquisition/sample_borrow.xml", "opds-2/navigation.json", "opds-2/home.json", "opds-2/publications.json",
        ]
        for file in files {
            var text = try String(contentsOf: Self.feeds.appendingPathComponent(file), encoding: .utf8)
            text = text.replacingOccurrences(of: "https://feedbooks.github.io", with: server.baseURL)
            text = text.replacingOccurrences(of: "http://www.feedbooks.com", with: server.baseURL)
            server.setFile(Data(text.utf8), at: "opds-test-catalog/" + file)
        }
        server.setFile(alice, at: "book/52.epub")
        server.setFile(Data("<html><body>Buy me</body></html>".utf8), at: "book/52")
        for name in ["chambrejaune", "centredelaterre", "moby"] {
            server.setFile(pride, at: "opds-test-catalog/assets/\(name)/file.epub")
        }
    }

    func url(_ server: TestHTTPServer, _ path: String) -> SyncSource {
        .url(URL(string: "\(server.baseURL)/opds-test-catalog/\(path)")!)
    }

    @Test("an acquisition feed across two pages: free EPUBs cached, samples, shops, loans and indirect links skipped, none failed")
    func acquisitionRules() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let manager = makeManager(dir)
            let report = try await manager.sync(url(server, "catalog/acquisition/main.xml"), keep: 20)
            // Entries 1–7 (acquisition, open-access) and page 2's entry 18 are books; 8–17 are not. All
            // eight link to the same file (book/52.epub): one URL is one book, within a run as across runs.
            #expect(
                report.summary == "8 of 8 cached (1 new, 7 already cached), 10 entries skipped (no free EPUB or PDF), 0 failed, 0 removed")
            #expect(Set(report.items.compactMap(\.id)).count == 1)
            #expect(report.isComplete)
            #expect(server.requestCount(for: "/opds-test-catalog/catalog/acquisition/page2.xml") == 1)
            #expect(server.requestCount(for: "/book/52") == 0, "a buy, borrow or indirect link is never fetched")
            let reasons = Dictionary(report.skippedEntries.map { ($0.title ?? "", $0.reason) }, uniquingKeysWith: { first, _ in first })
            #expect(reasons["Acquisition: Sample"] == "no free EPUB or PDF (only acquisition/sample)")
            #expect(reasons["Acquisition: Indirect good"]?.contains("indirect acquisition") == true)
            let books = try await manager.allBooks()
            #expect(books.count == 1, "one file, one book: \(books.map(\.title))")
            #expect(books.first.map { $0.id.description } == report.items.first?.id)
        }
    }

    @Test("a standalone entry document with only a sample and a borrow link: one entry, skipped")
    func entryDocument() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let report = try await makeManager(dir).sync(url(server, "catalog/acquisition/sample_borrow.xml"), keep: 5)
            #expect(report.summary == "0 of 0 cached (0 new, 0 already cached), 1 entry skipped (no free EPUB or PDF), 0 failed, 0 removed")
            #expect(report.isComplete)
        }
    }

    @Test("an XML document that is not a feed says so")
    func notAFeed() throws {
        let error = #expect(throws: BookCacheError.self) { try FeedParser().page(in: Data("<html><body>Sign in</body></html>".utf8)) }
        #expect(error?.message.contains("its root element is <html>") == true)
    }

    @Test("a next page that answers 404: the books of the pages read are synced, none removed, the run not recorded, the page reported")
    func unreadableNextPage() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            let source = url(server, "catalog/acquisition/main.xml")
            let full = try await manager.sync(source, keep: 20)
            #expect(full.inCache == 8 && full.isComplete)

            server.removeFile(at: "opds-test-catalog/catalog/acquisition/page2.xml")
            clock.advance(by: 7200)
            let partial = try await manager.sync(source, keep: 20, minInterval: 3600)
            #expect(partial.inCache == 7, "page 1's books are still synced")
            #expect(partial.unreadPages.map(\.url) == ["\(server.baseURL)/opds-test-catalog/catalog/acquisition/page2.xml"])
            #expect(partial.unreadPages.first?.failure.message.contains("404") == true, "\(partial.unreadPages)")
            #expect(!partial.isComplete)
            #expect(partial.removed.isEmpty, "a book the unread page listed is not removed")
            #expect(partial.summary.hasSuffix(", 0 failed, 0 removed, 1 page could not be read"), "\(partial.summary)")

            // Not recorded as a success: the next run, an hour after the last complete one, is not skipped.
            let next = try await manager.sync(source, keep: 20, minInterval: 3600)
            #expect(!next.skipped)
            #expect(next.unreadPages.count == 1)
        }
    }

    @Test("a catalogue answering 429 says too many requests, and when to come back (calibre-web does so for a minute after failed logins)")
    func catalogueTooManyRequests() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            server.enqueueFault(.status(429, retryAfter: "60"), for: "/opds-test-catalog/catalog/acquisition/main.xml")
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).sync(url(server, "catalog/acquisition/main.xml"), keep: 3)
            }
            #expect(
                error?.message.contains("HTTP 429; the catalogue says too many requests; try again in 60 s") == true,
                "\(error?.message ?? "")")
            #expect(error?.httpStatus == 429)
            #expect(error?.isServerBusy == true, "the command line exits 75, try again later")
        }
    }

    @Test("keep counts books only, and pages are read only until enough are found")
    func keepStopsPaging() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let report = try await makeManager(dir).sync(url(server, "catalog/acquisition/main.xml"), keep: 3)
            #expect(report.summary == "3 of 3 cached (1 new, 2 already cached), 0 failed, 0 removed", "one file under three entries")
            #expect(server.requestCount(for: "/opds-test-catalog/catalog/acquisition/page2.xml") == 0)
        }
    }

    @Test("from the navigation root: the 'New' section, then its newest-first link, lead to the books")
    func navigationRoot() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let report = try await makeManager(dir).sync(url(server, "catalog/root.xml"), keep: 2)
            #expect(report.section == "First Acquisition feed", "new.xml marks its subsection newest-first")
            #expect(report.format == "OPDS 1.2")
            #expect(report.summary == "2 of 2 cached (1 new, 1 already cached), 0 failed, 0 removed", "one file under two entries")
            #expect(server.requestCount(for: "/opds-test-catalog/catalog/links/new.xml") == 1)
        }
    }

    @Test("--section picks a section by title; an unknown one is refused with the list of sections")
    func sectionByTitle() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let manager = makeManager(dir)
            let report = try await manager.sync(url(server, "catalog/root.xml"), keep: 1, section: "first acquisition feed")
            #expect(report.section == "First Acquisition feed")
            #expect(report.inCache == 1)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.sync(url(server, "catalog/root.xml"), keep: 1, section: "Bestsellers", force: true)
            }
            #expect(error?.message.contains("has no section 'Bestsellers'") == true)
            #expect(error?.message.contains("Link: Popular") == true, "the sections are listed: \(error?.message ?? "")")
        }
    }

    @Test("OPDS 2: a navigation document's sort/new link (relative) leads to publications; WebPub is skipped")
    func opds2Navigation() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let report = try await makeManager(dir).sync(url(server, "opds-2/navigation.json"), keep: 5)
            #expect(report.section == "New Releases (Relative URI)")
            #expect(report.format == "OPDS 2.0")
            #expect(report.summary == "1 of 1 cached (1 new, 0 already cached), 1 entry skipped (no free EPUB or PDF), 0 failed, 0 removed")
            #expect(report.skippedEntries.first?.title == "Moby-Dick")
        }
    }

    @Test("OPDS 2: entries naming one identifier are one book")
    func opds2SameIdentifier() async throws {
        try await withServerAndDirectory { server, dir in
            try serveFeedbooks(server)
            let report = try await makeManager(dir).sync(url(server, "opds-2/publications.json"), keep: 5)
            #expect(report.wanted == 1)
            #expect(report.items.first?.id?.hasPrefix("ebook-fr.feedbooks.com_book_1474_voyage-au-centre-de-la-terre-") == true)
        }
    }

    @Test("a next link that leads back to a page already read ends the listing")
    func pageLoop() async throws {
        try await withServerAndDirectory(files: ["b.epub": alice]) { server, dir in
            let feed = """
                <feed xmlns="http://www.w3.org/2005/Atom"><title>Loop</title>
                <link rel="next" href="loop.xml" type="application/atom+xml;profile=opds-catalog;kind=acquisition"/>
                <entry><title>B</title><id>urn:b</id><link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="b.epub"/></entry>
                </feed>
                """
            server.setFile(Data(feed.utf8), at: "loop.xml")
            let report = try await makeManager(dir).sync(.url(URL(string: "\(server.baseURL)/loop.xml")!), keep: 10)
            #expect(report.wanted == 1)
            #expect(server.requestCount(for: "/loop.xml") == 1)
        }
    }

    // MARK: Parsing details

    @Test("format preference: EPUB first by default, PDF first when asked; an entry of neither is skipped")
    func formatPreference() throws {
        let feed = """
            <feed xmlns="http://www.w3.org/2005/Atom"><title>t</title>
            <entry><title>Both</title><id>urn:x:both</id>
              <link rel="http://opds-spec.org/acquisition" type="application/pdf" href="https://e.com/both.pdf"/>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip; charset=binary" href="https://e.com/both.epub"/>
            </entry>
            <entry><title>Mobi</title><id>urn:x:mobi</id>
              <link rel="http://opds-spec.org/acquisition" type="application/x-mobipocket-ebook" href="https://e.com/m.mobi"/>
            </entry>
            </feed>
            """
        let epubFirst = try FeedParser().page(in: Data(feed.utf8))
        #expect(epubFirst.entries.first?.request?.url.absoluteString == "https://e.com/both.epub")
        let pdfFirst = try FeedParser(formats: [.pdf, .epub]).page(in: Data(feed.utf8))
        #expect(pdfFirst.entries.first?.request?.url.absoluteString == "https://e.com/both.pdf")
        let pdfOnly = try FeedParser(formats: [.pdf]).page(in: Data(feed.utf8))
        #expect(pdfOnly.entries.first?.request != nil)
        guard case .skipped(let title, _) = epubFirst.entries.last?.outcome else {
            Issue.record("a MOBI-only entry is skipped")
            return
        }
        #expect(title == "Mobi")
    }

    @Test("xml:base and protocol-relative links resolve, from a file with no URL of its own")
    func xmlBase() throws {
        let feed = """
            <feed xmlns="http://www.w3.org/2005/Atom" xml:base="https://www.gutenberg.org/ebooks/search.opds/"><title>t</title>
            <entry><title>A</title><id>urn:a</id>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="//www.gutenberg.org/ebooks/1342.epub3.images"/>
            </entry>
            <entry xml:base="https://mirror.example/files/"><title>B</title><id>urn:b</id>
              <link rel="http://opds-spec.org/acquisition/open-access" type="application/epub+zip" href="b.epub"/>
              <link rel="http://opds-spec.org/image/thumbnail" type="image/png" href="small.png"/>
              <link rel="http://opds-spec.org/image" type="image/png" href="cover.png"/>
            </entry>
            </feed>
            """
        let page = try FeedParser().page(in: Data(feed.utf8))
        #expect(
            page.entries.map { $0.request?.url.absoluteString } == [
                "https://www.gutenberg.org/ebooks/1342.epub3.images", "https://mirror.example/files/b.epub",
            ])
        #expect(
            page.entries.last?.request?.coverURL?.absoluteString == "https://mirror.example/files/cover.png", "the cover, not the thumbnail"
        )
    }

    @Test("OPDS 2 language maps: the entry's language, else English, else the first; authors as names or objects")
    func languageMaps() throws {
        let feed = """
            {"metadata": {"title": "t"}, "publications": [
              {"metadata": {"title": {"en": "English", "fr": "Français"}, "language": "fr", "identifier": "urn:isbn:1",
                            "author": [{"name": {"de": "Autor", "fr": "Auteur"}}, "Second"]},
               "links": [{"rel": "http://opds-spec.org/acquisition/open-access", "type": "application/epub+zip", "href": "https://e.com/1.epub"}]},
              {"metadata": {"title": {"de": "Deutsch", "it": "Italiano"}, "identifier": "urn:isbn:2", "author": "Solo"},
               "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "https://e.com/2.epub"}]}
            ]}
            """
        let page = try FeedParser().page(in: Data(feed.utf8))
        #expect(page.entries.map { $0.request?.title } == ["Français", "Deutsch"])
        #expect(page.entries.map { $0.request?.authors } == [["Auteur", "Second"], ["Solo"]])
        #expect(page.entries.first?.request?.id.bookId.hasPrefix("isbn_1-") == true, "the id comes from the identifier")
    }

    @Test("a book's language, as OPDS 1 (dc:language) and OPDS 2 (metadata.language) give it; what is no language tag is dropped")
    func entryLanguage() throws {
        let atom = """
            <feed xmlns="http://www.w3.org/2005/Atom" xmlns:dc="http://purl.org/dc/terms/"><title>t</title>
            <entry><title>A</title><id>urn:a</id><dc:language> de-CH </dc:language>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="https://e.com/a.epub"/></entry>
            <entry><title>B</title><id>urn:b</id><dc:language>en"&gt;&lt;script&gt;</dc:language>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="https://e.com/b.epub"/></entry>
            <entry><title>C</title><id>urn:c</id><language>fr</language>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="https://e.com/c.epub"/></entry>
            </feed>
            """
        let page = try FeedParser().page(in: Data(atom.utf8))
        #expect(
            page.entries.map { $0.request?.language } == ["de-CH", nil, nil], "an Atom element of another namespace is not dc:language")
        let json = """
            {"metadata": {"title": "t"}, "publications": [
              {"metadata": {"title": "One", "language": ["pt-BR", "en"]},
               "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "https://e.com/1.epub"}]},
              {"metadata": {"title": "Two", "language": "x\\u0000y"},
               "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "https://e.com/2.epub"}]}
            ]}
            """
        #expect(try FeedParser().page(in: Data(json.utf8)).entries.map { $0.request?.language } == ["pt-BR", nil])
    }

    @Test("a book's publication date, as OPDS 1 (dc:issued, dc:date) and OPDS 2 (metadata.published) give it; what is no date is dropped")
    func entryPublished() throws {
        let atom = """
            <feed xmlns="http://www.w3.org/2005/Atom" xmlns:dc="http://purl.org/dc/terms/" xmlns:dce="http://purl.org/dc/elements/1.1/">
            <title>t</title>
            <entry><title>A</title><id>urn:a</id><dc:issued> 1818 </dc:issued><published>2010-01-01T00:00:00Z</published>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="https://e.com/a.epub"/></entry>
            <entry><title>B</title><id>urn:b</id><dce:date>2005-03-14T00:00:00+00:00</dce:date>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="https://e.com/b.epub"/></entry>
            <entry><title>C</title><id>urn:c</id><dc:issued>soon</dc:issued><issued>1900</issued>
              <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="https://e.com/c.epub"/></entry>
            </feed>
            """
        let page = try FeedParser().page(in: Data(atom.utf8))
        #expect(
            page.entries.map { $0.request?.published } == ["1818", "2005-03-14", nil],
            "Atom's published is the entry's, not the book's; an element of another namespace is not dc:issued")
        let json = """
            {"metadata": {"title": "t"}, "publications": [
              {"metadata": {"title": "One", "published": "1851-10-18"},
               "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "https://e.com/1.epub"}]},
              {"metadata": {"title": "Two", "published": 1851},
               "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "https://e.com/2.epub"}]}
            ]}
            """
        #expect(try FeedParser().page(in: Data(json.utf8)).entries.map { $0.request?.published } == ["1851-10-18", nil])
    }

    // MARK: Logins

    @Test("a login applies to its own origin only: another port or scheme is another host; its description hides the password")
    func loginOrigin() throws {
        let credentials = HTTPCredentials(user: "reader", password: "s3cret", for: URL(string: "http://127.0.0.1:8080/opds")!)
        #expect(credentials.applies(to: URL(string: "http://127.0.0.1:8080/get/epub/1/lib")!))
        #expect(!credentials.applies(to: URL(string: "http://127.0.0.1:8081/get/epub/1/lib")!), "another port is another host")
        #expect(!credentials.applies(to: URL(string: "https://127.0.0.1:8080/x")!))
        #expect("\(credentials)" == "reader:***@http://127.0.0.1:8080")
    }

    @Test("after a host's first Basic challenge, its login goes with each request: one request without it in a whole sync")
    func loginOncePerOrigin() async throws {
        try await withServerAndDirectory { server, dir in
            server.requireBasicAuth(user: "reader", password: "s3cret", below: "/private/")
            let names = ["a", "b", "c", "d", "e"]
            for name in names { server.setFile(name == "a" ? alice : pride, at: "private/\(name).epub") }
            let entries = names.map { name in
                """
                <entry><title>\(name)</title><id>urn:\(name)</id>
                  <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="\(name).epub"/></entry>
                """
            }
            server.setFile(
                Data(#"<feed xmlns="http://www.w3.org/2005/Atom"><title>Private</title>\#(entries.joined())</feed>"#.utf8),
                at: "private/feed.xml")
            let report = try await makeManager(dir).sync(
                .url(URL(string: "http://127.0.0.1:\(server.port)/private/feed.xml")!), keep: 5,
                credentials: HTTPCredentials(user: "reader", password: "s3cret", for: URL(string: server.baseURL)!))
            #expect(report.inCache == 5, "\(report.items)")
            let unanswered = server.requests.filter { $0.path.hasPrefix("/private/") && $0.headers["authorization"] == nil }
            #expect(unanswered.map(\.path) == ["/private/feed.xml"], "only the first request goes without the login")
            #expect(
                server.requests.filter { $0.path.hasPrefix("/private/") }.count == 7, "the feed twice (asked, answered), each book once")
        }
    }

    @Test("a catalogue behind Basic: the login is answered only when asked, only to its host; a redirect elsewhere drops it")
    func loginStaysWithItsHost() async throws {
        try await withServerAndDirectory(files: ["private/a.epub": alice, "b.epub": pride]) { server, dir in
            server.requireBasicAuth(user: "reader", password: "s3cret", below: "/private/")
            let port = server.port
            let feed = """
                <feed xmlns="http://www.w3.org/2005/Atom"><title>Private</title>
                <entry><title>Same host</title><id>urn:a</id>
                  <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="a.epub"/></entry>
                <entry><title>Other host</title><id>urn:b</id>
                  <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="http://localhost:\(port)/b.epub"/></entry>
                <entry><title>Moved</title><id>urn:c</id>
                  <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="moved.epub"/></entry>
                </feed>
                """
            server.setFile(Data(feed.utf8), at: "private/feed.xml")
            server.setFile(alice, at: "private/moved.epub")
            server.enqueueFault(.redirect(to: "http://localhost:\(port)/b.epub"), for: "/private/moved.epub")
            let manager = makeManager(dir)
            let report = try await manager.sync(.url(URL(string: "http://reader:s3cret@127.0.0.1:\(port)/private/feed.xml")!), keep: 5)
            #expect(report.summary == "3 of 3 cached (3 new, 0 already cached), 0 failed, 0 removed", "\(report.items)")

            let requests = server.requests
            #expect(requests.first { $0.path == "/private/feed.xml" }?.headers["authorization"] == nil, "never sent before the server asks")
            #expect(requests.contains { $0.path == "/private/feed.xml" && $0.headers["authorization"] != nil })
            #expect(requests.contains { $0.path == "/private/a.epub" && $0.headers["authorization"] != nil })
            let elsewhere = requests.filter { $0.path == "/b.epub" }
            #expect(elsewhere.count == 2)
            #expect(elsewhere.allSatisfy { $0.headers["authorization"] == nil }, "another host, directly or by redirect, gets no login")
            let index =
                try Data(contentsOf: dir.path("cache/index.sqlite"))
                + ((try? Data(contentsOf: dir.path("cache/index.sqlite-wal"))) ?? Data())
            #expect(!index.isEmpty)
            #expect(index.range(of: Data("s3cret".utf8)) == nil, "no password in the index")
            #expect(index.range(of: Data("127.0.0.1".utf8)) != nil, "the index holds the books' URLs, without their password")
        }
    }

    @Test("OPDS 2 groups: a group's own link and its navigation are sections; its publications count when the feed has none of its own")
    func opds2Groups() throws {
        let feed = """
            {"metadata": {"title": "Home"}, "links": [{"rel": "self", "href": "https://e.com/home.json", "type": "application/opds+json"}],
             "groups": [
               {"metadata": {"title": "Newest"}, "links": [{"rel": "self", "href": "https://e.com/new.json", "type": "application/opds+json"}],
                "publications": [{"metadata": {"title": "Fresh", "identifier": "urn:uuid:1"},
                                  "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "https://e.com/fresh.epub"}]}]},
               {"metadata": {"title": "Browse"}, "navigation": [{"href": "https://e.com/authors.json", "title": "Authors", "type": "application/opds+json"}]}
             ]}
            """
        let page = try FeedParser().page(in: Data(feed.utf8))
        #expect(page.format == .opds2)
        #expect(page.sections.map(\.title) == ["Newest", "Authors"])
        #expect(page.entries.compactMap { $0.request?.title } == ["Fresh"])
        #expect(!page.isNavigation, "its publications are books to sync")
    }
}
