import BookCache

/// One thing a `download` run was asked for: a valid request, or a manifest line that could not
/// be used (which counts as failed).
enum BatchItem {
    case request(BookDownloadRequest, source: String)
    case invalid(ManifestProblem)
}

/// How one item ended, as reported per item and in the summary.
struct BatchOutcome: Sendable {
    enum Status: String, Sendable {
        case cached
        case alreadyCached = "already-cached"
        case failed
        /// Stopped by SIGINT or SIGTERM; its partial file is kept for the next run.
        case interrupted
    }

    var id: String?
    var status: Status
    var path: String?
    /// The error in English, for `--json`.
    var error: String?
    /// The error in the reader's language, for the lines a person reads.
    var localizedError: String?
    /// The kind of the error (``BookCacheError/Kind``), for scripts.
    var kind: String?
    /// The exit status the error stands for (``ExitStatus``).
    var exitStatus: Int32?
    /// For a refused file, the kind of refusal (`htmlPage`, `damagedEntry`, …).
    var refusal: String?
    /// For a storage error: the bytes needed and free, when known.
    var neededBytes: Int64?
    var availableBytes: Int64?
    var attempts: Int
    var bytes: Int64
    var format: String?
    /// Books evicted to make room for this one.
    var evicted: [EvictedBook] = []
    /// Packaging rules the book breaks that no reader needs; said once, when it is cached.
    var warnings: [String] = []
}
