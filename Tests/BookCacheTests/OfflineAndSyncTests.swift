import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// A tiny valid PNG header, enough for the cover check.
let pngBytes = Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array(repeating: 0, count: 64))

@Suite("Offline reading, covers, outdated detection and refresh")
struct OfflineTests {
    let alice: Data
    let pride: Data
    init() throws {
        alice = try Fixtures.data("alice.epub")
        pride = try Fixtures.data("pride.epub")
    }

    @Test("open serves a cached book with the server stopped, and makes no request")
    func openCachedOffline() async throws {
        let server = TestHTTPServer()
        server.setFile(alice, at: "alice.epub")
        try await server.start()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let manager = makeManager(dir)
        let request = try request(server, "alice.epub", id: "ebook-alice")
        _ = try await manager.download(request)
        let before = server.requests.count
        try await server.shutdown()
        let url = try await manager.open(request)
        #expect(try Data(contentsOf: url) == alice)
        #expect(try await manager.open(BookID(parsing: "ebook-alice")) == url)
        #expect(server.requests.count == before)
    }

    @Test("open of a book that is not cached, with the server down, is the typed offline error")
    func openOffline() async throws {
        let url = try await TestHTTPServer.unreachableBaseURL() + "/alice.epub"
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // A manager that would retry connection failures three times...
        let manager = makeManager(dir, retryPolicy: RetryPolicy(retries: 3))
        let error = await #expect(throws: BookCacheError.self) {
            try await manager.open(try BookDownloadRequest(url: url, id: BookID(parsing: "ebook-alice")))
        }
        #expect(error?.kind == .offline)
        // ...says offline after one attempt when a reader is waiting.
        #expect((error?.underlying as? DownloadError)?.attempts == 1)
        #expect(error?.message.contains("not cached and the network is unavailable") == true)
        let byID = await #expect(throws: BookCacheError.self) { try await makeManager(dir).open(BookID(parsing: "ebook-alice")) }
        #expect(byID?.kind == .notCached)
    }

    @Test("open downloads a book that is not cached, at high priority")
    func openDownloads() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let url = try await makeManager(dir).open(try request(server, "alice.epub", id: "ebook-alice"))
            #expect(try Data(contentsOf: url) == alice)
        }
    }

    @Test("check: 304 is fresh; a changed ETag is outdated, and status says so; errors change nothing")
    func check() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice, "pride.epub": pride]) { server, dir in
            let manager = makeManager(dir)
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            _ = try await manager.download(try request(server, "pride.epub", id: "ebook-pride"))
            var results = try await manager.check()
            #expect(results.map(\.state) == [.fresh, .fresh])
            #expect(server.requests.last?.headers["if-none-match"] != nil)
            server.setFile(pride, at: "alice.epub")  // new content, new ETag
            server.enqueueFault(.status(500), for: "/pride.epub")
            results = try await manager.check()
            #expect(results.map(\.state) == [.outdated, .unknown])
            #expect(try await manager.status(of: BookID(parsing: "ebook-alice")) == .outdated)
            #expect(try await manager.metadata(for: BookID(parsing: "ebook-pride"))?.outdated == false)
        }
    }

    @Test(
        "check cancels the body of a 200 it does not read: the connection closes at once, not after the idle timeout",
        .timeLimit(.minutes(1)))
    func checkCancelsUnreadBody() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            // An idle timeout far beyond the test's limit: only a cancelled body ends the transfer in time
            let transport = CurlTransport(configuration: .init(idleReadTimeout: .seconds(3600)))
            defer { transport.shutdown() }
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: .none),
                transport: transport)
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            // The server has a new copy, and ignores the validator: a 200 whose body stalls
            server.setFile(pride, at: "alice.epub")
            server.enqueueFault(.stall, for: "/alice.epub")
            let results = try await manager.check()
            #expect(results.map(\.state) == [.outdated])
            #expect(await server.waitForClosedConnections(count: 1), "the stalled response's connection was not closed")
        }
    }

    @Test("refresh keeps the old copy readable until the new one is valid, then swaps it in")
    func refreshSwapsAtomically() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let manager = makeManager(dir)
            let id = try BookID(parsing: "ebook-alice")
            let path = try await manager.download(try request(server, "alice.epub", id: "ebook-alice")).fileURL
            try await manager.pin(id)
            server.setFile(pride, at: "alice.epub")
            _ = try await manager.check()
            let reader = try FileHandle(forReadingFrom: path)
            server.holdRequests(to: "/alice.epub")
            let refresh = Task { try await manager.refresh(outdatedOnly: true) }
            await server.waitForRequests(count: server.requests.count + 1)
            // Mid-refresh: the old copy is where it was, whole.
            #expect(try Data(contentsOf: path) == alice)
            #expect(try await manager.status(of: id) == .downloading(progress: nil))
            server.releaseHeld()
            let results = try await refresh.value
            #expect(results.count == 1)
            #expect(try Data(contentsOf: path) == pride)
            // A reader that had the old file open still reads the old bytes.
            #expect(try reader.readToEnd() == alice)
            let record = try await manager.metadata(for: id)
            #expect(record?.outdated == false)
            #expect(record?.pinned == true)
        }
    }

    @Test("a cover is cached beside the book, listed, and removed with it; a failed cover never fails the book")
    func covers() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice, "pride.epub": pride, "cover.png": pngBytes]) { server, dir in
            let manager = makeManager(dir)
            let withCover = try BookDownloadRequest(
                url: "\(server.baseURL)/alice.epub", id: BookID(parsing: "ebook-alice"), coverURL: "\(server.baseURL)/cover.png")
            _ = try await manager.download(withCover)
            await manager.waitForBackgroundWork()
            let record = try await manager.metadata(for: BookID(parsing: "ebook-alice"))
            #expect(record?.coverPath == "ebooks/alice.cover.png")
            #expect(FileManager.default.fileExists(atPath: dir.path("cache/ebooks/alice.cover.png").path))
            let broken = try BookDownloadRequest(
                url: "\(server.baseURL)/pride.epub", id: BookID(parsing: "ebook-pride"), coverURL: "\(server.baseURL)/html/cover")
            _ = try await manager.download(broken)
            await manager.waitForBackgroundWork()
            #expect(try await manager.metadata(for: BookID(parsing: "ebook-pride"))?.coverPath == nil)
            #expect(try await manager.verify().isClean)
            #expect(try await manager.delete(BookID(parsing: "ebook-alice")))
            #expect(!FileManager.default.fileExists(atPath: dir.path("cache/ebooks/alice.cover.png").path))
        }
    }
}

