/// The retry bookkeeping for one job, as a value type: each failure goes in, an action comes out.
/// Unit-tested without I/O.
public struct RetryStateMachine: Sendable {
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

    /// Creates the bookkeeping for a new job.
    public init(policy: RetryPolicy) {
        self.policy = policy
    }

    /// Records that an attempt starts.
    public mutating func attemptStarted() {
        attempts += 1
    }

    /// Decides what follows a failed attempt.
    /// - Parameters:
    ///   - error: Why the attempt failed.
    ///   - random: A number in `0..<1` for the jitter.
    public func next(after error: DownloadError, random: Double) -> Action {
        guard error.isRetryable, attempts <= policy.retries else { return .fail }
        if error.kind == .connectionFailed && !policy.retriesConnectionFailures { return .fail }
        var delay = policy.backoff(beforeRetry: attempts, random: random)
        var holdHost = false
        if let retryAfter = error.retryAfter, let status = error.statusCode, status == 429 || status == 503 {
            let honoured = policy.honoured(retryAfter)
            holdHost = honoured > .zero
            delay = max(delay, honoured)
        }
        return .retry(after: delay, holdHost: holdHost)
    }
}
