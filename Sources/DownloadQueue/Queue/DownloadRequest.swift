import Foundation

/// One file to fetch through a ``DownloadQueue``.
public struct DownloadRequest: Sendable {
    /// An absolute `http` or `https` URL.
    public var url: URL
    /// The file to write; it is removed again when the download fails for good.
    public var destination: String
    /// Where the job goes in the line.
    public var priority: DownloadPriority
    /// Refuse bodies larger than this many bytes.
    public var maxBytes: Int64
    /// Continue a partial file at `destination` left by an earlier attempt or process, and
    /// keep this job's partial file when it fails in a resumable way.
    public var resume: Bool
    /// This job's retry policy, instead of the queue's.
    public var retryPolicy: RetryPolicy?
    /// Credentials for the URL's host, answered to its `401` (Basic or Digest) and never sent
    /// to another host.
    public var credentials: HTTPCredentials?
    /// Extra headers sent with every request for the file, such as a bearer token.
    public var headers: [HTTPHeader] = []
    /// Reads the body as it is written, in every attempt (see ``BodyObserver``).
    package var observer: (any BodyObserver)?

    /// Creates a request.
    /// - Parameters:
    ///   - url: The file's URL.
    ///   - destination: Where to write it.
    ///   - priority: `.normal` by default.
    ///   - maxBytes: No limit by default.
    ///   - resume: `true` by default.
    public init(
        url: URL,
        destination: String,
        priority: DownloadPriority = .normal,
        maxBytes: Int64 = .max,
        resume: Bool = true
    ) {
        self.url = url
        self.destination = destination
        self.priority = priority
        self.maxBytes = maxBytes
        self.resume = resume
    }
}

/// Identifies a job in a ``DownloadQueue``.
public struct DownloadJobID: Hashable, Sendable, CustomStringConvertible {
    let value: UInt64
    public var description: String { "job-\(value)" }

    /// An id that no queue hands out, for events made outside a queue (tests, adapters).
    public static let placeholder = DownloadJobID(value: 0)
}

/// What happens to a job, in order: queued, then for each attempt started and progress, then
/// retrying between attempts, and finally finished.
public enum DownloadEvent: Sendable {
    /// The job is waiting for a slot.
    case queued(DownloadJobID)
    /// An attempt started (the first is 1).
    case started(DownloadJobID, attempt: Int)
    /// Bytes arrived.
    case progress(DownloadJobID, DownloadProgress)
    /// An attempt failed and another follows after `delay`.
    case retrying(DownloadJobID, attempt: Int, delay: Duration, reason: DownloadError)
    /// The job ended.
    case finished(DownloadJobID, Result<DownloadedFile, DownloadError>)

    /// The job this event is about.
    public var jobID: DownloadJobID {
        switch self {
        case .queued(let id), .started(let id, _), .progress(let id, _), .retrying(let id, _, _, _), .finished(let id, _):
            return id
        }
    }
}

/// A job in a ``DownloadQueue``: its events, its result, and a way to cancel it.
public struct DownloadHandle: Sendable {
    /// The job's id.
    public let id: DownloadJobID
    /// The job's events, ending after ``DownloadEvent/finished(_:_:)``. Iterate it once.
    public let events: AsyncStream<DownloadEvent>
    let task: Task<DownloadedFile, any Error>

    /// Waits for the job to end.
    /// - Returns: The downloaded file.
    /// - Throws: ``DownloadError``; its ``DownloadError/attempts`` says how many attempts were made.
    public func result() async throws(DownloadError) -> DownloadedFile {
        do {
            return try await task.value
        } catch let error as DownloadError {
            throw error
        } catch {
            // The job's task throws nothing but DownloadError.
            throw DownloadError(kind: .cancelled, url: URL(string: "about:blank")!, underlying: error)
        }
    }

    /// Cancels the job, whether it waits or runs. A resumable partial file is kept.
    public func cancel() {
        task.cancel()
    }
}
