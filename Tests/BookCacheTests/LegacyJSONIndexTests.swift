import BookCacheTestSupport
import Foundation
import Logging
import Testing

@testable import BookCache

/// Writes an index as the previous version wrote it: `metadata.json` with sorted keys, and
/// optionally journal lines after it.
enum LegacyFiles {
    static func snapshot(_ records: [CachedBookMetadata], schemaVersion: Int = 1) throws -> Data {
        struct Snapshot: Encodable {
            var schemaVersion: Int
            var books: [String: CachedBookMetadata]
        }
        let books = Dictionary(uniqueKeysWithValues: records.map { ($0.id, $0) })
        return try MetadataCoding.encoder().encode(Snapshot(schemaVersion: schemaVersion, books: books))
    }

    static func write(_ records: [CachedBookMetadata], journal: [String] = [], to layout: CacheLayout) throws {
        try FileManager.default.createDirectory(at: layout.root, withIntermediateDirectories: true)
        try snapshot(records).write(to: layout.legacyIndexFile)
        if !journal.isEmpty { try Data(journal.joined().utf8).write(to: layout.legacyJournalFile) }
    }

    static func line(set record: CachedBookMetadata) throws -> String {
        #"{"set":"# + String(decoding: try MetadataCoding.encoder().encode(record), as: UTF8.self) + "}\n"
    }
}

/// The previous version's index (`metadata.json` + `metadata.journal`), read once to import it.
@Suite("Importing the previous index", .blockingInternals)
struct LegacyJSONIndexTests {
    func record(_ name: String, size: Int64 = 3) throws -> CachedBookMetadata {
        let id = try BookID(type: .ebook, bookId: name)
        let date = Date(timeIntervalSince1970: 1_700_000_000.5)
        return CachedBookMetadata(
            id: id, title: "T \(id)", coverUrl: nil, fileUrl: "https://example.com/\(name).epub",
            localPath: "ebooks/\(name).epub", fileSize: size, downloadedAt: date, lastAccessedAt: date,
            checksum: String(repeating: "a", count: 64), format: .epub, etag: "\"e\"", lastModified: nil)
    }

    func makeLayout(_ dir: TemporaryDirectory) throws -> CacheLayout {
        let layout = CacheLayout(root: dir.url)
        for type in BookType.allCases {
            try FileManager.default.createDirectory(at: layout.folder(for: type), withIntermediateDirectories: true)
        }
        return layout
    }

    /// Gives a record its file and sidecar, as a download did.
    func putOnDisk(_ record: CachedBookMetadata, _ layout: CacheLayout) throws {
        try Data(repeating: 0x61, count: Int(record.fileSize)).write(to: layout.url(forRelativePath: record.localPath))
        try MetadataCoding.encoder().encode(record).write(
            to: layout.url(forRelativePath: layout.relativeSidecarPath(for: try record.bookID)))
    }

