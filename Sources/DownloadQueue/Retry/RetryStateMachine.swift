/// The retry bookkeeping for one job, as a value type: each failure goes in, an action comes out.
/// Unit-tested without I/O.
struct RetryStateMachine: Sendable {
    /// What to do after a failed attempt.
    public enum Action: Sendable, Equatable {
        /// Try again after this delay. `holdHost` is set when the server asked every request to
        /// its host to wait (429 or 503 with `Retry-After`).
        case retry(after: Duration, holdHost: Bool)
        /// Give up; the error is final.
        case fail
    }

    /// The policy in force.
    public let policy: RetryPolicy
    /// Attempts made so far.
    public private(set) var attempts = 0
    /// Failed attempts in a row that added nothing to the partial file; ``RetryPolicy/retries``
    /// bounds this count, not ``attempts``.
    public private(set) var attemptsWithoutProgress = 0
    /// The most bytes any failed attempt left for the next to resume from.
    private var keptHighWater: Int64 = 0

    /// Creates the bookkeeping for a new job.
    public init(policy: RetryPolicy) {
        self.policy = policy
    }

    /// Records that an attempt starts.
    public mutating func attemptStarted() {
        attempts += 1
    }

    /// Decides what follows a failed attempt.
    ///
    /// An attempt that left a longer partial file than any before it (``DownloadError/keptBytes``)
    /// made progress: it does not use up a retry, and the backoff starts again from the first
    /// delay. So ``RetryPolicy/retries`` bounds the attempts in a row that brought nothing — a
    /// connection reset every 30 MB still finishes a 200 MB book, as with curl's
    /// `--retry-all-errors`, wget and aria2. The file's size bounds the attempts with progress.
    /// A policy with no retries never retries.
    /// - Parameters:
    ///   - error: Why the attempt failed.
    ///   - random: A number in `0..<1` for the jitter.
    public mutating func next(after error: DownloadError, random: Double) -> Action {
        if error.keptBytes > keptHighWater {
            keptHighWater = error.keptBytes
            attemptsWithoutProgress = 0
        } else {
            attemptsWithoutProgress += 1
        }
        guard error.isRetryable, policy.retries > 0, attemptsWithoutProgress <= policy.retries else { return .fail }
        if error.kind == .connectionFailed && !policy.retriesConnectionFailures { return .fail }
        var delay = policy.backoff(beforeRetry: max(1, attemptsWithoutProgress), random: random)
        var holdHost = false
        if let retryAfter = error.retryAfter, let status = error.statusCode, status == 429 || status == 503 {
            let honoured = policy.honoured(retryAfter)
            holdHost = honoured > .zero
            delay = max(delay, honoured)
        }
        return .retry(after: delay, holdHost: holdHost)
    }
}
