/// Where one book download stands and what it does next: the download's steps as one value with
/// no I/O, so every path through them — a book another process cached meanwhile, a transfer that
/// is retried, a resumed file refused and fetched again from the start, a failure at any step — is
/// decided in one place and tested on its own. ``DownloadContext`` performs each action and feeds
/// its outcome back with ``next(_:)``.
///
/// ```
/// waiting ─admitted─▶ admitted ─locked─▶ locked ─found(cached)─▶ cached (as it was)
///                                           └─found(nothing)─▶ opening
/// opening ─opened─▶ head ─roomMade─▶ receiving ─bodyArrived─▶ received ─placeTaken─▶ validating
/// opening, receiving ─transferRetrying─▶ opening   (every attempt; a new response's room is checked again)
/// validating ─validated─▶ publishing ─published─▶ cached
/// validating ─refused, after a resume, once─▶ opening (from byte 0; the place is given back)
/// any phase ─failed─▶ failed
/// ```
///
/// The book's events follow the same steps, each sent once through the download's
/// ``DownloadFeed``: `validating` when a place is taken, `cached` when the book is returned (found
/// or published), `failed` when the download gives up; the queue's events (queued, started,
/// progress, retrying) as the queue reports them.
struct DownloadMachine: Equatable {
    /// Where the download stands.
    enum Phase: Equatable {
        /// In the queue's line.
        case waiting
        /// Holds a transfer slot.
        case admitted
        /// Holds the book's lock.
        case locked
        /// The request is sent (again), the head awaited.
        case opening
        /// The response head has arrived; room on the disk is being made for the body.
        case head
        /// The body is streaming into `partial/`.
        case receiving
        /// Every byte has arrived; waiting for a place among the books awaiting publish.
        case received
        /// Holds a place; the transfer's slot went to the next book; the file is being checked.
        case validating
        /// Handed to the group publisher.
        case publishing
        /// Done: cached now, or found cached.
        case cached
        /// Done: failed for good.
        case failed
    }

    /// What a step ended with.
    enum Outcome: Equatable {
        case admitted
        case locked
        /// The index was read: whether the book is cached whole already.
        case found(cached: Bool)
        case opened
        case roomMade
        case bodyArrived
        /// The attempt failed (before its head, or in its body) and the queue's policy retries it:
        /// the slot was given up for the delay, and the request goes again.
        case transferRetrying
        case placeTaken
        case validated
        /// Validation refused the file; `resumed` when part of it came from an earlier attempt.
        case refused(resumed: Bool)
        case published
        case failed
    }

    /// What to do next.
    enum Action: Equatable {
        case lock
        case readIndex
        /// Send the request (a place held from an earlier try is given back first).
        case open
        case makeRoom
        case receive
        /// Take a place among the books awaiting publish, then give the transfer's slot up.
        case takePlace
        case validate
        case publish
        /// Return the book found cached.
        case returnCached
        /// Return the book just published.
        case returnPublished
        /// Give up with the error the last step threw.
        case fail
    }

    /// A step found the download in a phase it cannot be in: a bug, reported as
    /// ``BookCacheError/Kind/unexpected`` rather than guessed around.
    struct Stuck: Error, CustomStringConvertible {
        let phase: Phase
        var description: String { "the download's steps went out of order (in phase \(phase))" }
    }

    private(set) var phase = Phase.waiting
    /// Whether the file was already fetched again from the start after a refusal.
    private(set) var restartedFromStart = false

    /// The action that follows `outcome` in the current phase. An outcome the phase cannot have
    /// (a bug of the caller's) fails the download rather than guessing.
    mutating func next(_ outcome: Outcome) -> Action {
        switch (phase, outcome) {
        case (_, .failed): return move(to: .failed, .fail)
        case (.waiting, .admitted): return move(to: .admitted, .lock)
        case (.admitted, .locked): return move(to: .locked, .readIndex)
        case (.locked, .found(let cached)): return cached ? move(to: .cached, .returnCached) : move(to: .opening, .open)
        case (.opening, .opened): return move(to: .head, .makeRoom)
        case (.opening, .transferRetrying): return move(to: .opening, .open)
        case (.head, .roomMade): return move(to: .receiving, .receive)
        case (.receiving, .transferRetrying): return move(to: .opening, .open)
        case (.receiving, .bodyArrived): return move(to: .received, .takePlace)
        case (.received, .placeTaken): return move(to: .validating, .validate)
        case (.validating, .validated): return move(to: .publishing, .publish)
        case (.validating, .refused(let resumed)):
            // The fault may be the partial file's, not the URL's: once, fetch it all again.
            guard resumed && !restartedFromStart else { return move(to: .failed, .fail) }
            restartedFromStart = true
            return move(to: .opening, .open)
        case (.publishing, .published): return move(to: .cached, .returnPublished)
        default: return move(to: .failed, .fail)
        }
    }

    private mutating func move(to next: Phase, _ action: Action) -> Action {
        phase = next
        return action
    }
}
