import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

#if canImport(Glibc)
    import Glibc
#endif

/// Books judged in worker processes (`bookcache validation-worker`): a worker that crashes, runs
/// out of memory or of time is the verdict on its book, never the test process's; a cancelled
/// book's worker is ended at once; the next book is judged by a new worker.
@Suite("Validation workers", .timeLimit(.minutes(3)))
struct ValidationWorkerTests {
    static let executable = ProcessRunner.productsDirectory.appendingPathComponent("bookcache").path

    static func workers(count: Int = 1) -> ValidationWorkers {
        ValidationWorkers(executable: executable, arguments: ["validation-worker"], count: count)
    }

    /// A FIFO in a fresh folder: a worker that opens it to judge it waits there, mid-book, until
    /// the test opens the other end.
    static func fifo(in dir: TemporaryDirectory) throws -> String {
        let path = dir.path("stuck.pdf").path
        try #require(mkfifo(path, 0o600) == 0)
        return path
    }

    /// Returns once a worker has opened `fifo` to judge it (opening the writing end waits for
    /// the reader), holding the writing end open so the worker waits on.
    static func workerOpened(_ fifo: String) async -> Int32 {
        await BlockingWork.run { open(fifo, O_WRONLY | O_CLOEXEC) }
    }

    /// A worker judging a FIFO: it waits there, mid-book, until the test ends it.
    struct StuckWorker {
        let dir: TemporaryDirectory
        let validation: BookValidation
        let judged: Task<ValidationReport, any Error>
        let writer: Int32
        let pid: Int32

        init() async throws {
            dir = try TemporaryDirectory("bookcache-worker")
            let fifo = try ValidationWorkerTests.fifo(in: dir)
            let validation = BookValidation.workers(ValidationWorkerTests.workers())
            self.validation = validation
            judged = Task { try await validation.judge(path: fifo, limits: ValidationLimits(), strict: false) }
            writer = await ValidationWorkerTests.workerOpened(fifo)
            pid = try #require(validation.workerProcesses.first)
        }

        func end() {
            close(writer)
            dir.remove()
        }
    }

    @Test("the fixtures get the same verdicts in a worker as in process")
    func sameVerdicts() async throws {
        let validation = BookValidation.workers(Self.workers(count: 2))
        let folder = Fixtures.books
        let names = try FileManager.default.subpathsOfDirectory(atPath: folder.path).filter {
            $0.hasSuffix(".epub") || $0.hasSuffix(".pdf")
        }
        #expect(names.count > 20)
        for name in names.sorted() {
            let path = folder.appendingPathComponent(name).path
            let here = await BlockingWork.run { Result { () throws(ValidationFailure) in try BookValidator().check(path: path) } }
            let there: Result<ValidationReport, ValidationFailure>
            do {
                there = .success(try await validation.judge(path: path, limits: ValidationLimits(), strict: false))
            } catch let failure as ValidationFailure {
                there = .failure(failure)
            }
            #expect(here == there, "\(name)")
        }
    }

    @Test("a worker that dies mid-book is that book's verdict; the next book is judged by a new worker")
    func workerKilledMidBook() async throws {
        // Given a worker judging a "book" that keeps it waiting
        let stuck = try await StuckWorker()
        defer { stuck.end() }
        let (validation, judged, pid) = (stuck.validation, stuck.judged, stuck.pid)
        // When it crashes (as a stack overflow would)
        kill(pid, SIGSEGV)
        // Then the book is refused as not judged safely, in words
        do {
            _ = try await judged.value
            Issue.record("a book whose worker crashed was accepted")
        } catch let failure as ValidationFailure {
            #expect(failure.kind == .unjudgeable)
            #expect(failure.reason.contains("crashed on it (signal 11)"), "\(failure.reason)")
        }
        // And the next book is judged, by another worker
        let report = try await validation.judge(
            path: Fixtures.books.appendingPathComponent("alice.epub").path, limits: ValidationLimits(), strict: false)
        #expect(report.format == .epub)
        #expect(validation.workerProcesses.first != pid)
    }

    @Test("cancelling a book while it is judged ends its worker at once")
    func cancelledBookEndsItsWorker() async throws {
        let stuck = try await StuckWorker()
        defer { stuck.end() }
        let (validation, judged, pid) = (stuck.validation, stuck.judged, stuck.pid)
        // When the task is cancelled
        judged.cancel()
        // Then it ends as cancelled, and the worker is gone (reaped: no such process)
        await #expect(throws: CancellationError.self) { try await judged.value }
        #expect(kill(pid, 0) == -1 && errno == ESRCH)
        #expect(validation.workerProcesses.isEmpty)
    }

