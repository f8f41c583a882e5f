import BookCacheTestSupport
import Foundation
import Synchronization
import Testing

@testable import DownloadQueue

/// Threads of our own as a task's executor, as an app that prefers its own executor has them:
/// a task that prefers it resumes on any of its threads after each suspension.
private final class ThreadsExecutor: TaskExecutor, Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    init(threads: Int) {
        for _ in 0..<threads {
            Thread { [self] in
                while true {
                    ready.wait()
                    let job = jobs.withLock { $0.removeFirst() }
                    job.runSynchronously(on: asUnownedTaskExecutor())
                }
            }.start()
        }
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }
}

/// A slot's state is behind a `Mutex`, whose lock keeps the locking thread's id. In an `async`
/// function the compiler may keep the address of that id — a thread-local — across a suspension,
/// so a lock taken after an `await` on another thread wrote the first thread's id, and its
/// unlock failed: "Call to unlock Mutex on a thread which hasn't acquired the lock"
/// (`waitForAdmission`, after the queue's actor gave the slot). The compiler keeps the address so
/// only when it optimizes: this test failed on the old code every time in a release build
/// (`swift test -c release -Xswiftc -enable-testing`), not in a debug one.
@Suite("Downloads from tasks that prefer an executor of their own", .timeLimit(.minutes(1)))
struct ExecutorPreferenceTests {
    @Test("forty downloads through four slots, each task resuming on any of four threads, all arrive whole")
    func downloadsOnOwnExecutor() async throws {
        let body = payload(40_000)
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            let queue = makeQueue(maxConcurrent: 4)
            let executor = ThreadsExecutor(threads: 4)
            let hashes = try await withThrowingTaskGroup(of: String.self) { group in
                for index in 0..<40 {
                    group.addTask {
                        try await Task(executorPreference: executor) {
                            try await queue.download(job(server, "b", in: dir, as: "b\(index)")).sha256
                        }.value
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(hashes.count == 40)
            #expect(Set(hashes) == [sha256(body)])
        }
    }
}
