import Synchronization

/// Which books this process is using right now (held open through the library, or being
/// downloaded and not yet published), so eviction leaves them alone.
final class UsageTracker: Sendable {
    private struct State {
        var counts: [String: Int] = [:]
        /// Books that a download here has published, by how many such downloads still hold their
        /// lock (from inside the index update that records the book to the lock's release after it
        /// commits).
        var published: [String: Int] = [:]
    }

    private let state = Mutex(State())

    func begin(_ id: BookID) {
        state.withLock { $0.counts[id.description, default: 0] += 1 }
    }

    func end(_ id: BookID) {
        state.withLock { Self.decrement(&$0.counts, id.description) }
    }

    var inUse: Set<String> {
        state.withLock { Set($0.counts.keys) }
    }

    /// Books a download here has published and whose lock it still holds: that lock does not make
    /// them busy.
    var publishedHere: Set<String> {
        state.withLock { Set($0.published.keys) }
    }

    /// A download of `id` in this process begins: its book is in use until it is published or
    /// the download ends.
    func beginDownload(_ id: BookID) -> Download {
        begin(id)
        return Download(id: id, tracker: self)
    }

    /// One download's use of its book.
    final class Download: Sendable {
        enum Phase { case running, published, ended }
        let id: BookID
        private let tracker: UsageTracker
        private let phase = Mutex(Phase.running)

        fileprivate init(id: BookID, tracker: UsageTracker) {
            self.id = id
            self.tracker = tracker
        }

        /// The book is published (inside the index update that records it): from here it is
        /// not in use for this download, nor busy for its lock — a book whose download has
        /// published it but not yet returned made the next books of a batch under a budget
        /// find it busy, and refused them.
        func published() {
            move(from: .running, to: .published)
        }

        /// The update that recorded it did not commit: the book is in use again.
        func unpublished() {
            move(from: .published, to: .running)
        }

        /// The download's part in its book ended: the book recorded and its lock released (by the
        /// publisher), or the download returned. Once; later calls do nothing.
        func end() {
            let was = phase.withLock { phase in
                defer { phase = .ended }
                return phase
            }
            tracker.move(id, from: was, to: .ended)
        }

        private func move(from old: Phase, to new: Phase) {
            let moved = phase.withLock { phase in
                guard phase == old else { return false }
                phase = new
                return true
            }
            if moved { tracker.move(id, from: old, to: new) }
        }
    }

    /// A download's book moves from one count to the other: in use while it runs, published here
    /// once published, neither once it has returned.
    private func move(_ id: BookID, from old: Download.Phase, to new: Download.Phase) {
        let key = id.description
        state.withLock { state in
            switch old {
            case .running: Self.decrement(&state.counts, key)
            case .published: Self.decrement(&state.published, key)
            case .ended: break
            }
            switch new {
            case .running: state.counts[key, default: 0] += 1
            case .published: state.published[key, default: 0] += 1
            case .ended: break
            }
        }
    }

    private static func decrement(_ counts: inout [String: Int], _ key: String) {
        if let count = counts[key], count > 1 { counts[key] = count - 1 } else { counts[key] = nil }
    }
}
