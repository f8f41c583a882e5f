import Dispatch
import Synchronization

/// Passes values from a producer running as blocking work to `consume`, which runs on the other
/// blocking-work threads, one value at a time and in order, with at most `depth` waiting.
///
/// It never waits for work that has not started (the rule of ``BlockingPool``): when `depth`
/// values wait and no consumer is running, the producer consumes the oldest itself; it waits
/// only while a consumer is running, which needs nothing from it.
package final class Handoff<Element: Sendable>: Sendable {
    private struct State {
        var waiting: [Element] = []
        /// Whether someone (a drain on the pool, or the producer) is consuming: only one at a time.
        var consuming = false
        /// Whether a drain is queued on the pool and has not yet looked at the state.
        var scheduled = false
        /// Whether the producer waits for a running consumer to make progress.
        var producerWaits = false
    }

    private let depth: Int
    private let pool: BlockingPool
    private let consume: @Sendable (Element) -> Void
    private let state = Mutex(State())
    private let progress = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - depth: How many values may wait for a consumer.
    ///   - pool: Where the consumers run.
    ///   - consume: Called with each value, in order, never twice at once.
    package init(depth: Int, pool: BlockingPool = .shared, consume: @escaping @Sendable (Element) -> Void) {
        self.depth = depth
        self.pool = pool
        self.consume = consume
    }

    /// Passes `value` on; consumes or waits while `depth` values wait already.
    package func put(_ value: Element) {
        state.withLock { $0.waiting.append(value) }
        settle(untilEmpty: false)
    }

    /// Returns when every value passed on has been consumed.
    package func finish() {
        settle(untilEmpty: true)
    }

    private enum Step {
        case done
        case consumeHere(Element)
        case wait
    }

    /// The producer's side: hands waiting values to a drain, consumes them itself, or waits for a
    /// running drain, until at most `depth` values (or, finishing, none) wait.
    private func settle(untilEmpty: Bool) {
        while true {
            let (step, scheduleDrain) = state.withLock { state -> (Step, Bool) in
                let limit = untilEmpty ? 0 : depth
                if state.waiting.count <= limit, !(untilEmpty && state.consuming) {
                    guard !state.waiting.isEmpty, !state.consuming, !state.scheduled else { return (.done, false) }
                    state.scheduled = true
                    return (.done, true)
                }
                if state.consuming {
                    state.producerWaits = true
                    return (.wait, false)
                }
                state.consuming = true
                return (.consumeHere(state.waiting.removeFirst()), false)
            }
            switch step {
            case .done:
                if scheduleDrain { pool.submit { [self] _ in drain() } }
                return
            case .consumeHere(let value):
                consume(value)
                state.withLock { $0.consuming = false }
            case .wait:
                progress.wait()
            }
        }
    }

    /// A consumer on the pool: takes values in order until none waits.
    private func drain() {
        let start = state.withLock { state -> Bool in
            state.scheduled = false
            // The producer is consuming: it schedules another drain if it leaves values behind.
            guard !state.consuming else { return false }
            state.consuming = true
            return true
        }
        guard start else { return }
        while true {
            let value = state.withLock { state -> Element? in
                state.waiting.isEmpty ? nil : state.waiting.removeFirst()
            }
            if let value { consume(value) }
            let wake = state.withLock { state -> Bool in
                if value == nil { state.consuming = false }
                defer { state.producerWaits = false }
                return state.producerWaits
            }
            if wake { progress.signal() }
            if value == nil { return }
        }
    }
}
