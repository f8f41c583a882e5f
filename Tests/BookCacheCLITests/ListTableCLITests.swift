import BookCacheTestSupport
import Foundation
import Testing

/// `list` as a table streams its rows (the widths from the first thousand); a long listing still
/// has every book once, in id order, under one header, with the total.
@Suite("list as a table, streamed")
struct ListTableCLITests {
    /// A cache whose previous-version index names `count` books (imported on first use).
    private func cache(with count: Int, in dir: TemporaryDirectory) throws -> URL {
        let cache = dir.path("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        var books: [String: Any] = [:]
        for number in 0..<count {
            // Ids of growing length, so a later row is wider than the first thousand.
            let bookId = number < 2000 ? String(format: "b%04d", number) : "b\(number)-a-much-longer-identifier"
            books["ebook-\(bookId)"] = [
                "id": "ebook-\(bookId)", "bookId": bookId, "bookType": "ebook", "title": "Title \(number)",
                "fileUrl": "http://127.0.0.1:1/\(bookId).epub", "localPath": "ebooks/\(bookId).epub", "fileSize": 1000 + number,
                "downloadedAt": "2026-11-24T02:10:43.592Z", "lastAccessedAt": "2026-11-24T02:10:43.592Z", "format": "epub",
                "checksum": String(repeating: "0", count: 64), "pinned": number == 7, "outdated": false,
            ]
        }
        let index = try JSONSerialization.data(withJSONObject: ["schemaVersion": 1, "books": books])
        try index.write(to: cache.appendingPathComponent("metadata.json"))
        return cache
    }

    @Test("2,500 books: one header, every id once and in order, aligned columns in the first thousand, the total")
    func longListing() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = try cache(with: 2500, in: dir)
        let result = try await ProcessRunner.run("bookcache", ["list", "--cache-dir", cache.path], environment: ["LANG": "C"])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.first?.hasPrefix("ID") == true, "\(lines.prefix(2))")
        #expect(lines.filter { $0.hasPrefix("ID ") }.count == 1, "the header is written once")
        let rows = Array(lines.dropFirst().prefix(2500))
        let ids = rows.map { String($0.prefix { $0 != " " }) }
        #expect(ids.count == 2500)
        #expect(ids == ids.sorted(), "rows come in id order")
        #expect(Set(ids).count == 2500)
        // The title column starts at the same place in every row the widths were taken from.
        let starts = Set(rows.prefix(1000).compactMap { $0.range(of: "Title ")?.lowerBound.utf16Offset(in: $0) })
        #expect(starts.count == 1, "\(starts)")
        #expect(rows.first { $0.hasPrefix("ebook-b0007") }?.contains("pinned") == true)
        #expect(lines.dropFirst(2501).first?.contains("2500 books") == true, "\(lines.suffix(3))")
    }

    @Test("a type with no books says so, with no header")
    func emptyType() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = try cache(with: 3, in: dir)
        let result = try await ProcessRunner.run(
            "bookcache", ["list", "--type", "magazine", "--cache-dir", cache.path], environment: ["LANG": "C"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("No books cached in "), "\(result.stdout)")
        #expect(!result.stdout.contains("ID"))
    }
}
