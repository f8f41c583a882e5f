import BookCache
import BookCacheTestSupport
import Foundation
import Testing

/// Runs the built `bookcache` binary against the loopback server and checks output and exit status.
@Suite("bookcache command line")
struct CLITests {
    func bookcache(_ arguments: [String], stdin: Data? = nil) async throws -> ProcessResult {
        try await ProcessRunner.run(
            "bookcache", arguments, environment: ["BOOKCACHE_DIR": "", "XDG_CACHE_HOME": "/nonexistent-xdg"], stdin: stdin)
    }

    func serving(_ body: (TestHTTPServer, String) async throws -> Void) async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in try await body(server, dir.path("cache").path) }
    }

    @Test("download, list, path, stats, delete: the whole round trip")
    func roundTrip() async throws {
        try await serving { server, cache in
            // When two books are downloaded
            let first = try await bookcache([
                "download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache, "--title", "Alice",
            ])
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains("cached ebook-alice"))
            #expect(first.stderr.isEmpty, "no progress noise when not on a terminal: \(first.stderr)")
            let second = try await bookcache([
                "--cache-dir", cache, "download", "\(server.baseURL)/fixture-monthly-2024-05.pdf", "--type", "magazine", "--id", "may",
            ])
            #expect(second.status == 0, "\(second.stderr)")

            // Then a second download of the same book does nothing
            let again = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache])
            #expect(again.status == 0)
            #expect(again.stdout.contains("already cached"))
            #expect(server.requestCount(for: "/alice.epub") == 1)

            // And list shows both, with a total
            let list = try await bookcache(["list", "--cache-dir", cache])
            #expect(list.status == 0)
            #expect(list.stdout.contains("ebook-alice"))
            #expect(list.stdout.contains("magazine-may"))
            #expect(list.stdout.contains("Alice"))
            #expect(list.stdout.contains("2 books"))
            let magazines = try await bookcache(["list", "--type", "magazine", "--cache-dir", cache])
            #expect(!magazines.stdout.contains("ebook-alice"))

            // And list --json is an array of records with ISO-8601 dates
            let json = try await bookcache(["list", "--json", "--cache-dir", cache])
            let records = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]]
            #expect(records?.count == 2)
            let alice = records?.first { $0["id"] as? String == "ebook-alice" }
            #expect(alice?["localPath"] as? String == "ebooks/alice.epub")
            #expect(alice?["format"] as? String == "epub")
            #expect((alice?["checksum"] as? String)?.count == 64)
            #expect(
                (alice?["downloadedAt"] as? String).flatMap { try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse($0) }
                    != nil)

            // And path prints the absolute file
            let path = try await bookcache(["path", "ebook-alice", "--cache-dir", cache])
            #expect(path.status == 0)
            #expect(path.stdout == cache + "/ebooks/alice.epub\n")

            // And stats counts per type
            let stats = try await bookcache(["stats", "--json", "--cache-dir", cache])
            let object = try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any]
            #expect(object?["totalCount"] as? Int == 2)
            #expect((object?["availableBytes"] as? Int ?? 0) > 0)
            let statsTable = try await bookcache(["stats", "--cache-dir", cache])
            #expect(statsTable.stdout.contains("free space"))

            // And delete removes one; deleting it again fails
            let delete = try await bookcache(["delete", "ebook-alice", "--cache-dir", cache])
            #expect(delete.status == 0)
            #expect(!FileManager.default.fileExists(atPath: cache + "/ebooks/alice.epub"))
            let deleteAgain = try await bookcache(["delete", "ebook-alice", "--cache-dir", cache])
            #expect(deleteAgain.status == 1)
            #expect(deleteAgain.stderr.contains("not cached"))
            let pathGone = try await bookcache(["path", "ebook-alice", "--cache-dir", cache])
            #expect(pathGone.status == 1)
            #expect(pathGone.stdout.isEmpty)
        }
    }

    @Test(
        "bad ids, URLs and checksums are refused before any I/O",
        arguments: [
            ["download", "URL/alice.epub", "--id", "../etc"],
            ["download", "URL/alice.epub", "--id", ".hidden"],
            ["download", "URL/alice.epub", "--id", "a\u{0430}"],
            ["download", "URL/alice.epub", "--type", "comic"],
            ["download", "ftp://example.com/a.epub"],
            ["download", "not a url"],
            ["download", "URL/alice.epub", "--sha256", "xyz"],
            ["download", "URL/alice.epub", "--cover-url", "file:///etc/passwd"],
            ["path", "alice"],
            ["path", "ebook-a/b"],
            ["delete", "ebook-ok", "magazine-.."],
        ])
    func refusedBeforeIO(arguments: [String]) async throws {
        try await serving { server, cache in
            let args = arguments.map { $0.replacingOccurrences(of: "URL/", with: "\(server.baseURL)/") } + ["--cache-dir", cache]
            let result = try await bookcache(args)
            #expect(result.status == 64, "\(args): \(result.stderr)")
            #expect(result.stderr.contains("Error:"))
            #expect(server.requests.isEmpty)
            #expect(!FileManager.default.fileExists(atPath: cache))
        }
    }

    @Test(
        "each corrupt fixture fails with one clear line and is not cached",
        arguments: [
            ("corrupt/crc-flip.epub", "CRC"),
            ("corrupt/truncated.epub", "truncated"),
            ("corrupt/missing-spine-item.epub", "spine"),
            ("corrupt/no-container.epub", "container.xml is missing"),
            ("corrupt/error-page.epub", "HTML page"),
            ("corrupt/truncated.pdf", "truncated"),
        ])
    func corrupt(name: String, reason: String) async throws {
        try await serving { server, cache in
            let result = try await bookcache(["download", "\(server.baseURL)/\(name)", "--cache-dir", cache])
            #expect(result.status == 65, "bad data")
            let lines = result.stderr.split(separator: "\n")
            #expect(lines.count == 1, "\(result.stderr)")
            #expect(result.stderr.hasPrefix("error: "))
            #expect(result.stderr.contains(reason))
            let list = try await bookcache(["list", "--json", "--cache-dir", cache])
            let records = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [Any]
            #expect(records?.isEmpty == true, "\(list.stdout)")
        }
    }

    @Test("a 404 and a checksum mismatch fail with their exit statuses (69, 65) and say why")
    func failures() async throws {
        try await serving { server, cache in
            let missing = try await bookcache(["download", "\(server.baseURL)/missing.epub", "--cache-dir", cache])
            #expect(missing.status == 69)
            #expect(missing.stderr.contains("404"))
            let mismatch = try await bookcache([
                "download", "\(server.baseURL)/alice.epub", "--sha256", String(repeating: "0", count: 64), "--cache-dir", cache,
            ])
            #expect(mismatch.status == 65)
            #expect(mismatch.stderr.contains("checksum mismatch"))
            let list = try await bookcache(["list", "--cache-dir", cache])
            #expect(list.stdout.contains("No books cached"))
        }
    }

    @Test("clear needs --yes without a terminal, and then empties the cache")
    func clear() async throws {
        try await serving { server, cache in
            _ = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache])
            _ = try await bookcache(["download", "\(server.baseURL)/pride.epub", "--id", "pride", "--cache-dir", cache])
            let refused = try await bookcache(["clear", "--cache-dir", cache])
            #expect(refused.status == 1)
            #expect(refused.stderr.contains("--yes"))
            #expect(FileManager.default.fileExists(atPath: cache + "/ebooks/alice.epub"))
            let cleared = try await bookcache(["clear", "--yes", "--cache-dir", cache])
            #expect(cleared.status == 0)
            #expect(cleared.stdout.contains("Removed 2 books"))
            #expect(!FileManager.default.fileExists(atPath: cache + "/ebooks/alice.epub"))
        }
    }

    @Test("the cache directory comes from BOOKCACHE_DIR when --cache-dir is absent")
    func environmentDirectory() async throws {
        try await serving { server, cache in
            let result = try await ProcessRunner.run(
                "bookcache", ["download", "\(server.baseURL)/pride.epub", "--id", "pride"], environment: ["BOOKCACHE_DIR": cache])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(FileManager.default.fileExists(atPath: cache + "/ebooks/pride.epub"))
        }
    }

    @Test("a cache path that is a file fails with one line and deletes nothing")
    func cacheIsAFile() async throws {
        try await serving { server, cache in
            try Data("precious".utf8).write(to: URL(fileURLWithPath: cache))
            for args in [["list"], ["download", "\(server.baseURL)/alice.epub"], ["clear", "--yes"], ["stats"]] {
                let result = try await bookcache(args + ["--cache-dir", cache])
                #expect(result.status == 73, "\(args)")
                #expect(result.stderr.contains("unusable"), "\(args): \(result.stderr)")
            }
            #expect(try Data(contentsOf: URL(fileURLWithPath: cache)) == Data("precious".utf8))
        }
    }

    @Test("list --json of a large index prints every record once, in id order, with strings escaped and credentials redacted")
    func largeListing() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = directory.path("cache")
        try FileManager.default.createDirectory(at: cache.appendingPathComponent("ebooks"), withIntermediateDirectories: true)
        // Given an index large enough to be written on several cores, with awkward strings
        let awkward = ["He said \"hi\"", "back\\slash", "line\nbreak\ttab", "bell\u{07}", "ünïcödé 📚", "a/b"]
        var books: [String: Any] = [:]
        let count = 2_501
        for number in 0..<count {
            let key = "ebook-b\(number)"
            var record: [String: Any] = [
                "id": key, "bookType": "ebook", "bookId": "b\(number)", "title": "\(awkward[number % awkward.count]) \(number)",
                "fileUrl": number % 500 == 0 ? "http://user:secret@127.0.0.1:1/b\(number).epub" : "http://127.0.0.1:1/b\(number).epub",
                "localPath": "ebooks/b\(number).epub", "fileSize": number, "downloadedAt": "2026-01-01T00:00:00.000Z",
                "lastAccessedAt": "2026-01-01T00:00:00.000Z", "checksum": String(repeating: "a", count: 64), "format": "epub",
                "pinned": number % 7 == 0, "outdated": number % 11 == 0,
            ]
            if number % 3 == 0 { record["etag"] = "\"e\(number)\"" }
            if number % 5 == 0 { record["syncSources"] = ["https://example.org/feed", "other"] }
            books[key] = record
        }
        let index = try JSONSerialization.data(withJSONObject: ["schemaVersion": 1, "books": books])
        try index.write(to: cache.appendingPathComponent("metadata.json"))

        // When it is listed as JSON
        let result = try await bookcache(["list", "--json", "--cache-dir", cache.path])
        #expect(result.status == 0, "\(result.stderr)")

        // Then every record is there once, sorted by id, with its strings intact
        let records = try #require(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])
        #expect(records.count == count)
        let ids = records.compactMap { $0["id"] as? String }
        #expect(ids == books.keys.sorted())
        for record in records {
            let number = try #require(Int((record["bookId"] as? String ?? "").dropFirst()))
            #expect(record["title"] as? String == "\(awkward[number % awkward.count]) \(number)")
            #expect(record["fileSize"] as? Int == number)
            #expect(record["pinned"] as? Bool == (number % 7 == 0))
            #expect(record["status"] as? String == (number % 11 == 0 ? "outdated" : "cached"))
            #expect(record["etag"] as? String == (number % 3 == 0 ? "\"e\(number)\"" : nil))
            #expect((record["syncSources"] as? [String])?.count == (number % 5 == 0 ? 2 : nil))
            let url = try #require(record["fileUrl"] as? String)
            #expect(!url.contains("secret"), "credentials are redacted: \(url)")
            if number % 500 == 0 { #expect(url.contains("***@"), "\(url)") }
        }
    }

    @Test("list --json writes every field of a record, as the record's own Codable form does (a new field cannot be forgotten)")
    func listedFieldsMatchTheRecord() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let cache = directory.path("cache")
        try FileManager.default.createDirectory(at: cache.appendingPathComponent("ebooks"), withIntermediateDirectories: true)
        // Given a record with every optional set and every list filled
        var record = CachedBookMetadata(
            id: try BookID(type: .ebook, bookId: "full"), title: "Full \"record\"", coverUrl: "http://127.0.0.1:1/c.jpg",
            fileUrl: "http://127.0.0.1:1/full.epub", localPath: "ebooks/full.epub", fileSize: 1234,
            downloadedAt: Date(timeIntervalSince1970: 1_790_000_000.25), lastAccessedAt: Date(timeIntervalSince1970: 1_790_000_100.5),
            checksum: String(repeating: "b", count: 64), format: .epub, etag: "\"e1\"", lastModified: "Tue, 24 Nov 2026 02:00:00 GMT")
        record.pinned = true
        record.outdated = true
        record.coverPath = "ebooks/full.cover.jpg"
        record.syncSources = ["https://example.org/feed"]
        record.authors = ["A. Author", "B. Author"]
        record.language = "de-CH"
        record.published = "1818"
        record.warnings = ["a warning"]
        for child in Mirror(reflecting: record).children {
            let label = child.label ?? "?"
            let value = Mirror(reflecting: child.value)
            #expect(value.displayStyle != .optional || !value.children.isEmpty, "set \(label) in this test")
            #expect(value.displayStyle != .collection || !value.children.isEmpty, "fill \(label) in this test")
        }
        // (written as the previous version's index, which the first command imports)
        let encoded = try JSONSerialization.jsonObject(with: MetadataCoding.encoder().encode(record)) as? [String: Any]
        let index = try JSONSerialization.data(withJSONObject: ["schemaVersion": 1, "books": ["ebook-full": try #require(encoded)]])
        try index.write(to: cache.appendingPathComponent("metadata.json"))

        // When it is listed as JSON
        let result = try await bookcache(["list", "--json", "--cache-dir", cache.path])
        #expect(result.status == 0, "\(result.stderr)")

        // Then it has exactly the record's fields with the same values, plus its status
        let listed = try #require((try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]])?.first)
        var expected = try #require(encoded)
        expected["status"] = "outdated"
        #expect(Set(listed.keys) == Set(expected.keys))
        func canonical(_ object: [String: Any]) throws -> String {
            String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
        }
        #expect(try canonical(listed) == canonical(expected))
    }

    @Test(
        "mistyped options and subcommands are named with a suggestion, never read as URLs; -o says where books go",
        arguments: [
            (
                ["download", "--concurency", "2", "http://127.0.0.1:1/a.epub"],
                "Unknown option '--concurency' for 'bookcache download'. Did you mean '--concurrency'?"
            ),
            (["download", "-o", "x.epub", "http://127.0.0.1:1/a.epub"], "bookcache path ID"),
            (["dowload", "http://127.0.0.1:1/a.epub"], "Unknown subcommand 'dowload' of 'bookcache'. Did you mean 'download'?"),
            (["queue", "lst"], "Did you mean 'list'?"),
            (["list", "--jsonn"], "Did you mean '--json'?"),
            (["sync", "http://127.0.0.1:1/f", "--kep", "3"], "Did you mean '--keep'?"),
        ])
    func typos(arguments: [String], message: String) async throws {
        let result = try await bookcache(arguments + ["--cache-dir", "/nonexistent-bookcache-typo-test"])
        #expect(result.status == 64)
        #expect(result.stderr.contains(message), "\(result.stderr)")
        #expect(!result.stderr.contains("invalid URL"), "\(result.stderr)")
    }

    @Test("the library's messages name no commands; the command line adds its own (open of a book not cached)")
    func commandHints() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let result = try await bookcache(["open", "ebook-nowhere", "--cache-dir", dir.path("cache").path])
        #expect(result.status == 1)
        #expect(
            result.stderr.contains("ebook-nowhere is not cached; download it first (bookcache download URL --id nowhere --type ebook)"),
            "\(result.stderr)")
    }

    @Test("bash completion offers the ids of the cache named on the line")
    func completion() async throws {
        try await serving { server, cache in
            _ = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache])
            _ = try await bookcache(["download", "\(server.baseURL)/pride.epub", "--id", "pride", "--cache-dir", cache])
            let dir = try TemporaryDirectory()
            defer { dir.remove() }
            let script = dir.path("bookcache.bash")
            try Data(try await bookcache(["--generate-completion-script", "bash"]).stdout.utf8).write(to: script)
            let line = "bookcache path --cache-dir \(cache) ebook-a"
            let bash = """
                source '\(script.path)'
                COMP_WORDS=(bookcache path --cache-dir '\(cache)' ebook-a); COMP_CWORD=4; COMP_LINE='\(line)'; COMP_POINT=${#COMP_LINE}
                _bookcache bookcache ebook-a path
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let result = try await ProcessRunner.run(
                at: URL(fileURLWithPath: "/bin/bash"), ["-c", bash],
                environment: ["PATH": ProcessRunner.productsDirectory.path + ":/usr/bin:/bin"])
            #expect(result.stdout.split(separator: "\n") == ["ebook-alice"], "\(result.stdout)\(result.stderr)")
        }
    }

    @Test("--quiet prints nothing but errors")
    func quiet() async throws {
        try await serving { server, cache in
            let good = try await bookcache([
                "download", "\(server.baseURL)/alice.epub", "\(server.baseURL)/pride.epub", "-q", "--cache-dir", cache,
            ])
            #expect(good.status == 0)
            #expect(good.stdout.isEmpty && good.stderr.isEmpty, "\(good.stdout)\(good.stderr)")
            let bad = try await bookcache(["download", "\(server.baseURL)/corrupt/crc-flip.epub", "--quiet", "--cache-dir", cache])
            #expect(bad.status == 65)
            #expect(bad.stdout.isEmpty)
            #expect(bad.stderr.hasPrefix("error: ") && bad.stderr.split(separator: "\n").count == 1, "\(bad.stderr)")
        }
    }

    @Test("--help describes every subcommand")
    func help() async throws {
        let result = try await bookcache(["--help"])
        #expect(result.status == 0)
        for name in ["download", "list", "path", "delete", "clear", "stats"] {
            #expect(result.stdout.contains(name))
        }
    }
}
