import BookCacheTestSupport
import Foundation
import Logging
import Testing

@testable import BookCache

@Suite("The metadata index")
struct IndexStoreTests {
    func record(_ id: BookID, size: Int64 = 3) -> CachedBookMetadata {
        let date = Date(timeIntervalSince1970: 1_700_000_000.5)
        return CachedBookMetadata(
            id: id, title: "T \(id)", coverUrl: nil, fileUrl: "https://example.com/\(id.bookId).epub",
            localPath: "\(id.type.folderName)/\(id.bookId).epub", fileSize: size, downloadedAt: date, lastAccessedAt: date,
            checksum: String(repeating: "a", count: 64), format: .epub, etag: "\"e\"", lastModified: nil)
    }

    func makeStore(_ dir: TemporaryDirectory) throws -> IndexStore {
        let layout = CacheLayout(root: dir.url)
        for type in BookType.allCases { try FileManager.default.createDirectory(at: layout.folder(for: type), withIntermediateDirectories: true) }
        return IndexStore(layout: layout, logger: Logger(label: "test"))
    }

    @Test("no update is lost when many stores update at once")
    func concurrentUpdates() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let stores = try (0..<4).map { _ in try makeStore(dir) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<200 {
                let store = stores[i % stores.count]
                let id = try BookID(type: .ebook, bookId: "b\(i)")
                let record = record(id)
                group.addTask { try store.update { $0[id] = record } }
            }
            try await group.waitForAll()
        }
        #expect(try stores[0].read().books.count == 200)
    }

    @Test("dates keep fractional seconds through a round trip")
    func roundTrip() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try makeStore(dir)
        let id = try BookID(parsing: "ebook-x")
        try store.update { $0[id] = record(id) }
        #expect(try store.read()[id] == record(id))
    }

    @Test("an unreadable index is moved aside and rebuilt from the sidecars", arguments: ["garbage", "truncated", "deleted"])
    func rebuild(damage: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try makeStore(dir)
        let layout = store.layout
        // Given two books with files and sidecars, and one sidecar whose file is gone
        var kept: [BookID] = []
        for name in ["one", "two", "gone"] {
            let id = try BookID(type: .ebook, bookId: name)
            let meta = record(id)
            if name != "gone" {
                try Data("abc".utf8).write(to: layout.url(forRelativePath: meta.localPath))
                kept.append(id)
            }
            try MetadataCoding.encoder().encode(meta).write(to: layout.url(forRelativePath: layout.relativeSidecarPath(for: id)))
            try store.update { $0[id] = meta }
        }
        // When the index is damaged
        let index = layout.indexFile
        switch damage {
        case "garbage": try Data("{not json".utf8).write(to: index)
        case "truncated":
            let data = try Data(contentsOf: index)
            try data.prefix(data.count / 2).write(to: index)
        default: try FileManager.default.removeItem(at: index)
        }
        // Then reading rebuilds it with the original metadata
        let rebuilt = try store.read()
        #expect(Set(rebuilt.books.keys) == Set(kept.map(\.description)))
        #expect(rebuilt[kept[0]] == record(kept[0]))
        #expect(FileManager.default.fileExists(atPath: index.path))
        if damage == "deleted" { return }
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.hasPrefix("metadata.json.corrupt-") }
        #expect(aside.count == 1)
    }

    @Test("an index from a newer schema is refused and left untouched")
    func newerSchema() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = try makeStore(dir)
        let future = Data(#"{"schemaVersion": 99, "books": {}, "somethingNew": true}"#.utf8)
        try future.write(to: store.layout.indexFile)
        let error = #expect(throws: BookCacheError.self) { try store.read() }
        #expect(error?.kind == .indexUnusable)
        #expect(error?.message.contains("newer") == true)
        let updateError = #expect(throws: BookCacheError.self) { try store.update { _ in } }
        #expect(updateError?.kind == .indexUnusable)
        #expect(try Data(contentsOf: store.layout.indexFile) == future)
    }
}
