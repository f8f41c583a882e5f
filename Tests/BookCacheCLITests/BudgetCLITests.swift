import BookCacheTestSupport
import Foundation
import Testing

@Suite("bookcache config, pin, prune, verify, stats")
struct BudgetCLITests {
    func serving(_ body: (TestHTTPServer, String, TemporaryDirectory) async throws -> Void) async throws {
        let alice = try Fixtures.data("alice.epub")
        let files = Dictionary(uniqueKeysWithValues: (0..<6).map { ("b\($0).epub", alice) })
        try await withServerAndDirectory(files: files) { server, dir in try await body(server, dir.path("cache").path, dir) }
    }

    func bookcache(_ arguments: [String], _ cache: String, stdin: Data? = nil) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"], stdin: stdin)
    }

    /// A manifest naming `b\(i).epub` as book `b\(i)` for each `i`.
    func manifest(_ server: TestHTTPServer, _ range: some Sequence<Int>) -> Data {
        Data(range.map { "{\"url\": \"\(server.baseURL)/b\($0).epub\", \"id\": \"b\($0)\"}\n" }.joined().utf8)
    }

    @Test("config set, get, list, unset; bad keys and values are refused")
    func config() async throws {
        try await serving { _, cache, _ in
            // Sizes are echoed in their shortest exact form, decimal as `stats` counts (2G is 2GB, not 1953125KiB)
            #expect(try await bookcache(["config", "set", "max-size", "2G"], cache).stdout == "max-size = 2GB\n")
            #expect(try await bookcache(["config", "set", "max-size", "1.5GB"], cache).stdout == "max-size = 1500MB\n")
            #expect(try await bookcache(["config", "set", "max-size", "2GiB"], cache).stdout == "max-size = 2GiB\n")
            #expect(try await bookcache(["config", "set", "concurrency", "8"], cache).stdout == "concurrency = 8\n")
            #expect(try await bookcache(["config", "set", "retries", "0"], cache).stdout == "retries = 0\n")
            #expect(try await bookcache(["config", "set", "concurrency", "65"], cache).status == 64)
            #expect(try await bookcache(["config", "unset", "concurrency"], cache).status == 0)
            #expect(try await bookcache(["config", "unset", "retries"], cache).status == 0)
            #expect(try await bookcache(["config", "set", "keep", "50"], cache).status == 0)
            #expect(try await bookcache(["config", "get", "max-size"], cache).stdout == "2GiB\n")
            let list = try await bookcache(["config", "list"], cache)
            #expect(list.stdout.hasPrefix("max-size = 2GiB\nkeep = 50\nreserve = (unset)\nproxy = (unset)\n"), "\(list.stdout)")
            // A proxy's password is never printed back.
            let proxy = try await bookcache(["config", "set", "proxy", "http://me:hunter2@127.0.0.1:3128"], cache)
            #expect(proxy.stdout == "proxy = http://***@127.0.0.1:3128\n", "\(proxy.stdout)")
            #expect(try await bookcache(["config", "list"], cache).stdout.contains("hunter2") == false)
            #expect(try await bookcache(["config", "set", "limit-rate", "2MB"], cache).stdout == "limit-rate = 2MB\n")
            #expect(try await bookcache(["config", "unset", "keep"], cache).status == 0)
            let unset = try await bookcache(["config", "get", "keep"], cache)
            #expect(unset.status == 1)
            for bad in [
                ["config", "set", "colour", "red"], ["config", "set", "max-size", "lots"], ["config", "set", "keep", "-3"],
                ["config", "get", "nope"],
                ["config", "set", "proxy", "ftp://x:1"], ["config", "set", "limit-rate", "10B"],
                ["config", "set", "netrc", "relative/.netrc"],
            ] {
                let result = try await bookcache(bad, cache)
                #expect(result.status == 64, "\(bad): \(result.stderr)")
            }
        }
    }

    @Test("a settings file that cannot be read is named as the settings, not the index (kind settingsUnusable), exit 74")
    func brokenSettings() async throws {
        try await serving { server, cache, _ in
            #expect(try await bookcache(["config", "set", "max-size", "2G"], cache).status == 0)
            try Data("{ not json".utf8).write(to: URL(fileURLWithPath: cache + "/config.json"))
            let download = try await bookcache(["download", "\(server.baseURL)/b0.epub", "--json"], cache)
            #expect(download.status == 74, "\(download.stdout) \(download.stderr)")
            #expect(download.stderr.contains("the settings file") && download.stderr.contains("config.json"), "\(download.stderr)")
            #expect(!download.stderr.contains("the index"), "\(download.stderr)")
        }
    }

    @Test("a batch under a budget ends within it, least recently used evicted; pinned books stay")
    func batchUnderBudget() async throws {
        try await serving { server, cache, _ in
            let first = try await bookcache(["download", "\(server.baseURL)/b0.epub", "--id", "b0", "--pin"], cache)
            #expect(first.status == 0, "\(first.stderr)")
            let batch = try await bookcache(
                ["download", "--from", "-", "--max-size", "5KiB", "--concurrency", "1"], cache, stdin: manifest(server, 1..<6))
            #expect(batch.status == 0, "\(batch.stderr)")
            let list = try await bookcache(["list", "--json"], cache)
            let records = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
            let total = records.reduce(0) { $0 + ($1["fileSize"] as? Int ?? 0) }
            #expect(total <= 5 * 1024)
            #expect(records.contains { $0["id"] as? String == "ebook-b0" && $0["pinned"] as? Bool == true })
            #expect(records.contains { $0["id"] as? String == "ebook-b5" }, "the newest stays")
            let stats = try await bookcache(["stats"], cache)
            #expect(stats.stdout.contains("pinned: 1 book"))
        }
    }

    @Test("pin, unpin and prune with a dry run, a count and JSON")
    func pinAndPrune() async throws {
        try await serving { server, cache, _ in
            _ = try await bookcache(["download", "--from", "-", "--concurrency", "1"], cache, stdin: manifest(server, 0..<3))
            #expect(try await bookcache(["pin", "ebook-b0"], cache).stdout == "pinned ebook-b0\n")
            let missing = try await bookcache(["pin", "ebook-nope"], cache)
            #expect(missing.status == 1)
            let dry = try await bookcache(["prune", "--keep", "1", "--dry-run"], cache)
            #expect(dry.stdout.contains("would remove ebook-b1"))
            #expect(dry.stdout.contains("would remove ebook-b2"))
            #expect(dry.stdout.contains("Would free 3.3 KB from 2 books."))
            #expect(try await bookcache(["list"], cache).stdout.contains("3 books"))
            let real = try await bookcache(["prune", "--keep", "1", "--json"], cache)
            let object = try JSONSerialization.jsonObject(with: Data(real.stdout.utf8)) as? [String: Any]
            #expect((object?["removed"] as? [[String: Any]])?.count == 2)
            #expect(object?["freedBytes"] as? Int == 3260)
            #expect(try await bookcache(["unpin", "ebook-b0"], cache).status == 0)
            let all = try await bookcache(["prune", "--older-than", "0s"], cache)
            #expect(all.stdout.contains("removed ebook-b0"))
            for bad in [["prune", "--keep", "-1"], ["prune", "--max-size", "huge"], ["prune", "--older-than", "7 days"]] {
                #expect(try await bookcache(bad, cache).status == 64, "\(bad)")
            }
        }
    }

    @Test("verify reports a flipped byte, a deleted file and a stray; exit 1; --repair fixes; --redownload restores")
    func verify() async throws {
        try await serving { server, cache, _ in
            _ = try await bookcache(["download", "--from", "-", "--concurrency", "1"], cache, stdin: manifest(server, 0..<3))
            let clean = try await bookcache(["verify"], cache)
            #expect(clean.status == 0)
            #expect(clean.stdout.contains("3 books checked, 0 problems"))
            let b0 = URL(fileURLWithPath: cache + "/ebooks/b0.epub")
            var data = try Data(contentsOf: b0)
            data[100] ^= 0x40
            try data.write(to: b0)
            try FileManager.default.removeItem(atPath: cache + "/ebooks/b1.epub")
            try Data("x".utf8).write(to: URL(fileURLWithPath: cache + "/ebooks/stray.epub"))
            let broken = try await bookcache(["verify", "--json"], cache)
            #expect(broken.status == 1)
            let object = try JSONSerialization.jsonObject(with: Data(broken.stdout.utf8)) as? [String: Any]
            let kinds = (object?["problems"] as? [[String: Any]])?.compactMap { $0["kind"] as? String }
            #expect(kinds == ["changed", "missing", "stray"])
            let one = try await bookcache(["verify", "ebook-b2"], cache)
            #expect(one.status == 0, "only the named book is checked")
            let repaired = try await bookcache(["verify", "--repair", "--redownload"], cache)
            #expect(repaired.status == 0, "\(repaired.stdout) \(repaired.stderr)")
            #expect(repaired.stdout.contains("downloaded again"))
            let after = try await bookcache(["verify"], cache)
            #expect(after.status == 0, "\(after.stdout)")
            #expect(after.stdout.contains("3 books checked, 0 problems"))
        }
    }
}
