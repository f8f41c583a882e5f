import Foundation

/// When and how often a failed download is tried again.
///
/// Only retryable failures are retried (see ``DownloadError/isRetryable``): connection errors,
/// timeouts, bodies cut short, 408, 429 and 5xx. Never other 4xx, never a refused response,
/// never after cancellation.
///
/// The delay before retry *n* (counting from 1) is `min(baseDelay × multiplier^(n−1), maxDelay)`,
/// then scaled by a random factor in `[1 − jitter, 1]` so many clients do not retry in step.
/// With the defaults (0.5 s, ×2, 30 s cap, jitter 0.5):
///
/// | retry | delay before it |
/// | --- | --- |
/// | 1 | 0.25–0.5 s |
/// | 2 | 0.5–1 s |
/// | 3 | 1–2 s |
/// | 4 | 2–4 s |
/// | 5 | 4–8 s |
/// | 6 | 8–16 s |
/// | 7 | 15–30 s (capped) |
/// | 8 and later | 15–30 s |
///
/// A `Retry-After` from the server (seconds or an HTTP date, on 429 and 503) replaces the
/// computed delay when it is longer, up to ``maxRetryAfter``.
public struct RetryPolicy: Sendable, Hashable {
    /// Extra attempts after the first; 0 disables retrying.
    public var retries: Int
    /// The delay before the first retry, before jitter.
    public var baseDelay: Duration
    /// The factor between successive delays.
    public var multiplier: Double
    /// The longest computed delay.
    public var maxDelay: Duration
    /// The fraction of each delay that is randomised, 0–1.
    public var jitter: Double
    /// The longest `Retry-After` that is honoured; longer ones are cut to this.
    public var maxRetryAfter: Duration
    /// Whether a failure to connect at all is retried. Off for a reader who is waiting: with no
    /// network, saying so at once beats retrying.
    public var retriesConnectionFailures = true

    /// Creates a policy.
    /// - Parameters:
    ///   - retries: Extra attempts after the first; 3 by default.
    ///   - baseDelay: 0.5 s by default.
    ///   - multiplier: 2 by default.
    ///   - maxDelay: 30 s by default.
    ///   - jitter: 0.5 by default.
    ///   - maxRetryAfter: 5 minutes by default.
    public init(
        retries: Int = 3,
        baseDelay: Duration = .milliseconds(500),
        multiplier: Double = 2,
        maxDelay: Duration = .seconds(30),
        jitter: Double = 0.5,
        maxRetryAfter: Duration = .seconds(300)
    ) {
        self.retries = max(0, retries)
        self.baseDelay = baseDelay
        self.multiplier = max(1, multiplier)
        self.maxDelay = maxDelay
        self.jitter = min(1, max(0, jitter))
        self.maxRetryAfter = maxRetryAfter
    }

    /// No retries at all.
    public static let none = RetryPolicy(retries: 0)

    /// The computed backoff before retry number `retry` (1 for the first retry).
    /// - Parameters:
    ///   - retry: Which retry this is, from 1.
    ///   - random: A number in `0..<1` that picks the jitter.
    public func backoff(beforeRetry retry: Int, random: Double) -> Duration {
        let exponent = Double(max(0, retry - 1))
        let base = baseDelay.seconds * pow(multiplier, exponent)
        let capped = min(base, maxDelay.seconds)
        let scaled = capped * (1 - jitter * min(max(random, 0), 1))
        return .milliseconds(Int64((scaled * 1000).rounded()))
    }

    /// The `Retry-After` to honour, capped.
    func honoured(_ retryAfter: Duration) -> Duration {
        min(retryAfter, maxRetryAfter)
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        let parts = components
        return Double(parts.seconds) + Double(parts.attoseconds) / 1e18
    }
}
