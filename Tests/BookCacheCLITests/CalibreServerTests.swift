import BookCacheTestSupport
import Foundation
import Testing

/// `bookcache sync` against a real calibre-server (Debian's `calibre`, which `scripts/test.sh`
/// installs): open, with Digest and with Basic logins, three books to a page.
@Suite("bookcache sync against calibre-server and calibre-web", .serialized)
struct CalibreServerTests {
    func bookcache(_ arguments: [String], _ cache: String) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"])
    }

    /// A library of eight EPUB books (one also with a PDF) added oldest first, then one with only
    /// a MOBI, which is the newest.
    func makeLibrary(in dir: TemporaryDirectory) async throws -> URL {
        let library = dir.path("library")
        let books = ["alice.epub", "pride.epub"]
        for n in 1...8 {
            let file = Fixtures.books.appendingPathComponent(books[n % 2])
            try await CalibreServer.calibredb(
                ["add", "--duplicates", "--title", "Book \(n)", "--authors", "Author \(n)", file.path], library: library)
        }
        try await CalibreServer.calibredb(
            ["add_format", "1", Fixtures.books.appendingPathComponent("fixture-monthly-2024-05.pdf").path], library: library)
        try await addOnlyMOBI(as: 9, to: library, in: dir)
        try await giveEachADay(9, in: library)
        return library
    }

    /// Adds the book "Only MOBI", calibre's book `id`, with a MOBI file and nothing else.
    func addOnlyMOBI(as id: Int, to library: URL, in dir: TemporaryDirectory) async throws {
        try await CalibreServer.calibredb(["add", "--empty", "--title", "Only MOBI", "--authors", "M"], library: library)
        let mobi = dir.path("only.mobi")
        try Data("BOOKMOBI".utf8).write(to: mobi)
        try await CalibreServer.calibredb(["add_format", "\(id)", mobi.path], library: library)
    }

    /// Books added within one second can share a timestamp, and then "newest" has no one answer:
    /// books 1 to `count` each get a day of their own, in order.
    func giveEachADay(_ count: Int, in library: URL) async throws {
        for id in 1...count {
            try await CalibreServer.calibredb(
                ["set_metadata", "\(id)", "--field", "timestamp:2024-01-\(String(format: "%02d", id))T12:00:00+00:00"], library: library)
        }
    }

    func ids(_ cache: String) async throws -> [[String: Any]] {
        let list = try await bookcache(["list", "--json"], cache)
        return try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
    }

    @Test(
        "the root catalogue, open, with Digest and with Basic: the newest N, each its own book with its cover and title",
        .enabled(if: CalibreServer.isInstalled, "calibre-server is not installed; scripts/test.sh installs Debian's calibre"))
    func calibre() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let library = try await makeLibrary(in: dir)

        // Open: the root is a navigation feed; "By Newest" is followed, paged three at a time.
        try await CalibreServer.with(library: library, login: .open, maxOPDSItems: 3, workDirectory: dir.url) { open in
            let cache = dir.path("open").path
            let first = try await bookcache(["sync", "\(open.baseURL)/opds", "--keep", "5", "--min-interval", "4h"], cache)
            #expect(first.status == 0, "\(first.stdout) \(first.stderr)")
            #expect(first.stdout.contains("section: By Newest"), "\(first.stdout)")
            #expect(
                first.stdout.contains("5 of 5 cached (5 new, 0 already cached), 1 entry skipped (no free EPUB or PDF), 0 failed"),
                "\(first.stdout)")
            #expect(first.stdout.contains("skipped 'Only MOBI': no EPUB or PDF (only application/x-mobipocket-ebook)"), "\(first.stdout)")
            let records = try await ids(cache)
            #expect(Set(records.compactMap { $0["title"] as? String }) == ["Book 8", "Book 7", "Book 6", "Book 5", "Book 4"])
            #expect(Set(records.compactMap { $0["localPath"] as? String }).count == 5, "five files, not one")
            #expect(records.allSatisfy { ($0["coverPath"] as? String)?.hasSuffix(".cover.jpg") == true }, "\(records)")
            #expect(records.allSatisfy { ($0["authors"] as? [String])?.count == 1 })
            let again = try await bookcache(["sync", "\(open.baseURL)/opds", "--keep", "5", "--min-interval", "4h"], cache)
            #expect(again.status == 0)
            #expect(again.stdout.contains("nothing to do"), "\(again.stdout)")
            let pdfFirst = try await bookcache(["sync", "\(open.baseURL)/opds", "--keep", "8", "--format", "pdf,epub", "--force"], cache)
            #expect(pdfFirst.status == 0, "\(pdfFirst.stderr)")
            #expect(try await ids(cache).contains { $0["title"] as? String == "Book 1" && $0["format"] as? String == "pdf" })
        }

        // Digest (calibre's default): refused without a login, cached with one in the URL.
        let accessLog = dir.path("digest-access.log")
        try await CalibreServer.with(
            library: library, login: .digest(user: "reader", password: "s3cret"), maxOPDSItems: 3, workDirectory: dir.url,
            accessLog: accessLog
        ) { digest in
            let cache = dir.path("digest").path
            let refused = try await bookcache(["sync", "\(digest.baseURL)/opds", "--keep", "2"], cache)
            #expect(refused.status == 69)
            #expect(refused.stderr.contains("HTTP 401; the catalogue asks for a login"), "\(refused.stderr)")
            let url = digest.baseURL.replacingOccurrences(of: "http://", with: "http://reader:s3cret@")
            let synced = try await bookcache(["sync", "\(url)/opds", "--keep", "2"], cache)
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            #expect(synced.stdout.contains("2 of 2 cached"))
            #expect(!synced.stdout.contains("s3cret") && !synced.stderr.contains("s3cret"))
            // Digest is answered up front once the server has challenged: one download at a time,
            // only the first request of the sync goes without the login (each of n at once asks once).
            let before = try unanswered(accessLog)
            let one = try await bookcache(["sync", "\(url)/opds", "--keep", "4", "--force", "--concurrency", "1"], cache)
            #expect(one.status == 0, "\(one.stdout) \(one.stderr)")
            let requests = try String(contentsOf: accessLog, encoding: .utf8).split(separator: "\n").count
            let refusals = try unanswered(accessLog) - before
            #expect(refusals == 1, "\(refusals) 401s in a sync of \(requests) requests")
            let four = try await bookcache(["sync", "\(url)/opds", "--keep", "4", "--force", "--concurrency", "4"], cache)
            #expect(four.status == 0, "\(four.stdout) \(four.stderr)")
            let atOnce = try unanswered(accessLog) - before - refusals
            #expect((1...4).contains(atOnce), "\(atOnce) 401s with 4 downloads at once")
            let list = try await bookcache(["list", "--json"], cache)
            #expect(!list.stdout.contains("s3cret"), "no password in the index")
            let wrong = try await bookcache(["sync", "\(digest.baseURL)/opds", "--user", "reader:nope", "--keep", "2", "--force"], cache)
            #expect(wrong.stderr.contains("the login was refused"), "\(wrong.stderr)")
        }

        // Basic, with --user.
        try await CalibreServer.with(
            library: library, login: .basic(user: "reader", password: "s3cret"), maxOPDSItems: 3, workDirectory: dir.url
        ) { basic in
            let cache = dir.path("basic").path
            let synced = try await bookcache(["sync", "\(basic.baseURL)/opds", "--user", "reader:s3cret", "--keep", "4"], cache)
            #expect(synced.status == 0, "\(synced.stdout) \(synced.stderr)")
            #expect(synced.stdout.contains("4 of 4 cached (4 new, 0 already cached), 1 entry skipped"), "\(synced.stdout)")
            let netrc = dir.path("netrc")
            try Data("machine 127.0.0.1 login reader password s3cret\n".utf8).write(to: netrc)
            let fromNetrc = try await bookcache(
                ["sync", "\(basic.baseURL)/opds", "--netrc-file", netrc.path, "--keep", "4", "--force"], cache)
            #expect(fromNetrc.status == 0, "\(fromNetrc.stderr)")
            #expect(fromNetrc.stdout.contains("4 of 4 cached (0 new, 4 already cached)"), "\(fromNetrc.stdout)")
        }
    }

    /// How many requests calibre-server answered with 401, by its access log.
    func unanswered(_ accessLog: URL) throws -> Int {
        try String(contentsOf: accessLog, encoding: .utf8).split(separator: "\n").filter { $0.contains("\" 401 ") }.count
    }
}
