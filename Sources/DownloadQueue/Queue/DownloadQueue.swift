import Foundation
import Logging

/// Runs downloads with bounded concurrency, priorities, retries and resume.
///
/// - At most ``maxConcurrent`` downloads run at once. Waiting jobs start highest priority
///   first, first-in-first-out within a priority.
/// - A failed attempt is retried by the ``RetryPolicy`` (exponential backoff with jitter, a
///   cap, `Retry-After`). Between attempts a job gives up its slot, so other jobs go on.
/// - A 429 or 503 with `Retry-After` holds back every job for that host until then.
/// - With ``DownloadRequest/resume`` on, a retry continues the partial file with `Range`.
/// - Events for each job and for the whole queue arrive as `AsyncStream`s.
///
/// ```swift
/// let queue = DownloadQueue(maxConcurrent: 8, transport: CurlTransport.shared, logger: logger)
/// let handle = await queue.enqueue(DownloadRequest(url: url, destination: "/tmp/book.part"))
/// for await event in handle.events {
///     if case .progress(_, let progress) = event { print(progress.receivedBytes) }
/// }
/// let file = try await handle.result()
/// ```
public actor DownloadQueue {
    /// The most downloads that run at once.
    public let maxConcurrent: Int
    /// How failed attempts are retried.
    public let retryPolicy: RetryPolicy
    private let downloader: FileDownloader
    private nonisolated let clock: any DownloadClock
    private let random: @Sendable () -> Double
    private let logger: Logger

    private var nextID: UInt64 = 0
    private var running = 0
    /// Jobs waiting for a slot, in start order: by priority, then by sequence.
    private var waiting: [Waiter] = []
    /// Jobs given a slot before they asked for it.
    private var granted: Set<DownloadJobID> = []
    private var tasks: [DownloadJobID: Task<DownloadedFile, any Error>] = [:]
    private var hostHolds: [String: Duration] = [:]
    private var holdTimerArmed: Set<String> = []
    private let subscribers = Broadcast<DownloadEvent>()

    private struct Waiter {
        let id: DownloadJobID
        let priority: DownloadPriority
        let sequence: UInt64
        let host: String
        var continuation: CheckedContinuation<Void, any Error>?
    }

    /// Creates a queue.
    /// - Parameters:
    ///   - maxConcurrent: The most downloads at once; at least 1. 4 by default.
    ///   - retryPolicy: How failures are retried.
    ///   - transport: The HTTP stack.
    ///   - clock: Time and sleep for backoff; inject a manual clock in tests.
    ///   - random: Numbers in `0..<1` for the jitter.
    ///   - logger: Where to log.
    public init(
        maxConcurrent: Int = 4,
        retryPolicy: RetryPolicy = RetryPolicy(),
        transport: any HTTPTransport,
        clock: any DownloadClock = SystemDownloadClock(),
        random: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) },
        logger: Logger
    ) {
        self.maxConcurrent = max(1, maxConcurrent)
        self.retryPolicy = retryPolicy
        self.downloader = FileDownloader(transport: transport, logger: logger)
        self.clock = clock
        self.random = random
        self.logger = logger
    }

    /// How many downloads are running now.
    public var activeCount: Int { running }

    /// How many jobs wait for a slot.
    public var waitingCount: Int { waiting.count }

    /// A stream of every job's events, from now on. Each call makes a new subscriber.
    public func events() -> AsyncStream<DownloadEvent> {
        subscribers.stream()
    }

    /// Adds a job. It is in the line when this returns, so jobs enqueued one after another
    /// start in that order (within a priority).
    /// - Parameter request: What to fetch and where.
    /// - Returns: The job's handle: events, result, cancel.
    public func enqueue(_ request: DownloadRequest) -> DownloadHandle {
        let (stream, continuation) = AsyncStream<DownloadEvent>.makeStream(bufferingPolicy: .bufferingNewest(1024))
        let slot = line(request, events: { event in continuation.yield(event) })
        let task = Task { () throws -> DownloadedFile in
            defer { continuation.finish() }
            await slot.waitForAdmission()
            let outcome: Result<DownloadedFile, DownloadError>
            do throws(DownloadError) {
                outcome = .success(try await slot.download())
            } catch {
                outcome = .failure(error)
            }
            // Success or failure, the job is done: its slot and its task go.
            await slot.end()
            return try outcome.get()
        }
        tasks[slot.id] = task
        return DownloadHandle(id: slot.id, events: stream, task: task)
    }

    /// Cancels one job, waiting or running. A resumable partial file is kept.
    /// - Parameter id: The job.
    public func cancel(_ id: DownloadJobID) {
        tasks[id]?.cancel()
    }

    /// Cancels every job, waiting or running.
    public func cancelAll() {
        for task in tasks.values { task.cancel() }
    }

    /// Enqueues a job and waits for its result.
    /// - Parameters:
    ///   - request: What to fetch and where.
    ///   - onEvent: Called with each of the job's events.
    /// - Returns: The downloaded file.
    /// - Throws: ``DownloadError``; cancelling the calling task cancels the job.
    public nonisolated func download(
        _ request: DownloadRequest,
        onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in }
    ) async throws(DownloadError) -> DownloadedFile {
        try await withSlot(for: request, onEvent: onEvent) { slot throws(DownloadError) in
            try await slot.download()
        }
    }

    /// Waits until the queue admits the job — a free slot, its turn by priority, its host not
    /// held back — then runs `body` with the slot, and frees the slot when `body` returns.
    ///
    /// This is how a caller does its own work between admission and the request and decides by
    /// values, top to bottom: take a lock, find the file already there (and return without a
    /// request), read the response head with ``DownloadSlot/open()`` and decide whether there
    /// is room, then ``DownloadSlot/receive(_:)``. The slot is held for the first attempt;
    /// between retries it is given up so other jobs go on. An attempt that is retried comes back
    /// to the caller (``DownloadSlot/Opened/retrying``, ``DownloadSlot/Received/retrying``), which
    /// opens it again and decides on the new head as on the first.
    ///
    /// ```swift
    /// let file = try await queue.withSlot(for: request) { slot in
    ///     while true {
    ///         guard case .head(let opened) = try await slot.open() else { continue }
    ///         guard opened.head.expectedLength ?? 0 < room else { opened.cancel(); throw NoRoom() }
    ///         if case .file(let file) = try await slot.receive(opened) { return file }
    ///     }
    /// }
    /// ```
    /// When the task is cancelled while it waits, `body` still runs, with a slot that was never
    /// admitted: its ``DownloadSlot/open()`` throws ``DownloadError/Kind/cancelled``.
    /// - Parameters:
    ///   - request: What to fetch and where.
    ///   - onEvent: Called with each of the job's events.
    ///   - body: The caller's steps with the slot.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    package nonisolated func withSlot<T, E: Error>(
        for request: DownloadRequest,
        onEvent: @escaping @Sendable (DownloadEvent) -> Void = { _ in },
        _ body: (DownloadSlot) async throws(E) -> T
    ) async throws(E) -> T {
        let slot = await line(request, events: onEvent)
        await slot.waitForAdmission()
        do {
            let value = try await body(slot)
            await slot.end()
            return value
        } catch {
            await slot.end()
            throw error
        }
    }

    /// Puts a new job in the line.
    private func line(_ request: DownloadRequest, events: @escaping @Sendable (DownloadEvent) -> Void) -> DownloadSlot {
        nextID += 1
        let id = DownloadJobID(value: nextID)
        let subscribers = self.subscribers
        let slot = DownloadSlot(
            id: id, request: request, queue: self, downloader: downloader,
            retries: RetryStateMachine(policy: request.retryPolicy ?? retryPolicy),
            emit: { event in
                events(event)
                subscribers.yield(event)
            })
        insertWaiter(Waiter(id: id, priority: request.priority, sequence: id.value, host: Self.hostKey(request.url)))
        slot.emit(.queued(id))
        schedule()
        return slot
    }

    /// Called by a slot after a failed attempt: the retry decision, with the host held back when
    /// the server asked. The slot is given up either way.
    func decide(after error: DownloadError, for slot: DownloadSlot, retries: inout RetryStateMachine) -> RetryStateMachine.Action {
        let action = Task.isCancelled ? .fail : retries.next(after: error, random: random())
        if case .retry(let delay, let holdHost) = action {
            // Hold the host before the slot is freed, so no waiting job for it slips in.
            if holdHost { hold(Self.hostKey(slot.request.url), for: delay) }
            logger.info(
                "retrying", metadata: ["url": "\(error.url)", "attempt": "\(retries.attempts)", "delay": "\(delay)", "reason": "\(error)"])
        }
        return action
    }

    /// Sleeps for a retry's delay on the queue's clock.
    nonisolated func sleep(for delay: Duration) async throws {
        try await clock.sleep(for: delay)
    }

    /// Puts a job that waited out its retry delay back in the line.
    func lineAgain(_ slot: DownloadSlot) {
        insertWaiter(Waiter(id: slot.id, priority: slot.request.priority, sequence: slot.id.value, host: Self.hostKey(slot.request.url)))
        schedule()
    }

    func forget(_ id: DownloadJobID) {
        tasks[id] = nil
    }

    /// Jobs the queue still keeps a task for (enqueued and not yet ended), for tests.
    var trackedJobCount: Int { tasks.count }

    // MARK: - Slots

    private func insertWaiter(_ waiter: Waiter) {
        let index =
            waiting.firstIndex { other in
                other.priority < waiter.priority || (other.priority == waiter.priority && other.sequence > waiter.sequence)
            } ?? waiting.endIndex
        waiting.insert(waiter, at: index)
    }

    /// Waits for the job's slot. Cancellation (handled by the caller) removes the waiter and
    /// throws.
    func waitForSlot(_ id: DownloadJobID) async throws {
        if granted.remove(id) != nil { return }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                if granted.remove(id) != nil {
                    continuation.resume()
                } else if Task.isCancelled {
                    waiting.removeAll { $0.id == id }
                    continuation.resume(throwing: CancellationError())
                } else if let index = waiting.firstIndex(where: { $0.id == id }) {
                    waiting[index].continuation = continuation
                } else {
                    continuation.resume(throwing: CancellationError())
                }
            }
        } onCancel: {
            Task { await self.cancelWaiter(id) }
        }
    }

    func cancelWaiter(_ id: DownloadJobID) {
        guard let index = waiting.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiting.remove(at: index)
        if let continuation = waiter.continuation {
            continuation.resume(throwing: CancellationError())
        }
    }

    func releaseSlot() {
        running -= 1
        schedule()
    }

    /// Starts waiting jobs while slots are free, skipping hosts that are held back.
    private func schedule() {
        let now = clock.now()
        var index = 0
        while running < maxConcurrent && index < waiting.count {
            let waiter = waiting[index]
            if let until = hostHolds[waiter.host], until > now {
                armHoldTimer(for: waiter.host, until: until, now: now)
                index += 1
                continue
            }
            waiting.remove(at: index)
            running += 1
            if let continuation = waiter.continuation {
                continuation.resume()
            } else {
                granted.insert(waiter.id)
            }
        }
    }

    private func hold(_ host: String, for delay: Duration) {
        let until = clock.now() + delay
        hostHolds[host] = max(hostHolds[host] ?? .zero, until)
    }

    private func armHoldTimer(for host: String, until: Duration, now: Duration) {
        guard holdTimerArmed.insert(host).inserted else { return }
        let clock = self.clock
        Task {
            // The timer's task is never cancelled, and a sleep fails only by cancellation.
            try? await clock.sleep(for: until - now)
            self.holdExpired(host)
        }
    }

    private func holdExpired(_ host: String) {
        holdTimerArmed.remove(host)
        if let until = hostHolds[host], until <= clock.now() { hostHolds[host] = nil }
        schedule()
    }

    // MARK: - Events

    static func hostKey(_ url: URL) -> String {
        "\(url.scheme?.lowercased() ?? "")://\(url.host?.lowercased() ?? ""):\(url.port ?? -1)"
    }
}
