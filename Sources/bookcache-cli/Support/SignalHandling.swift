import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Turns SIGINT and SIGTERM into a call, so a run can stop starting jobs, cancel the running
/// ones (their partial files are kept for resume) and exit with the conventional status.
final class SignalWatcher: Sendable {
    private let state = SignalState()
    // Dispatch sources are not Sendable; they are only kept alive here, never used again.
    nonisolated(unsafe) private let sources: [any DispatchSourceSignal]

    /// The signal that arrived, if any.
    var signal: Int32? { state.value }

    /// Starts watching; `onSignal` runs once, for the first signal.
    init(onSignal: @escaping @Sendable (Int32) -> Void) {
        let queue = DispatchQueue(label: "bookcache.signals")
        let state = self.state
        var made: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            _ = Glibc.signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler {
                if state.recordFirst(number) { onSignal(number) }
            }
            source.resume()
            made.append(source)
        }
        sources = made
    }

    /// The exit status for the signal received: 128 + its number.
    var exitStatus: Int32? { signal.map { 128 + $0 } }
}

private final class SignalState: Sendable {
    private let received = Mutex<Int32?>(nil)

    var value: Int32? { received.withLock { $0 } }

    /// Records the signal; `true` only for the first one.
    func recordFirst(_ number: Int32) -> Bool {
        received.withLock { value in
            guard value == nil else { return false }
            value = number
            return true
        }
    }
}
