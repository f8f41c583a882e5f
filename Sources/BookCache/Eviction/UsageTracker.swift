import Synchronization

/// Which books this process is using right now (held open through the library, or being
/// downloaded), so eviction leaves them alone.
final class UsageTracker: Sendable {
    private let counts = Mutex<[String: Int]>([:])

    func begin(_ id: BookID) {
        counts.withLock { $0[id.description, default: 0] += 1 }
    }

    func end(_ id: BookID) {
        counts.withLock { counts in
            let key = id.description
            if let count = counts[key], count > 1 { counts[key] = count - 1 } else { counts[key] = nil }
        }
    }

    var inUse: Set<String> {
        counts.withLock { Set($0.keys) }
    }
}