@Suite("Sync from manifests and OPDS feeds")
struct SyncTests {
    let alice: Data
    init() throws { alice = try Fixtures.data("alice.epub") }

    func files(_ count: Int) -> [String: Data] {
        Dictionary(uniqueKeysWithValues: (0..<count).map { ("b\($0).epub", alice) })
    }

    func manifest(_ server: TestHTTPServer, _ range: some Sequence<Int>) -> SyncSource {
        let text = range.map { "{\"url\": \"\(server.baseURL)/b\($0).epub\", \"id\": \"b\($0)\"}" }.joined(separator: "\n")
        return .data(Data(text.utf8), name: "feed")
    }

    @Test("keep N: caches the first N, removes earlier sync-only books, never manual or pinned ones")
    func keepN() async throws {
        try await withServerAndDirectory(files: files(6)) { server, dir in
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            // A book the user downloaded, which the feed also lists
            _ = try await manager.download(try request(server, "b1.epub", id: "ebook-b1"))
            var report = try await manager.sync(manifest(server, 0..<6), keep: 3)
            #expect(report.summary == "3 of 3 cached (2 new, 1 already cached), 0 failed, 0 removed")
            try await manager.pin(BookID(parsing: "ebook-b2"))
            // The feed moves on: now b3, b4, b5 are first
            report = try await manager.sync(manifest(server, 3..<6), keep: 3, force: true)
            #expect(report.summary == "3 of 3 cached (3 new, 0 already cached), 0 failed, 1 removed")
            #expect(report.removed == ["ebook-b0"])
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b1", "ebook-b2", "ebook-b3", "ebook-b4", "ebook-b5"])
        }
    }

    @Test("within the minimum interval nothing is done, unless forced")
    func minInterval() async throws {
        try await withServerAndDirectory(files: files(2)) { server, dir in
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            _ = try await manager.sync(manifest(server, 0..<1), keep: 5, minInterval: 4 * 3600)
            clock.advance(by: 3600)
            let skipped = try await manager.sync(manifest(server, 0..<2), keep: 5, minInterval: 4 * 3600)
            #expect(skipped.skipped)
            #expect(try await manager.allBooks().count == 1)
            let forced = try await manager.sync(manifest(server, 0..<2), keep: 5, minInterval: 4 * 3600, force: true)
            #expect(!forced.skipped)
            #expect(try await manager.allBooks().count == 2)
            clock.advance(by: 5 * 3600)
            #expect(try await !manager.sync(manifest(server, 0..<2), keep: 5, minInterval: 4 * 3600).skipped)
        }
    }

    @Test("a failing entry does not stop the others, and the sync is not recorded as successful")
    func failingEntry() async throws {
        try await withServerAndDirectory(files: files(2)) { server, dir in
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            let text = "\(server.baseURL)/b0.epub\n\(server.baseURL)/missing.epub\n{\"url\": 3}\n\(server.baseURL)/b1.epub\n"
            let report = try await manager.sync(.data(Data(text.utf8), name: "mixed"), keep: 10, minInterval: 3600)
            #expect(report.summary == "2 of 4 cached (2 new, 0 already cached), 2 failed, 0 removed")
            #expect(!report.isComplete)
            let again = try await manager.sync(.data(Data(text.utf8), name: "mixed"), keep: 10, minInterval: 3600)
            #expect(!again.skipped, "a sync with failures is retried")
        }
    }

