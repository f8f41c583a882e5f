import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// The download service as an app runs it: without HTTP, in-process.
@Suite("DownloadService")
struct DownloadServiceTests {
    @Test("each priority's word names it, and no other word names one")
    func priorityWords() {
        for priority in DownloadPriority.allCases { #expect(DownloadPriority(word: priority.word) == priority) }
        #expect(DownloadPriority.allCases.map(\.word).joined(separator: ", ") == "low, normal, high")
        for word in ["urgent", "High", " high", ""] { #expect(DownloadPriority(word: word) == nil, "\(word)") }
    }

    @Test("submitted jobs run to their end, with events; a second service over the same cache sees them; a book's active job is reused")
    func runsJobs() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let manager = makeManager(dir)
            let service = DownloadService(manager: manager)
            let events = service.events()
            let runner = Task { try await service.run() }
            let body = #"[{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}, {"url": "\#(server.baseURL)/gone.epub", "id": "gone"}]"#
            let jobs = try await service.submit(Data(body.utf8))
            #expect(jobs.map(\.state) == [.queued, .queued])
            let alice = try #require(try await service.waitForEnd(of: jobs[0].id, timeout: .seconds(60)))
            #expect(alice.state == .cached)
            #expect(alice.bytes == alice.total)
            let gone = try #require(try await service.waitForEnd(of: jobs[1].id, timeout: .seconds(60)))
            #expect(gone.state == .failed)
            #expect(gone.error?.kind == "downloadFailed")
            #expect(try await manager.status(of: BookID(parsing: "ebook-alice")) != .notCached)
            // The events told the story: accepted, then cached
            var seen: [ServiceJob.State] = []
            for await event in events {
                if case .job(let job) = event, job.id == jobs[0].id { seen.append(job.state) }
                if seen.last == .cached { break }
            }
            #expect(seen.first == .queued && seen.last == .cached, "\(seen)")
            runner.cancel()
            try await runner.value

            // The jobs are in the database: another service over the cache reads them
            let again = DownloadService(manager: makeManager(dir))
            #expect(try await again.jobs().map(\.state) == [.cached, .failed])
        }
    }

