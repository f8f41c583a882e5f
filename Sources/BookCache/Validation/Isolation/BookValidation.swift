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

    /// The process ids of the workers running now (none in process), for a status line.
    package var workerProcesses: [Int32] { pool?.processes ?? [] }

    /// What judging a book came to.
    enum Judgement: Sendable {
        /// Accepted, with what validation found.
        case accepted(ValidationReport)
        /// Refused: why (``ValidationFailure/Kind/unjudgeable`` when its worker died on it or ran
        /// out of time).
        case refused(ValidationFailure)
        /// Its task was cancelled; its worker, if it had one, was ended.
        case cancelled
        /// The workers' settings cannot be read.
        case unusable(BookCacheError)
    }

    /// Judges the file at `path` as ``judge(path:limits:strict:then:arrived:)`` does, with
    /// nothing seen as it arrived, and returns the report.
    /// - Throws: ``ValidationFailure``, `CancellationError`, or ``BookCacheError`` when the
    ///   workers' settings cannot be read.
    package func judge(path: String, limits: ValidationLimits, strict: Bool) async throws -> ValidationReport {
        let judgement = await judge(path: path, limits: limits, strict: strict, arrived: { nil }) { $0 }
        switch judgement {
        case .accepted(let report): return report
        case .refused(let failure): throw failure
        case .cancelled: throw CancellationError()
        case .unusable(let error): throw error
        }
    }

    /// Judges the file at `path` and hands the judgement to `then` on the blocking-work thread
    /// that waited for it: a book's judging and what follows it take one hop.
    /// - Parameters:
    ///   - arrived: Run on that thread first: the entries an ``ArrivingZIP`` saw whole and right
    ///     as the file arrived.
    ///   - then: What follows the judgement, on the same thread.
    func judge<T: Sendable, E: Error>(
        path: String, limits: ValidationLimits, strict: Bool, arrived: @escaping @Sendable () -> ZIPStreamReader.Verdict?,
        then: @escaping @Sendable (Judgement) throws(E) -> T
    ) async throws(E) -> T {
        guard let pool else {
            return try await BlockingWork.run { () throws(E) -> T in
                let seen = arrived()
                let judgement: Judgement
                do throws(ValidationFailure) {
                    judgement = .accepted(try BookValidator(limits: limits, strict: strict).check(path: path, arrived: seen))
                } catch {
                    judgement = .refused(error)
                }
                return try then(judgement)
            }
        }
        return try await pool.judge(path: path, limits: limits, strict: strict, arrived: arrived, then: then)
    }
}
