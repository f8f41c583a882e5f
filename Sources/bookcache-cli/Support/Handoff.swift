import Dispatch
import Synchronization

/// Hands values from one blocking-work thread to one other, in order, with at most `depth`
/// waiting: `put` blocks while the reader is behind, `take` while the writer is. Both sides run
/// in `BlockingWork.run`, never on the cooperative pool.
final class Handoff<Element: Sendable>: Sendable {
    private let waiting = Mutex<[Element?]>([])
    private let filled = DispatchSemaphore(value: 0)
    private let free: DispatchSemaphore

    /// - Parameter depth: How many values may wait for the reader.
    init(depth: Int) {
        free = DispatchSemaphore(value: depth)
    }

    /// Passes `value` on, waiting while `depth` values wait already.
    func put(_ value: Element) {
        send(value)
    }

    /// Tells the reader nothing more comes.
    func finish() {
        send(nil)
    }

    /// The next value, waiting for it; `nil` once the writer has finished (call no more then).
    func take() -> Element? {
        filled.wait()
        let value = waiting.withLock { $0.removeFirst() }
        free.signal()
        return value
    }

    private func send(_ value: Element?) {
        free.wait()
        waiting.withLock { $0.append(value) }
        filled.signal()
    }
}
