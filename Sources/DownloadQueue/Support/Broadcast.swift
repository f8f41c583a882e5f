import Foundation
import Synchronization

/// Sends each value to every stream made by ``stream()`` and still listened to. A slow listener
/// keeps the newest 4,096 values; a stream that ends stops receiving. The queue's events and the
/// cache's (book events, evictions, the service's jobs) go out through it.
package final class Broadcast<Element: Sendable>: Sendable {
    private let continuations = Mutex<[UUID: AsyncStream<Element>.Continuation]>([:])

    package init() {}

    /// A new listener's stream, of the values yielded from now on.
    package func stream() -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(4096))
        let key = UUID()
        continuations.withLock { $0[key] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.continuations.withLock { $0.removeValue(forKey: key) }
        }
        return stream
    }

    /// Ends every stream made so far (they deliver what they hold, then finish).
    package func finish() {
        let ended = continuations.withLock { continuations -> [AsyncStream<Element>.Continuation] in
            defer { continuations.removeAll() }
            return Array(continuations.values)
        }
        for continuation in ended { continuation.finish() }
    }

    /// Sends `value` to every listener.
    package func yield(_ value: Element) {
        continuations.withLock { continuations in
            for continuation in continuations.values { continuation.yield(value) }
        }
    }
}
