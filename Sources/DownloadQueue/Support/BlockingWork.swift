import Dispatch
import Synchronization

/// The one place where work that blocks a thread runs: file writes and `fsync`, reading a
/// partial file back, lock files, validation, index reads and writes.
///
/// Swift's cooperative pool has one thread per core; a call that blocks there (a write to a slow
/// disk, a `flock` another process holds) stops every task scheduled on it. Such calls are sent
/// here instead, to dispatch threads that are not the pool's, so the pool keeps receiving bytes
/// while a batch is written. ``run(_:)`` suspends the calling task — it does not block it — until
/// the work is done. ``SerialExecutor`` gives an actor (the cache manager) an executor on such a
/// thread, so its synchronous index calls never run on the pool either.
///
/// Each call goes to a serial queue of its own. Serial queues are served by dispatch's
/// overcommitting threads, which it adds when every thread is blocked; a concurrent queue is
/// served by one thread per core, and work that blocks there waits for dispatch to notice the
/// starvation — about 0.8 s, measured on `verify`, whose two lanes block one another.
package enum BlockingWork {
    /// A queue for one piece of blocking work.
    static func queue() -> DispatchQueue {
        DispatchQueue(label: "bookcache.blocking", qos: .userInitiated)
    }

    /// Runs `body` on a blocking-work thread and returns its result.
    /// - Parameter body: Work that may block: file I/O, locks, CPU-heavy checks.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, with its type.
    package static func run<T: Sendable, E: Error>(_ body: @escaping @Sendable () throws(E) -> T) async throws(E) -> T {
        let result: Result<T, E> = await withCheckedContinuation { continuation in
            queue().async {
                continuation.resume(returning: Result { () throws(E) -> T in try body() })
            }
        }
        return try result.get()
    }

    /// Runs `body` on a blocking-work thread, telling it whether the calling task has been
    /// cancelled meanwhile (`Task.isCancelled` there would always be `false`: it is no task).
    /// - Parameter body: Work that may block, given a check it can call between steps.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws, with its type.
    package static func run<T: Sendable, E: Error>(
        cancellable body: @escaping @Sendable (_ isCancelled: @Sendable () -> Bool) throws(E) -> T
    ) async throws(E) -> T {
        let cancelled = Mutex(false)
        let result: Result<T, E> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                queue().async {
                    continuation.resume(returning: Result { () throws(E) -> T in try body({ cancelled.withLock { $0 } }) })
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
        return try result.get()
    }

    /// A serial executor whose jobs run on the blocking-work threads, one at a time, for an actor
    /// that makes blocking calls in its synchronous methods.
    package final class SerialExecutor: _Concurrency.SerialExecutor {
        private let queue: DispatchQueue

        /// Creates an executor.
        /// - Parameter label: The dispatch label, seen in debuggers and crash reports.
        package init(label: String) {
            queue = DispatchQueue(label: label, qos: .userInitiated)
        }

        package func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            let executor = asUnownedSerialExecutor()
            queue.async { job.runSynchronously(on: executor) }
        }

        package func asUnownedSerialExecutor() -> UnownedSerialExecutor {
            UnownedSerialExecutor(ordinary: self)
        }
    }
}