    @Test("a book waiting for a worker is cancelled without one")
    func cancelledWhileWaiting() async throws {
        let dir = try TemporaryDirectory("bookcache-worker")
        defer { dir.remove() }
        let fifo = try Self.fifo(in: dir)
        let validation = BookValidation.workers(Self.workers(count: 1))
        let first = Task { try await validation.judge(path: fifo, limits: ValidationLimits(), strict: false) }
        let writer = await Self.workerOpened(fifo)
        // The second waits for the one worker
        let second = Task {
            try await validation.judge(
                path: Fixtures.books.appendingPathComponent("alice.epub").path, limits: ValidationLimits(), strict: false)
        }
        second.cancel()
        await #expect(throws: CancellationError.self) { try await second.value }
        first.cancel()
        close(writer)
        _ = try? await first.value
    }

    @Test("a book that takes longer than its wall-clock budget is refused as out of time")
    func wallClock() async throws {
        let dir = try TemporaryDirectory("bookcache-worker")
        defer { dir.remove() }
        let fifo = try Self.fifo(in: dir)
        var settings = Self.workers()
        settings.cpuSeconds = 0.05
        settings.cpuSecondsPerMiB = 0
        settings.wallClockSlack = 0
        let validation = BookValidation.workers(settings)
        // The FIFO is held open for reading and writing here (which does not wait on Linux): the
        // worker's open finds a writer and its read waits for bytes that never come. (A blocking
        // open of the writing end waited forever when the worker was killed before it opened the
        // FIFO: the fresh-clone CI run hit that.)
        let holder = open(fifo, O_RDWR | O_NONBLOCK | O_CLOEXEC)
        try #require(holder >= 0)
        defer { close(holder) }
        do {
            _ = try await validation.judge(path: fifo, limits: ValidationLimits(), strict: false)
            Issue.record("a book that never ended was accepted")
        } catch let failure as ValidationFailure {
            #expect(failure.kind == .unjudgeable)
            #expect(failure.reason.contains("ran out of time"), "\(failure.reason)")
        }
    }

    @Test("a worker that runs out of memory on a book is that book's verdict, in words")
    func outOfMemory() async throws {
        // Given a memory bound below what a worker needs to read any book
        var settings = Self.workers()
        settings.memoryBytes = 32 << 20
        let validation = BookValidation.workers(settings)
        do {
            let report = try await validation.judge(
                path: Fixtures.books.appendingPathComponent("fixture-monthly-2024-05.pdf").path, limits: ValidationLimits(), strict: false)
            Issue.record("judged within 32 MiB of address space: \(report)")
        } catch let failure as ValidationFailure {
            #expect(failure.kind == .unjudgeable)
            #expect(failure.reason.contains("ran out of memory"), "\(failure.reason)")
        }
    }

