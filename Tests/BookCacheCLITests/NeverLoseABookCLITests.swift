import BookCacheTestSupport
import Foundation
import Testing

/// The reproductions of "never lose or confuse a reader's book", run as a user would: the built
/// `bookcache` against the loopback server.
@Suite("bookcache never loses or confuses a book")
struct NeverLoseABookCLITests {
    func bookcache(_ arguments: [String], _ cache: String) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"])
    }

    func ids(_ cache: String) async throws -> [String] {
        let list = try await bookcache(["list", "--json"], cache)
        let records = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
        return records.compactMap { $0["id"] as? String }
    }

    @Test(
        "keep 1: a login page and a damaged book evict nothing; a book that ends cached evicts, and says so",
        arguments: [
            ["config", "set", "keep", "1"], ["config", "set", "max-size", "2KB"],
        ])
    func failedDownloadsKeepTheOfflineBook(limit: [String]) async throws {
        let alice = try Fixtures.data("alice.epub")
        let pride = try Fixtures.data("pride.epub")
        let damaged = try Data(contentsOf: Fixtures.books.appendingPathComponent("corrupt/truncated.epub"))
        try await withServerAndDirectory(files: ["alice.epub": alice, "pride.epub": pride, "damaged.epub": damaged]) { server, dir in
            let cache = dir.path("cache").path
            #expect(try await bookcache(limit, cache).status == 0)
            let first = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice"], cache)
            #expect(first.status == 0, "\(first.stderr)")

            // When: a login page and a damaged book are downloaded
            let login = try await bookcache(["download", "\(server.baseURL)/html/login", "--id", "login"], cache)
            #expect(login.status == 65)
            #expect(login.stderr.contains("not a valid book"))
            let broken = try await bookcache(["download", "\(server.baseURL)/damaged.epub", "--id", "damaged"], cache)
            #expect(broken.status == 65)
            // Then: nothing was evicted, and nothing says so
            #expect(!login.stderr.contains("evicted") && !broken.stderr.contains("evicted"))
            #expect(try await ids(cache) == ["ebook-alice"])
            #expect(FileManager.default.fileExists(atPath: cache + "/ebooks/alice.epub"))

            // When: a book ends cached, the one before it goes, in one line
            let second = try await bookcache(["download", "\(server.baseURL)/pride.epub", "--id", "pride"], cache)
            #expect(second.status == 0, "\(second.stderr)")
            #expect(
                second.stderr.contains("evicted ebook-alice (1.6 KB, least recently read) to make room for ebook-pride"), "\(second.stderr)"
            )
            #expect(try await ids(cache) == ["ebook-pride"])
            let json = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--json"], cache)
            let line = try #require(json.stdout.split(separator: "\n").first)
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect((object?["evicted"] as? [[String: Any]])?.first?["id"] as? String == "ebook-pride")
        }
    }

    @Test("two URLs ending in the same file name are two books; the same URL again is already cached")
    func sameFileNameTwoBooks() async throws {
        let alice = try Fixtures.data("alice.epub")
        let pride = try Fixtures.data("pride.epub")
        try await withServerAndDirectory(files: ["a/book.epub": alice, "b/book.epub": pride]) { server, dir in
            let cache = dir.path("cache").path
            let first = try await bookcache(["download", "\(server.baseURL)/a/book.epub"], cache)
            let second = try await bookcache(["download", "\(server.baseURL)/b/book.epub"], cache)
            #expect(first.status == 0 && second.status == 0, "\(first.stderr) \(second.stderr)")
            #expect(second.stdout.hasPrefix("cached ebook-book-"), "\(second.stdout)")
            let ids = try await ids(cache)
            #expect(ids.count == 2)
            let paths = try await ids.asyncMap {
                try await bookcache(["path", $0], cache).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let contents = try paths.map { try Data(contentsOf: URL(fileURLWithPath: $0)) }
            #expect(Set(contents) == [alice, pride])
            let again = try await bookcache(["download", "\(server.baseURL)/b/book.epub"], cache)
            #expect(again.stdout.contains("already cached"))
            #expect(server.requestCount(for: "/b/book.epub") == 1)
        }
    }

    @Test("with --id, a new signed URL for a cached book downloads nothing")
    func explicitIdIsTheBook() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            _ = try await bookcache(["download", "\(server.baseURL)/alice.epub?sig=1", "--id", "alice"], cache)
            let again = try await bookcache(["download", "\(server.baseURL)/alice.epub?sig=2", "--id", "alice"], cache)
            #expect(again.status == 0)
            #expect(again.stdout.contains("ebook-alice is already cached"))
            #expect(server.requestCount(for: "/alice.epub") == 1)
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
