import BookCacheTestSupport
import DownloadQueue
import Foundation
import Synchronization
import Testing

@testable import BookCache

/// A clock the test moves by hand, so access times never need a sleep.
final class ManualClock: Sendable {
    private let current = Mutex(Date(timeIntervalSince1970: 1_700_000_000))
    var now: Date { current.withLock { $0 } }
    func advance(by seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

func makeManager(
    _ dir: TemporaryDirectory, clock: ManualClock? = nil, reserve: Int64 = 0, retryPolicy: RetryPolicy = .none
) -> BookCacheManager {
    let configuration = BookCacheConfiguration(
        rootDirectory: dir.path("cache"),
        storageReserveBytes: reserve,
        now: { clock?.now ?? Date() },
        retryPolicy: retryPolicy
    )
    return BookCacheManager(configuration: configuration)
}

func request(_ server: TestHTTPServer, _ path: String, id: String, sha256: String? = nil, title: String? = nil) throws
    -> BookDownloadRequest
{
    try BookDownloadRequest(url: "\(server.baseURL)/\(path)", id: BookID(parsing: id), title: title, expectedSHA256: sha256)
}

/// Every file below the type folders and the partial folder, relative to the cache root.
func filesInCache(_ dir: TemporaryDirectory) -> [String] {
    let root = dir.path("cache")
    var found: [String] = []
    for folder in ["ebooks", "magazines", "partial"] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent(folder).path)) ?? []
        found += names.map { "\(folder)/\($0)" }
    }
    return found.sorted()
}

@Suite("BookCacheManager")
struct BookCacheManagerTests {
    @Test("a downloaded book is validated, moved into place, indexed and described by a sidecar")
    func downloadOne() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            let id = try BookID(parsing: "ebook-alice")
            #expect(try await manager.status(of: id) == .notCached)

            let result = try await manager.download(try request(server, "alice.epub", id: "ebook-alice", title: "Alice"))

