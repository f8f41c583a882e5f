import CBookCacheShims
import Dispatch
import Foundation
import Synchronization

/// The one place where work that blocks a thread runs: file writes and `fsync`, reading a
/// partial file back, lock files, validation, index reads and writes.
///
/// Swift's cooperative pool has one thread per core; a call that blocks there (a write to a slow
/// disk, a lock another process holds) stops every task scheduled on it. Such calls are sent
/// here instead, to the threads of ``BlockingPool/shared``, a fixed pool that is not the
/// cooperative one, so the cooperative pool keeps receiving bytes while a batch is written.
/// ``run(_:)`` suspends the calling task — it does not block it — until the work is done.
/// ``SerialExecutor`` gives an actor (the cache manager) an executor on the same threads, so its
/// synchronous index calls never run on the cooperative pool either.
///
/// Work here may block on the disk, on SQLite or on a lock another process holds for a moment,
/// but never on other work of this pool that has not started (see ``BlockingPool``): fan-out
/// from async code is a task group over ``run(_:)``; from blocking code, ``Lanes``.
package enum BlockingWork {
    /// Runs `body` on a blocking-work thread and returns its result.
    /// - Parameter body: Work that may block: file I/O, locks, CPU-heavy checks.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, with its type.
    package static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            BlockingPool.shared.submit { state in
                guard case .active = state else { preconditionFailure("the shared pool is never shut down") }
                continuation.resume(returning: Result { () throws(E) -> T in try body() })
            }
        }
        return try result.get()
    }

    /// Whether the calling thread may block: a thread of a ``BlockingPool`` (work sent with
    /// ``run(_:)``, or an actor on a ``SerialExecutor``), the main thread (the command line's;
    /// an app's is its own to decide), or a thread that runs no task (an app's own thread). A task
    /// on Swift's cooperative pool may not: it would stop every task scheduled behind it.
    package static var mayBlock: Bool {
        bookcache_is_blocking_thread() != 0 || Thread.isMainThread || withUnsafeCurrentTask { $0 == nil } || testMayBlock
    }

    /// Set by tests that call blocking internals from their own task on purpose: the index's SQL
    /// in white-box tests, or a lock held to play another process. Nothing in the library sets it.
    @TaskLocal package static var testMayBlock = false

    /// Stops a debug build (every test run) where a call that blocks, such as one to the index,
    /// is made from a task on the cooperative pool; release builds do not check. The place a call
    /// may run is thereby checked wherever it is made, not left to a comment.
    /// - Parameter what: The blocking call, for the message.
    package static func assertMayBlock(_ what: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line) {
        assert(
            mayBlock,
            "\(what()) blocks: make it from BlockingWork.run or an actor on BlockingWork.SerialExecutor, not from a task on the cooperative pool",
            file: file, line: line)
    }

    /// A serial executor whose jobs run on the blocking-work threads, one at a time and in the
    /// order they came, for an actor that makes blocking calls in its synchronous methods. It
    /// holds a pool thread only while it has jobs.
    package final class SerialExecutor: _Concurrency.SerialExecutor {
        private struct Jobs {
            var waiting: [UnownedJob] = []
            /// Whether a drain is queued or running on the pool.
            var draining = false
        }

        private let jobs = Mutex(Jobs())
        private let pool: BlockingPool

        /// Creates an executor.
        /// - Parameter pool: The pool its jobs run on.
        package init(pool: BlockingPool = .shared) {
            self.pool = pool
        }

        package func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            let startDrain = jobs.withLock { jobs -> Bool in
                jobs.waiting.append(job)
                defer { jobs.draining = true }
                return !jobs.draining
            }
            if startDrain { pool.submit { [self] _ in drain() } }
        }

        /// Runs the waiting jobs in order until none is left. (A shut-down pool still runs them:
        /// a job dropped would leave its task suspended for ever.)
        private func drain() {
            let executor = asUnownedSerialExecutor()
            while true {
                let batch = jobs.withLock { jobs -> [UnownedJob] in
                    defer { jobs.waiting.removeAll(keepingCapacity: true) }
                    if jobs.waiting.isEmpty { jobs.draining = false }
                    return jobs.waiting
                }
                if batch.isEmpty { return }
                for job in batch { job.runSynchronously(on: executor) }
            }
        }

        package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
            UnownedSerialExecutor(ordinary: self)
        }
    }
}
