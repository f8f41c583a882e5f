/// The state of one curl transfer as its caller and libcurl's callbacks see it, and what each
/// event means the transfer must do: a value type with no I/O and no continuations, so every
/// order of events is tested without libcurl (as async-http-client's state machines are).
/// ``CurlTransfer`` keeps it behind a `Mutex`, with the continuations it says to resume.
struct CurlTransferState {
    /// How a transfer ended (the transfer keeps the error itself).
    enum End: Equatable {
        case success
        case failure
    }

    /// What to do with body bytes that just arrived.
    enum BodyArrival: Equatable {
        /// Hand them to the reader that waits for them.
        case toReader
        /// Keep them (``buffer(_:)``) until the reader asks.
        case buffer
        /// Do not take them: pause the transfer (libcurl hands them over again once unpaused).
        case pause
    }

    /// What a reader asking for the next buffer gets.
    enum Read: Equatable {
        /// This buffer.
        case give([UInt8])
        /// The body ended.
        case end
        /// The transfer failed.
        case fail
        /// Nothing yet: wait; unpause the transfer first when it is paused.
        case wait(unpause: Bool)
    }

    /// A transfer pauses once this many bytes wait unread.
    let pauseAbove: Int
    /// Transfers that keep bytes unread pause once they keep this many together.
    let sharedLimit: Int
    /// Whether a caller waits for the response head (delivered with the first body bytes, or
    /// at the end of a transfer without a body).
    private(set) var headWaiting = false
    /// Whether a reader waits for the next buffer.
    private(set) var readerWaiting = false
    /// Whether the transfer is paused because nobody reads.
    private(set) var paused = false
    /// How the transfer ended, once it has.
    private(set) var end: End?
    private var buffered: [[UInt8]] = []
    /// Bytes received and not yet read.
    private(set) var bufferedBytes = 0

    init(pauseAbove: Int, sharedLimit: Int = .max) {
        self.pauseAbove = pauseAbove
        self.sharedLimit = sharedLimit
    }

    /// The caller waits for the head.
    mutating func headRequested() {
        headWaiting = true
    }

    /// `count` body bytes arrived; `deliverHead` is true for the first ones while a caller waits
    /// for the head.
    ///
    /// `allKeep` is what the transport's transfers keep unread, this one's included
    /// (``BufferBudget``). Alone, a transfer pauses past ``pauseAbove``; beside others that keep
    /// bytes too, it also pauses once they all keep ``sharedLimit``. One that keeps nothing always
    /// takes the bytes, so every transfer goes on; together they keep at most the larger bound
    /// (one transfer may fill its own before the others start) and one callback's bytes a transfer.
    mutating func bodyArrived(count: Int, allKeep: Int = 0) -> (deliverHead: Bool, action: BodyArrival) {
        let deliverHead = headWaiting
        headWaiting = false
        let sharedFull = bufferedBytes > 0 && allKeep > bufferedBytes && allKeep >= sharedLimit
        if !readerWaiting && (bufferedBytes >= pauseAbove || sharedFull) {
            paused = true
            return (deliverHead, .pause)
        }
        if readerWaiting {
            readerWaiting = false
            return (deliverHead, .toReader)
        }
        return (deliverHead, .buffer)
    }

    /// Keeps bytes that ``bodyArrived(count:)`` said to buffer.
    mutating func buffer(_ bytes: [UInt8]) {
        buffered.append(bytes)
        bufferedBytes += bytes.count
    }

    /// The transfer ended. Returns whether the head is to be delivered now (or failed), and
    /// whether a waiting reader is to be told the end (there is nothing left for it to read).
    mutating func finished(_ end: End) -> (deliverHead: Bool, endReader: Bool) {
        self.end = end
        let deliverHead = headWaiting
        headWaiting = false
        let endReader = readerWaiting && buffered.isEmpty
        if endReader { readerWaiting = false }
        return (deliverHead, endReader)
    }

    /// The reader asks for the next buffer: what is buffered first, then the end.
    mutating func read() -> Read {
        if !buffered.isEmpty {
            let buffer = buffered.removeFirst()
            bufferedBytes -= buffer.count
            return .give(buffer)
        }
        switch end {
        case .success: return .end
        case .failure: return .fail
        case nil:
            readerWaiting = true
            return .wait(unpause: paused)
        }
    }

    /// The driver is about to unpause the transfer: `true` when it was paused (and now is not).
    mutating func unpause() -> Bool {
        guard paused else { return false }
        paused = false
        return true
    }
}