    @Test("hostile books are refused by a worker, and the worker judges on")
    func hostileBooks() async throws {
        let dir = try TemporaryDirectory("bookcache-worker")
        defer { dir.remove() }
        let validation = BookValidation.workers(Self.workers())
        let books: [(String, [UInt8])] = [
            ("deep.pdf", HostileBooks.deepPageTree(levels: 20_000)),
            ("bomb.pdf", HostileBooks.nestedFlate(layers: 2, decodedBytes: 64 << 20)),
            ("catalogs.pdf", HostileBooks.catalogsWithoutObjects(count: 40_000)),
        ]
        var pids = Set<Int32>()
        for (name, bytes) in books {
            let path = dir.path(name).path
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            await #expect(throws: ValidationFailure.self, "\(name)") {
                try await validation.judge(path: path, limits: ValidationLimits(), strict: false)
            }
            pids.formUnion(validation.workerProcesses)
        }
        #expect(pids.count == 1, "one worker judged them all")
    }

    @Test("a worker holds none of this process's descriptors, even one opened without close-on-exec (a lock's would keep the lock)")
    func noInheritedDescriptors() async throws {
        let dir = try TemporaryDirectory("bookcache-worker")
        defer { dir.remove() }
        let held = dir.path("held.lock").path
        let descriptor = open(held, O_RDWR | O_CREAT, 0o600)
        try #require(descriptor >= 0)
        defer { close(descriptor) }
        let validation = BookValidation.workers(Self.workers())
        _ = try await validation.judge(
            path: Fixtures.books.appendingPathComponent("alice.epub").path, limits: ValidationLimits(), strict: false)
        let pid = try #require(validation.workerProcesses.first)
        let descriptors = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")
        let targets = descriptors.compactMap { try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)") }
        #expect(!targets.contains(held), "\(targets)")
        #expect(descriptors.count <= 6, "standard input, output, error and the runtime's own: \(targets)")
    }

    @Test("requests and replies come through their frames whole; a frame cut short or longer than it says is malformed")
    func frames() throws {
        var limits = ValidationLimits()
        limits.maxPDFDecodingRatio = 7
        limits.maxEntries = 12
        let entry = ZIPStreamReader.Entry(
            header: ZIPStreamReader.Header(rawName: [0x6D, 0xFF, 0x00], method: 8, crc32: 0xDEAD_BEEF, compressedSize: 5, size: -1),
            vouched: true)
        let requests = [
            WorkerRequest(
                path: "/tmp/ü b.epub", strict: true, limits: limits, arrived: [entry, entry], memoryLimit: 1 << 40, cpuSeconds: 2.5),
            WorkerRequest(path: "", strict: false, limits: ValidationLimits(), arrived: nil),
        ]
        for request in requests {
            let frame = WorkerFrame.encode(request)
            #expect(WorkerFrame.length(of: frame) == frame.count - 4)
            #expect(try WorkerFrame.decodeRequest(Array(frame.dropFirst(4))) == request)
            #expect(throws: WorkerFrame.Malformed.self) { try WorkerFrame.decodeRequest(Array(frame.dropFirst(4).dropLast())) }
            #expect(throws: WorkerFrame.Malformed.self) { try WorkerFrame.decodeRequest(Array(frame.dropFirst(4)) + [0]) }
        }
        let replies = [
            WorkerReply(report: ValidationReport(format: .epub, warnings: ["a", "b — ü"], language: "de", published: nil)),
            WorkerReply(report: ValidationReport(format: .pdf, warnings: [])),
            WorkerReply(failure: ValidationFailure("could not be judged safely: …", kind: .unjudgeable)),
        ]
        for reply in replies {
            let frame = WorkerFrame.encode(reply)
            #expect(try WorkerFrame.decodeReply(Array(frame.dropFirst(4))) == reply)
        }
        #expect(throws: WorkerFrame.Malformed.self) {
            try WorkerFrame.decodeReply([WorkerFrame.version, 1, 0, 0, 0, 0, 3, 0, 0, 0, 0x6E, 0x6F, 0x21])
        }
    }

    @Test("a book cancelled after its worker answered leaves the worker alone: it is back in the pool and judges the next book")
    func cancelledAfterTheAnswer() async throws {
        let validation = BookValidation.workers(Self.workers())
        let alice = Fixtures.books.appendingPathComponent("alice.epub").path
        // `then` runs after the answer: it waits there until the task has been cancelled
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let judged = Task {
            await validation.judge(path: alice, limits: ValidationLimits(), strict: false, arrived: { nil }) { judgement in
                entered.signal()
                proceed.wait()
                return judgement
            }
        }
        await BlockingWork.run { entered.wait() }
        let pid = try #require(validation.workerProcesses.first)
        judged.cancel()
        proceed.signal()
        guard case .accepted = await judged.value else {
            Issue.record("the book's verdict changed with a cancellation that came after it")
            return
        }
        #expect(kill(pid, 0) == 0, "the worker was killed after it had answered")
        _ = try await validation.judge(path: alice, limits: ValidationLimits(), strict: false)
        #expect(validation.workerProcesses == [pid], "the same worker judged the next book")
    }

    @Test("verify with a worker that cannot judge a book says it was not checked; repair leaves the book (it is not corrupt)")
    func verifyDoesNotRemoveWhatItCouldNotJudge() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            // Given a book cached as usual
            let cache = dir.path("cache")
            let cached = BookCacheManager(configuration: BookCacheConfiguration(rootDirectory: cache, storageReserveBytes: 0))
            let id = try BookID(type: .ebook, bookId: "alice")
            _ = try await cached.download(try BookDownloadRequest(url: "\(server.baseURL)/alice.epub", id: id))
            // When it is verified by workers given too little memory to judge anything
            var workers = Self.workers()
            workers.memoryBytes = 32 << 20
            var configuration = BookCacheConfiguration(rootDirectory: cache, storageReserveBytes: 0)
            configuration.validation = .workers(workers)
            let starved = BookCacheManager(configuration: configuration)
            let report = try await starved.verify(repair: true)
            // Then it is not a problem, it is said to be unchecked, and it is still cached
            #expect(report.problems.isEmpty, "\(report.problems)")
            #expect(
                report.warnings[id.description]?.first?.hasPrefix("not checked: could not be judged safely") == true, "\(report.warnings)")
            #expect(try await cached.status(of: id) != .notCached)
        }
    }
}
