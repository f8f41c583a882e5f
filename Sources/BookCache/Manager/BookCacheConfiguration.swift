import DownloadQueue
import Foundation

/// How a ``BookCacheManager`` is set up.
public struct BookCacheConfiguration: Sendable {
    /// The cache root. See ``CacheLayout/defaultRoot(explicit:environment:)`` for the usual choice.
    public var rootDirectory: URL
    /// The most downloads at once.
    public var maxConcurrentDownloads: Int
    /// Free space to leave on the cache's filesystem after a download whose size is known;
    /// `nil` means the cache's `reserve` setting, else ``defaultReserveBytes``.
    public var storageReserveBytes: Int64?
    /// The size budget; `nil` means the cache's `max-size` setting (none by default).
    public var maxSizeBytes: Int64?
    /// The most books kept; `nil` means the cache's `keep` setting (none by default).
    public var keepCount: Int?
    /// Whether books may be evicted (least recently used first) to make free space on the disk.
    public var evictForSpace: Bool
    /// Measures the free bytes on the filesystem holding a folder; injectable for tests.
    public var freeSpace: @Sendable (URL) throws -> Int64
    /// The largest book accepted, announced or actual.
    public var maxBookBytes: Int64
    /// Bounds for validation: an EPUB's entries, what a PDF's streams decode to.
    public var validationLimits: ValidationLimits
    /// Where books are judged: ``BookValidation/inProcess`` by default, for apps that cannot
    /// start processes; ``BookValidation/workers(_:)`` contains what a hostile book can do to one
    /// worker process (see ``BookValidation``).
    public var validation: BookValidation = .inProcess
    /// Whether a book is marked (`partial/ID.part.judging`) while it is judged, so that a
    /// ``DownloadService`` that died judging it counts that at its next start. Two file-system
    /// operations a book; only a service needs them.
    package var marksBooksBeingJudged = false
    /// Refuse books with validation warnings (``ValidationReport/warnings``); `nil` follows the
    /// cache's `strict` setting, which is off by default.
    public var strictValidation: Bool? = nil
    /// The clock used for download and access times; injectable so LRU tests never sleep.
    public var now: @Sendable () -> Date
    /// How failed downloads are retried.
    public var retryPolicy: RetryPolicy
    /// Time and sleep for retry backoff; injectable so retry tests never sleep.
    public var downloadClock: any DownloadClock
    /// The language of `localizedDescription` for the errors of downloads — thrown by
    /// ``BookCacheManager/download(_:onEvent:)`` and carried by ``BookEvent/failed(_:_:)``:
    /// English, German or Simplified Chinese. `nil` (the default) follows the app's
    /// `Locale.current`. ``BookCacheError/message(in:)`` says any error in any locale.
    public var locale: Locale?

    /// Creates a configuration.
    /// - Parameters:
    ///   - rootDirectory: The cache root; created on first use.
    ///   - maxConcurrentDownloads: 4 by default.
    ///   - storageReserveBytes: The cache's setting, else 100 MB, by default.
    ///   - maxSizeBytes: The cache's `max-size` setting by default.
    ///   - keepCount: The cache's `keep` setting by default.
    ///   - evictForSpace: `true` by default.
    ///   - freeSpace: `statvfs` by default.
    ///   - maxBookBytes: 16 GiB by default.
    ///   - validationLimits: Bounds for EPUB validation.
    ///   - now: The clock; the system clock by default.
    ///   - retryPolicy: 3 retries with exponential backoff by default.
    ///   - downloadClock: The clock for backoff; the system clock by default.
    ///   - locale: The language of download errors' `localizedDescription`; the app's by default.
    public init(
        rootDirectory: URL,
        maxConcurrentDownloads: Int = 4,
        storageReserveBytes: Int64? = nil,
        maxSizeBytes: Int64? = nil,
        keepCount: Int? = nil,
        evictForSpace: Bool = true,
        freeSpace: @escaping @Sendable (URL) throws -> Int64 = { try BookCacheConfiguration.statvfsFreeSpace($0) },
        maxBookBytes: Int64 = 16 << 30,
        validationLimits: ValidationLimits = ValidationLimits(),
        now: @escaping @Sendable () -> Date = { Date() },
        retryPolicy: RetryPolicy = RetryPolicy(),
        downloadClock: any DownloadClock = SystemDownloadClock(),
        locale: Locale? = nil
    ) {
        self.rootDirectory = rootDirectory
        self.maxConcurrentDownloads = maxConcurrentDownloads
        self.storageReserveBytes = storageReserveBytes
        self.maxSizeBytes = maxSizeBytes
        self.keepCount = keepCount
        self.evictForSpace = evictForSpace
        self.freeSpace = freeSpace
        self.maxBookBytes = maxBookBytes
        self.validationLimits = validationLimits
        self.now = now
        self.retryPolicy = retryPolicy
        self.downloadClock = downloadClock
        self.locale = locale
    }

    /// The free space kept by default: 100 MB.
    public static let defaultReserveBytes: Int64 = 100_000_000

    /// Free bytes for an unprivileged user on the filesystem holding `url` (or its nearest
    /// existing parent).
    public static func statvfsFreeSpace(_ url: URL) throws -> Int64 {
        var probe = url
        while !FileManager.default.fileExists(atPath: probe.path) && probe.path != "/" {
            probe = probe.deletingLastPathComponent()
        }
        return try FileSystem.availableBytes(at: probe)
    }
}
