import BookCacheTestSupport
import DownloadQueue
import Foundation
import Logging
import Synchronization
import Testing

@testable import BookCache

@Suite("Eviction planning")
struct EvictionPlannerTests {
    func book(_ name: String, size: Int64, accessed: TimeInterval, pinned: Bool = false) -> CachedBookMetadata {
        let id = try! BookID(type: .ebook, bookId: name)
        let date = Date(timeIntervalSince1970: accessed)
        var record = CachedBookMetadata(
            id: id, title: name, coverUrl: nil, fileUrl: "https://e.com/\(name)", localPath: "ebooks/\(name).epub", fileSize: size,
            downloadedAt: date, lastAccessedAt: date, checksum: "", format: .epub, etag: nil, lastModified: nil)
        record.pinned = pinned
        return record
    }

    @Test("least recently used go first, until the budget holds")
    func lruOrder() {
        let books = [book("c", size: 10, accessed: 300), book("a", size: 10, accessed: 100), book("b", size: 10, accessed: 200)]
        let plan = EvictionPlanner.plan(books: books, limits: .init(maxSize: 15))
        #expect(plan.victims.map(\.bookId) == ["a", "b"])
        #expect(plan.freedBytes == 20)
        #expect(plan.satisfied)
    }

    @Test("pinned and protected books are never chosen; the plan says when limits cannot be met")
    func pinnedAndProtected() {
        let books = [
            book("a", size: 10, accessed: 100, pinned: true), book("b", size: 10, accessed: 200), book("c", size: 10, accessed: 300),
        ]
        let plan = EvictionPlanner.plan(books: books, limits: .init(maxSize: 5), protected: ["ebook-c"])
        #expect(plan.victims.map(\.bookId) == ["b"])
        #expect(!plan.satisfied)
    }

    @Test("an incoming book counts against the budget and the count")
    func incoming() {
        let books = [book("a", size: 10, accessed: 100), book("b", size: 10, accessed: 200)]
        #expect(EvictionPlanner.plan(books: books, limits: .init(maxSize: 25), incomingBytes: 10).victims.map(\.bookId) == ["a"])
        #expect(EvictionPlanner.plan(books: books, limits: .init(keep: 2), incomingCount: 1).victims.map(\.bookId) == ["a"])
    }

    @Test("older-than removes every stale book; bytes-to-free removes until enough is freed")
    func olderThanAndFree() {
        let books = [book("a", size: 10, accessed: 100), book("b", size: 10, accessed: 200), book("c", size: 10, accessed: 300)]
        let stale = EvictionPlanner.plan(books: books, limits: .init(olderThan: Date(timeIntervalSince1970: 250)))
        #expect(stale.victims.map(\.bookId) == ["a", "b"])
        let free = EvictionPlanner.plan(books: books, limits: .init(bytesToFree: 15))
        #expect(free.victims.map(\.bookId) == ["a", "b"])
        let nothing = EvictionPlanner.plan(books: books, limits: .init())
        #expect(nothing.victims.isEmpty && nothing.satisfied)
    }

    @Test(
        "human sizes and durations",
        arguments: [
            ("500", Int64(500)), ("500B", 500), ("2KB", 2000), ("1.5GB", 1_500_000_000), ("2GiB", 2_147_483_648),
            ("1 MiB", 1_048_576), ("0.5kib", 512), ("3mb", 3_000_000),
        ])
    func sizes(text: String, bytes: Int64) throws {
        #expect(try ByteSize(parsing: text).bytes == bytes)
    }

    @Test("bad sizes and durations are refused", arguments: ["", "-1", "1XB", "GB", "1.2.3MB", "99999999999TiB", "1e3"])
    func badSizes(text: String) {
        #expect(throws: BookCacheError.self) { try ByteSize(parsing: text) }
    }

    @Test("durations")
    func durations() throws {
        #expect(try TimeSpan(parsing: "30m").seconds == 1800)
        #expect(try TimeSpan(parsing: "4h").seconds == 14_400)
        #expect(try TimeSpan(parsing: "7d").seconds == 604_800)
        #expect(try TimeSpan(parsing: "1.5h").seconds == 5400)
        for bad in ["", "7", "-1d", "3y", "d"] {
            #expect(throws: BookCacheError.self) { try TimeSpan(parsing: bad) }
        }
    }
}

@Suite("The budget in the manager")
struct BudgetTests {
    let alice: Data
    init() throws { alice = try Fixtures.data("alice.epub") }