            #expect(result.wasAlreadyCached == false)
            #expect(result.metadata.format == .epub)
            #expect(result.metadata.localPath == "ebooks/alice.epub")
            #expect(result.metadata.fileSize == Int64(alice.count))
            #expect(result.metadata.title == "Alice")
            #expect(result.metadata.downloadedAt == clock.now)
            #expect(try Data(contentsOf: result.fileURL) == alice)
            #expect(try await manager.status(of: id) == .cached(size: Int64(alice.count), date: clock.now))
            #expect(filesInCache(dir) == ["ebooks/alice.epub", "ebooks/alice.meta.json"])
            let sidecar = try MetadataCoding.decoder().decode(
                CachedBookMetadata.self, from: Data(contentsOf: dir.path("cache/ebooks/alice.meta.json")))
            #expect(sidecar == result.metadata)
            #expect(try await manager.allBooks() == [result.metadata])
            #expect(try await manager.totalSize() == Int64(alice.count))
        }
    }

    @Test(
        "a language an app gives goes through the same BCP 47 check as a catalogue's: a tag is kept, anything else gives way to the EPUB's own"
    )
    func requestLanguage() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let manager = makeManager(dir)
            var tagged = try request(server, "alice.epub", id: "ebook-tagged")
            tagged.language = " pt-BR "
            #expect(tagged.language == "pt-BR")
            #expect(try await manager.download(tagged).metadata.language == "pt-BR")
            var hostile = try request(server, "alice.epub", id: "ebook-hostile")
            hostile.language = "en\"><script>x</script>"
            #expect(hostile.language == nil)
            #expect(try await manager.download(hostile).metadata.language == "en", "alice.epub's own dc:language")
        }
    }

    @Test("the README's snippet: progress as bytes arrive, then open offline")
    func readmeSnippet() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let manager = makeManager(dir)
            let request = try request(server, "alice.epub", id: "ebook-alice")
            let seen = EventLog()
            let result = try await manager.download(
                request,
                onProgress: { progress in
                    if progress.fractionCompleted == 1 { seen.append(.progress(request.id, progress)) }
                })
            let file = try await manager.open(request.id)
            #expect(file == result.fileURL)
            #expect(seen.kinds == ["progress"])
        }
    }

    @Test("a cached book is not downloaded again")
    func alreadyCached() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let manager = makeManager(dir)
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            let again = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            #expect(again.wasAlreadyCached)
            #expect(server.requestCount(for: "/alice.epub") == 1)
        }
    }

    @Test("PDF magazines land in magazines/")
    func magazine() async throws {
        try await withServerAndDirectory(files: ["may.pdf": try Fixtures.data("fixture-monthly-2024-05.pdf")]) { server, dir in
            let result = try await makeManager(dir).download(try request(server, "may.pdf", id: "magazine-2024-05"))
            #expect(result.metadata.localPath == "magazines/2024-05.pdf")
            #expect(result.metadata.format == .pdf)
        }
    }

    @Test(
        "each corrupt fixture is refused and leaves nothing behind",
        arguments: [
            "corrupt/crc-flip.epub", "corrupt/truncated.epub", "corrupt/missing-spine-item.epub", "corrupt/no-container.epub",
            "corrupt/error-page.epub", "corrupt/truncated.pdf", "corrupt/image-byte-flipped.pdf", "corrupt/annotation-byte-flipped.pdf",
            "corrupt/zip-bomb.epub",
            "corrupt/path-traversal.epub",
        ])
    func corruptRefused(name: String) async throws {
        try await withServerAndDirectory(files: ["book": try Fixtures.data(name)]) { server, dir in
            let manager = makeManager(dir)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "book", id: "ebook-bad"))
            }
            #expect(error?.kind == .fileCorrupted)
            #expect(error?.reason?.isEmpty == false)
            #expect(filesInCache(dir).isEmpty)
            let books = try await manager.allBooks()
            let status = try await manager.status(of: BookID(parsing: "ebook-bad"))
            #expect(books.isEmpty)
            #expect(status == .notCached)
        }
    }

    @Test("an HTML page served with 200 is refused as corrupt")
    func htmlWith200() async throws {
        try await withServerAndDirectory { server, dir in
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "html/login", id: "ebook-x"))
            }
            #expect(error?.kind == .fileCorrupted)
            #expect(error?.message.contains("HTML") == true)
        }
    }

    @Test("a checksum mismatch is refused, naming both sums")
    func checksumMismatch() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let wrong = String(repeating: "0", count: 64)
            let manager = makeManager(dir)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice", sha256: wrong))
            }
            #expect(error?.kind == .checksumMismatch)
            #expect(error?.expectedChecksum == wrong)
            #expect(error?.actualChecksum?.count == 64)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("a matching checksum is accepted")
    func checksumMatch() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let manager = makeManager(dir)
            let first = try await manager.download(try request(server, "alice.epub", id: "ebook-a"))
            let second = try await manager.download(
                try request(server, "alice.epub", id: "ebook-b", sha256: first.metadata.checksum.uppercased()))
            #expect(second.metadata.checksum == first.metadata.checksum)
        }
    }

    @Test("a 404 is a download failure with the status, and nothing is cached")
    func notFound() async throws {
        try await withServerAndDirectory { server, dir in
            let manager = makeManager(dir)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "missing.epub", id: "ebook-m"))
            }
            #expect(error?.kind == .downloadFailed)
            #expect(error?.httpStatus == 404)
            #expect(error?.message.contains("check the URL") == true)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("no server is network unavailable")
    func offline() async throws {
        let base = try await TestHTTPServer.unreachableBaseURL()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let error = await #expect(throws: BookCacheError.self) {
            try await makeManager(dir).download(try BookDownloadRequest(url: base + "/alice.epub", id: BookID(parsing: "ebook-a")))
        }
        #expect(error?.kind == .networkUnavailable)
    }

    @Test("a book larger than the free space is refused before writing")
    func insufficientStorage() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            // A reserve larger than any disk makes every known size too big.
            let manager = makeManager(dir, reserve: Int64.max / 2)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(error?.kind == .insufficientStorage)
            #expect(error?.neededBytes ?? 0 > error?.availableBytes ?? 0)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("cachedFile records the access; touch moves lastAccessedAt")
    func accessTimes() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            let id = try BookID(parsing: "ebook-alice")
            let downloaded = try await manager.download(try request(server, "alice.epub", id: "ebook-alice")).metadata.downloadedAt
            clock.advance(by: 60)
            let url = try await manager.cachedFile(for: id)
            #expect(url?.path.hasSuffix("ebooks/alice.epub") == true)
            #expect(try await manager.metadata(for: id)?.lastAccessedAt == downloaded.addingTimeInterval(60))
            clock.advance(by: 60)
            try await manager.touch(id)
            #expect(try await manager.metadata(for: id)?.lastAccessedAt == downloaded.addingTimeInterval(120))
            #expect(try await manager.metadata(for: id)?.downloadedAt == downloaded)
            #expect(try await manager.cachedFile(for: BookID(parsing: "ebook-none")) == nil)
            let error = await #expect(throws: BookCacheError.self) { try await manager.touch(BookID(parsing: "ebook-none")) }
            #expect(error?.kind == .notCached)
        }
    }

    @Test("pins and access times are kept in sidecars, so an index rebuilt after loss keeps them")
    func sidecarsFollowChanges() async throws {
        let files = ["a.epub": try Fixtures.data("alice.epub"), "p.epub": try Fixtures.data("pride.epub")]
        try await withServerAndDirectory(files: files) { server, dir in
            let clock = ManualClock()
            let manager = makeManager(dir, clock: clock)
            let alice = try BookID(parsing: "ebook-a")
            let pride = try BookID(parsing: "ebook-p")
            _ = try await manager.download(try request(server, "a.epub", id: "ebook-a"))
            _ = try await manager.download(try request(server, "p.epub", id: "ebook-p"))
            // Given alice pinned and pride read an hour later
            try await manager.pin(alice)
            clock.advance(by: 3600)
            try await manager.touch(pride)
            let before = try await manager.allBooks()

            // When the index (the database and its log) is lost
            for name in ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"] {
                let file = dir.path("cache").appendingPathComponent(name)
                if FileManager.default.fileExists(atPath: file.path) { try FileManager.default.removeItem(at: file) }
            }
            #expect(!FileManager.default.fileExists(atPath: dir.path("cache/index.sqlite").path))

            // Then a new manager rebuilds them from the sidecars with the pin and the access time
            let rebuilt = try await makeManager(dir, clock: clock).allBooks()
            #expect(rebuilt == before)
            #expect(rebuilt.first { $0.id == "ebook-a" }?.pinned == true)
            #expect(rebuilt.first { $0.id == "ebook-p" }?.lastAccessedAt == clock.now)
        }
    }

    @Test("delete and clear remove files, sidecars and records")
    func deleteAndClear() async throws {
        let files = [
            "a.epub": try Fixtures.data("alice.epub"), "p.epub": try Fixtures.data("pride.epub"),
            "m.pdf": try Fixtures.data("fixture-monthly-2024-05.pdf"),
        ]
        try await withServerAndDirectory(files: files) { server, dir in
            let manager = makeManager(dir)
            _ = try await manager.download(try request(server, "a.epub", id: "ebook-a"))
            _ = try await manager.download(try request(server, "p.epub", id: "ebook-p"))
            _ = try await manager.download(try request(server, "m.pdf", id: "magazine-m"))

            #expect(try await manager.delete(BookID(parsing: "ebook-a")))
            #expect(try await !manager.delete(BookID(parsing: "ebook-a")))
            #expect(filesInCache(dir) == ["ebooks/p.epub", "ebooks/p.meta.json", "magazines/m.meta.json", "magazines/m.pdf"])

            #expect(try await manager.clear(type: .magazine) == [BookID(parsing: "magazine-m")])
            #expect(try await manager.allBooks().map(\.id) == ["ebook-p"])
            #expect(try await manager.clear() == [BookID(parsing: "ebook-p")])
            #expect(filesInCache(dir).isEmpty)
            #expect(try await manager.allBooks().isEmpty)
        }
    }

    @Test("concurrent requests for one book share a single download")
    func sharedDownload() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let manager = makeManager(dir)
            let req = try request(server, "alice.epub", id: "ebook-alice")
            let results = try await withThrowingTaskGroup(of: BookDownloadResult.self) { group in
                for _ in 0..<8 { group.addTask { try await manager.download(req) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.count == 8)
            #expect(server.requestCount(for: "/alice.epub") == 1)
            #expect(Set(results.map(\.metadata.checksum)).count == 1)
        }
    }

    @Test("many books downloaded at once all end up in the index")
    func concurrentDifferentBooks() async throws {
        let alice = try Fixtures.data("alice.epub")
        var files: [String: Data] = [:]
        for i in 0..<24 { files["b\(i).epub"] = alice }
        try await withServerAndDirectory(files: files) { server, dir in
            // Two managers on one directory, as two processes would be.
            let first = makeManager(dir)
            let second = makeManager(dir)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<24 {
                    let manager = i.isMultiple(of: 2) ? first : second
                    let req = try request(server, "b\(i).epub", id: "ebook-b\(i)")
                    group.addTask { _ = try await manager.download(req) }
                }
                try await group.waitForAll()
            }
            #expect(try await first.allBooks().count == 24)
            #expect(try await second.allBooks().count == 24)
        }
    }

    @Test("a cache path that is a file is refused with a clear error")
    func rootIsAFile() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            try Data("x".utf8).write(to: dir.path("cache"))
            let manager = makeManager(dir)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(error?.kind == .cacheDirectoryUnusable)
            let listError = await #expect(throws: BookCacheError.self) { try await manager.allBooks() }
            #expect(listError?.kind == .cacheDirectoryUnusable)
            #expect(try Data(contentsOf: dir.path("cache")) == Data("x".utf8))
        }
    }

    @Test("reading a cache that does not exist creates nothing")
    func readOnlyDoesNotCreate() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let manager = makeManager(dir)
        #expect(try await manager.allBooks().isEmpty)
        #expect(try await manager.status(of: BookID(parsing: "ebook-1")) == .notCached)
        #expect(try await !manager.delete(BookID(parsing: "ebook-1")))
        #expect(!FileManager.default.fileExists(atPath: dir.path("cache").path))
    }

    @Test("a book whose file vanished is reported as not cached and downloaded again")
    func vanishedFile() async throws {
        try await withServerAndDirectory(files: ["alice.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let manager = makeManager(dir)
            let first = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            try FileManager.default.removeItem(at: first.fileURL)
            #expect(try await manager.status(of: BookID(parsing: "ebook-alice")) == .notCached)
            let second = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            #expect(!second.wasAlreadyCached)
            #expect(FileManager.default.fileExists(atPath: second.fileURL.path))
        }
    }
}

