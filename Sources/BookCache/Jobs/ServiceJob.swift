import DownloadQueue
import Foundation

/// A book download accepted by a ``DownloadService``: kept in the cache's database from the
/// moment it is accepted until it ends, so it survives a restart or a killed process.
public struct ServiceJob: Sendable, Hashable, Codable {
    /// Where a job stands.
    public enum State: String, Sendable, Hashable, Codable, CaseIterable {
        /// Waiting for a download slot.
        case queued
        /// Its bytes are arriving.
        case downloading
        /// The server could not be reached (DNS, refused, unreachable, offline); it is tried
        /// again with a growing delay, at most ``DownloadService/Configuration/maxNetworkDelay``,
        /// for as long as it takes.
        case waitingForNetwork = "waiting-for-network"
        /// An attempt failed in a way worth retrying (a 503, a dropped connection); the queue
        /// tries again after its backoff, resuming the partial file.
        case retrying
        /// The book is in the cache. Final.
        case cached
        /// The book cannot be downloaded as asked (404, not a book, checksum, …); ``ServiceJob/error``
        /// says why. Final.
        case failed
        /// Cancelled before it ended. Final.
        case cancelled

        /// Whether the job has ended and will not change again.
        public var isFinal: Bool { self == .cached || self == .failed || self == .cancelled }
    }

    /// Why a job failed: a ``BookCacheError`` kind and its message.
    public struct Failure: Sendable, Hashable, Codable {
        /// The kind, as ``BookCacheError/Kind`` names it (`downloadFailed`, `fileCorrupted`, …).
        public var kind: String
        /// What happened and what to do.
        public var message: String

        /// Creates a failure.
        public init(kind: String, message: String) {
            self.kind = kind
            self.message = message
        }
    }

    /// The job's id: 16 hexadecimal digits.
    public var id: String
    /// The book, `TYPE-ID`.
    public var bookId: String
    /// The book's URL, without credentials.
    public var url: String
    /// A title, when one was given.
    public var title: String?
    /// The priority among queued jobs.
    public var priority: DownloadPriority
    /// Where the job stands.
    public var state: State
    /// Bytes received so far (of the current attempt's file, resumed bytes included).
    public var bytes: Int64
    /// The file's size, once the server has said it.
    public var total: Int64?
    /// Why the job failed, or why it waits (the last connection error).
    public var error: Failure?
    /// Attempts made after connection failures.
    public var attempts: Int
    /// When the job was accepted.
    public var createdAt: Date
    /// When the job last changed state.
    public var updatedAt: Date
    /// When a job waiting for the network is tried next.
    public var nextAttemptAt: Date?
}

/// What a ``DownloadService`` reports as it works, for a live view (the web page's progress bars,
/// `GET /api/v1/events`).
public enum ServiceEvent: Sendable, Hashable {
    /// A job was accepted or changed state (queued, downloading, waiting, cached, failed, …).
    case job(ServiceJob)
    /// Bytes of a running job arrived (at most four times a second per job), or its attempt
    /// changed state (retrying, waiting for the network, downloading again).
    case progress(jobId: String, bytes: Int64, total: Int64?, state: ServiceJob.State)
    /// A book was cached or removed.
    case book(id: String, cached: Bool)
    /// A scheduled source was added, changed, ran, or was removed (`nil` source: removed).
    case source(id: String, ScheduledSource?)
}

/// A catalogue or manifest synced by a ``DownloadService`` on a schedule.
public struct ScheduledSource: Sendable, Hashable, Codable {
    /// The source's id: 16 hexadecimal digits.
    public var id: String
    /// The manifest or feed, a URL or a path (credentials in a URL are kept, to log in).
    public var source: String
    /// How many of its first books to keep cached.
    public var keep: Int
    /// The type for books whose source does not say.
    public var type: BookType
    /// The formats to take, most wanted first.
    public var formats: [BookFormat]
    /// The section of a navigation feed to follow; the newest-first one by default.
    public var section: String?
    /// Seconds between runs.
    public var every: TimeInterval
    /// When it runs next.
    public var nextRunAt: Date
    /// When it last ran.
    public var lastRunAt: Date?
    /// What the last run said (its summary, or the error).
    public var lastResult: String?
    /// Whether the last run ended with every wanted book cached.
    public var lastRunSucceeded: Bool?

    /// The source as shown: credentials in its URL replaced by `***`.
    public var redacted: ScheduledSource {
        var copy = self
        if let url = URL(string: source), url.user != nil {
            copy.source = URLRedaction.redacted(url)
        }
        return copy
    }
}
