import DownloadQueue
import Foundation

/// Where a ``BookCacheManager`` judges the books it downloads: in worker processes, or in its
/// own process.
///
/// ```swift
/// var configuration = BookCacheConfiguration(rootDirectory: root)
/// configuration.validation = .workers(ValidationWorkers(executable: "/proc/self/exe", arguments: ["validation-worker"]))
/// ```
///
/// The parsers that judge a book (libzip, qpdf, libxml2 through `XMLParser`) read bytes a stranger
/// chose. Within a worker, a book that crashes one, or makes it run out of memory or time, costs
/// that book (refused as ``ValidationFailure/Kind/unjudgeable``). In process, the same book costs
/// the app: a stack overflow in a C++ parser ends the process, and memory and time are bounded
/// only by the validator's own checks (page-tree depth, decoding bounds, linear repairs), with no
/// bound on what a parser's unknown bug costs. The `bookcache` command line and `bookcache serve`
/// always judge in workers.
public struct BookValidation: Sendable {
    private let pool: ValidationWorkerPool?

    /// Judges in this process, on a blocking-work thread: for an app that cannot start processes.
    /// A hostile book can end the app (see above).
    public static let inProcess = BookValidation(pool: nil)

    /// Judges in worker processes started as `workers` says.
    public static func workers(_ workers: ValidationWorkers) -> BookValidation {
        BookValidation(pool: ValidationWorkerPool { workers })
    }

    /// Judges in worker processes started as `resolve` says, called when the first book is
    /// judged (settings read from a file, only by a command that judges a book).
    package static func workers(lazily resolve: @escaping @Sendable () throws(BookCacheError) -> ValidationWorkers) -> BookValidation {
        BookValidation(pool: ValidationWorkerPool(resolve))
    }

    /// Whether books are judged in worker processes.
    public var isolated: Bool { pool != nil }

    /// The process ids of the workers running now (none in process), for a status line.
    package var workerProcesses: [Int32] { pool?.processes ?? [] }

    /// Judges the file at `path`, as ``judge(path:arrived:limits:strict:)`` does with nothing
    /// seen as it arrived.
    package func judge(path: String, limits: ValidationLimits, strict: Bool) async throws -> ValidationReport {
        try await judge(path: path, arrived: nil, limits: limits, strict: strict)
    }

    /// Judges the file at `path`.
    /// - Parameters:
    ///   - arrived: The entries an ``ArrivingZIP`` saw whole and right as the file arrived.
    /// - Throws: ``ValidationFailure`` (``ValidationFailure/Kind/unjudgeable`` when the worker
    ///   died or ran out of time on it), `CancellationError` when the task was cancelled — the
    ///   worker judging it is then killed at once — or ``BookCacheError`` when the workers'
    ///   settings cannot be read.
    func judge(
        path: String, arrived: ZIPStreamReader.Verdict?, limits: ValidationLimits, strict: Bool
    ) async throws -> ValidationReport {
        guard let pool else {
            return try await BlockingWork.run { () throws(ValidationFailure) in
                try BookValidator(limits: limits, strict: strict).check(path: path, arrived: arrived)
            }
        }
        return try await pool.judge(WorkerRequest(path: path, strict: strict, limits: limits, arrived: arrived?.entries))
    }
}
