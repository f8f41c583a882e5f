/// The time source and sleep the queue uses for backoff and `Retry-After`; inject a manual one
/// in tests so nothing really sleeps.
public protocol DownloadClock: Sendable {
    /// Monotonic time since an arbitrary origin.
    func now() -> Duration
    /// Suspends for `duration`; throws `CancellationError` when the task is cancelled.
    func sleep(for duration: Duration) async throws
}

/// The real clock: `ContinuousClock`.
public struct SystemDownloadClock: DownloadClock {
    private let origin = ContinuousClock.now

    /// Creates the clock.
    public init() {}

    public func now() -> Duration { ContinuousClock.now - origin }

    public func sleep(for duration: Duration) async throws {
        try await Task.sleep(for: duration)
    }
}
