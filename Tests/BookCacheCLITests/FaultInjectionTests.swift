import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

/// The store's promise, proven with real processes: several at once lose nothing and fetch each
/// book once; a kill -9 at any moment leaves a consistent cache that the next run completes; a
/// damaged or deleted index loses no book.
@Suite("Fault injection: processes, kills, damaged state", .serialized, .timeLimit(.minutes(5)))
struct FaultInjectionTests {
    static let bookCount = 30

    /// A server with 30 books (EPUBs and PDFs) whose bodies trickle, so kills land mid-download.
    func withBooks(_ body: (TestHTTPServer, TemporaryDirectory, [String]) async throws -> Void) async throws {
        let server = TestHTTPServer()
        let epub = try Fixtures.data("pride.epub")
        let pdf = try Fixtures.data("fixture-monthly-2024-05.pdf")
        var names: [String] = []
        for i in 0..<Self.bookCount {
            let name = i.isMultiple(of: 3) ? "mag\(i).pdf" : "book\(i).epub"
            server.setFile(i.isMultiple(of: 3) ? pdf : epub, at: name)
            names.append(name)
        }
        server.slowBodies(chunk: 128, pause: .milliseconds(5))
        try await server.start()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        do {
            try await body(server, dir, names)
            try await server.shutdown()
        } catch {
            try? await server.shutdown()
            throw error
        }
    }

