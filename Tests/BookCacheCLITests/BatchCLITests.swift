import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

@Suite("bookcache download: batches")
struct BatchCLITests {
    func serving(_ body: (TestHTTPServer, String, TemporaryDirectory) async throws -> Void) async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in try await body(server, dir.path("cache").path, dir) }
    }

    func bookcache(_ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments, stdin: stdin)
    }

    @Test("a batch mixing good and bad items caches the good ones and says what failed")
    func mixedBatch() async throws {
        try await serving { server, cache, dir in
            let manifest = """
                # two good books, one corrupt, one missing, one malformed line
                {"url": "\(server.baseURL)/alice.epub", "title": "Alice"}
                \(server.baseURL)/pride.epub
                {"url": "\(server.baseURL)/corrupt/crc-flip.epub"}
                {"url": "\(server.baseURL)/missing.epub"}
                {"url": 42}
                """
            let file = dir.path("books.jsonl")
            try Data(manifest.utf8).write(to: file)
            let result = try await bookcache(["download", "--from", file.path, "--cache-dir", cache, "--retries", "0"])
            #expect(result.status == 1)
            #expect(result.stdout.contains("2 of 5 cached, 3 failed"), "\(result.stdout)")
            #expect(result.stderr.contains("line 6: 'url' must be a string"))
            #expect(result.stderr.contains("CRC"))
            let json = try await bookcache(["download", "--from", file.path, "--cache-dir", cache, "--retries", "0", "--json"])
            let lines = json.stdout.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            let crc = lines.first { ($0["id"] as? String)?.hasPrefix("ebook-crc-flip") == true }
            #expect(crc?["kind"] as? String == "fileCorrupted")
            #expect(crc?["refusal"] as? String == "damagedEntry", "\(json.stdout)")
            #expect(result.stderr.contains("404"))
            // Lines without an id get the file name and a hash of the URL.
            let cached = try FileManager.default.contentsOfDirectory(atPath: cache + "/ebooks")
            #expect(cached.contains { $0.hasPrefix("alice-") && $0.hasSuffix(".epub") }, "\(cached)")
            #expect(cached.contains { $0.hasPrefix("pride-") && $0.hasSuffix(".epub") }, "\(cached)")
            #expect(!FileManager.default.fileExists(atPath: cache + "/ebooks/crc-flip.epub"))
        }
    }

    @Test("the cache's concurrency setting is the default when --concurrency is not given", .timeLimit(.minutes(1)))
    func concurrencySetting() async throws {
        try await serving { server, cache, _ in
            #expect(try await bookcache(["config", "set", "concurrency", "5", "--cache-dir", cache]).status == 0)
            // The server answers only once five requests are in flight together: with the default
            // of 4 the batch would never finish.
            let names = (0..<5).map { "book\($0).epub" }
            for name in names { server.setFile(try Fixtures.data("alice.epub"), at: name) }
            server.holdUntilConcurrent(5)
            let result = try await bookcache(["download"] + names.map { "\(server.baseURL)/\($0)" } + ["--cache-dir", cache])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(server.maxConcurrentRequests == 5)
        }
    }

    @Test(
        "a manifest through a named pipe (as --from <(…) gives one) is read twice from a copy: an id named again is warned of before the start and fetched once, a bad line fails in its place"
    )
    func manifestThroughAPipe() async throws {
        try await serving { server, cache, dir in
            let fifo = dir.path("manifest.fifo").path
            #expect(mkfifo(fifo, 0o600) == 0)
            let manifest = """
                {"url": "\(server.baseURL)/alice.epub", "id": "alice"}
                {"url": 42}
                {"url": "\(server.baseURL)/pride.epub", "id": "alice"}
                \(server.baseURL)/pride.epub

                """
            // The writer's open waits for the reader, as a shell's process substitution does.
            DispatchQueue.global().async {
                guard let handle = FileHandle(forWritingAtPath: fifo) else { return }
                handle.write(Data(manifest.utf8))
                try? handle.close()
            }
            let result = try await bookcache(["download", "--from", fifo, "--json", "--cache-dir", cache, "--retries", "0"])
            #expect(result.status == 64, "the bad line is a usage error: \(result.stderr)")
            #expect(result.stderr.contains("line 3: ebook-alice is also named by line 1; it is fetched once"), "\(result.stderr)")
            let objects = try result.stdout.split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            #expect(objects.last?["total"] as? Int == 3, "alice, the bad line and pride; the duplicate is not an item")
            #expect(objects.filter { $0["status"] as? String == "cached" }.count == 2)
            #expect(server.requestCount(for: "/alice.epub") == 1 && server.requestCount(for: "/pride.epub") == 1)
        }
    }

    @Test("a manifest file given as standard input is read from where the shell left it, twice, not from its start")
    func stdinFileReadFromItsOffset() async throws {
        try await serving { server, cache, dir in
            let file = dir.path("books.jsonl")
            try Data("\(server.baseURL)/missing.epub\n\(server.baseURL)/alice.epub\n".utf8).write(to: file)
            // The shell reads the first line itself, then hands the rest to bookcache.
            let bookcache = ProcessRunner.productsDirectory.appendingPathComponent("bookcache").path
            let result = try await ProcessRunner.run(
                at: URL(filePath: "/bin/sh"),
                ["-c", #"{ read -r skipped; exec "$0" download --from - --json --cache-dir "$1"; } < "$2""#, bookcache, cache, file.path])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(server.requestCount(for: "/missing.epub") == 0 && server.requestCount(for: "/alice.epub") == 1)
        }
    }

    @Test("a manifest file changed while its batch runs does not change the batch: the batch reads the copy it counted")
    func manifestChangedMeanwhile() async throws {
        try await serving { server, cache, dir in
            // The last line names pride, past what the batch reads ahead at its start (256 lines, and
            // the file 64 KiB at a time): 450 unusable lines of 600 bytes come first.
            let bad = Array(repeating: #"{"url": 42, "title": "\#(String(repeating: "x", count: 580))"}"#, count: 450)
            let text = (["\(server.baseURL)/alice.epub"] + bad + ["\(server.baseURL)/pride.epub"]).joined(separator: "\n") + "\n"
            let file = dir.path("books.jsonl")
            try Data(text.utf8).write(to: file)
            server.holdRequests(to: "/alice.epub")
            let client = try ProcessRunner.launch(
                "bookcache", ["download", "--from", file.path, "--json", "--concurrency", "1", "--cache-dir", cache])
            // The first book is at the server: the manifest was read once through. Its last line now
            // names another book, written in place.
            #expect(await server.waitForRequests(count: 1, from: client))
            let handle = try FileHandle(forUpdating: file)
            try handle.seek(toOffset: UInt64(text.utf8.count - "pride.epub\n".utf8.count))
            try handle.write(contentsOf: Data("misng".utf8))
            try handle.close()
            server.releaseHeld()
            let result = await client.wait()
            #expect(result.status == 64, "the bad lines are usage errors: \(result.stderr)")
            #expect(server.requestCount(for: "/pride.epub") == 1 && server.requestCount(for: "/misng.epub") == 0)
        }
    }

    @Test("a manifest on stdin, with --json: one object per book and a summary")
    func jsonFromStdin() async throws {
        try await serving { server, cache, _ in
            let manifest = "\(server.baseURL)/alice.epub\n{\"url\": \"\(server.baseURL)/missing.epub\", \"id\": \"gone\"}\n"
            let result = try await bookcache(
                ["download", "--from", "-", "--json", "--retries", "0", "--cache-dir", cache], stdin: Data(manifest.utf8))
            #expect(result.status == 69, "one book failed, with a 404: unavailable")
            let objects = try result.stdout.split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            #expect(objects.count == 3)
            let alice = objects.first { ($0["id"] as? String)?.hasPrefix("ebook-alice-") == true }
            #expect(alice?["status"] as? String == "cached")
            #expect(alice?["attempts"] as? Int == 1)
            #expect((alice?["path"] as? String)?.contains("/ebooks/alice-") == true)
            #expect((alice?["bytes"] as? Int ?? 0) > 0)
            let gone = objects.first { $0["id"] as? String == "ebook-gone" }
            #expect(gone?["status"] as? String == "failed")
            #expect((gone?["error"] as? String)?.contains("404") == true)
            #expect(gone?["kind"] as? String == "downloadFailed")
            #expect(alice?["kind"] is NSNull, "a cached book has no error kind")
            let summary = objects.last
            #expect(summary?["summary"] as? Bool == true)
            #expect(summary?["total"] as? Int == 2)
            #expect(summary?["cached"] as? Int == 1)
            #expect(summary?["failed"] as? Int == 1)
            #expect(result.stderr.contains("1 of 2 cached, 1 failed"))
        }
    }

    @Test("several URLs are a batch; a second run reports them already cached; duplicates are fetched once")
    func urlsAndDuplicates() async throws {
        try await serving { server, cache, _ in
            let urls = ["\(server.baseURL)/alice.epub", "\(server.baseURL)/pride.epub", "\(server.baseURL)/alice.epub"]
            let first = try await bookcache(["download"] + urls + ["--cache-dir", cache, "--concurrency", "2"])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains("2 of 2 cached, 0 failed"))
            #expect(first.stderr.contains("fetched once"))
            #expect(server.requestCount(for: "/alice.epub") == 1)
            let second = try await bookcache(["download"] + urls.prefix(2) + ["--cache-dir", cache])
            #expect(second.status == 0)
            #expect(second.stdout.contains("2 already cached"))
            #expect(server.requestCount(for: "/alice.epub") == 1)
        }
    }

    @Test("a flaky server costs only time: retries finish the batch")
    func flakyServer() async throws {
        try await serving { server, cache, _ in
            server.enqueueFault(.status(503, retryAfter: "0"), for: "/alice.epub")
            server.enqueueFault(.dropAfter(bytes: 500), for: "/pride.epub")
            let result = try await bookcache([
                "download", "\(server.baseURL)/alice.epub", "\(server.baseURL)/pride.epub", "--json", "--cache-dir", cache,
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let objects = try result.stdout.split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            #expect(objects.filter { $0["status"] as? String == "cached" }.count == 2)
            #expect(objects.filter { $0["attempts"] as? Int == 2 }.count == 2)
        }
    }

    @Test(
        "bad batch options are refused before any I/O",
        arguments: [
            ["download"],
            ["download", "URL/alice.epub", "--concurrency", "0"],
            ["download", "URL/alice.epub", "--concurrency", "-3"],
            ["download", "URL/alice.epub", "--concurrency", "99999999999999999999"],
            ["download", "URL/alice.epub", "--retries", "-1"],
            ["download", "URL/alice.epub", "URL/pride.epub", "--id", "x"],
            ["download", "--from", "/nonexistent/manifest.jsonl"],
            ["download", "URL/alice.epub", "ftp://nope/x.epub"],
        ])
    func refused(arguments: [String]) async throws {
        try await serving { server, cache, _ in
            let args = arguments.map { $0.replacingOccurrences(of: "URL/", with: "\(server.baseURL)/") } + ["--cache-dir", cache]
            let result = try await bookcache(args)
            #expect(result.status == 64, "\(args): \(result.stderr)")
            #expect(server.requests.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    @Test("an empty manifest caches nothing and succeeds")
    func emptyManifest() async throws {
        try await serving { _, cache, _ in
            let result = try await bookcache(["download", "--from", "-", "--cache-dir", cache], stdin: Data("# nothing\n\n".utf8))
            #expect(result.status == 0)
            #expect(result.stdout.contains("0 of 0 cached, 0 failed"))
        }
    }

    @Test("the next book's transfer starts while an earlier book of the batch is still being published", .timeLimit(.minutes(2)))
    func transfersDoNotWaitForPublishing() async throws {
        try await serving { server, cache, _ in
            #expect(try await bookcache(["download", "\(server.baseURL)/alice.epub", "--cache-dir", cache]).status == 0)
            // Another connection holds the index's write lock: no book can be published until it
            // commits. With one transfer at a time, pride's request can only arrive once alice's
            // body has arrived and its transfer has made way while alice waits to be published.
            let blocker = try asAnotherProcess {
                try SQLiteDatabase(path: CacheLayout(root: URL(fileURLWithPath: cache)).databaseFile.path)
            }
            try asAnotherProcess { try blocker.execute("BEGIN IMMEDIATE") }
            let process = try ProcessRunner.launch(
                "bookcache",
                [
                    "download", "\(server.baseURL)/alice.epub?again", "\(server.baseURL)/pride.epub", "--concurrency", "1", "--cache-dir",
                    cache,
                ])
            let arrived = await server.waitForRequests(count: 3, from: process)
            #expect(arrived)
            #expect(server.requests.last?.path == "/pride.epub")
            try asAnotherProcess { try blocker.execute("COMMIT") }
            let result = await process.wait()
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("2 of 2 cached"), "\(result.stdout)")
        }
    }

    @Test("SIGTERM stops the batch, keeps the index consistent, and exits 143")
    func terminated() async throws {
        try await serving { server, cache, dir in
            // Alice downloads; pride's request is held so the run is mid-batch when signalled.
            server.holdRequests(to: "/pride.epub")
            let manifest = "\(server.baseURL)/alice.epub\n\(server.baseURL)/pride.epub\n"
            let file = dir.path("m.jsonl")
            try Data(manifest.utf8).write(to: file)
            let process = try ProcessRunner.launch(
                "bookcache", ["download", "--from", file.path, "--cache-dir", cache, "--concurrency", "1"])
            await server.waitForRequests(count: 2, from: process)
            process.send(SIGTERM)
            let result = await process.wait()
            server.releaseHeld()
            #expect(result.status == 143, "\(result.stdout) \(result.stderr)")
            #expect(result.stdout.contains("1 of 2 cached, 0 failed, 1 interrupted"), "\(result.stdout)")
            #expect(result.stderr.contains("interrupted ebook-pride-"), "the book cut off is interrupted, not failed: \(result.stderr)")
            #expect(!result.stderr.contains("error:"), "\(result.stderr)")
            let list = try await bookcache(["list", "--json", "--cache-dir", cache])
            #expect(list.status == 0)
            let records = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]
            #expect(records?.count == 1)
            #expect((records?.first?["id"] as? String)?.hasPrefix("ebook-alice-") == true)
            // The next run completes the batch
            let again = try await bookcache(["download", "--from", file.path, "--cache-dir", cache])
            #expect(again.status == 0, "\(again.stderr)")
        }
    }
}
