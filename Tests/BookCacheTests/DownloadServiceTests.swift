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