    func manager(
        _ dir: TemporaryDirectory, clock: ManualClock, maxSize: Int64? = nil, keep: Int? = nil,
        freeSpace: Int64? = nil, evictForSpace: Bool = true
    ) -> BookCacheManager {
        BookCacheManager(
            configuration: BookCacheConfiguration(
                rootDirectory: dir.path("cache"), storageReserveBytes: 0, maxSizeBytes: maxSize, keepCount: keep,
                evictForSpace: evictForSpace,
                freeSpace: { url in try freeSpace ?? BookCacheConfiguration.statvfsFreeSpace(url) },
                now: { clock.now }, retryPolicy: .none))
    }

    func files(_ count: Int) -> [String: Data] {
        Dictionary(uniqueKeysWithValues: (0..<count).map { ("b\($0).epub", alice) })
    }

    @Test("the budget evicts the least recently used book, not the one just read")
    func budgetEvictsLRU() async throws {
        try await withServerAndDirectory(files: files(3)) { server, dir in
            let clock = ManualClock()
            let size = Int64(alice.count)
            let manager = manager(dir, clock: clock, maxSize: size * 2)
            _ = try await manager.download(try request(server, "b0.epub", id: "ebook-b0"))
            clock.advance(by: 10)
            _ = try await manager.download(try request(server, "b1.epub", id: "ebook-b1"))
            clock.advance(by: 10)
            _ = try await manager.cachedFile(for: BookID(parsing: "ebook-b0"))  // b0 is now the most recent
            clock.advance(by: 10)
            _ = try await manager.download(try request(server, "b2.epub", id: "ebook-b2"))
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b0", "ebook-b2"])
            #expect(!FileManager.default.fileExists(atPath: dir.path("cache/ebooks/b1.epub").path))
            #expect(!FileManager.default.fileExists(atPath: dir.path("cache/ebooks/b1.meta.json").path))
        }
    }

