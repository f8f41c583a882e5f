import Synchronization

/// Wakes one waiting task: ``wait(until:clock:)`` returns when ``signal()`` is called (or was
/// called since the last wait) or when the deadline passes, whichever comes first.
final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())

    /// Wakes the waiter, or the next one to wait.
    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard let waiter = state.waiter else {
                state.pending = true
                return nil
            }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Waits for a signal, the deadline (`nil`: none) or the task's cancellation.
    func wait<C: Clock>(until deadline: C.Instant?, clock: C) async where C.Duration == Duration {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let ready = self.state.withLock { state -> Bool in
                            if state.pending {
                                state.pending = false
                                return true
                            }
                            state.waiter = continuation
                            return false
                        }
                        if ready { continuation.resume() }
                    }
                } onCancel: {
                    self.signal()
                }
            }
            if let deadline {
                group.addTask {
                    do {
                        try await clock.sleep(until: deadline, tolerance: nil)
                    } catch {
                        // Cancelled: the signal came first.
                        return
                    }
                    self.signal()
                }
            }
            await group.next()
            group.cancelAll()
        }
        // A signal from the timer or a cancellation after the wait ended is left pending: the
        // next wait returns at once, which costs the caller one more look at its queue.
    }
}
