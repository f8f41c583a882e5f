import Synchronization

/// The body bytes that all transfers of one transport have received and their readers not yet
/// taken, against a bound: what keeps a batch's memory bounded however many transfers run.
///
/// Each transfer also pauses past its own ``CurlTransfer/pauseAbove``; this bound is shared. A
/// reader is slower than its transfer whenever the disk is (a batch's books arrive together on
/// a fast network while earlier ones are written and synced): without it, each of n transfers
/// kept up to its own bound unread, so memory grew with n (1 MiB books at 8 transfers: peak
/// private memory 15–17 MiB, up to 20.7). With it, the bytes past the bound wait in the kernel's
/// socket buffers, which TCP's window then limits.
final class BufferBudget: Sendable {
    /// The bytes kept unread at which transfers that keep some pause.
    let limit: Int
    private let kept = Atomic<Int>(0)
    private let most = Atomic<Int>(0)

    init(limit: Int) {
        self.limit = limit
    }

    /// A transfer kept `count` more bytes.
    func kept(_ count: Int) {
        most.max(kept.add(count, ordering: .relaxed).newValue, ordering: .relaxed)
    }

    /// A transfer's reader took `count` bytes, or the transfer went with them unread.
    func released(_ count: Int) {
        guard count > 0 else { return }
        kept.subtract(count, ordering: .relaxed)
    }

    /// Bytes kept unread now.
    var keptBytes: Int { kept.load(ordering: .relaxed) }

    /// The most bytes kept unread at once so far.
    var peak: Int { most.load(ordering: .relaxed) }
}