    @Test("pinned and held books survive the budget; the newcomer that cannot fit is refused")
    func pinnedAndHeldSurvive() async throws {
        try await withServerAndDirectory(files: files(3)) { server, dir in
            let clock = ManualClock()
            let size = Int64(alice.count)
            let manager = manager(dir, clock: clock, maxSize: size * 2)
            _ = try await manager.download(try request(server, "b0.epub", id: "ebook-b0"))
            clock.advance(by: 10)
            _ = try await manager.download(try request(server, "b1.epub", id: "ebook-b1"))
            try await manager.pin(BookID(parsing: "ebook-b0"))
            let held = try await manager.hold(BookID(parsing: "ebook-b1"))
            clock.advance(by: 10)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "b2.epub", id: "ebook-b2"))
            }
            #expect(error?.kind == .insufficientStorage)
            #expect(error?.message.contains("pinned or busy") == true)
            #expect(FileManager.default.fileExists(atPath: held.path))
            await manager.release(try BookID(parsing: "ebook-b1"))
            _ = try await manager.download(try request(server, "b2.epub", id: "ebook-b2"))
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b0", "ebook-b2"])
        }
    }

    @Test("keep N holds at most N books")
    func keepCount() async throws {
        try await withServerAndDirectory(files: files(4)) { server, dir in
            let clock = ManualClock()
            let manager = manager(dir, clock: clock, keep: 2)
            for i in 0..<4 {
                _ = try await manager.download(try request(server, "b\(i).epub", id: "ebook-b\(i)"))
                clock.advance(by: 10)
            }
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b2", "ebook-b3"])
        }
    }

    @Test("a Content-Length beyond the free space fails at once, before writing, when eviction is off")
    func insufficientStorageInjected() async throws {
        try await withServerAndDirectory(files: files(1)) { server, dir in
            let manager = manager(dir, clock: ManualClock(), freeSpace: 100, evictForSpace: false)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "b0.epub", id: "ebook-b0"))
            }
            #expect(error?.kind == .insufficientStorage)
            #expect(error?.availableBytes == 100)
            #expect(error?.neededBytes == Int64(alice.count))
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("short of free space, least recently used books are evicted to make room")
    func evictForFreeSpace() async throws {
        try await withServerAndDirectory(files: files(3)) { server, dir in
            let clock = ManualClock()
            let size = Int64(alice.count)
            // The disk reports room for the newcomer only once one book is gone.
            let state = FreeSpace(initial: size * 10)
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 0, freeSpace: { _ in state.value }, now: { clock.now },
                    retryPolicy: .none))
            _ = try await manager.download(try request(server, "b0.epub", id: "ebook-b0"))
            clock.advance(by: 10)
            _ = try await manager.download(try request(server, "b1.epub", id: "ebook-b1"))
            state.value = size / 2
            _ = try await manager.download(try request(server, "b2.epub", id: "ebook-b2"))
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b1", "ebook-b2"])
        }
    }

    @Test("reads are recorded for LRU the first time after caching, then at most once a minute a book: no index write per request")
    func accessResolution() async throws {
        try await withServerAndDirectory(files: files(1)) { server, dir in
            let clock = ManualClock()
            let manager = manager(dir, clock: clock)
            let id = try BookID(parsing: "ebook-b0")
            _ = try await manager.download(try request(server, "b0.epub", id: "ebook-b0"))
            clock.advance(by: 5)
            let firstRead = clock.now
            _ = try await manager.cachedFile(for: id)
            #expect(try await manager.metadata(for: id)?.lastAccessedAt == firstRead, "the first read after caching counts")
            clock.advance(by: 30)
            _ = try await manager.cachedFile(for: id)
            #expect(try await manager.metadata(for: id)?.lastAccessedAt == firstRead, "a read within the minute writes nothing")
            clock.advance(by: 31)
            _ = try await manager.cachedFile(for: id)
            #expect(try await manager.metadata(for: id)?.lastAccessedAt == clock.now)
            // touch records every call
            clock.advance(by: 1)
            try await manager.touch(id)
            #expect(try await manager.metadata(for: id)?.lastAccessedAt == clock.now)
        }
    }

    @Test("prune: dry run, older-than, and pinned books left alone")
    func prune() async throws {
        try await withServerAndDirectory(files: files(3)) { server, dir in
            let clock = ManualClock()
            let manager = manager(dir, clock: clock)
            for i in 0..<3 {
                _ = try await manager.download(try request(server, "b\(i).epub", id: "ebook-b\(i)"))
                clock.advance(by: 3600)
            }
            try await manager.pin(BookID(parsing: "ebook-b0"))
            let dry = try await manager.prune(olderThan: 5000, dryRun: true)
            #expect(dry.removed.map(\.id) == ["ebook-b1"])
            #expect(try await manager.allBooks().count == 3)
            let real = try await manager.prune(keep: 1)
            #expect(real.removed.map(\.id) == ["ebook-b1", "ebook-b2"])
            #expect(real.satisfied)
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b0"])
            let none = try await manager.prune(keep: 0)
            #expect(none.removed.isEmpty)
            #expect(!none.satisfied, "the pinned book keeps one")
        }
    }

    @Test("verify catches a flipped byte, a deleted file and a stray file; repair fixes them")
    func verify() async throws {
        try await withServerAndDirectory(files: files(3)) { server, dir in
            let manager = manager(dir, clock: ManualClock())
            for i in 0..<3 { _ = try await manager.download(try request(server, "b\(i).epub", id: "ebook-b\(i)")) }
            #expect(try await manager.verify().isClean)
            let b0 = dir.path("cache/ebooks/b0.epub")
            var data = try Data(contentsOf: b0)
            data[data.count / 2] ^= 0x01
            try data.write(to: b0)
            try FileManager.default.removeItem(at: dir.path("cache/ebooks/b1.epub"))
            try Data("stray".utf8).write(to: dir.path("cache/magazines/stray.pdf"))
            let report = try await manager.verify()
            #expect(report.problems.map(\.kind) == [.changed, .missing, .stray])
            #expect(report.problems.map(\.path) == ["ebooks/b0.epub", "ebooks/b1.epub", "magazines/stray.pdf"])
            let repaired = try await manager.verify(repair: true)
            #expect(repaired.problems.allSatisfy { $0.repair != nil })
            #expect(try await manager.verify().isClean)
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b2"])
        }
    }

    @Test("verify --repair adopts a book that was published but never indexed")
    func adoptStray() async throws {
        try await withServerAndDirectory(files: files(1)) { server, dir in
            let manager = manager(dir, clock: ManualClock())
            _ = try await manager.download(try request(server, "b0.epub", id: "ebook-b0"))
            // As if the process died between the rename and the index update:
            try asAnotherProcess {
                try IndexStore(layout: CacheLayout(root: dir.path("cache")), logger: Logger(label: "t")).update {
                    $0[key: "ebook-b0"] = nil
                }
            }
            let report = try await manager.verify(repair: true)
            #expect(report.problems.map(\.kind) == [.stray, .stray])
            #expect(report.problems.first?.repair == "adopted into the index")
            #expect(try await manager.allBooks().map(\.id) == ["ebook-b0"])
        }
    }
}

final class FreeSpace: Sendable {
    private let storage: Mutex<Int64>
    init(initial: Int64) { storage = Mutex(initial) }
    var value: Int64 {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
