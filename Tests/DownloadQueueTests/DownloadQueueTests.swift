import BookCacheTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import DownloadQueue

/// A body of `count` bytes that differs from others by `seed`.
func payload(_ count: Int, seed: UInt8 = 0) -> Data {
    Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) })
}

func sha256(_ data: Data) -> String {
    SHA256Hasher.hex(of: data)
}

/// A job that fetches `/path` from the test server into `name` in the test's directory.
func job(_ server: TestHTTPServer, _ path: String, in dir: TemporaryDirectory, as name: String) -> DownloadRequest {
    DownloadRequest(url: URL(string: "\(server.baseURL)/\(path)")!, destination: dir.path(name).path)
}

func makeQueue(maxConcurrent: Int = 4, retries: Int = 3, clock: ManualDownloadClock = ManualDownloadClock()) -> DownloadQueue {
    DownloadQueue(
        maxConcurrent: maxConcurrent, retryPolicy: RetryPolicy(retries: retries), transport: CurlTransport.shared,
        clock: clock, random: { 0 }, logger: Logger(label: "test"))
}

@Suite("DownloadQueue against the fault server", .timeLimit(.minutes(1)))
struct DownloadQueueTests {
    let body = payload(100_000)

    @Test("a batch from one host keeps its connections between books: no more than the transfers at once")
    func connectionsKept() async throws {
        let files = Dictionary(uniqueKeysWithValues: (0..<300).map { ("b\($0)", payload(20_000, seed: UInt8($0 % 251))) })
        try await withServerAndDirectory(files: files) { server, dir in
            // A transport of its own: the shared one's idle connections are every test's.
            let transport = CurlTransport()
            defer { transport.shutdown() }
            let queue = DownloadQueue(
                maxConcurrent: 8, retryPolicy: RetryPolicy(retries: 0), transport: transport, clock: ManualDownloadClock(),
                random: { 0 }, logger: Logger(label: "test"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<300 {
                    group.addTask { _ = try await queue.download(job(server, "b\(index)", in: dir, as: "b\(index)")) }
                }
                try await group.waitForAll()
            }
            // libcurl's default cache (four connections per transfer running when one ends) closed
            // connections between books: 13-20 here before.
            #expect(server.connectionCount <= 8)
        }
    }

    @Test("an enqueued job that ends, in success or failure, leaves nothing behind in the queue")
    func enqueuedJobsAreForgotten() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            let queue = makeQueue(retries: 0)
            let good = await queue.enqueue(job(server, "b", in: dir, as: "b"))
            let bad = await queue.enqueue(job(server, "status/404", in: dir, as: "missing"))
            _ = try await good.result()
            await #expect(throws: DownloadError.self) { try await bad.result() }
            #expect(await queue.trackedJobCount == 0)
        }
    }

    @Test("a job that ends in its slot without a request frees the slot, and sends nothing")
    func slotWithoutRequest() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            let queue = makeQueue(maxConcurrent: 1)
            let answer = await queue.withSlot(for: job(server, "b", in: dir, as: "a")) { slot in
                slot.id.description
            }
            #expect(answer.hasPrefix("job-"))
            #expect(server.requestCount(for: "/b") == 0)
            #expect(await queue.activeCount == 0)
            // With one slot, a leaked slot would hold this download back for ever.
            let file = try await queue.download(job(server, "b", in: dir, as: "b"))
            #expect(file.sha256 == sha256(body))
        }
    }

    @Test("the response head is a value: refused, its body is not written and the slot is freed")
    func headRefused() async throws {
        struct NoRoom: Error {}
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            let queue = makeQueue(maxConcurrent: 1)
            let destination = dir.path("refused")
            var request = job(server, "b", in: dir, as: "refused")
            request.resume = false
            let error = await #expect(throws: NoRoom.self) {
                try await queue.withSlot(for: request) { slot in
                    guard case .head(let opened) = try await slot.open() else { throw NoRoom() }
                    #expect(opened.head.expectedLength == Int64(body.count))
                    opened.cancel()
                    throw NoRoom()
                }
            }
            #expect(error != nil)
            #expect(!FileManager.default.fileExists(atPath: destination.path))
            #expect(await queue.activeCount == 0)
            let file = try await queue.download(job(server, "b", in: dir, as: "b"))
            #expect(file.byteCount == Int64(body.count))
        }
    }

    @Test("503 twice then 200: three requests, each wait at least Retry-After")
    func serviceUnavailableTwice() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.status(503, retryAfter: "2"), for: "/b")
            server.enqueueFault(.status(503, retryAfter: "2"), for: "/b")
            let clock = ManualDownloadClock()
            let queue = makeQueue(clock: clock)
            let file = try await queue.download(job(server, "b", in: dir, as: "b"))
            #expect(file.sha256 == sha256(body))
            #expect(server.requestCount(for: "/b") == 3)
            let retrySleeps = clock.sleeps.filter { $0 >= .seconds(2) }
            #expect(retrySleeps.count >= 2)
        }
    }

    @Test("429 with Retry-After is waited out")
    func tooManyRequests() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.status(429, retryAfter: "5"), for: "/b")
            let clock = ManualDownloadClock()
            let file = try await makeQueue(clock: clock).download(
                job(server, "b", in: dir, as: "b"))
            #expect(file.byteCount == Int64(body.count))
            #expect(clock.sleeps.contains { $0 >= .seconds(5) })
            #expect(server.requestCount(for: "/b") == 2)
        }
    }

    @Test("404 is not retried: exactly one request")
    func notFoundOnce() async throws {
        try await withServerAndDirectory { server, dir in
            let clock = ManualDownloadClock()
            let error = await #expect(throws: DownloadError.self) {
                try await makeQueue(clock: clock).download(job(server, "nothing", in: dir, as: "n"))
            }
            #expect(error?.statusCode == 404)
            #expect(error?.attempts == 1)
            #expect(server.requestCount(for: "/nothing") == 1)
            #expect(clock.sleeps.isEmpty)
        }
    }

    @Test("retries exhausted: the error names the attempts")
    func exhausted() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            for _ in 0..<10 { server.enqueueFault(.status(500), for: "/b") }
            let error = await #expect(throws: DownloadError.self) {
                try await makeQueue(retries: 3).download(job(server, "b", in: dir, as: "b"))
            }
            #expect(error?.attempts == 4)
            #expect(error?.description.contains("4 attempts") == true)
            #expect(server.requestCount(for: "/b") == 4)
        }
    }

    @Test("a connection dropped at 40% is resumed with a Range request")
    func resumeAfterDrop() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            let cut = body.count * 4 / 10
            server.enqueueFault(.dropAfter(bytes: cut), for: "/b")
            let file = try await makeQueue().download(job(server, "b", in: dir, as: "b"))
            #expect(file.sha256 == sha256(body))
            // The client keeps what reached it before the drop (at most the 40%), and asks for the rest.
            #expect(file.resumedFrom > 0 && file.resumedFrom <= Int64(cut))
            let second = server.requests.filter { $0.path == "/b" }.last
            #expect(second?.headers["range"] == "bytes=\(file.resumedFrom)-")
            #expect(second?.headers["if-range"] != nil)
            #expect(try Data(contentsOf: dir.path("b")) == body)
            #expect(!FileManager.default.fileExists(atPath: dir.path("b.resume").path))
        }
    }

    @Test("a server that ignores Range gets the whole file again, and the result is right")
    func ignoredRange() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: 30_000), for: "/b")
            server.enqueueFault(.ignoreRange, for: "/b")
            let file = try await makeQueue().download(job(server, "b", in: dir, as: "b"))
            #expect(file.resumedFrom == 0)
            #expect(file.sha256 == sha256(body))
            #expect(try Data(contentsOf: dir.path("b")) == body)
            // The first attempt's record, which named bytes of the partial now replaced, is gone too
            #expect(!FileManager.default.fileExists(atPath: dir.path("b.resume").path))
        }
    }

    @Test("an ETag that changes between attempts: the final file is the new content")
    func changedETag() async throws {
        let newBody = payload(120_000, seed: 9)
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: 50_000), for: "/b")
            let oldETag = server.etag(for: "b")
            let clock = ManualDownloadClock(onSleep: { _ in server.setFile(newBody, at: "b") })
            let file = try await makeQueue(clock: clock).download(
                job(server, "b", in: dir, as: "b"))
            #expect(file.sha256 == sha256(newBody))
            #expect(file.resumedFrom == 0)
            #expect(try Data(contentsOf: dir.path("b")) == newBody)
            // The second request did ask for the rest, with the old validator
            #expect(server.requests.last?.headers["range"]?.hasPrefix("bytes=") == true)
            #expect(server.requests.last?.headers["if-range"] == oldETag)
            #expect(oldETag != server.etag(for: "b"))
        }
    }

    @Test("a chunked body dropped part-way is retried to completion")
    func chunkedDrop() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.chunkedDropAfter(bytes: 60_000), for: "/b")
            let file = try await makeQueue().download(job(server, "b", in: dir, as: "b"))
            #expect(file.sha256 == sha256(body))
            #expect(server.requestCount(for: "/b") == 2)
        }
    }

    @Test("a 206 for another range than asked is not appended; the file starts over")
    func wrongContentRange() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: 40_000), for: "/b")
            server.enqueueFault(.partialFrom(offset: 10), for: "/b")
            let file = try await makeQueue().download(job(server, "b", in: dir, as: "b"))
            #expect(file.sha256 == sha256(body))
            #expect(file.resumedFrom == 0)
            #expect(server.requestCount(for: "/b") == 3)
            // The third request starts over: no Range
            #expect(server.requests.last?.headers["range"] == nil)
        }
    }

    @Test("a partial file and its record survive a failed run, and the next run resumes it")
    func resumeAcrossRuns() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: 70_000), for: "/b")
            let request = job(server, "b", in: dir, as: "b")
            // A first queue that gives up after one attempt (as a killed process would)
            await #expect(throws: DownloadError.self) { try await makeQueue(retries: 0).download(request) }
            #expect(FileManager.default.fileExists(atPath: dir.path("b").path))
            #expect(FileManager.default.fileExists(atPath: dir.path("b.resume").path))
            // A new queue picks it up
            let file = try await makeQueue(retries: 0).download(request)
            #expect(file.resumedFrom > 0)
            #expect(file.sha256 == sha256(body))
        }
    }

    @Test("a file that shrank on the server (416) is fetched whole")
    func rangeNotSatisfiable() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.dropAfter(bytes: 90_000), for: "/b")
            let request = job(server, "b", in: dir, as: "b")
            await #expect(throws: DownloadError.self) { try await makeQueue(retries: 0).download(request) }
            // Same ETag, but only 1000 bytes now: a Range from ~90,000 cannot be satisfied.
            let small = payload(1000, seed: 4)
            server.setFile(small, at: "b", etag: server.etag(for: "b"))
            let file = try await makeQueue(retries: 0).download(request)
            #expect(file.sha256 == sha256(small))
            #expect(server.requests.suffix(2).map { $0.headers["range"] == nil } == [false, true])
        }
    }

    @Test("in-flight requests never exceed the limit (counted at the server)")
    func concurrencyLimit() async throws {
        var files: [String: Data] = [:]
        for i in 0..<12 { files["f\(i)"] = payload(10_000, seed: UInt8(i)) }
        try await withServerAndDirectory(files: files) { server, dir in
            // Every request is held until 3 are in flight at once, so a queue that sent more
            // than 3 at a time would show it in the server's count.
            server.holdUntilConcurrent(3)
            let queue = makeQueue(maxConcurrent: 3)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<12 {
                    let request = job(server, "f\(i)", in: dir, as: "f\(i)")
                    group.addTask { _ = try await queue.download(request) }
                }
                try await group.waitForAll()
            }
            #expect(server.maxConcurrentRequests == 3)
            #expect(server.requests.count == 12)
        }
    }

    @Test("a high-priority job queued last starts before queued normal ones")
    func priorities() async throws {
        var files: [String: Data] = ["first": payload(1000)]
        for name in ["n1", "n2", "n3", "high", "low"] { files[name] = payload(1000) }
        try await withServerAndDirectory(files: files) { server, dir in
            let queue = makeQueue(maxConcurrent: 1)
            server.holdRequests(to: "/first")
            func request(_ name: String, _ priority: DownloadPriority) -> DownloadRequest {
                DownloadRequest(url: URL(string: "\(server.baseURL)/\(name)")!, destination: dir.path(name).path, priority: priority)
            }
            let first = await queue.enqueue(request("first", .normal))
            await server.waitForRequests(count: 1)
            // While the only slot is busy, queue low, three normal, then high.
            var handles = [await queue.enqueue(request("low", .low))]
            for name in ["n1", "n2", "n3"] { handles.append(await queue.enqueue(request(name, .normal))) }
            handles.append(await queue.enqueue(request("high", .high)))
            server.releaseHeld()
            _ = try await first.result()
            for handle in handles { _ = try await handle.result() }
            #expect(server.requests.map(\.path) == ["/first", "/high", "/n1", "/n2", "/n3", "/low"])
        }
    }

    @Test("a 503 with Retry-After holds back the other jobs for that host")
    func hostHold() async throws {
        try await withServerAndDirectory(files: ["a": body, "b": body]) { server, dir in
            server.enqueueFault(.status(503, retryAfter: "30"), for: "/a")
            let clock = ManualDownloadClock()
            let queue = makeQueue(maxConcurrent: 1, clock: clock)
            let a = await queue.enqueue(job(server, "a", in: dir, as: "a"))
            let b = await queue.enqueue(job(server, "b", in: dir, as: "b"))
            _ = try await a.result()
            _ = try await b.result()
            // b was held until the Retry-After had passed: the clock moved at least 30 s
            // before its request, so no request for /b came between the 503 and the retry.
            let paths = server.requests.map(\.path)
            #expect(paths.first == "/a")
            #expect(clock.now() >= .seconds(30))
            #expect(paths.firstIndex(of: "/b")! > 1, "\(paths)")
        }
    }

    @Test("events arrive in order: queued, started, progress, retrying, started, finished")
    func eventsInOrder() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            server.enqueueFault(.status(503), for: "/b")
            let queue = makeQueue()
            let all = await queue.events()
            let handle = await queue.enqueue(job(server, "b", in: dir, as: "b"))
            var kinds: [String] = []
            for await event in handle.events {
                switch event {
                case .queued: kinds.append("queued")
                case .started(_, let attempt): kinds.append("started\(attempt)")
                case .progress: if kinds.last != "progress" { kinds.append("progress") }
                case .retrying(_, let attempt, _, _): kinds.append("retrying\(attempt)")
                case .finished(_, let result): kinds.append((try? result.get()) != nil ? "finished" : "failed")
                }
            }
            #expect(kinds == ["queued", "started1", "retrying1", "started2", "progress", "finished"])
            var sawFinished = false
            for await event in all {
                if case .finished(let id, _) = event, id == handle.id {
                    sawFinished = true
                    break
                }
            }
            #expect(sawFinished)
        }
    }

    @Test("cancelAll ends waiting and running jobs")
    func cancelAll() async throws {
        try await withServerAndDirectory(files: ["a": body, "b": body]) { server, dir in
            let queue = makeQueue(maxConcurrent: 1)
            server.holdRequests(to: "/a")
            let a = await queue.enqueue(job(server, "a", in: dir, as: "a"))
            await server.waitForRequests(count: 1)
            let b = await queue.enqueue(job(server, "b", in: dir, as: "b"))
            await queue.cancelAll()
            let errors = [
                await #expect(throws: DownloadError.self) { try await a.result() },
                await #expect(throws: DownloadError.self) { try await b.result() },
            ]
            #expect(errors.map { $0?.kind } == [.cancelled, .cancelled])
            server.releaseHeld()
            #expect(server.requestCount(for: "/b") == 0)
            #expect(await queue.activeCount == 0)
        }
    }

    @Test("cancelling a waiting job ends it without a request")
    func cancelWaiting() async throws {
        try await withServerAndDirectory(files: ["first": body, "second": body]) { server, dir in
            let queue = makeQueue(maxConcurrent: 1)
            server.holdRequests(to: "/first")
            let first = await queue.enqueue(job(server, "first", in: dir, as: "1"))
            await server.waitForRequests(count: 1)
            let second = await queue.enqueue(job(server, "second", in: dir, as: "2"))
            second.cancel()
            let error = await #expect(throws: DownloadError.self) { try await second.result() }
            #expect(error?.kind == .cancelled)
            server.releaseHeld()
            _ = try await first.result()
            #expect(server.requestCount(for: "/second") == 0)
        }
    }
}
