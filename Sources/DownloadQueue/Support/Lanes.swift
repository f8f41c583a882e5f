import Foundation

/// Runs CPU-bound work on several threads at once and waits for all of it: lane 0 on the
/// calling thread, the others on ``BlockingWork``'s threads.
///
/// Call it from blocking work (a ``BlockingWork/run(_:)`` body, the manager's executor) or from
/// a command's own thread, never from a task on the cooperative pool: it waits. Unlike
/// `DispatchQueue.concurrentPerform`, a call nested inside another parallel section still gets
/// threads (dispatch runs a nested apply serially once its pool is busy, so a book validated
/// while the verifier hashes it would use one core).
package enum Lanes {
    /// The processors this process may use, read once (each read of it opens cgroup files).
    package static let available = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Calls `body(lane)` for each lane in `0..<count`, concurrently, and returns when all are done.
    package static func run(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
        guard count > 1 else {
            if count == 1 { body(0) }
            return
        }
        let done = DispatchGroup()
        for lane in 1..<count {
            BlockingWork.queue().async(group: done) { body(lane) }
        }
        body(0)
        done.wait()
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
