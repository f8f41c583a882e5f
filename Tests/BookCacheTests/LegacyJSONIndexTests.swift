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

    func makeStore(_ dir: TemporaryDirectory) throws -> LegacyJSONIndex {
        let layout = CacheLayout(root: dir.url)
        for type in BookType.allCases { try FileManager.default.createDirectory(at: layout.folder(for: type), withIntermediateDirectories: true) }
        return LegacyJSONIndex(layout: layout, logger: Logger(label: "test"))
    }

    @Test("escaped strings in a snapshot decode as JSONDecoder decodes them", arguments: [
        #"plain"#, #"\"quoted\""#, #"back\\slash and \/ slash"#, #"\b\f\n\r\t"#, #"caf\u00e9 \u00C9"#,
        #"books \ud83d\udcda!"#, #"\u0000nul"#,
    ])
    func escapedStrings(escaped: String) throws {
        let record = record(try BookID(parsing: "ebook-x"))
        var json = String(decoding: try MetadataCoding.encoder().encode(record), as: UTF8.self)
        json = json.replacingOccurrences(of: #""title":"T ebook-x""#, with: #""title":"\#(escaped)""#)
        let expected = try MetadataCoding.decoder().decode(CachedBookMetadata.self, from: Data(json.utf8))
        let snapshot = #"{"schemaVersion":1,"books":{"ebook-x":\#(json)}}"#
        let index = try MetadataIndex(snapshot: Data(snapshot.utf8))
        #expect(index[key: "ebook-x"] == expected)
        #expect(index.sortedBooks == [expected])
        #expect(expected.title != "T ebook-x", "the title was replaced")

        // The direct scanner (not only its JSONDecoder fallback) reads the string the same way
        let literal = Data(("\"" + escaped + "\"").utf8)
        let scanned = try literal.withUnsafeBytes { raw in
            var scanner = JSONScanner(bytes: raw, base: 0)
            return try scanner.string()
        }
        #expect(scanned == (try JSONDecoder().decode(String.self, from: literal)))
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

@Suite("The index journal")
struct IndexJournalTests {
    func record(_ name: String, size: Int64 = 3) -> CachedBookMetadata {
        // Names here are fixed and valid; a bad one is a broken test, so crash loudly.
        let id = try! BookID(type: .ebook, bookId: name)
        let date = Date(timeIntervalSince1970: 1_700_000_000.5)
        return CachedBookMetadata(
            id: id, title: name, coverUrl: nil, fileUrl: "https://example.com/\(name).epub", localPath: "ebooks/\(name).epub",
            fileSize: size, downloadedAt: date, lastAccessedAt: date, checksum: String(repeating: "b", count: 64), format: .epub,
            etag: nil, lastModified: nil)
    }

    func makeStore(_ dir: TemporaryDirectory, threshold: Int = 512) -> LegacyJSONIndex {
        LegacyJSONIndex(layout: CacheLayout(root: dir.url), logger: Logger(label: "test"), compactionThreshold: threshold)
    }

    @Test("changes after the first go to the journal, one line per changed record")
    func appends() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = makeStore(dir)
        try store.update { $0[key: "ebook-a"] = record("a") }
        #expect(FileManager.default.fileExists(atPath: store.layout.indexFile.path))
        let snapshot = try Data(contentsOf: store.layout.indexFile)
        try store.update { $0[key: "ebook-b"] = record("b") }
        try store.update { $0[key: "ebook-a"] = nil }
        #expect(try Data(contentsOf: store.layout.indexFile) == snapshot, "the snapshot is not rewritten per change")
        let lines = try String(contentsOf: store.layout.journalFile, encoding: .utf8).split(separator: "\n")
        #expect(lines.count == 2)
        #expect(Set(try store.read().books.keys) == ["ebook-b"])
        // A fresh store (another process) sees the same
        #expect(Set(try makeStore(dir).read().books.keys) == ["ebook-b"])
    }

    @Test("the journal is folded into a new snapshot once it is long enough")
    func compaction() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = makeStore(dir, threshold: 4)
        for i in 0..<10 {
            try store.update { $0[key: "ebook-b\(i)"] = record("b\(i)") }
        }
        let journal = (try? Data(contentsOf: store.layout.journalFile)) ?? Data()
        let lines = journal.split(separator: 0x0A).count
        #expect(lines < 10, "compacted: \(lines) lines left")
        #expect(try makeStore(dir).read().books.count == 10)
    }

    @Test("a torn last line from a killed writer is ignored, then cut off by the next update")
    func tornTail() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = makeStore(dir)
        try store.update { $0[key: "ebook-a"] = record("a") }
        try store.update { $0[key: "ebook-b"] = record("b") }
        let handle = try FileHandle(forWritingTo: store.layout.journalFile)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"set":{"id":"ebook-c","boo"#.utf8))
        try handle.close()
        let fresh = makeStore(dir)
        #expect(Set(try fresh.read().books.keys) == ["ebook-a", "ebook-b"])
        try fresh.update { $0[key: "ebook-d"] = record("d") }
        #expect(Set(try makeStore(dir).read().books.keys) == ["ebook-a", "ebook-b", "ebook-d"])
        let text = try String(contentsOf: store.layout.journalFile, encoding: .utf8)
        #expect(!text.contains("ebook-c"))
    }

    @Test("a damaged journal line is moved aside and the index rebuilt from what is on disk")
    func damagedJournal() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let store = makeStore(dir)
        let layout = store.layout
        try FileManager.default.createDirectory(at: layout.folder(for: .ebook), withIntermediateDirectories: true)
        for name in ["a", "b"] {
            let meta = record(name)
            try Data("abc".utf8).write(to: layout.url(forRelativePath: meta.localPath))
            try MetadataCoding.encoder().encode(meta).write(to: layout.url(forRelativePath: "ebooks/\(name).meta.json"))
            try store.update { $0[key: meta.id] = meta }
        }
        let handle = try FileHandle(forWritingTo: layout.journalFile)
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("garbage that is not json\n".utf8))
        try handle.close()
        #expect(Set(try makeStore(dir).read().books.keys) == ["ebook-a", "ebook-b"])
        let aside = try FileManager.default.contentsOfDirectory(atPath: dir.url.path).filter { $0.hasPrefix("metadata.journal.corrupt-") }
        #expect(aside.count == 1)
    }

    @Test("two stores on one cache see each other's changes")
    func twoStores() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let one = makeStore(dir, threshold: 3)
        let two = makeStore(dir, threshold: 3)
        for i in 0..<9 {
            let store = i.isMultiple(of: 2) ? one : two
            try store.update { $0[key: "ebook-x\(i)"] = record("x\(i)") }
            #expect(try one.read().books.count == i + 1)
            #expect(try two.read().books.count == i + 1)
        }
        try two.update { index in
            for i in 0..<9 where i.isMultiple(of: 3) { index[key: "ebook-x\(i)"] = nil }
        }
        #expect(try one.read().books.count == 6)
    }
}

