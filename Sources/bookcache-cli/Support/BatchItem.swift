import BookCache
import Foundation

/// One thing a `download` run was asked for: a valid request, a manifest line (made a request
/// when it starts, so a long manifest waits in memory as its parsed lines, not as requests), or
/// a manifest line that could not be used (which counts as failed).
enum BatchItem {
    case request(BookDownloadRequest, source: String)
    case line(ManifestEntry)
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
    /// Why it failed or was interrupted.
    var failure: BatchFailure?
    var attempts: Int
    var bytes: Int64
    var format: String?
    /// Books evicted to make room for this one.
    var evicted: [EvictedBook] = []
    /// Packaging rules the book breaks that no reader needs; said once, when it is cached.
    var warnings: [String] = []
}

/// Why an item failed: the library's error, or a manifest line that could not be used. Everything
/// a batch says about a failure — its words, kind and exit status — comes from here.
enum BatchFailure: Sendable {
    case error(BookCacheError)
    case invalidLine(String)

    /// The message with the command line's hint, in `locale`'s language (English for `--json`).
    func message(in locale: Locale) -> String {
        switch self {
        case .error(let error): cliMessage(error, in: locale)
        case .invalidLine(let problem): problem
        }
    }

    /// The kind (``BookCacheError/Kind``), for scripts.
    var kind: String {
        switch self {
        case .error(let error): error.kind.description
        case .invalidLine: BookCacheError.Kind.invalidArgument.description
        }
    }

    /// The exit status it stands for (``ExitStatus``).
    var exitStatus: Int32 {
        switch self {
        case .error(let error): ExitStatus.of(error)
        case .invalidLine: ExitStatus.usage
        }
    }

    /// The library's error, when there is one.
    var error: BookCacheError? {
        if case .error(let error) = self { error } else { nil }
    }
}
