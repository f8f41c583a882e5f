import BookCacheTestSupport
import Foundation
import Testing

/// A cache made by the previous version (JSON index and journal) opened by this one.
@Suite("A cache of the previous version is imported")
struct MigrationCLITests {
    @Test("every book, pin, title and setting survives the import, and the old index is kept aside")
    func importsPreviousVersion() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache")
        try FileManager.default.copyItem(at: Fixtures.repositoryRoot.appendingPathComponent("Fixtures/caches/previous-version"), to: cache)
        #expect(FileManager.default.fileExists(atPath: cache.appendingPathComponent("metadata.journal").path))

        let list = try await ProcessRunner.run("bookcache", ["list", "--json", "--cache-dir", cache.path])
        #expect(list.status == 0, "\(list.stderr)")
        let records = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(records.compactMap { $0["id"] as? String } == ["ebook-alice", "ebook-pride", "magazine-2024-05"])
        let alice = try #require(records.first)
        #expect(alice["pinned"] as? Bool == true)
        #expect(alice["title"] as? String == "Alice in Fixtureland")

        #expect(FileManager.default.fileExists(atPath: cache.appendingPathComponent("index.sqlite").path))
        #expect(FileManager.default.fileExists(atPath: cache.appendingPathComponent("metadata.json.imported").path))
        #expect(!FileManager.default.fileExists(atPath: cache.appendingPathComponent("metadata.json").path))

        let path = try await ProcessRunner.run("bookcache", ["path", "ebook-pride", "--cache-dir", cache.path])
        #expect(path.stdout.hasSuffix("ebooks/pride.epub\n"), "\(path.stdout)\(path.stderr)")
        let stats = try await ProcessRunner.run("bookcache", ["stats", "--json", "--cache-dir", cache.path])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(stats.stdout.utf8)) as? [String: Any])
        #expect(object["totalCount"] as? Int == 3, "\(stats.stdout)")
        #expect(object["pinnedCount"] as? Int == 1)
        #expect((object["byType"] as? [String: [String: Int]])?["magazine"]?["count"] == 1)
        let keep = try await ProcessRunner.run("bookcache", ["config", "get", "keep", "--cache-dir", cache.path])
        #expect(keep.stdout.contains("10"))
        let verify = try await ProcessRunner.run("bookcache", ["verify", "--cache-dir", cache.path])
        #expect(verify.status == 0, "\(verify.stdout)")
    }
}
