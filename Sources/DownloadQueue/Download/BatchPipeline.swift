import Foundation

/// Hashes and writes one batch of a large body on its own thread while the next batch is
/// received, so the network, the hash and the disk overlap instead of taking turns.
///
/// At most one batch is in hand at a time: ``submit(_:)`` waits (without blocking a thread) for
/// the previous one to finish. The first failure is kept and thrown by the next ``submit(_:)`` or
/// ``drain()``. ``close()`` ends the thread once it is idle; call it on every path.
final class BatchPipeline: @unchecked Sendable {
    private let condition = NSCondition()
    private var queued: [[UInt8]]?
    private var busy = false
    private var closed = false
    private var failure: (any Error)?
    private var waiter: CheckedContinuation<Void, Never>?

    /// Starts the thread that runs `work` on each submitted batch, in order.
    init(work: @escaping @Sendable ([[UInt8]]) throws -> Void) {
        let thread = Thread { [self] in run(work) }
        thread.name = "bookcache-writer"
        thread.start()
    }

    /// Hands `batch` over once the previous batch is done.
    /// - Throws: The failure of an earlier batch, if any.
    func submit(_ batch: [[UInt8]]) async throws {
        await waitUntilIdle()
        try condition.withLock {
            if let failure { throw failure }
            queued = batch
            busy = true
            condition.signal()
        }
    }

    /// Waits for the batch in hand, if any.
    /// - Throws: The first failure of any batch.
    func drain() async throws {
        await waitUntilIdle()
        if let failure = condition.withLock({ failure }) { throw failure }
    }

    /// Lets the thread end once it has finished the batch in hand.
    func close() {
        condition.withLock {
            closed = true
            condition.signal()
        }
    }

    private func waitUntilIdle() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            condition.lock()
            if busy {
                waiter = continuation
                condition.unlock()
            } else {
                condition.unlock()
                continuation.resume()
            }
        }
    }

    private func run(_ work: ([[UInt8]]) throws -> Void) {
        condition.lock()
        while true {
            while queued == nil && !closed { condition.wait() }
            guard let batch = queued else { break }
            queued = nil
            condition.unlock()
            var error: (any Error)?
            do { try work(batch) } catch let thrown { error = thrown }
            condition.lock()
            if failure == nil, let error { failure = error }
            busy = false
            let resumed = waiter
            waiter = nil
            condition.unlock()
            resumed?.resume()
            condition.lock()
        }
        condition.unlock()
    }
}
