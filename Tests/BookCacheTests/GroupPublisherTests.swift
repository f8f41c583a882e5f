import BookCacheTestSupport
import DownloadQueue
import Foundation
import Logging
import Testing

@testable import BookCache

/// Books ready together are published together: one index transaction for the group, and one
/// book's failure is its own.
@Suite("Group publishing")
struct GroupPublisherTests {
    /// A validated book's entry: its bytes in `partial/`, its record made.
    func entry(_ name: String, in layout: CacheLayout) throws -> GroupPublisher.Entry {
        let id = try BookID(type: .ebook, bookId: name)
        let partial = layout.partialFile(for: id)
        let bytes = Data("the book \(name)".utf8)
        try bytes.write(to: partial)
        let now = Date()
        let record = CachedBookMetadata(
            id: id, title: name, coverUrl: nil, fileUrl: "http://127.0.0.1:1/\(name).epub",
            localPath: layout.relativePath(for: id, format: .epub), fileSize: Int64(bytes.count), downloadedAt: now, lastAccessedAt: now,
            checksum: SHA256Hasher.hex(of: bytes), format: .epub, etag: nil, lastModified: nil)
        return GroupPublisher.Entry(
            record: record, partial: partial, pin: false, syncSource: nil, limits: (maxSize: nil, keep: nil, reserve: 0))
    }

