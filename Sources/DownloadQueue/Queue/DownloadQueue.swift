import Foundation
import Logging

/// Runs downloads with bounded concurrency and priorities.
///
/// At most ``maxConcurrent`` downloads run at once. Waiting jobs start highest priority first,
/// first-in-first-out within a priority. Cancelling the task that awaits a job cancels the job,
/// whether it is still waiting or already running.
///
/// ```swift
/// let queue = DownloadQueue(maxConcurrent: 4, transport: AsyncHTTPClientTransport.shared, logger: logger)
/// let file = try await queue.download(from: url, to: "/tmp/book.part", priority: .high)
/// print(file.sha256)
/// ```
public actor DownloadQueue {
    /// The most downloads that run at once.
    public let maxConcurrent: Int
    private let downloader: FileDownloader
    private var running = 0
    private var waiting: [Waiter] = []
    private var nextTicket: UInt64 = 0

    private struct Waiter {
        let ticket: UInt64
        let priority: DownloadPriority
        let continuation: CheckedContinuation<Void, any Error>
    }

    /// Creates a queue.
    /// - Parameters:
    ///   - maxConcurrent: The most downloads at once; at least 1.
    ///   - transport: The HTTP stack.
    ///   - logger: Where to log.
    public init(maxConcurrent: Int = 4, transport: any HTTPTransport, logger: Logger) {
        self.maxConcurrent = max(1, maxConcurrent)
        self.downloader = FileDownloader(transport: transport, logger: logger)
    }

    /// How many downloads are running now.
    public var activeCount: Int { running }

    /// How many jobs wait for a free slot.
    public var waitingCount: Int { waiting.count }

    /// Waits for a slot, then downloads `url` into `destination`.
    ///
    /// - Parameters:
    ///   - url: An absolute `http` or `https` URL.
    ///   - destination: The file to write; removed again if the download fails.
    ///   - priority: Where the job goes in the line.
    ///   - maxBytes: Refuse bodies larger than this.
    ///   - checkHead: Called with the response head before the body is written; throw to refuse.
    ///   - onProgress: Called as bytes arrive.
    /// - Returns: What was downloaded, with its SHA-256.
    /// - Throws: ``DownloadError``; ``DownloadError/Kind/cancelled`` if the task was cancelled.
    public func download(
        from url: URL,
        to destination: String,
        priority: DownloadPriority = .normal,
        maxBytes: Int64 = .max,
        checkHead: @escaping @Sendable (ResponseHead) throws -> Void = { _ in },
        onProgress: @escaping @Sendable (DownloadProgress) -> Void = { _ in }
    ) async throws -> DownloadedFile {
        do {
            try await acquireSlot(priority: priority)
        } catch {
            throw DownloadError(kind: .cancelled, url: url)
        }
        defer { releaseSlot() }
        return try await downloader.download(
            from: url, to: destination, maxBytes: maxBytes, checkHead: checkHead, onProgress: onProgress)
    }

    private func acquireSlot(priority: DownloadPriority) async throws {
        try Task.checkCancellation()
        if running < maxConcurrent && waiting.isEmpty {
            running += 1
            return
        }
        let ticket = nextTicket
        nextTicket += 1
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if Task.isCancelled {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                // Behind every job of the same or higher priority, ahead of lower ones.
                let index = waiting.firstIndex { $0.priority < priority } ?? waiting.endIndex
                waiting.insert(Waiter(ticket: ticket, priority: priority, continuation: continuation), at: index)
            }
        } onCancel: {
            Task { await self.cancelWaiter(ticket) }
        }
    }

    private func cancelWaiter(_ ticket: UInt64) {
        guard let index = waiting.firstIndex(where: { $0.ticket == ticket }) else { return }
        let waiter = waiting.remove(at: index)
        waiter.continuation.resume(throwing: CancellationError())
    }

    private func releaseSlot() {
        if waiting.isEmpty {
            running -= 1
        } else {
            // Hand the slot straight to the next job; the running count stays the same.
            waiting.removeFirst().continuation.resume()
        }
    }
}
