import DownloadQueue
import Foundation

/// How a ``BookCacheManager`` is set up.
public struct BookCacheConfiguration: Sendable {
    /// The cache root. See ``CacheLayout/defaultRoot(explicit:environment:)`` for the usual choice.
    public var rootDirectory: URL
    /// The most downloads at once.
    public var maxConcurrentDownloads: Int
    /// Free space to leave on the cache's filesystem after a download whose size is known.
    public var storageReserveBytes: Int64
    /// The largest book accepted, announced or actual.
    public var maxBookBytes: Int64
    /// Bounds for EPUB validation.
    public var validationLimits: ValidationLimits
    /// The clock used for download and access times; injectable so LRU tests never sleep.
    public var now: @Sendable () -> Date
    /// How failed downloads are retried.
    public var retryPolicy: RetryPolicy
    /// Time and sleep for retry backoff; injectable so retry tests never sleep.
    public var downloadClock: any DownloadClock

    /// Creates a configuration.
    /// - Parameters:
    ///   - rootDirectory: The cache root; created on first use.
    ///   - maxConcurrentDownloads: 4 by default.
    ///   - storageReserveBytes: 100 MB by default.
    ///   - maxBookBytes: 16 GiB by default.
    ///   - validationLimits: Bounds for EPUB validation.
    ///   - now: The clock; the system clock by default.
    ///   - retryPolicy: 3 retries with exponential backoff by default.
    ///   - downloadClock: The clock for backoff; the system clock by default.
    public init(
        rootDirectory: URL,
        maxConcurrentDownloads: Int = 4,
        storageReserveBytes: Int64 = 100_000_000,
        maxBookBytes: Int64 = 16 << 30,
        validationLimits: ValidationLimits = ValidationLimits(),
        now: @escaping @Sendable () -> Date = { Date() },
        retryPolicy: RetryPolicy = RetryPolicy(),
        downloadClock: any DownloadClock = SystemDownloadClock()
    ) {
        self.rootDirectory = rootDirectory
        self.maxConcurrentDownloads = maxConcurrentDownloads
        self.storageReserveBytes = storageReserveBytes
        self.maxBookBytes = maxBookBytes
        self.validationLimits = validationLimits
        self.now = now
        self.retryPolicy = retryPolicy
        self.downloadClock = downloadClock
    }
}
