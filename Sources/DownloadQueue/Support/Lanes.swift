import Dispatch
import Foundation
import Synchronization

/// Runs CPU-bound work on several threads at once and waits for all of it, from blocking code
/// (a validator, the index's rebuild) that cannot suspend.
///
/// The calling thread runs lanes too, and it never waits for a lane that has not started: lanes
/// are offered to ``BlockingPool/shared``, and whichever comes first — a pool thread or the
/// caller, once its own lane is done — takes the next one. The caller waits only for lanes
/// already running, which need nothing from it, so a nested call or a busy pool makes the work
/// slower, never stuck. (Unlike `DispatchQueue.concurrentPerform`, a call nested inside another
/// parallel section still gets threads when the pool has them.) Async code fans out with a task
/// group over ``BlockingWork/run(_:)`` instead.
package enum Lanes {
    /// The processors this process may use, read once (each read of it opens cgroup files).
    package static let available = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Calls `body(lane)` for each lane in `0..<count`, concurrently, and returns when all are done.
    package static func run(_ count: Int, on pool: BlockingPool = .shared, _ body: @escaping @Sendable (Int) -> Void) {
        guard count > 1 else {
            if count == 1 { body(0) }
            return
        }
        let section = Section(count: count, body: body)
        for _ in 1..<count {
            pool.submit { _ in section.work() }
        }
        section.work()
        section.waitForRunning()
    }

    /// The lanes of one call: the next lane to take, and the lanes not yet finished.
    private final class Section: Sendable {
        private let count: Int
        private let body: @Sendable (Int) -> Void
        private let next = Mutex(0)
        private let unfinished: Mutex<Int>
        private let allDone = DispatchSemaphore(value: 0)

        init(count: Int, body: @escaping @Sendable (Int) -> Void) {
            self.count = count
            self.body = body
            unfinished = Mutex(count)
        }

        /// Takes and runs lanes until none is left to take.
        func work() {
            while true {
                let lane = next.withLock { next -> Int? in
                    guard next < count else { return nil }
                    defer { next += 1 }
                    return next
                }
                guard let lane else { return }
                body(lane)
                let last = unfinished.withLock { unfinished -> Bool in
                    unfinished -= 1
                    return unfinished == 0
                }
                if last { allDone.signal() }
            }
        }

        /// Returns when every lane has finished; called after ``work()`` found none left to
        /// take, so what it waits for is running.
        func waitForRunning() {
            allDone.wait()
        }
    }

    /// Calls `body(lane)` for each lane in `0..<count`, concurrently, and returns the results in
    /// lane order.
    package static func map<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> T) -> [T] {
        let slots = Slots<T>(count: count)
        run(count) { lane in slots.store(body(lane), at: lane) }
        return slots.values
    }

    /// One slot per lane, each written by its own lane only, read after all have finished.
    // Unchecked: each lane writes only its own slot; the slots are read after every lane has ended.
    private final class Slots<T>: @unchecked Sendable {
        private let buffer: UnsafeMutableBufferPointer<T?>

        init(count: Int) {
            buffer = .allocate(capacity: count)
            buffer.initialize(repeating: nil)
        }

        deinit {
            buffer.deinitialize()
            buffer.deallocate()
        }

        func store(_ value: T, at lane: Int) {
            buffer[lane] = value
        }

        var values: [T] { buffer.map { $0! } }
    }
}
