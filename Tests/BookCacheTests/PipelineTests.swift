import BookCacheTestSupport
import DownloadQueue
import Foundation
import Synchronization
import Testing

@testable import BookCache

/// Transfers run ahead of validation and publishing, within a bounded window.
@Suite("The download pipeline")
struct PipelineTests {
    @Test("places are taken first come, first served, and a given-back place goes to the first in line", .timeLimit(.minutes(1)))
    func placesInOrder() async throws {
        let places = Places(2)
        await places.take()
        await places.take()
        #expect(places.taken == 2)
        let order = OrderLog()
        let first = Task {
            await places.take()
            order.append("first")
        }
        try await waitUntil { places.waiting == 1 }
        let second = Task {
            await places.take()
            order.append("second")
        }
        try await waitUntil { places.waiting == 2 }
        places.give()
        await first.value
        #expect(order.entries == ["first"])
        places.give()
        await second.value
        #expect(order.entries == ["first", "second"])
        places.give()
        places.give()
        #expect(places.taken == 0)
    }

    @Test("a full window of books awaiting publish holds the transfers back", .timeLimit(.minutes(1)))
    func fullWindowHoldsTransfers() async throws {
        let alice = try Fixtures.data("alice.epub")
        let names = ["a", "b", "c", "d"]
        var files: [String: Data] = ["seed.epub": alice]
        for name in names { files["\(name).epub"] = alice }
        try await withServerAndDirectory(files: files) { server, dir in
            let configuration = BookCacheConfiguration(rootDirectory: dir.path("cache"), maxConcurrentDownloads: 1, retryPolicy: .none)
            let manager = BookCacheManager(configuration: configuration)
            _ = try await manager.download(try request(server, "seed.epub", id: "ebook-seed"))
            #expect(manager.awaitingPublish.count == 2)
            #expect(manager.pipelineDepth == 4)
            // No book can be published while another connection holds the index's write lock.
            let blocker = try asAnotherProcess { try SQLiteDatabase(path: manager.layout.databaseFile.path) }
            try asAnotherProcess { try blocker.execute("BEGIN IMMEDIATE") }
            let downloads = Task {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for name in names {
                        group.addTask { _ = try await manager.download(try request(server, "\(name).epub", id: "ebook-\(name)")) }
                    }
                    try await group.waitForAll()
                }
            }
            // Two books fill the window of two; the third's body arrives and it waits for a place,
            // keeping the one transfer's slot, so the fourth is not requested.
            try await waitUntil { manager.awaitingPublish.waiting == 1 }
            #expect(manager.awaitingPublish.taken == 2)
            #expect(names.map { server.requestCount(for: "/\($0).epub") }.sorted() == [0, 1, 1, 1])
            try asAnotherProcess { try blocker.execute("COMMIT") }
            try await downloads.value
            for name in names {
                #expect(try await manager.metadata(for: BookID(parsing: "ebook-\(name)")) != nil)
            }
            #expect(manager.awaitingPublish.taken == 0)
        }
    }

    @Test("a transfer that is retried has its new response's room checked again", .timeLimit(.minutes(2)))
    func retryChecksRoom() async throws {
        try await withServerAndDirectory(files: ["book.epub": try Fixtures.data("alice.epub")]) { server, dir in
            let configuration = BookCacheConfiguration(
                rootDirectory: dir.path("cache"), storageReserveBytes: 0, maxSizeBytes: 1_000_000,
                retryPolicy: RetryPolicy(retries: 1, baseDelay: .zero, jitter: 0))
            let manager = BookCacheManager(configuration: configuration)
            // The first answer breaks off; the second announces a body the budget could never hold
            // (and then sends less, so a download that did not check would wait for the rest).
            server.enqueueFault(.dropAfter(bytes: 100), for: "/book.epub")
            server.enqueueFault(.contentLength("50000000"), for: "/book.epub")
            let book = try request(server, "book.epub", id: "ebook-book")
            do throws(BookCacheError) {
                _ = try await manager.download(book)
                Issue.record("the book was cached")
            } catch {
                #expect(error.kind == .insufficientStorage && error.message.contains("budget"), "\(error)")
            }
            #expect(server.requestCount(for: "/book.epub") == 2)
        }
    }

    @Test("a cached book whose file is not its recorded size is not 'already cached': it is fetched again")
    func alreadyCachedMeansWhole() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let manager = makeManager(dir)
            let book = try request(server, "alice.epub", id: "ebook-alice")
            let first = try await manager.download(book)
            // Cut short behind the cache's back (a disk error, another program).
            try alice.prefix(100).write(to: first.fileURL)
            #expect(try await manager.cachedFile(for: book.id) == nil)
            let again = try await manager.download(book)
            #expect(!again.wasAlreadyCached)
            #expect(try Data(contentsOf: again.fileURL) == alice)
            #expect(server.requestCount(for: "/alice.epub") == 2)
        }
    }

    /// Polls `condition` between yields (state other tasks change, not time); the test's time
    /// limit ends a wait that never ends.
    private func waitUntil(_ condition: () -> Bool) async throws {
        while !condition() {
            try Task.checkCancellation()
            await Task.yield()
        }
    }
}

/// What happened, in order, from several tasks.
private final class OrderLog: Sendable {
    private let log = Mutex<[String]>([])
    var entries: [String] { log.withLock { $0 } }
    func append(_ entry: String) { log.withLock { $0.append(entry) } }
}