    func manifest(_ server: TestHTTPServer, _ names: some Sequence<String>, in dir: TemporaryDirectory, as file: String) throws -> String {
        let path = dir.path(file).path
        let lines = names.map { name in
            name.hasSuffix(".pdf") ? #"{"url": "\#(server.baseURL)/\#(name)", "type": "magazine"}"# : "\(server.baseURL)/\(name)"
        }
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Checks the cache the way a reader would: list works, every listed book is whole and
    /// matches its checksum, ids are unique, and the type folders hold nothing half-done.
    @discardableResult
    func checkConsistent(_ cache: String) async throws -> [String] {
        let list = try await ProcessRunner.run("bookcache", ["list", "--json", "--cache-dir", cache])
        try #require(list.status == 0, "list failed: \(list.stderr)")
        let records = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        let ids = records.compactMap { $0["id"] as? String }
        #expect(Set(ids).count == ids.count, "duplicate ids: \(ids)")
        for record in records {
            let path = cache + "/" + (record["localPath"] as? String ?? "?")
            let data = try #require(FileManager.default.contents(atPath: path), "listed but missing: \(path)")
            let digest = SHA256Hasher.hex(of: data)
            #expect(digest == record["checksum"] as? String, "checksum mismatch for \(path)")
        }
        for folder in ["ebooks", "magazines"] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: cache + "/" + folder)) ?? []
            for name in names {
                #expect(
                    name.hasSuffix(".epub") || name.hasSuffix(".pdf") || name.hasSuffix(".meta.json"),
                    "unexpected file in \(folder): \(name)")
                #expect(!name.hasPrefix("."), "hidden temporary file in \(folder): \(name)")
            }
        }
        return ids
    }

    @Test("eight processes on overlapping batches: the index holds exactly the union, each book fetched once")
    func manyProcesses() async throws {
        try await withBooks { server, dir, names in
            let cache = dir.path("cache").path
            let ranges = [0..<20, 10..<30, 5..<25, 0..<30, 15..<30, 0..<10, 20..<30, 5..<15]
            var processes: [RunningProcess] = []
            for (n, range) in ranges.enumerated() {
                let file = try manifest(server, names[range], in: dir, as: "m\(n).jsonl")
                processes.append(
                    try ProcessRunner.launch("bookcache", ["download", "--from", file, "--cache-dir", cache, "--concurrency", "4"]))
            }
            for process in processes {
                let result = await process.wait()
                #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            }
            let ids = try await checkConsistent(cache)
            #expect(ids.count == Self.bookCount)
            for name in names {
                #expect(server.requestCount(for: "/" + name) == 1, "\(name) fetched \(server.requestCount(for: "/" + name)) times")
            }
        }
    }

    /// Kills `process` with SIGKILL once `server` has seen `count` requests in all, and returns
    /// how it ended — or lets it end, when it ends first (having needed fewer requests than that,
    /// or failed): waiting for requests that never come would hang the test.
    func kill(_ process: RunningProcess, onceServerHas count: Int, _ server: TestHTTPServer) async -> ProcessResult {
        if await server.waitForRequests(count: count, from: process) { process.send(SIGKILL) }
        return await process.wait()
    }

    @Test("kill -9 at random moments: consistent after every kill, and the final run completes the batch")
    func killLoop() async throws {
        try await withBooks { server, dir, names in
            let cache = dir.path("cache").path
            let file = try manifest(server, names, in: dir, as: "all.jsonl")
            var generator = SplitMix64(seed: 0xB00C)
            var killed = 0
            // The last book is held until the kills are over, so no run can finish the batch before
            // its kill lands, however late this test gets to send it (on a loaded machine a whole
            // run once ended first, and the loop killed nothing).
            server.holdRequests(to: "/" + names[names.count - 1])
            var remaining = Self.bookCount
            for _ in 0..<12 {
                let before = server.requests.count
                let process = try ProcessRunner.launch(
                    "bookcache", ["download", "--from", file, "--cache-dir", cache, "--concurrency", "4"])
                // Kill once the server has seen a random number of this run's requests, so the
                // kill lands during downloads, validation or publishing; a run asks for every book
                // not cached yet, so that many requests always come.
                let wait = min(Int(generator.next() % 6) + 1, remaining)
                let result = await kill(process, onceServerHas: before + wait, server)
                #expect(result.status == 128 + SIGKILL, "ended on its own: \(result.stderr)")
                if result.status != 0 { killed += 1 }
                // Consistent after every kill.
                remaining = Self.bookCount - (try await checkConsistent(cache).count)
            }
            server.releaseHeld()
            #expect(killed == 12)
            print("kill loop: \(killed) runs killed with SIGKILL mid-batch, cache consistent after each")
            let final = try await ProcessRunner.run("bookcache", ["download", "--from", file, "--cache-dir", cache])
            #expect(final.status == 0, "\(final.stdout)\n\(final.stderr)")
            #expect(try await checkConsistent(cache).count == Self.bookCount)
            let partials = (try? FileManager.default.contentsOfDirectory(atPath: cache + "/partial")) ?? []
            #expect(partials.filter { $0.hasSuffix(".part") }.isEmpty, "leftover partials: \(partials)")
        }
    }

    @Test("kill -9 while small books are published in groups: every book reported cached before the kill is listed and whole")
    func killDuringGroupCommits() async throws {
        let server = TestHTTPServer()
        let epub = try Fixtures.data("alice.epub")
        let names = (0..<150).map { "small\($0).epub" }
        for name in names { server.setFile(epub, at: name) }
        try await server.start()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache").path
        let file = try manifest(server, names, in: dir, as: "small.jsonl")
        var generator = SplitMix64(seed: 0x6C0B)
        var reported = Set<String>()
        var killed = 0
        for _ in 0..<8 {
            let remaining = names.count - reported.count
            guard remaining > 1 else { break }
            let before = server.requests.count
            let process = try ProcessRunner.launch(
                "bookcache", ["download", "--from", file, "--cache-dir", cache, "--concurrency", "16", "--json"])
            // Fast bodies and sixteen at once: books finish together, so the kill lands while a
            // group is being published as often as not. Killed once the server has seen some of
            // the requests still to come.
            let wait = Int(generator.next() % UInt64(min(40, remaining - 1))) + 1
            let result = await kill(process, onceServerHas: before + wait, server)
            #expect([0, 128 + SIGKILL].contains(result.status), "ended on its own, and failed: \(result.stderr)")
            if result.status != 0 { killed += 1 }
            for line in result.stdout.split(separator: "\n") {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    object["status"] as? String == "cached", let id = object["id"] as? String
                else { continue }
                reported.insert(id)
            }
            // Every book a line called cached is listed, whole and matching its checksum.
            let listed = Set(try await checkConsistent(cache))
            #expect(reported.isSubset(of: listed), "reported cached but not listed: \(reported.subtracting(listed).sorted())")
            reported = listed
        }
        #expect(killed > 0)
        let final = try await ProcessRunner.run("bookcache", ["download", "--from", file, "--cache-dir", cache])
        #expect(final.status == 0, "\(final.stdout)\n\(final.stderr)")
        #expect(try await checkConsistent(cache).count == names.count)
        try await server.shutdown()
    }

    @Test("a damaged or deleted index loses no book, and the user is told", arguments: ["truncate", "garbage", "delete", "delete-all"])
    func damagedIndex(damage: String) async throws {
        try await withBooks { server, dir, names in
            let cache = dir.path("cache").path
            let file = try manifest(server, names.prefix(6), in: dir, as: "six.jsonl")
            let first = try await ProcessRunner.run("bookcache", ["download", "--from", file, "--cache-dir", cache])
            #expect(first.status == 0)
            let index = cache + "/index.sqlite"
            switch damage {
            case "truncate":
                let data = try Data(contentsOf: URL(fileURLWithPath: index))
                try data.prefix(data.count / 3).write(to: URL(fileURLWithPath: index))
                // The log too, so no page of the truncated part comes back from it.
                try? FileManager.default.removeItem(atPath: index + "-wal")
            case "garbage":
                try Data(repeating: 0x5A, count: 8192).write(to: URL(fileURLWithPath: index))
                // Without its log (which may hold every page, hiding the damage).
                try? FileManager.default.removeItem(atPath: index + "-wal")
            case "delete":
                // Only the database: a log left beside it must not be replayed into a new one.
                try FileManager.default.removeItem(atPath: index)
            default:
                for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: index + suffix) }
            }
            let list = try await ProcessRunner.run("bookcache", ["list", "--json", "--cache-dir", cache])
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stderr.contains("rebuilt"), "the user is told: \(list.stderr)")
            let records = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]
            #expect(records?.count == 6)
            // Original metadata survives: the URL and checksum come from the sidecars
            #expect(records?.allSatisfy { ($0["fileUrl"] as? String)?.hasPrefix(server.baseURL) == true } == true)
            try await checkConsistent(cache)
        }
    }

    @Test("an index from a newer version is refused with a clear message and left untouched")
    func newerIndex() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        let future = Data(#"{"schemaVersion": 7, "books": {}}"#.utf8)
        try future.write(to: cache.appendingPathComponent("metadata.json"))
        for args in [["list"], ["delete", "ebook-x"], ["clear", "--yes"]] {
            let result = try await ProcessRunner.run("bookcache", args + ["--cache-dir", cache.path])
            #expect(result.status == 74, "\(args)")
            #expect(result.stderr.contains("newer BookCache"), "\(args): \(result.stderr)")
        }
        #expect(try Data(contentsOf: cache.appendingPathComponent("metadata.json")) == future)
    }
}

/// A small deterministic random number generator, so fault-injection runs are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
