import Dispatch
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