    @Test("an OPDS 1.2 Atom feed, served over HTTP with relative links")
    func opds1() async throws {
        let feed = """
            <?xml version="1.0" encoding="UTF-8"?>
            <feed xmlns="http://www.w3.org/2005/Atom" xmlns:opds="http://opds-spec.org/2010/catalog">
              <id>urn:feed</id><title>New books</title>
              <entry>
                <title>Zero</title><id>urn:b0</id>
                <link rel="http://opds-spec.org/image" href="cover.png" type="image/png"/>
                <link rel="http://opds-spec.org/acquisition/open-access" href="b0.epub" type="application/epub+zip"/>
              </entry>
              <entry>
                <title>No book here</title><id>urn:x</id>
                <link rel="alternate" href="page.html" type="text/html"/>
              </entry>
              <entry>
                <title>One</title><id>urn:b1</id>
                <link rel="http://opds-spec.org/acquisition" href="/b1.epub" type="application/epub+zip;profile=x"/>
              </entry>
            </feed>
            """
        var files = files(2)
        files["feed.xml"] = Data(feed.utf8)
        files["cover.png"] = pngBytes
        try await withServerAndDirectory(files: files) { server, dir in
            let manager = makeManager(dir)
            let report = try await manager.sync(.url(URL(string: "\(server.baseURL)/feed.xml")!), keep: 3)
            await manager.waitForBackgroundWork()
            #expect(report.format == "OPDS 1.2")
            // The entry without a book is skipped, not failed, and takes no slot.
            #expect(report.summary == "2 of 2 cached (2 new, 0 already cached), 1 entry skipped (no free EPUB or PDF), 0 failed, 0 removed")
            #expect(report.isComplete)
            let books = try await manager.allBooks()
            #expect(books.map(\.title) == ["Zero", "One"])
            // Ids come from the entries' <id>s: urn:b0 is made safe and given a hash.
            #expect(books.first?.id.hasPrefix("ebook-b0-") == true)
            #expect(books.first.map { $0.coverPath == "ebooks/\($0.bookId).cover.png" } == true)
        }
    }

    @Test("an OPDS 2.0 feed")
    func opds2() async throws {
        try await withServerAndDirectory(files: files(3)) { server, dir in
            let feed = """
                {"metadata": {"title": "Feed"}, "publications": [
                  {"metadata": {"title": "Two"}, "links": [{"rel": "http://opds-spec.org/acquisition/open-access", "type": "application/epub+zip", "href": "\(server.baseURL)/b2.epub"}]},
                  {"metadata": {"title": "Zero"}, "links": [{"rel": ["self"], "type": "application/opds-publication+json", "href": "x"}, {"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "\(server.baseURL)/b0.epub"}]},
                  {"metadata": {"title": "One"}, "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "\(server.baseURL)/b1.epub"}]}
                ]}
                """
            let report = try await makeManager(dir).sync(.data(Data(feed.utf8), name: "opds2"), keep: 2)
            #expect(report.format == "OPDS 2.0")
            #expect(report.items.map { $0.id?.prefix("ebook-b2-".count) } == ["ebook-b2-", "ebook-b0-"])
            #expect(report.summary == "2 of 2 cached (2 new, 0 already cached), 0 failed, 0 removed")
        }
    }

    @Test("sync runs at low priority: an open asked for meanwhile is served first")
    func openBeatsSync() async throws {
        var all = files(4)
        all["wanted.epub"] = alice
        try await withServerAndDirectory(files: all) { server, dir in
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), maxConcurrentDownloads: 1, storageReserveBytes: 0, retryPolicy: .none))
            // The sync's downloads start in no set order: whichever is first is held.
            for book in 0..<4 { server.holdRequests(to: "/b\(book).epub") }
            let sync = Task { try await manager.sync(manifest(server, 0..<4), keep: 4) }
            await server.waitForRequests(count: 1)
            let open = Task { try await manager.open(try request(server, "wanted.epub", id: "ebook-wanted")) }
            // Let the open reach the queue before the held sync download lets go.
            while await manager.queuedDownloads() < 4 { await Task.yield() }
            server.releaseHeld()
            _ = try await open.value
            _ = try await sync.value
            let paths = server.requests.map(\.path)
            #expect(paths.first?.hasPrefix("/b") == true)
            #expect(paths[1] == "/wanted.epub", "\(paths)")
        }
    }

    @Test(
        "formats are detected from the content",
        arguments: [
            ("  <?xml version='1.0'?><feed/>", FeedParser.Format.opds1),
            ("{\"publications\": []}", .opds2),
            ("{\"url\": \"https://e.com/a.epub\"}\n", .manifest),
            ("https://e.com/a.epub\n", .manifest),
        ])
    func detect(text: String, format: FeedParser.Format) {
        #expect(FeedParser.detect(Data(text.utf8)) == format)
    }
}