    @Test("a submission is checked whole: one bad element refuses it, naming each bad one; nothing is stored")
    func refusesBadSubmissions() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = DownloadService(manager: makeManager(dir))
        let bad =
            #"[{"url": "https://example.com/a.epub"}, {"url": "nope"}, {"url": "https://example.com/b.epub", "priority": "urgent"}, 3]"#
        let error = await #expect(throws: DownloadService.SubmissionError.self) { try await service.submit(Data(bad.utf8)) }
        #expect(error?.problems.map(\.index) == [1, 2, 3])
        #expect(try await service.jobs().isEmpty)
        for body in ["", "{}", "[]", "\"url\""] {
            await #expect(throws: DownloadService.SubmissionError.self, "\(body)") { try await service.submit(Data(body.utf8)) }
        }
        // The same book twice in one submission, and again later, is one job while it has not ended
        let twice = #"[{"url": "https://127.0.0.1:1/a.epub", "id": "a"}, {"url": "https://127.0.0.1:1/a.epub", "id": "a"}]"#
        let jobs = try await service.submit(Data(twice.utf8))
        #expect(jobs.count == 2 && jobs[0].id == jobs[1].id)
        #expect(try await service.submit(Data(#"{"url": "https://127.0.0.1:1/a.epub", "id": "a"}"#.utf8)).first?.id == jobs[0].id)
        #expect(try await service.jobs().count == 1)
    }

    @Test("a cancelled queued job ends cancelled and is not run")
    func cancelsQueued() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = DownloadService(manager: makeManager(dir))
            let jobs = try await service.submit(Data(#"{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}"#.utf8))
            #expect(try await service.cancel(jobs[0].id)?.state == .cancelled)
            let runner = Task { try await service.run() }
            // A second job, submitted after the run started, ends; the cancelled one was never fetched
            let later = try await service.submit(Data(#"{"url": "\#(server.baseURL)/pride.epub", "id": "pride"}"#.utf8))
            #expect(try await service.waitForEnd(of: later[0].id, timeout: .seconds(60))?.state == .cached)
            #expect(server.requestCount(for: "/alice.epub") == 0)
            #expect(try await service.cancel("0000000000000000") == nil)
            runner.cancel()
            try await runner.value
        }
    }
}

/// A book that ends the service at every start (issue 55) must not end it forever.
@Suite("DownloadService: no crash loops", .blockingInternals)
struct CrashLoopTests {
    @Test("a job the service died judging twice is failed at the next start, in words; retried, it counts from zero")
    func crashLoop() async throws {
        // Given a job a service was judging when it died (its state left downloading, the
        // book's judging mark left behind)
        let dir = try TemporaryDirectory("bookcache-crashloop")
        defer { dir.remove() }
        let manager = BookCacheManager(configuration: BookCacheConfiguration(rootDirectory: dir.url))
        let service = DownloadService(manager: manager)
        let submitted = try await service.submit(Data(#"[{"url": "http://127.0.0.1:9/deep.pdf", "id": "deep"}]"#.utf8))
        let layout = CacheLayout(root: dir.url)
        let store = try JobStore(layout: layout)
        var job = try #require(submitted.first)
        let mark = layout.judgingMark(for: try BookID(parsing: job.bookId))
        func died(judging: Bool) throws {
            job.state = .downloading
            try store.update(job)
            if judging {
                try FileManager.default.createDirectory(at: mark.deletingLastPathComponent(), withIntermediateDirectories: true)
                try Data().write(to: mark)
            }
        }
        func restart() throws -> (requeued: Int, failed: Int) {
            try store.requeueInterrupted(now: Date()) { FileManager.default.fileExists(atPath: mark.path) && $0 == job.bookId }
        }
        try died(judging: true)
        // When the service starts again, once: the job is queued again
        #expect(try restart() == (requeued: 1, failed: 0))
        #expect(try store.job(job.id)?.state == .queued)
        try FileManager.default.removeItem(at: mark)
        // A death while its bytes arrive is not counted
        try died(judging: false)
        #expect(try restart() == (requeued: 1, failed: 0))
        // And when it died judging it a second time, the next start fails it, saying why
        try died(judging: true)
        #expect(try restart() == (requeued: 0, failed: 1))
        let failed = try #require(try store.job(job.id))
        #expect(failed.state == .failed)
        #expect(
            failed.error?.message.contains("stopped unexpectedly 2 times while it judged this book") == true,
            "\(String(describing: failed.error))")
        // A retry starts its count again: one more death queues it again
        let retried = try #require(try await service.retry(job.id))
        #expect(retried.state == .queued)
        job = retried
        try died(judging: true)
        #expect(try restart() == (requeued: 1, failed: 0))
    }

    @Test("a job table made before the count was kept gains it")
    func olderTable() throws {
        let dir = try TemporaryDirectory("bookcache-crashloop")
        defer { dir.remove() }
        let layout = CacheLayout(root: dir.url)
        // The table as an older bookcache made it (without the column)
        let database = try SQLiteDatabase(path: layout.databaseFile.path)
        try database.execute(JobStore.schema)
        #expect(try JobStore(layout: layout).requeueInterrupted(now: Date()) { _ in true } == (requeued: 0, failed: 0))
    }

    @Test("a service's book is marked while it is judged (a worker that never answers sees the mark), and the mark goes with the verdict")
    func judgingMark() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let seen = dir.path("seen").path
            let mark = CacheLayout(root: dir.path("cache")).judgingMark(for: try BookID(parsing: "ebook-alice"))
            // A "worker" that notes the mark once it is there and never answers: the wall clock ends it
            let script = "while [ ! -e '\(mark.path)' ]; do sleep 0.01; done; touch '\(seen)'; exec sleep 100"
            var workers = ValidationWorkers(executable: "/bin/sh", arguments: ["-c", script])
            (workers.cpuSeconds, workers.cpuSecondsPerMiB, workers.wallClockSlack) = (1, 0, 0)
            var configuration = BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: .none)
            configuration.validation = .workers(workers)
            configuration.marksBooksBeingJudged = true
            let manager = BookCacheManager(configuration: configuration)
            let alice = try BookDownloadRequest(url: "\(server.baseURL)/alice.epub", id: BookID(type: .ebook, bookId: "alice"))
            do {
                _ = try await manager.download(alice)
                Issue.record("a book whose worker never answered was cached")
            } catch let error as BookCacheError {
                #expect(error.kind == .unjudgeable, "\(error)")
                #expect(error.message.contains("ran out of time"), "\(error.message)")
            }
            #expect(FileManager.default.fileExists(atPath: seen), "the mark was there while the book was judged")
            #expect(!FileManager.default.fileExists(atPath: mark.path), "and is gone with the verdict")
        }
    }

    @Test("an app's or a command's book is not marked (two file-system operations a book only a service needs)")
    func noMarkOutsideService() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let manager = makeManager(dir)
            let result = try await manager.download(
                try BookDownloadRequest(url: "\(server.baseURL)/alice.epub", id: BookID(type: .ebook, bookId: "alice")))
            #expect(!result.wasAlreadyCached)
            let partial = manager.layout.partialFolder.path
            #expect(try FileManager.default.contentsOfDirectory(atPath: partial).filter { $0.hasSuffix(".judging") }.isEmpty)
        }
    }
}