    /// A manager on a new cache in `dir`, its folders made and its index open.
    func openedManager(in dir: TemporaryDirectory) async throws -> BookCacheManager {
        let manager = BookCacheManager(configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0))
        try await manager.prepareDirectories()
        _ = try await manager.allBooks()
        return manager
    }

    @Test(
        "a book its download has published is not busy for the budget while that download returns (a sequential batch under a budget once refused its third book); one still downloading is"
    )
    func publishedIsNotBusy() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let manager = try await openedManager(in: dir)
        let (layout, publisher) = (manager.layout, manager.publisher)
        let (usage, evictor) = await (manager.usageTracker, manager.evictionRunner)
        let size = try entry("b0", in: layout).record.fileSize
        // Room for two books.
        let limits: Evictor.Limits = (maxSize: size * 2, keep: nil, reserve: 0)
        func publish(
            _ name: String, by download: UsageTracker.Download?, holding lock: BookLock? = nil
        ) async throws -> GroupPublisher.Outcome {
            var ready = try entry(name, in: layout)
            ready.limits = limits
            ready.download = download
            ready.lock = lock
            return await publisher.publish(ready)
        }
        func admit(_ name: String) async throws -> Result<[EvictedBook], BookCacheError> {
            let id = try BookID(type: .ebook, bookId: name)
            return await BlockingWork.run { Result { () throws(BookCacheError) in try evictor.admit(size, for: id, limits: limits) } }
        }
        // b1 and b2 published by their downloads, which have not returned; each hands its lock to the publisher, as a download does.
        var running: [(UsageTracker.Download, BookLock)] = []
        defer { for (download, lock) in running { download.end(); lock.release() } }
        for name in ["b1", "b2"] {
            let id = try BookID(type: .ebook, bookId: name)
            let download = usage.beginDownload(id)
            let lock = try await BookLock.acquire(id, in: layout)
            running.append((download, lock))
            guard case .success = try await publish(name, by: download, holding: lock) else {
                Issue.record("\(name) was not published")
                return
            }
        }
        // The next book of the batch fits: the budget evicts b1, the least recently used, when it is published.
        if case .failure(let error) = try await admit("b3") { Issue.record("b3 was refused: \(error.message)") }
        guard case .success(let third) = try await publish("b3", by: nil) else {
            Issue.record("b3 was not published")
            return
        }
        #expect(third.evicted.map(\.metadata.id) == ["ebook-b1"])

        // A download that has not published its book yet keeps it: b2 and b3 fetched again (once the first
        // downloads have returned), neither published.
        for (download, lock) in running {
            download.end()
            lock.release()
        }
        running = []
        for name in ["b2", "b3"] {
            let id = try BookID(type: .ebook, bookId: name)
            running.append((usage.beginDownload(id), try await BookLock.acquire(id, in: layout)))
        }
        guard case .failure(let refused) = try await admit("b4") else {
            Issue.record("b4 was admitted while b2 and b3 are being downloaded")
            return
        }
        #expect(refused.kind == .insufficientStorage)
        #expect(try await manager.allBooks().map(\.id) == ["ebook-b2", "ebook-b3"])
    }

    @Test(
        "a book's lock goes as it is published, before its download returns, so another process's budget may evict it; locked again elsewhere, it is busy here too; a book that fails to publish keeps its lock"
    )
    func publishedLetsGoOfItsLock() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let manager = try await openedManager(in: dir)
        let (layout, publisher) = (manager.layout, manager.publisher)
        let (usage, evictor) = await (manager.usageTracker, manager.evictionRunner)
        // b2's sidecar cannot be written (a folder is in its place): it is not published.
        try FileManager.default.createDirectory(
            at: layout.url(forRelativePath: layout.relativeSidecarPath(for: try BookID(type: .ebook, bookId: "b2")))
                .appendingPathComponent("in-the-way"),
            withIntermediateDirectories: true)
        var locks: [BookLock] = []
        var downloads: [UsageTracker.Download] = []
        // The downloads' own release, as they return: after the publisher's, it must do nothing.
        defer {
            for lock in locks { lock.release() }
            for download in downloads { download.end() }
        }
        for name in ["b1", "b2"] {
            let id = try BookID(type: .ebook, bookId: name)
            let lock = try await BookLock.acquire(id, in: layout)
            locks.append(lock)
            downloads.append(usage.beginDownload(id))
            var ready = try entry(name, in: layout)
            ready.lock = lock
            ready.download = downloads.last
            let outcome = await publisher.publish(ready)
            // As another process sees it (an open file description lock of its own).
            let held = await BlockingWork.run { BookLock.isHeld(id, in: layout) }
            switch (name, outcome) {
            case ("b1", .success): #expect(!held, "b1 is published: its lock is free for another process")
            case ("b2", .failure): #expect(held, "b2 was not published: its download still holds it")
            default: Issue.record("\(name): \(outcome)")
            }
        }
        // A lock taken again after the publisher let go of b1's is not released by b1's download returning.
        let b1 = try BookID(type: .ebook, bookId: "b1")
        let again = try #require(try await BlockingWork.run { () throws -> BookLock? in try BookLock.tryAcquire(b1, in: layout) })
        defer { again.release() }
        // Locked again, as by another process refreshing it, while b1's download here has not returned:
        // busy for this process's budget too (its lock is asked, not passed over as this process's own).
        let plan = try await BlockingWork.run { () throws(BookCacheError) in
            try evictor.prune(EvictionPlanner.Limits(maxSize: nil, keep: 0), dryRun: true)
        }
        #expect(plan.victims.isEmpty, "\(plan.victims.map(\.id))")
        locks[0].release()
        #expect(await BlockingWork.run { BookLock.isHeld(b1, in: layout) })
    }

    @Test("books ready while one is published go in the next group, together; one that fails leaves the others")
    func groupWithAFailure() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let log = LogCapture()
        var logger = Logger(label: "test", factory: { _ in log.handler })
        logger.logLevel = .trace
        let manager = BookCacheManager(
            configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0), logger: logger)
        try await manager.prepareDirectories()
        _ = try await manager.allBooks()
        let layout = manager.layout
        let publisher = manager.publisher

        // The third's sidecar cannot be written (a folder is in its place).
        let names = ["b1", "b2", "b3", "b4", "b5"]
        try FileManager.default.createDirectory(
            at: layout.url(forRelativePath: layout.relativeSidecarPath(for: try BookID(type: .ebook, bookId: "b3")))
                .appendingPathComponent("in-the-way"),
            withIntermediateDirectories: true)
        let (first, outcomes) = try await publishAsAGroup(
            try names.map { try entry($0, in: layout) }, after: try entry("first", in: layout), by: publisher, layout: layout)
        guard case .success = first else {
            Issue.record("the first book was not published")
            return
        }
        for name in names where name != "b3" {
            guard case .success(let stored) = outcomes["ebook-\(name)"] else {
                Issue.record("\(name): \(String(describing: outcomes["ebook-\(name)"]))")
                continue
            }
            #expect(FileManager.default.fileExists(atPath: layout.url(forRelativePath: stored.stored.localPath).path))
        }
        guard case .failure(let failure) = outcomes["ebook-b3"] else {
            Issue.record("b3 should have failed: \(String(describing: outcomes["ebook-b3"]))")
            return
        }
        #expect(failure.message.contains("b3"), "\(failure.message)")
        let listed = try await manager.allBooks().map(\.id)
        #expect(listed == ["ebook-b1", "ebook-b2", "ebook-b4", "ebook-b5", "ebook-first"])
        #expect(log.text.contains(#"published a group ["books": 5]"#), "\(log.text)")
    }

    @Test(
        "a disk that fills up in the middle of a group: the books published before ENOSPC are cached, the others fail with a full disk, nothing half-made",
        .enabled(if: SmallFilesystem.isAvailable, "needs root to mount a small tmpfs"))
    func diskFullMidGroup() async throws {
        // Out of inodes rather than bytes, so exactly the n-th new file fails: each book's sidecar is one new file.
        let disk = try SmallFilesystem(bytes: 8 << 20, inodes: 200)
        defer { disk.unmount() }
        let manager = BookCacheManager(
            configuration: BookCacheConfiguration(rootDirectory: disk.url.appendingPathComponent("cache"), storageReserveBytes: 0))
        try await manager.prepareDirectories()
        _ = try await manager.allBooks()
        let layout = manager.layout
        let publisher = manager.publisher
        let names = ["b1", "b2", "b3", "b4", "b5"]
        let (first, outcomes) = try await publishAsAGroup(
            try names.map { try entry($0, in: layout) }, after: try entry("first", in: layout), by: publisher, layout: layout
        ) {
            // Room for three more files: the first book's sidecar and two of the group's.
            let filler = disk.url.appendingPathComponent("filler")
            try FileManager.default.createDirectory(at: filler, withIntermediateDirectories: true)
            var made = 0
            while disk.freeInodes > 3 {
                try Data().write(to: filler.appendingPathComponent("\(made)"))
                made += 1
            }
        }
        guard case .success = first else {
            Issue.record("the first book was not published")
            return
        }
        let cached = names.filter { if case .success = outcomes["ebook-\($0)"] { true } else { false } }
        #expect(cached.count == 2, "\(outcomes)")
        for name in names where !cached.contains(name) {
            guard case .failure(let failure) = outcomes["ebook-\(name)"] else {
                Issue.record("\(name): no outcome")
                continue
            }
            #expect(failure.kind == .insufficientStorage, "\(name): \(failure)")
        }
        // What the index lists is exactly what was reported cached, each whole, each with its sidecar
        let listed = try await manager.allBooks()
        #expect(Set(listed.map(\.id)) == Set((cached + ["first"]).map { "ebook-\($0)" }))
        for record in listed {
            #expect(try Data(contentsOf: layout.url(forRelativePath: record.localPath)) == Data("the book \(record.bookId)".utf8))
            #expect(
                FileManager.default.fileExists(atPath: layout.url(forRelativePath: layout.relativeSidecarPath(for: try record.bookID)).path)
            )
        }
        for name in names where !cached.contains(name) {
            let id = try BookID(type: .ebook, bookId: name)
            #expect(!FileManager.default.fileExists(atPath: layout.url(forRelativePath: layout.relativePath(for: id, format: .epub)).path))
        }
    }

    /// Publishes `first` while another connection holds the index's write lock, then `entries`,
    /// which arrive meanwhile, as the next group; `meanwhile` runs once they all wait, before the
    /// lock is let go. Returns each outcome.
    private func publishAsAGroup(
        _ entries: [GroupPublisher.Entry], after first: GroupPublisher.Entry, by publisher: GroupPublisher, layout: CacheLayout,
        meanwhile: () throws -> Void = {}
    ) async throws -> (first: GroupPublisher.Outcome, group: [String: GroupPublisher.Outcome]) {
        let blocker = try asAnotherProcess { try SQLiteDatabase(path: layout.databaseFile.path) }
        try asAnotherProcess { try blocker.execute("BEGIN IMMEDIATE") }
        let lead = Task { await publisher.publish(first) }
        try await waitUntil { publisher.isPublishing && publisher.waitingCount == 0 }
        let rest = Task {
            await withTaskGroup(of: (String, GroupPublisher.Outcome).self) { group in
                for entry in entries { group.addTask { (entry.record.id, await publisher.publish(entry)) } }
                var outcomes: [String: GroupPublisher.Outcome] = [:]
                for await (id, outcome) in group { outcomes[id] = outcome }
                return outcomes
            }
        }
        try await waitUntil { publisher.waitingCount == entries.count }
        try asAnotherProcess { try meanwhile() }
        try asAnotherProcess { try blocker.execute("COMMIT") }
        return (await lead.value, await rest.value)
    }

    /// Polls `condition` between yields (state another thread changes, not time).
    private func waitUntil(_ condition: () -> Bool) async throws {
        for _ in 0..<10_000_000 {
            if condition() { return }
            await Task.yield()
        }
        Issue.record("the condition never held")
        throw CancellationError()
    }
}