@Suite("BookCacheManager: retries, resume and locking")
struct BookCacheManagerResumeTests {
    @Test("a download cut short is retried and resumed; the book is whole")
    func retriedAndResumed() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: alice.count / 2), for: "/alice.epub")
            let clock = ManualDownloadClock()
            let configuration = BookCacheConfiguration(
                rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: RetryPolicy(retries: 2), downloadClock: clock)
            let manager = BookCacheManager(configuration: configuration)
            let events = EventLog()
            let result = try await manager.download(try request(server, "alice.epub", id: "ebook-alice")) { events.append($0) }
            #expect(try Data(contentsOf: result.fileURL) == alice)
            #expect(server.requestCount(for: "/alice.epub") == 2)
            #expect(events.kinds.contains("retrying"))
            #expect(filesInCache(dir) == ["ebooks/alice.epub", "ebooks/alice.meta.json"])
        }
    }

    @Test("a failed download keeps its partial file, and the next download resumes it")
    func resumedByNextCall() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: 1000), for: "/alice.epub")
            let manager = makeManager(dir)
            await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(filesInCache(dir) == ["partial/ebook-alice.part", "partial/ebook-alice.part.resume"])
            #expect(try await manager.allBooks().isEmpty)
            let result = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            #expect(try Data(contentsOf: result.fileURL) == alice)
            #expect(server.requests.last?.headers["range"] != nil)
            #expect(filesInCache(dir) == ["ebooks/alice.epub", "ebooks/alice.meta.json"])
        }
    }

    @Test("two managers asked for the same book fetch it once; the other reports it cached")
    func perBookLock() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let first = makeManager(dir)
            let second = makeManager(dir)
            server.holdRequests(to: "/alice.epub")
            let req = try request(server, "alice.epub", id: "ebook-alice")
            let one = Task { try await first.download(req) }
            await server.waitForRequests(count: 1)
            // The first holds the book's lock while its request is held; the second waits for it.
            let two = Task { try await second.download(req) }
            server.releaseHeld()
            let results = try await [one.value, two.value]
            #expect(server.requestCount(for: "/alice.epub") == 1)
            #expect(results.filter(\.wasAlreadyCached).count == 1)
            #expect(try await first.allBooks().count == 1)
        }
    }

    @Test("cancelling a download keeps the partial for resume and caches nothing")
    func cancelKeepsPartial() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let manager = makeManager(dir)
            server.holdRequests(to: "/alice.epub")
            let id = try BookID(parsing: "ebook-alice")
            let task = Task { try await manager.download(try request(server, "alice.epub", id: "ebook-alice")) }
            await server.waitForRequests(count: 1)
            #expect(try await manager.status(of: id) == .downloading(progress: nil))
            await manager.cancelDownload(id)
            let error = await #expect(throws: BookCacheError.self) { try await task.value }
            #expect(error?.kind == .cancelled)
            server.releaseHeld()
            #expect(try await manager.status(of: id) == .notCached)
            #expect(try await manager.allBooks().isEmpty)
        }
    }
}

/// Collects event kinds from any task.
final class EventLog: Sendable {
    private let storage = Mutex<[String]>([])
    private let delays = Mutex<[Duration]>([])
    var kinds: [String] { storage.withLock { $0 } }
    /// The delay of each `retrying` event, in order.
    var retryDelays: [Duration] { delays.withLock { $0 } }
    func append(_ event: BookEvent) {
        let kind: String
        switch event {
        case .queued: kind = "queued"
        case .started: kind = "started"
        case .progress: kind = "progress"
        case .retrying(_, _, let delay, _):
            kind = "retrying"
            delays.withLock { $0.append(delay) }
        case .validating: kind = "validating"
        case .cached(_, let already): kind = already ? "already-cached" : "cached"
        case .failed: kind = "failed"
        case .evicted: kind = "evicted"
        }
        storage.withLock { $0.append(kind) }
    }
}
