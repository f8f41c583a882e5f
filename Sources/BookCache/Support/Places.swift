import Synchronization

/// A fixed number of places, taken and given back by tasks, waited for without blocking a
/// thread: first come, first served.
///
/// Waiting is not cancellable: it is for work that is finished once begun (a book whose body has
/// arrived is validated and published even when its download is cancelled), and every holder
/// gives its place back after work that is not cancellable either, so every wait ends.
final class Places: Sendable {
    private struct State {
        var free: Int
        var line: [CheckedContinuation<Void, Never>] = []
    }

    private let state: Mutex<State>

    /// The number of places.
    let count: Int

    init(_ count: Int) {
        self.count = max(1, count)
        state = Mutex(State(free: self.count))
    }

    /// How many places are taken now.
    var taken: Int { state.withLock { count - $0.free } }

    /// How many tasks wait for a place.
    var waiting: Int { state.withLock { $0.line.count } }

    /// Takes a place, waiting in line while none is free.
    func take() async {
        let free = state.withLock { state -> Bool in
            guard state.free > 0 && state.line.isEmpty else { return false }
            state.free -= 1
            return true
        }
        if free { return }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            // Decided again under the lock: a place given back since the first look is free now.
            let now = state.withLock { state -> Bool in
                if state.free > 0 && state.line.isEmpty {
                    state.free -= 1
                    return true
                }
                state.line.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// Gives a place back: to the first in line, if anyone waits.
    func give() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.line.isEmpty {
                state.free += 1
                return nil
            }
            return state.line.removeFirst()
        }
        next?.resume()
    }
}
