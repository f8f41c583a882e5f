import BookCacheTestSupport
import Foundation
import Testing

/// `bookcache sync` against a real calibre-web (PyPI's `calibreweb` 0.6.27, which
/// `scripts/test.sh` installs in a venv): with accounts (Basic) and with anonymous browsing, two
/// books to a page, a PDF-only and a MOBI-only book, download links without a file extension.
/// In calibre-server's suite: `calibredb` refuses to run while another calibre program does, so
/// the two servers' tests run one after another.
extension CalibreServerTests {
    /// Four EPUBs, one PDF-only book and one MOBI-only book, each added on a day of its own
    /// (the MOBI one newest).
    func makeWebLibrary(in dir: TemporaryDirectory) async throws -> URL {
        let library = dir.path("library")
        for n in 1...4 {
            let file = Fixtures.books.appendingPathComponent(["alice.epub", "pride.epub"][n % 2])
            try await CalibreServer.calibredb(
                ["add", "--duplicates", "--title", "Book \(n)", "--authors", "Author \(n)", file.path], library: library)
        }
        try await CalibreServer.calibredb(
            [
                "add", "--duplicates", "--title", "Only PDF", "--authors", "P",
                Fixtures.books.appendingPathComponent("fixture-monthly-2024-05.pdf").path,
            ],
            library: library)
        try await addOnlyMOBI(as: 6, to: library, in: dir)
        try await giveEachADay(6, in: library)
        return library
    }

    func webTitles(_ cache: String) async throws -> Set<String> {
        Set(try await ids(cache).compactMap { $0["title"] as? String })
    }

    @Test(
        "calibre-web with accounts: the newest section ('Recently added Books') is found, pages of two followed, the PDF-only book taken and the MOBI-only one skipped; one failed login at most (the first challenge), none on later requests; a wrong password says so",
        .enabled(if: CalibreWeb.isInstalled, "calibre-web is not installed; scripts/test.sh installs it in .build/calibre-web"))
    func calibreWebWithAccounts() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let library = try await makeWebLibrary(in: dir)
        try await CalibreWeb.with(library: library, admin: "Reader-Pass-1", anonymous: false, booksPerPage: 2, workDirectory: dir.url) {
            web in
            let cache = dir.path("cache").path
            let host = web.baseURL.replacingOccurrences(of: "http://", with: "")
            let synced = try await bookcache(["sync", "http://admin:Reader-Pass-1@\(host)/opds", "--first", "4"], cache)
            #expect(synced.status == 0, "\(synced.stdout)\(synced.stderr)")
            #expect(synced.stdout.contains("section: Recently added Books"), "\(synced.stdout)")
            #expect(synced.stdout.contains("4 of 4 cached (4 new, 0 already cached), 1 entry skipped"), "\(synced.stdout)")
            #expect(try await webTitles(cache) == ["Only PDF", "Book 4", "Book 3", "Book 2"])
            // One request without the login learns the scheme; every later one carries it
            let afterOne = try web.failedLogins()
            #expect(afterOne <= 1, "\(afterOne) failed logins logged")
            let again = try await bookcache(["sync", "http://admin:Reader-Pass-1@\(host)/opds", "--first", "4", "--force"], cache)
            #expect(again.status == 0)
            #expect(again.stdout.contains("4 of 4 cached (0 new, 4 already cached)"), "\(again.stdout)")
            let afterTwo = try web.failedLogins()
            #expect(afterTwo <= 2, "\(afterTwo) failed logins logged after two syncs")

            let wrong = try await bookcache(["sync", "http://admin:nope@\(host)/opds", "--first", "4", "--force"], dir.path("other").path)
            #expect(wrong.status != 0)
            #expect(wrong.stderr.contains("login"), "\(wrong.stderr)")
            #expect(!wrong.stderr.contains("nope"), "no password in messages")
        }
    }

    @Test(
        "calibre-web, anonymous browsing: the catalogue without a login; books too when the Guest may download, else a 401 that says a login is needed",
        .enabled(if: CalibreWeb.isInstalled, "calibre-web is not installed; scripts/test.sh installs it in .build/calibre-web"))
    func calibreWebAnonymous() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let library = try await makeWebLibrary(in: dir)
        try await CalibreWeb.with(
            library: library, admin: "Reader-Pass-1", anonymous: true, guestDownloads: true, booksPerPage: 2, workDirectory: dir.url
        ) { web in
            let cache = dir.path("cache").path
            let synced = try await bookcache(["sync", "\(web.baseURL)/opds", "--first", "3"], cache)
            #expect(synced.status == 0, "\(synced.stdout)\(synced.stderr)")
            #expect(try await webTitles(cache) == ["Only PDF", "Book 4", "Book 3"])
            #expect(try web.failedLogins() == 0)
        }
        // calibre-web's default: Guests browse but may not download
        try await CalibreWeb.with(library: library, admin: "Reader-Pass-1", anonymous: true, booksPerPage: 2, workDirectory: dir.url) {
            web in
            let refused = try await bookcache(["sync", "\(web.baseURL)/opds", "--first", "3"], dir.path("refused").path)
            #expect(refused.status == 69, "\(refused.stdout)\(refused.stderr)")
            #expect(refused.stdout.contains("section: Recently added Books"), "the catalogue itself was read")
            #expect(refused.stderr.contains("the server asks for a login (--user USER:PASSWORD"), "\(refused.stderr)")
        }
    }
}
