import CBookCacheShims
import Dispatch
import Foundation
import Synchronization

/// A fixed set of threads for work that blocks, with a lifecycle — as swift-nio's
/// `NIOThreadPool`: threads are started on demand up to ``size``, work waits in one queue in the
/// order it came, and ``shutdownGracefully()`` runs what is queued, then ends the threads.
///
/// Most code reaches it through ``BlockingWork``, which runs on ``shared``. The rule that keeps a
/// fixed pool from deadlocking: **work on the pool never waits for pool work that has not
/// started.** ``Lanes`` runs lanes nobody has started on the waiting thread itself, and waits only
/// for lanes already running; async callers fan out with task groups over ``run(_:)``, which
/// suspend instead of waiting.
package final class BlockingPool: Sendable {
    /// What a piece of work is told when it is run: whether the pool still takes work.
    package enum WorkState: Sendable {
        /// The pool is running: do the work.
        case active
        /// The pool was shut down before the work could be taken: do not do it.
        case cancelled
    }

    /// A piece of work, told whether the pool is still active.
    package typealias Work = @Sendable (WorkState) -> Void

    /// Thrown by ``runIfActive(_:)`` on a pool that has been shut down.
    package struct Inactive: Error, CustomStringConvertible {
        package var description: String { "the blocking-work pool has been shut down" }
    }

    /// The pool every ``BlockingWork`` call runs on, never shut down. Its size is twice the
    /// processors, at least 16: enough for every slot of a batch to have a write or an `fsync`
    /// outstanding while the checks of others run.
    package static let shared = BlockingPool(size: max(16, 2 * ProcessInfo.processInfo.activeProcessorCount), label: "bookcache-pool")

    private enum Lifecycle {
        case running
        case stopping
        case stopped
    }

    private struct State {
        var lifecycle = Lifecycle.running
        /// Queued work; `head` is the next to take (the array is compacted as it drains).
        var queue: [Work] = []
        var head = 0
        var threads = 0
        /// Threads waiting for a signal.
        var waiting = 0
        var stopWaiters: [CheckedContinuation<Void, Never>] = []

        mutating func take() -> Work? {
            guard head < queue.count else { return nil }
            let work = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            } else if head >= 1024, head * 2 >= queue.count {
                queue.removeFirst(head)
                head = 0
            }
            return work
        }
    }

    /// How many threads the pool runs at most.
    package let size: Int
    /// The threads' name (at most 15 bytes reach the kernel).
    package let label: String
    private let state = Mutex(State())
    /// One signal per queued piece of work, and one per thread when the pool stops.
    private let ready = DispatchSemaphore(value: 0)

    /// Creates a pool; its threads start as work arrives.
    /// - Parameters:
    ///   - size: The most threads it runs at once (at least 1).
    ///   - label: The threads' name, seen in debuggers and crash reports.
    package init(size: Int, label: String) {
        precondition(size >= 1, "a pool needs a thread")
        self.size = size
        self.label = label
    }

    /// Queues `work`; it is called with ``WorkState/active`` on a pool thread, or at once with
    /// ``WorkState/cancelled`` when the pool has been shut down.
    package func submit(_ work: @escaping Work) {
        let spawn = state.withLock { state -> Bool? in
            guard state.lifecycle == .running else { return nil }
            state.queue.append(work)
            // A thread more when more work waits than threads do, and the pool is not full.
            guard state.queue.count - state.head > state.waiting, state.threads < size else { return false }
            state.threads += 1
            return true
        }
        guard let spawn else { return work(.cancelled) }
        if spawn { startThread() }
        ready.signal()
    }

    /// Runs `body` on a pool thread and returns its result, suspending the calling task (not
    /// blocking it) meanwhile.
    /// - Throws: What `body` throws, or ``Inactive`` when the pool has been shut down.
    package func runIfActive<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        let result: Result<T, any Error> = await withCheckedContinuation { continuation in
            submit { state in
                guard case .active = state else { return continuation.resume(returning: .failure(Inactive())) }
                continuation.resume(returning: Result { try body() })
            }
        }
        return try result.get()
    }

    /// Stops taking work, runs what is queued, and returns when every thread has ended. Work
    /// submitted afterwards is called with ``WorkState/cancelled``.
    package func shutdownGracefully() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let (threads, resumeNow) = state.withLock { state -> (Int, Bool) in
                switch state.lifecycle {
                case .stopped:
                    return (0, true)
                case .stopping:
                    state.stopWaiters.append(continuation)
                    return (0, false)
                case .running:
                    if state.threads == 0 {
                        state.lifecycle = .stopped
                        return (0, true)
                    }
                    state.lifecycle = .stopping
                    state.stopWaiters.append(continuation)
                    return (state.threads, false)
                }
            }
            for _ in 0..<threads { ready.signal() }
            if resumeNow { continuation.resume() }
        }
    }

    private func startThread() {
        Thread { [self] in
            Self.nameCurrentThread(label)
            bookcache_mark_blocking_thread()
            work()
        }.start()
    }

    /// Names the calling thread where ps, top, perf and gdb read it (the kernel keeps 15 bytes).
    /// From inside the thread and with `pthread_setname_np` itself: a name given before `start()`
    /// does not reach the thread on Linux, and `Thread.current.name` set first thing reached it
    /// only sometimes (a loaded run of the tests read the creator's name, `oot.default-qos`).
    package static func nameCurrentThread(_ name: String) {
        // Fails only off Linux; the name is for people reading profiles, nothing depends on it.
        _ = bookcache_name_current_thread(name)
    }

    /// A thread's life: take work as it is signalled; end when the pool stops and nothing is left.
    private func work() {
        while true {
            state.withLock { $0.waiting += 1 }
            ready.wait()
            let next = state.withLock { state -> Work? in
                state.waiting -= 1
                return state.take()
            }
            guard let next else {
                // No work for this signal: the pool is stopping.
                let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
                    state.threads -= 1
                    guard state.threads == 0 else { return [] }
                    state.lifecycle = .stopped
                    defer { state.stopWaiters.removeAll() }
                    return state.stopWaiters
                }
                for waiter in waiters { waiter.resume() }
                return
            }
            next(.active)
        }
    }
}