@Suite("Index decoding")
struct IndexDecodingTests {
    @Test("the fast date path agrees with the general ISO-8601 parser", arguments: [
        "2026-11-22T12:04:51.802Z", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59.5Z", "1999-12-31T23:59:59.999Z", "2024-03-01T00:00:00.000Z",
    ])
    func dates(text: String) throws {
        let general = try Date.ISO8601FormatStyle(includingFractionalSeconds: text.contains(".")).parse(text)
        let fast = try #require(MetadataCoding.parseUTC(text))
        #expect(abs(fast.timeIntervalSince1970 - general.timeIntervalSince1970) < 0.000_5)
    }

    @Test("dates are written as the general formatter writes them", arguments: [0.0, 1_700_000_000.5, 1_763_812_345.25, 951_868_799.5, -86_400.25])
    func formatting(seconds: Double) throws {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(MetadataCoding.formatUTC(date) == date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        let back = try #require(MetadataCoding.parseUTC(MetadataCoding.formatUTC(date)))
        #expect(abs(back.timeIntervalSince1970 - seconds) < 0.001)
    }

    @Test("other date forms are left to the general parser", arguments: ["2026-11-22T12:04:51+02:00", "2026-13-01T00:00:00Z", "yesterday", "2026-11-22 12:04:51Z"])
    func otherDates(text: String) {
        #expect(MetadataCoding.parseUTC(text) == nil)
    }

    @Test("a snapshot is read lazily, pretty or compact, and one record decodes alone")
    func lazySnapshot() throws {
        let json = """
            {
              "books" : {
                "ebook-a" : {"id": "ebook-a", "bookType": "ebook", "bookId": "a", "title": "A \\"quoted\\" {title}", "fileUrl": "https://e.com/a",
                             "localPath": "ebooks/a.epub", "fileSize": 3, "downloadedAt": "2026-01-01T00:00:00Z",
                             "lastAccessedAt": "2026-01-01T00:00:00Z", "checksum": "", "format": "epub"},
                "ebook-b" : {"broken": true}
              },
              "schemaVersion" : 1
            }
            """
        let index = try MetadataIndex(snapshot: Data(json.utf8))
        #expect(index.count == 2)
        #expect(index[key: "ebook-a"]?.title == "A \"quoted\" {title}")
        #expect(index[key: "ebook-b"] == nil, "an undecodable record reads as absent")
        #expect(index.books.keys.sorted() == ["ebook-a"])
        for bad in ["{\"books\": {\"x\": {}", "{\"books\": {}}", "[1,2]", "{\"schemaVersion\": 1, \"books\": {\"a\": \"unterminated}}"] {
            #expect(throws: (any Error).self) { try MetadataIndex(snapshot: Data(bad.utf8)) }
        }
    }
}
