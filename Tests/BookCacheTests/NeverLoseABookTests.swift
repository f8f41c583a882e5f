import BookCacheTestSupport
import DownloadQueue
import Foundation
import Synchronization
import Testing

@testable import BookCache

/// The cache's first promise: a download that does not end cached evicts nothing, and two
/// different books never share one record.
@Suite("Never lose or confuse a book")
struct NeverLoseABookTests {
    let alice: Data
    let pride: Data
    let damaged: Data
    init() throws {
        alice = try Fixtures.data("alice.epub")
        pride = try Fixtures.data("pride.epub")
        damaged = try Self.flippingAByteOfTheLastEntry(of: alice)
    }

    /// The book with one byte flipped inside its last entry's data, so its CRC no longer matches.
    static func flippingAByteOfTheLastEntry(of book: Data) throws -> Data {
        let bytes = [UInt8](book)
        let signature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]
        let header = try #require((0...(bytes.count - 30)).last { Array(bytes[$0..<$0 + 4]) == signature })
        func field(_ offset: Int) -> Int { Int(bytes[header + offset]) | Int(bytes[header + offset + 1]) << 8 }
        let compressed = field(18) | field(20) << 16
        let dataStart = header + 30 + field(26) + field(28)
        try #require(compressed > 2)
        var damaged = bytes
        damaged[dataStart + compressed / 2] ^= 0x55
        return Data(damaged)
    }

    enum Limit: String, CaseIterable, CustomTestStringConvertible {
        case keep
        case maxSize
        var testDescription: String { rawValue }
    }

    enum Failure: String, CaseIterable, CustomTestStringConvertible {
        case htmlPage, damagedEPUB, checksumMismatch, notFound, cancelled
        var testDescription: String { rawValue }
    }

    func manager(_ dir: TemporaryDirectory, limit: Limit, clock: ManualClock, retryPolicy: RetryPolicy = .none) -> BookCacheManager {
        // Room for any one of the books, never for two.
        let size = Int64(max(alice.count, pride.count, damaged.count))
        return BookCacheManager(
            configuration: BookCacheConfiguration(
                rootDirectory: dir.path("cache"), storageReserveBytes: 0,
                maxSizeBytes: limit == .maxSize ? size + size / 2 : nil, keepCount: limit == .keep ? 1 : nil,
                now: { clock.now }, retryPolicy: retryPolicy))
    }

    @Test("a download that fails for any reason evicts nothing for the budget", arguments: Limit.allCases, Failure.allCases)
    func failedDownloadEvictsNothing(limit: Limit, failure: Failure) async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice, "pride.epub": pride, "damaged.epub": damaged]) { server, dir in
            // Given: alice is the one book the budget allows.
            let clock = ManualClock()
            let manager = manager(dir, limit: limit, clock: clock)
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            clock.advance(by: 10)

            // When: another download fails.
            let error: BookCacheError?
            switch failure {
            case .htmlPage:
                error = await #expect(throws: BookCacheError.self) {
                    try await manager.download(try request(server, "html/login", id: "ebook-login"))
                }
                #expect(error?.kind == .fileCorrupted)
            case .damagedEPUB:
                error = await #expect(throws: BookCacheError.self) {
                    try await manager.download(try request(server, "damaged.epub", id: "ebook-damaged"))
                }
                #expect(error?.kind == .fileCorrupted)
            case .checksumMismatch:
                error = await #expect(throws: BookCacheError.self) {
                    try await manager.download(
                        try request(server, "pride.epub", id: "ebook-pride", sha256: String(repeating: "0", count: 64)))
                }
                #expect(error?.kind == .checksumMismatch)
            case .notFound:
                error = await #expect(throws: BookCacheError.self) {
                    try await manager.download(try request(server, "missing.epub", id: "ebook-missing"))
                }
                #expect(error?.httpStatus == 404)
            case .cancelled:
                // The body stalls after its first bytes; the download is cancelled once they arrived.
                server.enqueueFault(.stallAfter(bytes: 100), for: "/pride.epub")
                let arrived = Signal()
                let task = Task {
                    try await manager.download(try request(server, "pride.epub", id: "ebook-pride")) { event in
                        if case .progress(_, let progress) = event, progress.receivedBytes > 0 { arrived.fire() }
                    }
                }
                await arrived.wait()
                task.cancel()
                let result = await task.result
                if case .failure(let thrown as BookCacheError) = result { error = thrown } else { error = nil }
                #expect(error?.kind == .cancelled)
            }

            // Then: alice is still cached, file and record.
            #expect(try await manager.allBooks().map(\.id) == ["ebook-alice"])
            let file = try await manager.cachedFile(for: BookID(parsing: "ebook-alice"))
            #expect(try file.map { try Data(contentsOf: $0) } == alice)
        }
    }

    @Test("budget eviction happens when the new book is published, and the result names what went", arguments: Limit.allCases)
    func evictionIsReported(limit: Limit) async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice, "pride.epub": pride]) { server, dir in
            let clock = ManualClock()
            let manager = manager(dir, limit: limit, clock: clock)
            let first = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            #expect(first.evicted.isEmpty)
            clock.advance(by: 10)
            let events = manager.evictions()
            let second = try await manager.download(try request(server, "pride.epub", id: "ebook-pride"))
            #expect(second.evicted.map(\.metadata.id) == ["ebook-alice"])
            #expect(second.evicted.map(\.reason) == [.budget])
            #expect(try await manager.allBooks().map(\.id) == ["ebook-pride"])
            try #require(!second.evicted.isEmpty, "the stream would wait forever")
            var iterator = events.makeAsyncIterator()
            let event = await iterator.next()
            #expect(event?.metadata.id == "ebook-alice")
            #expect(event?.reason == .budget)
        }
    }

    @Test("free-space eviction frees only what the body and the reserve need, and is reported")
    func freeSpaceEvictsOnlyWhatIsNeeded() async throws {
        let files = Dictionary(uniqueKeysWithValues: (0..<4).map { ("b\($0).epub", alice) })
        try await withServerAndDirectory(files: files) { server, dir in
            let clock = ManualClock()
            let size = Int64(alice.count)
            let free = FreeSpace(initial: size * 100)
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 0, freeSpace: { _ in free.value }, now: { clock.now },
                    retryPolicy: .none))
            for i in 0..<3 {
                _ = try await manager.download(try request(server, "b\(i).epub", id: "ebook-b\(i)"))
                clock.advance(by: 10)
            }
            // Room for half a book: one book must go, not two.
            free.value = size / 2
            let result = try await manager.download(try request(server, "b3.epub", id: "ebook-b3"))
            #expect(result.evicted.map(\.metadata.id) == ["ebook-b0"])
            #expect(result.evicted.map(\.reason) == [.freeSpace])
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b1", "ebook-b2", "ebook-b3"])
        }
    }

    @Test("with room on the disk, no budget and a failing download, nothing is evicted for space")
    func noEvictionWithRoom() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let free = FreeSpace(initial: 1 << 30)
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 0, freeSpace: { _ in free.value }, retryPolicy: .none))
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            await #expect(throws: BookCacheError.self) { try await manager.download(try request(server, "html/login", id: "ebook-login")) }
            #expect(try await manager.allBooks().map(\.id) == ["ebook-alice"])
        }
    }

    @Test("the insufficient-storage message names the book's size and the reserve apart")
    func reserveIsNamed() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 100_000_000, evictForSpace: false,
                    freeSpace: { _ in 16_800_000 }, retryPolicy: .none))
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(error?.kind == .insufficientStorage)
            #expect(error?.message.contains("1.6 KB for the book + 100 MB reserve") == true, "\(error?.message ?? "")")
            #expect(error?.message.contains("16.8 MB free") == true, "\(error?.message ?? "")")
            #expect(error?.neededBytes == Int64(alice.count) + 100_000_000)
        }
    }

    // MARK: Identity

    @Test("ids derived from URLs with the same file name are different books")
    func derivedIdsDoNotCollide() async throws {
        try await withServerAndDirectory(files: ["a/book.epub": alice, "b/book.epub": pride]) { server, dir in
            let manager = makeManager(dir)
            let a = try BookDownloadRequest(url: "\(server.baseURL)/a/book.epub", type: .ebook)
            let b = try BookDownloadRequest(url: "\(server.baseURL)/b/book.epub", type: .ebook)
            #expect(a.id != b.id)
            #expect(a.id.bookId.hasPrefix("book-"))
            let first = try await manager.download(a)
            let second = try await manager.download(b)
            #expect(!second.wasAlreadyCached)
            #expect(try Data(contentsOf: first.fileURL) == alice)
            #expect(try Data(contentsOf: second.fileURL) == pride)
            #expect(try await manager.allBooks().count == 2)
            // The same URL again is the same book.
            #expect(
                try await manager.download(try BookDownloadRequest(url: "\(server.baseURL)/a/book.epub", type: .ebook)).wasAlreadyCached)
        }
    }

    @Test("a derived id is never answered with a cached record from another URL")
    func derivedIdGuardsAgainstAnotherURL() async throws {
        try await withServerAndDirectory(files: ["a/book.epub": alice, "b/book.epub": pride]) { server, dir in
            let manager = makeManager(dir)
            let a = try BookDownloadRequest(url: "\(server.baseURL)/a/book.epub", type: .ebook)
            _ = try await manager.download(a)
            // As if two URLs hashed alike: b's request carries a's derived id.
            var b = try BookDownloadRequest(url: "\(server.baseURL)/b/book.epub", type: .ebook)
            b.id = a.id
            let error = await #expect(throws: BookCacheError.self) { try await manager.download(b) }
            #expect(error?.kind == .identifierInUse)
            #expect(error?.message.contains("give it an id of its own") == true)
            #expect(error?.remedy == .giveOwnID)
            #expect(error?.message.contains("--") == false, "the library names no command-line options")
        }
    }

    @Test("with an explicit id, a new (signed) URL for a cached book downloads nothing")
    func explicitIdKeepsTheBook() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let manager = makeManager(dir)
            _ = try await manager.download(try request(server, "alice.epub?signature=1&expires=100", id: "ebook-alice"))
            let again = try await manager.download(try request(server, "alice.epub?signature=2&expires=200", id: "ebook-alice"))
            #expect(again.wasAlreadyCached)
            #expect(server.requestCount(for: "/alice.epub") == 1)
        }
    }

    @Test("derived ids: stable, short, safe, and credentials or fragments do not change them")
    func derivedIdRule() throws {
        let plain = BookDownloadRequest.derivedBookId(for: URL(string: "https://example.com/books/alice.epub")!)
        #expect(plain.hasPrefix("alice-"))
        #expect(plain.count == "alice-".count + 12)
        #expect(BookDownloadRequest.derivedBookId(for: URL(string: "https://me:secret@EXAMPLE.com/books/alice.epub#ch1")!) == plain)
        #expect(BookDownloadRequest.derivedBookId(for: URL(string: "https://example.com/books/alice.epub?v=2")!) != plain)
        let calibre = BookDownloadRequest.derivedBookId(for: URL(string: "http://host:8080/get/epub/12/Calibre_Library")!)
        #expect(calibre.hasPrefix("Calibre_Library-"))
        #expect(calibre != BookDownloadRequest.derivedBookId(for: URL(string: "http://host:8080/get/epub/13/Calibre_Library")!))
        _ = try BookID(
            type: .ebook,
            bookId: BookDownloadRequest.derivedBookId(for: URL(string: "https://e.com/" + String(repeating: "x", count: 300) + ".epub")!))
        _ = try BookID(type: .ebook, bookId: BookDownloadRequest.derivedBookId(for: URL(string: "https://e.com/")!))
    }

    @Test("ids from a source's identifier: kept when already safe, made safe and unique otherwise")
    func sourceIdentifierRule() throws {
        #expect(
            BookDownloadRequest.bookId(forSourceIdentifier: "urn:uuid:6409a00b-7bf2-405e-826c-3fdff0fd0734")
                == "6409a00b-7bf2-405e-826c-3fdff0fd0734")
        #expect(BookDownloadRequest.bookId(forSourceIdentifier: "moby-dick") == "moby-dick")
        let feedbooks = BookDownloadRequest.bookId(forSourceIdentifier: "https://www.feedbooks.com/book/123")
        #expect(feedbooks.hasPrefix("www.feedbooks.com_book_123-"))
        #expect(feedbooks != BookDownloadRequest.bookId(forSourceIdentifier: "https://www.feedbooks.com/book/124"))
        #expect(BookDownloadRequest.bookId(forSourceIdentifier: "a:b") != BookDownloadRequest.bookId(forSourceIdentifier: "a/b"))
        for identifier in ["urn:isbn:978-3-16-148410-0", "..", "ünïcødé", String(repeating: "z", count: 500), "", "   "] {
            _ = try BookID(type: .ebook, bookId: BookDownloadRequest.bookId(forSourceIdentifier: identifier))
        }
    }

    @Test("a sync of a feed whose links all end alike caches each entry as its own book")
    func syncWithLinksEndingAlike() async throws {
        let books = [alice, pride, alice, pride, alice]
        var files: [String: Data] = [:]
        for (n, book) in books.enumerated() { files["get/epub/\(n + 1)/Calibre_Library"] = book }
        try await withServerAndDirectory(files: files) { server, dir in
            let entries = (1...5).map { n in
                """
                <entry><title>Book \(n)</title><id>urn:uuid:00000000-0000-0000-0000-00000000000\(n)</id>
                <author><name>A</name><uri>urn:author:same</uri></author>
                <link rel="http://opds-spec.org/acquisition" type="application/epub+zip" href="/get/epub/\(n)/Calibre_Library"/></entry>
                """
            }
            let feed = """
                <?xml version="1.0" encoding="UTF-8"?>
                <feed xmlns="http://www.w3.org/2005/Atom"><id>urn:calibre:library</id><title>calibre</title>
                \(entries.joined(separator: "\n"))
                </feed>
                """
            server.setFile(Data(feed.utf8), at: "opds")
            let manager = makeManager(dir)
            let report = try await manager.sync(.url(URL(string: "\(server.baseURL)/opds")!), keep: 5)
            #expect(report.items.map(\.status) == Array(repeating: .cached, count: 5))
            #expect(Set(report.items.compactMap(\.id)).count == 5)
            #expect(report.items.first?.id == "ebook-00000000-0000-0000-0000-000000000001")
            let cached = try await manager.allBooks()
            #expect(cached.count == 5)
            #expect(Set(cached.map(\.localPath)).count == 5)
            for record in cached {
                let n = Int(record.title.dropFirst("Book ".count))!
                #expect(try Data(contentsOf: manager.layout.url(forRelativePath: record.localPath)) == books[n - 1])
            }
        }
    }

    @Test("a feed without entry ids still gives each link its own book; an entry listed twice counts once")
    func syncWithoutIdentifiers() async throws {
        try await withServerAndDirectory(files: ["a/file.epub": alice, "b/file.epub": pride]) { server, dir in
            let feed = """
                {"metadata": {"title": "t"}, "publications": [
                  {"metadata": {"title": "A"}, "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "/a/file.epub"}]},
                  {"metadata": {"title": "B"}, "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "/b/file.epub"}]},
                  {"metadata": {"title": "A again"}, "links": [{"rel": "http://opds-spec.org/acquisition", "type": "application/epub+zip", "href": "/a/file.epub"}]}
                ]}
                """
            server.setFile(Data(feed.utf8), at: "catalog.json")
            let manager = makeManager(dir)
            let report = try await manager.sync(.url(URL(string: "\(server.baseURL)/catalog.json")!), keep: 10)
            #expect(report.wanted == 2)
            #expect(report.items.filter { $0.status == .cached }.count == 2)
            #expect(report.isComplete)
            #expect(try await manager.allBooks().count == 2)
        }
    }

    // MARK: Retries

    @Test("attempts that add bytes do not use up the retries: a body cut six times ends cached with 2 retries")
    func progressDoesNotCount() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let step = alice.count * 15 / 100
            for _ in 0..<6 { server.enqueueFault(.dropAfter(bytes: step), for: "/alice.epub") }
            let clock = ManualDownloadClock()
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: RetryPolicy(retries: 2, jitter: 0),
                    downloadClock: clock))
            let events = EventLog()
            let result = try await manager.download(try request(server, "alice.epub", id: "ebook-alice")) { events.append($0) }
            #expect(try Data(contentsOf: result.fileURL) == alice)
            #expect(server.requestCount(for: "/alice.epub") == 7)
            // Each retry after progress waits the first delay again: the backoff does not grow.
            #expect(events.retryDelays == Array(repeating: .milliseconds(500), count: 6))
        }
    }

    @Test("attempts without progress still give up after the retries, in plain words")
    func noProgressGivesUp() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            for _ in 0..<3 { server.enqueueFault(.status(503), for: "/alice.epub") }
            let clock = ManualDownloadClock()
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: RetryPolicy(retries: 2), downloadClock: clock))
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            }
            #expect(server.requestCount(for: "/alice.epub") == 3)
            #expect(error?.message.contains("gave up after 3 attempts") == true, "\(error?.message ?? "")")
        }
    }
}

/// A one-shot signal a test waits on; fired from any thread.
final class Signal: Sendable {
    private let state = Mutex<(fired: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func fire() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            guard !state.fired else { return [] }
            state.fired = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.fired { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }
}
