import BookCacheTestSupport
import Foundation
import Testing

/// A real full disk and a read-only cache, on a small tmpfs. Skipped where tmpfs cannot be
/// mounted (not root, or no mount rights); CI runs as root and mounts it.
@Suite("Full and read-only disks", .enabled(if: SmallFilesystem.isAvailable, "needs root to mount a small tmpfs"))
struct SmallDiskTests {
    func withServer(_ files: [String: Data], _ body: (TestHTTPServer) async throws -> Void) async throws {
        let server = TestHTTPServer()
        for (name, data) in files { server.setFile(data, at: name) }
        try await server.start()
        do {
            try await body(server)
        } catch {
            try? await server.shutdown()
            throw error
        }
        try await server.shutdown()
    }

    // Several 1 MiB batches, so the failing write happens on the writer thread of a large body.
    let big = Data((0..<2_500_000).map { UInt8(truncatingIfNeeded: $0 &* 13) })

    @Test("a write that hits ENOSPC fails that download cleanly; the others go on")
    func diskFillsUp() async throws {
        let disk = try SmallFilesystem(bytes: 256 * 1024)
        defer { disk.unmount() }
        try await withServer(["big.epub": big, "alice.epub": try Fixtures.data("alice.epub")]) { server in
            let cache = disk.url.appendingPathComponent("cache").path
            // The big one is chunked, so its size is unknown until the disk is full.
            let result = try await ProcessRunner.run(
                "bookcache",
                [
                    "download", "\(server.baseURL)/chunked/big.epub", "\(server.baseURL)/alice.epub",
                    "--concurrency", "1", "--retries", "0", "--cache-dir", cache, "--json",
                ], environment: ["BOOKCACHE_RESERVE": "0"])
            #expect(result.status == 73)
            let objects = try result.stdout.split(separator: "\n").map {
                try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] ?? [:]
            }
            let failed = objects.first { ($0["id"] as? String)?.hasPrefix("ebook-big-") == true }
            #expect(failed?["status"] as? String == "failed")
            #expect((failed?["error"] as? String)?.contains("insufficient storage") == true, "\(failed ?? [:])")
            #expect(failed?["kind"] as? String == "insufficientStorage")
            #expect((failed?["availableBytes"] as? Int).map { $0 < 256 * 1024 } == true, "the free space is told: \(failed ?? [:])")
            #expect(objects.first { ($0["id"] as? String)?.hasPrefix("ebook-alice-") == true }?["status"] as? String == "cached")
            let partials = (try? FileManager.default.contentsOfDirectory(atPath: cache + "/partial")) ?? []
            #expect(partials.filter { $0.hasPrefix("ebook-big") }.isEmpty, "partial removed: \(partials)")
        }
    }

    @Test("a known size larger than the free space is refused before writing")
    func knownSizeTooBig() async throws {
        let disk = try SmallFilesystem(bytes: 256 * 1024)
        defer { disk.unmount() }
        try await withServer(["big.epub": big]) { server in
            let cache = disk.url.appendingPathComponent("cache").path
            let result = try await ProcessRunner.run(
                "bookcache", ["download", "\(server.baseURL)/big.epub", "--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"])
            #expect(result.status == 73)
            #expect(result.stderr.contains("insufficient storage: 2.5 MB for the book;"), "\(result.stderr)")
            #expect(result.stderr.contains("free at"))
        }
    }

    @Test("a read-only cache still lists and opens; changes fail with one clear line and delete nothing")
    func readOnlyCache() async throws {
        let disk = try SmallFilesystem(bytes: 1024 * 1024)
        defer { disk.unmount() }
        try await withServer(["alice.epub": try Fixtures.data("alice.epub"), "pride.epub": try Fixtures.data("pride.epub")]) { server in
            let cache = disk.url.appendingPathComponent("cache").path
            let first = try await ProcessRunner.run(
                "bookcache", ["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache],
                environment: ["BOOKCACHE_RESERVE": "0"])
            #expect(first.status == 0, "\(first.stderr)")
            try disk.remountReadOnly()
            let list = try await ProcessRunner.run("bookcache", ["list", "--cache-dir", cache])
            #expect(list.status == 0, "\(list.stderr)")
            #expect(list.stdout.contains("ebook-alice"))
            for args in [["download", "\(server.baseURL)/pride.epub"], ["delete", "ebook-alice"], ["clear", "--yes"]] {
                let result = try await ProcessRunner.run("bookcache", args + ["--cache-dir", cache])
                #expect(result.status == 73, "\(args)")
                #expect(result.stderr.split(separator: "\n").count == 1, "\(args): \(result.stderr)")
                #expect(result.stderr.hasPrefix("error:"), "\(args): \(result.stderr)")
            }
            #expect(FileManager.default.fileExists(atPath: cache + "/ebooks/alice.epub"))
        }
    }
}
