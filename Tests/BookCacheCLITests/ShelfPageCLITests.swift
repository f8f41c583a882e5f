import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

/// The page as a reader's shelf: the API's pages (without a browser), and the page itself in a
/// real headless Chromium on a cache of 3,003 books made by the index benchmark's fabricator.
@Suite("bookcache serve: the shelf", .serialized, .timeLimit(.minutes(5)))
struct ShelfPageCLITests {
    typealias Service = ServiceCLITests.Service

    /// A cache of `count` fabricated books (files hard-linked to alice.epub, sidecars, a cover
    /// for every third), a minute apart, each with an author of its own.
    func fabricated(_ count: Int, in dir: TemporaryDirectory) async throws -> String {
        let cache = dir.path("cache").path
        let made = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/python3"),
            [
                Fixtures.repositoryRoot.appendingPathComponent("Benchmarks/make-index.py").path, cache, "\(count)",
                Fixtures.books.appendingPathComponent("alice.epub").path, "--sidecars", "--covers",
            ])
        try #require(made.status == 0, "\(made.stderr)")
        return cache
    }

    func ids(_ answer: ServiceCLITests.HTTPAnswer) -> [String] {
        (answer.json["books"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    @Test(
        "GET /books pages: limit, cursor, sort, search, type and status; a cursor stays good while books are cached; bad values are 400; refresh, retry, clear finished and clear all"
    )
    func apiPages() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = try await fabricated(120, in: dir)
            let service = try await Service.start(cache: cache)
            defer { service.process.send(SIGKILL) }

            // Newest first, 25 a page, while new books are cached between pages (they are newer:
            // they go before the cursor and do not shift the pages)
            var seen: [String] = []
            var after: String?
            var added = 0
            repeat {
                let answer = try await service.http("GET", "/api/v1/books?limit=25&sort=newest" + (after.map { "&after=\($0)" } ?? ""))
                #expect(answer.status == 200)
                seen += ids(answer)
                after = answer.json["next"] as? String
                let copy = "copy\(added).epub"
                server.setFile(try Data(contentsOf: Fixtures.books.appendingPathComponent("pride.epub")), at: copy)
                let job = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/\#(copy)"}"#)
                let id = try #require((job.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
                _ = try await service.http("GET", "/api/v1/jobs/\(id)?wait=30")
                added += 1
            } while after != nil
            #expect(seen.count == 120 && Set(seen).count == 120, "\(seen.count) seen")
            #expect(seen.first == "ebook-book119" && seen.last == "ebook-book0")

            // Search ('+' is a space, as forms send it), type, status, sort, and the whole listing without parameters
            #expect(
                ids(try await service.http("GET", "/api/v1/books?q=number+7&sort=title&limit=500"))
                    == [
                        "ebook-book7", "ebook-book17", "ebook-book27", "ebook-book37", "ebook-book47", "ebook-book57", "ebook-book67",
                        "ebook-book70", "ebook-book71", "ebook-book72", "ebook-book73", "ebook-book74", "ebook-book75", "ebook-book76",
                        "ebook-book77", "ebook-book78", "ebook-book79", "ebook-book87", "ebook-book97", "ebook-book107", "ebook-book117",
                    ].sorted { "Book number \($0.dropFirst(10))" < "Book number \($1.dropFirst(10))" })
            #expect(ids(try await service.http("GET", "/api/v1/books?q=author%2042")).contains("ebook-book42"))
            #expect(ids(try await service.http("GET", "/api/v1/books?type=magazine")).isEmpty)
            #expect(ids(try await service.http("GET", "/api/v1/books?status=pinned")).isEmpty)
            _ = try await service.http("PUT", "/api/v1/books/ebook-book5/pin")
            #expect(ids(try await service.http("GET", "/api/v1/books?status=pinned")) == ["ebook-book5"])
            #expect(ids(try await service.http("GET", "/api/v1/books?sort=size&limit=1")).count == 1)
            let whole = try await service.http("GET", "/api/v1/books")
            #expect(ids(whole).count == 120 + added && whole.json["next"] == nil)
            for bad in [
                "limit=0", "limit=501", "limit=x", "sort=bogus", "type=book", "status=gone", "after=garbage", "q=a%00b", "q=%zz",
                "after=" + String(repeating: "A", count: 2000),
            ] {
                let answer = try await service.http("GET", "/api/v1/books?\(bad)")
                #expect(answer.status == 400, "\(bad.prefix(30)): \(answer.status)")
            }

            // A book's file is named after its title; its cover is served; a book without one is 404
            let file = try await service.http("HEAD", "/api/v1/books/ebook-book3/file")
            #expect(
                file.headers["content-disposition"]
                    == #"attachment; filename="Book number 3.epub"; filename*=UTF-8''Book%20number%203.epub"#)
            let cover = try await service.http("HEAD", "/api/v1/books/ebook-book3/cover")
            #expect(cover.status == 200 && cover.headers["content-type"] == "image/png", "\(cover.status)")
            #expect(try await service.http("HEAD", "/api/v1/books/ebook-book4/cover").status == 404)

            // Retry a failed job: it is queued again and ends cached once the file is there
            let failing = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/later.epub"}"#)
            let failingID = try #require((failing.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            let failed = try await service.http("GET", "/api/v1/jobs/\(failingID)?wait=30")
            #expect(failed.json["state"] as? String == "failed", "\(failed.body)")
            server.setFile(try Data(contentsOf: Fixtures.books.appendingPathComponent("alice.epub")), at: "later.epub")
            let retried = try await service.http("POST", "/api/v1/jobs/\(failingID)/retry", body: "")
            #expect(retried.json["state"] as? String == "queued", "\(retried.body)")
            let ended = try await service.http("GET", "/api/v1/jobs/\(failingID)?wait=30")
            #expect(ended.json["state"] as? String == "cached", "\(ended.body)")
            #expect(try await service.http("POST", "/api/v1/jobs/0000000000000000/retry", body: "").status == 404)

            // A title of 1,000 characters (titles are cut at 1 KiB): paging by title passes the cursor made of it back whole
            let longTitle = "Aa " + String(repeating: "x", count: 1000)
            let longBook = try await ProcessRunner.run(
                "bookcache", ["download", "\(server.baseURL)/copy1.epub?long", "--title", longTitle, "--cache-dir", cache])
            #expect(longBook.status == 0, "\(longBook.stderr)")
            let firstByTitle = try await service.http("GET", "/api/v1/books?sort=title&limit=1")
            #expect((firstByTitle.json["books"] as? [[String: Any]])?.first?["title"] as? String == longTitle)
            let cursor = try #require(firstByTitle.json["next"] as? String)
            let afterLong = try await service.http("GET", "/api/v1/books?sort=title&limit=1&after=\(cursor)")
            #expect(afterLong.status == 200, "\(afterLong.body.prefix(200))")
            let opdsAfterLong = try await service.http("GET", "/opds/new?after=\(cursor)")
            #expect(opdsAfterLong.status == 400, "a title cursor is not a newest cursor")

            // Refresh (the page's button): the book is fetched again as a job and stays one book
            let copy = try #require(ids(try await service.http("GET", "/api/v1/books?q=copy0")).first)
            let fetched = server.requestCount(for: "/copy0.epub")
            let refresh = try await service.http("POST", "/api/v1/books/\(copy)/refresh", body: "")
            #expect(refresh.status == 202, "\(refresh.body)")
            let refreshJob = try #require((refresh.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            let refreshed = try await service.http("GET", "/api/v1/jobs/\(refreshJob)?wait=30")
            #expect(refreshed.json["state"] as? String == "cached", "\(refreshed.body)")
            #expect(server.requestCount(for: "/copy0.epub") > fetched, "fetched again")
            #expect(ids(try await service.http("GET", "/api/v1/books?q=copy0")) == [copy])
            #expect(try await service.http("POST", "/api/v1/books/ebook-nothing/refresh", body: "").status == 404)

            // Clear finished: every ended job is forgotten; the books stay
            let cleared = try await service.http("DELETE", "/api/v1/jobs")
            #expect(cleared.json["removed"] as? Int == added + 2, "\(cleared.body)")
            #expect((try await service.http("GET", "/api/v1/jobs").json["jobs"] as? [Any])?.isEmpty == true)
            // Clear all: every book goes
            let all = try await service.http("DELETE", "/api/v1/books")
            #expect(all.json["removed"] as? Int == 120 + added + 2, "\(all.body)")
            #expect(try await service.http("GET", "/api/v1/stats").json["totalCount"] as? Int == 0)
        }
    }

    @Test(
        "in a real Chromium, 3,003 books: the first screen shows 50 with their covers, search narrows by title and by author, the next page loads, a book's link gives its exact bytes; screenshots at phone and desktop width"
    )
    func page() async throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            Issue.record("chromium is not installed; scripts/test.sh installs it")
            return
        }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = try await fabricated(3003, in: dir)
        let service = try await Service.start(cache: cache)
        defer { service.process.send(SIGKILL) }
        let artifacts = Fixtures.repositoryRoot.appendingPathComponent(".build/test-artifacts", isDirectory: true)
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        let sha = SHA256Hasher.hex(of: try Data(contentsOf: Fixtures.books.appendingPathComponent("alice.epub")))
        let result = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/python3"),
            [
                Fixtures.repositoryRoot.appendingPathComponent("Tests/browser/shelf_check.py").path, service.loginLink, "3003", sha,
                artifacts.appendingPathComponent("shelf-phone.png").path, artifacts.appendingPathComponent("shelf-desktop.png").path,
            ])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("shelf ok"), "\(result.stdout)")
    }
}