    @Test("the journal's complete lines are applied in order after the snapshot; a torn last line is ignored")
    func journalReplay() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = try makeLayout(dir)
        var changed = try record("a")
        changed.title = "changed later"
        try LegacyFiles.write(
            [try record("a"), try record("b"), try record("c")],
            journal: [
                try LegacyFiles.line(set: changed), #"{"remove":"ebook-b"}"# + "\n", try LegacyFiles.line(set: try record("d")),
                #"{"set":{"id":"ebook-tor"#,
            ],
            to: layout)
        let records = try LegacyJSONIndex(layout: layout, logger: Logger(label: "test")).records()
        #expect(records.map(\.id) == ["ebook-a", "ebook-c", "ebook-d"])
        #expect(records.first?.title == "changed later")
    }

    @Test("a record that does not decode is left out; the others are imported")
    func undecodableRecord() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = try makeLayout(dir)
        let good = String(decoding: try MetadataCoding.encoder().encode(try record("a")), as: UTF8.self)
        let json = """
            {
              "books" : {
                "ebook-a" : \(good),
                "ebook-b" : {"broken": true}
              },
              "schemaVersion" : 1
            }
            """
        try Data(json.utf8).write(to: layout.legacyIndexFile)
        #expect(try LegacyJSONIndex(layout: layout, logger: Logger(label: "test")).records() == [try record("a")])
    }

    @Test(
        "a damaged previous index is moved aside and the new index is rebuilt from the sidecars",
        arguments: ["garbage", "truncated", "bad journal line"])
    func damaged(damage: String) throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = try makeLayout(dir)
        // Given two books with files and sidecars, and one sidecar whose file is gone
        let kept = [try record("one"), try record("two")]
        for book in kept { try putOnDisk(book, layout) }
        let gone = try record("gone")
        try MetadataCoding.encoder().encode(gone).write(to: layout.url(forRelativePath: layout.relativeSidecarPath(for: try gone.bookID)))
        try LegacyFiles.write(kept + [gone], to: layout)
        // When the previous index is damaged
        switch damage {
        case "garbage": try Data("{not json".utf8).write(to: layout.legacyIndexFile)
        case "truncated":
            let data = try Data(contentsOf: layout.legacyIndexFile)
            try data.prefix(data.count / 2).write(to: layout.legacyIndexFile)
        default: try Data("not a journal line\n".utf8).write(to: layout.legacyJournalFile)
        }
        // Then the new index holds the books on disk, and the damaged files are kept aside
        let store = IndexStore(layout: layout, logger: Logger(label: "test"))
        #expect(try store.allRecords() == kept)
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.url.path)
        #expect(names.contains { $0.hasPrefix("metadata.json.corrupt-") })
        #expect(!names.contains("metadata.json"))
    }

    @Test("a previous index from a newer schema is refused and left untouched")
    func newerSchema() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let layout = try makeLayout(dir)
        let future = Data(#"{"schemaVersion": 99, "books": {}, "somethingNew": true}"#.utf8)
        try future.write(to: layout.legacyIndexFile)
        let error = #expect(throws: BookCacheError.self) { try IndexStore(layout: layout, logger: Logger(label: "test")).allRecords() }
        #expect(error?.kind == .indexUnusable)
        #expect(error?.message.contains("newer") == true, "\(error?.message ?? "")")
        #expect(try Data(contentsOf: layout.legacyIndexFile) == future)
    }
}

@Suite("Metadata dates")
struct MetadataDateTests {
    @Test(
        "the fast date path agrees with the general ISO-8601 parser",
        arguments: [
            "2026-11-22T12:04:51.802Z", "1970-01-01T00:00:00Z", "2000-02-29T23:59:59.5Z", "1999-12-31T23:59:59.999Z",
            "2024-03-01T00:00:00.000Z",
        ])
    func dates(text: String) throws {
        let general = try Date.ISO8601FormatStyle(includingFractionalSeconds: text.contains(".")).parse(text)
        let fast = try #require(MetadataCoding.parseUTC(text))
        #expect(abs(fast.timeIntervalSince1970 - general.timeIntervalSince1970) < 0.000_5)
    }

    @Test(
        "dates are written as the general formatter writes them",
        arguments: [0.0, 1_700_000_000.5, 1_763_812_345.25, 951_868_799.5, -86_400.25])
    func formatting(seconds: Double) throws {
        let date = Date(timeIntervalSince1970: seconds)
        #expect(MetadataCoding.formatUTC(date) == date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        let back = try #require(MetadataCoding.parseUTC(MetadataCoding.formatUTC(date)))
        #expect(abs(back.timeIntervalSince1970 - seconds) < 0.001)
    }

    @Test(
        "other date forms are left to the general parser",
        arguments: ["2026-11-22T12:04:51+02:00", "2026-13-01T00:00:00Z", "yesterday", "2026-11-22 12:04:51Z"])
    func otherDates(text: String) {
        #expect(MetadataCoding.parseUTC(text) == nil)
    }
}
