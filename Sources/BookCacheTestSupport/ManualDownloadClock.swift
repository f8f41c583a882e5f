import DownloadQueue
import Synchronization

/// A ``DownloadClock`` in virtual time: `sleep` returns at once, moves the clock to the wake-up
/// time, and records how long was asked for. Retry tests check the delays without waiting.
public final class ManualDownloadClock: DownloadClock {
    private struct State {
        var now: Duration = .zero
        var sleeps: [Duration] = []
    }

    private let state = Mutex(State())
    private let onSleep: @Sendable (Int) -> Void

    /// Creates a clock at time zero.
    /// - Parameter onSleep: Called with the sleep's index (0 for the first) before it returns;
    ///   a test can change the server between attempts here.
    public init(onSleep: @escaping @Sendable (Int) -> Void = { _ in }) {
        self.onSleep = onSleep
    }

    /// Every sleep asked for, in order.
    public var sleeps: [Duration] { state.withLock { $0.sleeps } }

    public func now() -> Duration { state.withLock { $0.now } }

    public func sleep(for duration: Duration) async throws {
        try Task.checkCancellation()
        let index = state.withLock { state -> Int in
            state.sleeps.append(duration)
            state.now = max(state.now, state.now + duration)
            return state.sleeps.count - 1
        }
        onSleep(index)
        await Task.yield()
        try Task.checkCancellation()
    }
}
