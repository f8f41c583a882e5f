import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// A cache folder only its owner can steer: what another user left in it, or a record that names a
/// path outside it, is never followed; a partial file that fails after a resume is fetched again.
@Suite("A cache folder nobody else can steer", .timeLimit(.minutes(1)))
struct CacheFolderTrustTests {
    @Test("a cache folder others can write (a shared 0777 /tmp/books) is refused, saying what to do, and nothing is written in it")
    func worldWritableRoot() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            // Given a cache folder made by someone else first, open to everyone
            let root = dir.path("cache")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            #expect(chmod(root.path, 0o777) == 0)
            let manager = makeManager(dir)

            // When a book is downloaded into it, or it is read
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            await #expect(throws: BookCacheError.self) { try await manager.allBooks() }

            // Then it is refused with the fix, and nothing was fetched or made there
            #expect(error?.kind == .cacheDirectoryUnusable)
            #expect(error?.message.contains("chmod go-w") == true)
            #expect(server.requestCount(for: "/alice.epub") == 0)
            #expect(try FileManager.default.contentsOfDirectory(atPath: root.path).isEmpty)
        }
    }

    @Test("a cache folder another user owns is refused", .enabled(if: getuid() == 0, "chown to another user needs root"))
    func foreignRoot() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let root = dir.path("cache")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            #expect(chown(root.path, 65534, 65534) == 0)
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(error?.kind == .cacheDirectoryUnusable)
            #expect(error?.message.contains("another user") == true)
            #expect(server.requestCount(for: "/alice.epub") == 0)
        }
    }

    @Test("a partial/ folder that is a link (planted while the cache was open to others) is refused, not followed")
    func linkedPartialFolder() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let root = dir.path("cache")
            let elsewhere = dir.path("elsewhere")
            try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
            try FileManager.default.createSymbolicLink(
                atPath: root.appendingPathComponent("partial").path, withDestinationPath: elsewhere.path)
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(error?.kind == .cacheDirectoryUnusable)
            #expect(error?.message.contains("partial/") == true)
            #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere.path).isEmpty)
        }
    }

    @Test("an index record whose path leads out of the cache is read as the layout's path: the file outside is never served or deleted")
    func recordPathOutsideTheCache() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            // Given a cached book whose record was hand-edited (or damaged) to name a file outside
            let manager = makeManager(dir)
            let id = try BookID(parsing: "ebook-alice")
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            let outside = dir.path("outside-notes.txt")
            try Data("my notes".utf8).write(to: outside)
            try asAnotherProcess {
                let database = try SQLiteDatabase(path: CacheLayout(root: dir.path("cache")).databaseFile.path)
                try database.execute(
                    "UPDATE book SET localPath = '../outside-notes.txt', coverPath = '../../etc/passwd' WHERE id = 'ebook-alice'")
            }

            // When a new manager reads it, opens it and deletes it
            let reader = makeManager(dir)
            let record = try #require(try await reader.metadata(for: id))
            let file = try #require(try await reader.cachedFile(for: id))

            // Then the record's paths are the layout's, the book's own file is what is opened,
            // and deleting the book leaves the file outside alone
            #expect(record.localPath == "ebooks/alice.epub")
            #expect(record.coverPath == nil)
            #expect(try Data(contentsOf: file) == alice)
            #expect(try await reader.delete(id))
            #expect(try Data(contentsOf: outside) == Data("my notes".utf8))
        }
    }

    @Test("a resumed book that fails validation is fetched once more from the start before it is called damaged")
    func refusedResumeStartsOver() async throws {
        let alice = try Fixtures.data("alice.epub")
        let pride = try Fixtures.data("pride.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            // Given a partial file whose record vouches for its bytes — but they are another
            // book's (a file replaced on the server without a new validator, say)
            let partialFolder = dir.path("cache/partial")
            try FileManager.default.createDirectory(at: partialFolder, withIntermediateDirectories: true)
            let prefix = pride.prefix(min(pride.count, alice.count) / 2)
            try prefix.write(to: partialFolder.appendingPathComponent("ebook-alice.part"))
            let record: [String: Any] = [
                "url": "\(server.baseURL)/alice.epub", "validator": try #require(server.etag(for: "alice.epub")),
                "totalLength": alice.count, "length": prefix.count, "sha256": SHA256Hasher.hex(of: Data(prefix)),
            ]
            try JSONSerialization.data(withJSONObject: record).write(to: partialFolder.appendingPathComponent("ebook-alice.part.resume"))

            // When the book is downloaded
            let result = try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-alice"))

            // Then the resume was refused by validation, and the book was fetched whole and cached
            #expect(server.requests.filter { $0.path == "/alice.epub" }.map { $0.headers["range"] } == ["bytes=\(prefix.count)-", nil])
            #expect(try Data(contentsOf: result.fileURL) == alice)
        }
    }
}
