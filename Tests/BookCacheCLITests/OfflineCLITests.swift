import BookCacheTestSupport
import Foundation
import Testing

@Suite("bookcache open, check, refresh, sync")
struct OfflineCLITests {
    func bookcache(_ arguments: [String], _ cache: String, stdin: Data? = nil) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"], stdin: stdin)
    }

    @Test("open, check, list status, refresh — and open with the server gone")
    func offlineRoundTrip() async throws {
        let alice = try Fixtures.data("alice.epub")
        let pride = try Fixtures.data("pride.epub")
        let server = TestHTTPServer()
        server.setFile(alice, at: "alice.epub")
        try await server.start()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache").path

        let opened = try await bookcache(["open", "\(server.baseURL)/alice.epub", "--id", "alice"], cache)
        #expect(opened.status == 0, "\(opened.stderr)")
        #expect(opened.stdout == cache + "/ebooks/alice.epub\n")
        let fresh = try await bookcache(["check"], cache)
        #expect(fresh.stdout.contains("fresh: ebook-alice"))
        server.setFile(pride, at: "alice.epub")
        let stale = try await bookcache(["check", "ebook-alice"], cache)
        #expect(stale.stdout.contains("outdated: ebook-alice"))
        #expect(try await bookcache(["list"], cache).stdout.contains("outdated"))
        let json = try await bookcache(["list", "--json"], cache)
        #expect(json.stdout.contains("\"status\" : \"outdated\""))
        let refreshed = try await bookcache(["refresh", "--outdated"], cache)
        #expect(refreshed.status == 0, "\(refreshed.stderr)")
        #expect(refreshed.stdout.contains("1 of 1 refreshed, 0 failed"))
        #expect(try Data(contentsOf: URL(fileURLWithPath: cache + "/ebooks/alice.epub")) == pride)
        #expect(try await bookcache(["list", "--json"], cache).stdout.contains("\"status\" : \"cached\""))

        let base = server.baseURL
        try await server.shutdown()
        let offline = try await bookcache(["open", "ebook-alice"], cache)
        #expect(offline.status == 0)
        #expect(offline.stdout == cache + "/ebooks/alice.epub\n")
        let missing = try await bookcache(["open", "\(base)/other.epub"], cache)
        #expect(missing.status == 69)
        #expect(missing.stderr.contains("not cached and the network is unavailable"))
        let checkOffline = try await bookcache(["check"], cache)
        #expect(checkOffline.status == 1)
        #expect(checkOffline.stdout.contains("unknown: ebook-alice"))
    }

    @Test("sync from a manifest on stdin: summary, min-interval skip, --force, --json")
    func sync() async throws {
        let alice = try Fixtures.data("alice.epub")
        let server = TestHTTPServer()
        for i in 0..<4 { server.setFile(alice, at: "b\(i).epub") }
        try await server.start()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache").path
        let feed = dir.path("feed.jsonl")
        try Data((0..<4).map { "\(server.baseURL)/b\($0).epub" }.joined(separator: "\n").utf8).write(to: feed)

        let first = try await bookcache(["sync", feed.path, "--first", "2", "--min-interval", "4h"], cache)
        #expect(first.status == 0, "\(first.stderr)")
        #expect(first.stdout.contains("2 of 2 cached (2 new, 0 already cached), 0 failed, 0 removed"))
        let skipped = try await bookcache(["sync", feed.path, "--keep", "3", "--min-interval", "4h"], cache)
        #expect(skipped.status == 0)
        #expect(skipped.stdout.contains("nothing to do"))
        try Data((2..<4).map { "\(server.baseURL)/b\($0).epub" }.joined(separator: "\n").utf8).write(to: feed)
        let forced = try await bookcache(["sync", feed.path, "--keep", "2", "--min-interval", "4h", "--force", "--json"], cache)
        let object = try JSONSerialization.jsonObject(with: Data(forced.stdout.utf8)) as? [String: Any]
        #expect(object?["synced"] as? Int == 2)
        let removed = (object?["removed"] as? [String])?.sorted() ?? []
        #expect(removed.count == 2 && removed[0].hasPrefix("ebook-b0-") && removed[1].hasPrefix("ebook-b1-"), "\(removed)")
        // A wanted book the server no longer has: the item carries its kind, and the exit status is 69
        try Data("\(server.baseURL)/gone.epub\n".utf8).write(to: feed)
        let missing = try await bookcache(["sync", feed.path, "--keep", "1", "--force", "--json"], cache)
        #expect(missing.status == 69, "\(missing.stderr)")
        let report = try JSONSerialization.jsonObject(with: Data(missing.stdout.utf8)) as? [String: Any]
        let item = (report?["items"] as? [[String: Any]])?.first
        #expect(item?["status"] as? String == "failed")
        #expect(item?["kind"] as? String == "downloadFailed", "\(missing.stdout)")
        for bad in [
            ["sync", feed.path, "--keep", "-1"], ["sync", "/nope.jsonl", "--keep", "1"],
            ["sync", feed.path, "--keep", "1", "--min-interval", "soon"],
        ] {
            #expect(try await bookcache(bad, cache).status == 64, "\(bad)")
        }
        try await server.shutdown()
    }
}
