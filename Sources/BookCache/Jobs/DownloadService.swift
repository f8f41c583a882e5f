import DownloadQueue
import Foundation
import Logging
import Synchronization

/// A download manager over one cache: a persistent queue of book downloads and a schedule of
/// syncs, run by ``run()`` until its task is cancelled. `bookcache serve` puts an HTTP API in
/// front of it; an app can run it without HTTP.
///
/// - A job is committed to the cache's database before ``submit(_:)`` returns, so once accepted
///   it ends cached, failed or cancelled — through restarts and `kill -9` (a job left
///   downloading is queued again at the next ``run()``, and its partial file resumed; a job
///   whose book was cached just before the kill ends cached without a second download).
/// - Connection failures (DNS, refused, unreachable, offline) put a job in
///   ``ServiceJob/State/waitingForNetwork``: tried again after 2 s, then twice as long each
///   time, at most ``Configuration/maxNetworkDelay``, for as long as it takes. Busy servers
///   (408, 429, 5xx, after the queue's own retries) put it in ``ServiceJob/State/retrying`` the
///   same way, at most ``Configuration/maxServerAttempts`` times. Anything else fails the job
///   with the error's kind and message.
/// - Scheduled sources run at low priority when due (``addSource(_:keep:type:formats:section:every:)``).
///
/// ```swift
/// let service = DownloadService(manager: manager)
/// let runner = Task { await service.run() }
/// let jobs = try await service.submit(Data(#"[{"url": "https://example.com/a.epub"}]"#.utf8))
/// for await event in service.events() { … }
/// ```
public actor DownloadService {
    /// How the service runs its jobs.
    public struct Configuration: Sendable {
        /// Jobs downloading at once (the manager's queue bounds transfers as well).
        public var concurrency: Int
        /// The first delay after a connection failure; it doubles with each failure.
        public var firstNetworkDelay: Duration
        /// The longest delay between attempts of a job waiting for the network or a busy server.
        public var maxNetworkDelay: Duration
        /// How many times a job is tried again after a busy server before it fails.
        public var maxServerAttempts: Int
        /// The most jobs one ``submit(_:)`` accepts.
        public var maxJobsPerSubmission: Int
        /// The shortest interval a scheduled source may have.
        public var minimumSourceInterval: TimeInterval

        /// Creates a configuration.
        /// - Parameters:
        ///   - concurrency: 4 by default.
        ///   - firstNetworkDelay: 2 seconds by default.
        ///   - maxNetworkDelay: 5 minutes by default.
        ///   - maxServerAttempts: 10 by default.
        ///   - maxJobsPerSubmission: 10,000 by default.
        ///   - minimumSourceInterval: 60 seconds by default.
        public init(
            concurrency: Int = 4, firstNetworkDelay: Duration = .seconds(2), maxNetworkDelay: Duration = .seconds(300),
            maxServerAttempts: Int = 10, maxJobsPerSubmission: Int = 10_000, minimumSourceInterval: TimeInterval = 60
        ) {
            self.concurrency = max(1, concurrency)
            self.firstNetworkDelay = firstNetworkDelay
            self.maxNetworkDelay = maxNetworkDelay
            self.maxServerAttempts = maxServerAttempts
            self.maxJobsPerSubmission = maxJobsPerSubmission
            self.minimumSourceInterval = minimumSourceInterval
        }
    }

    /// A submission that cannot be accepted; nothing of it was enqueued.
    public struct SubmissionError: Error, Sendable, Hashable, CustomStringConvertible {
        /// One refused element: its position in the array (0 for a single object) and why.
        public struct Problem: Sendable, Hashable, Codable {
            /// The element's position, counting from 0.
            public var index: Int
            /// Why it was refused.
            public var reason: String
        }

        /// Every refused element; empty when the body as a whole is unusable (see ``message``).
        public var problems: [Problem]
        /// What is wrong, for a body that is not a JSON object or array of objects.
        public var message: String

        public var description: String {
            problems.isEmpty ? message : problems.map { "job \($0.index): \($0.reason)" }.joined(separator: "; ")
        }
    }

    /// Its methods read and write the database with blocking calls: the actor runs on the
    /// blocking-work threads (see `BlockingWork`), as the manager does.
    private nonisolated let executor = BlockingWork.SerialExecutor()
    /// The executor the actor runs on.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// The cache it fills.
    public nonisolated let manager: BookCacheManager
    let configuration: Configuration
    let logger: Logger
    let now: @Sendable () -> Date
    private var openedStore: JobStore?
    let broadcast = Broadcast<ServiceEvent>()
    let wakeup = Wakeup()
    /// Jobs running now, and whether each was cancelled by ``cancel(_:)``.
    private var running: [String: (task: Task<Void, Never>, cancelled: Bool)] = [:]
    var syncing: [String: Task<Void, Never>] = [:]
    /// Live progress of running jobs (written from download callbacks, off the actor).
    private nonisolated let live = Mutex<[String: LiveProgress]>([:])

    private struct LiveProgress {
        var state: ServiceJob.State
        var bytes: Int64
        var total: Int64?
        var lastSent: ContinuousClock.Instant?
    }

    /// Creates a service over a manager's cache. Nothing is read until it is used.
    /// - Parameters:
    ///   - manager: The cache to fill.
    ///   - configuration: Concurrency and retry delays.
    ///   - logger: Where the service logs.
    ///   - now: The clock for schedules (for tests).
    public init(
        manager: BookCacheManager, configuration: Configuration = Configuration(),
        logger: Logger = Logger(label: "bookcache.service", factory: { _ in SwiftLogNoOpLogHandler() }),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.manager = manager
        self.configuration = configuration
        self.logger = logger
        self.now = now
    }

    func store() throws(BookCacheError) -> JobStore {
        if let openedStore { return openedStore }
        let store = try JobStore(layout: manager.layout)
        openedStore = store
        return store
    }

    // MARK: - Jobs

    /// Accepts one manifest object or an array of them — the fields of `bookcache download
    /// --from` (`url`, `id`, `type`, `title`, `sha256`, `coverUrl`, `size`, `pin`, `headers`),
    /// plus `priority` (`low`, `normal`, `high`). Every element is checked first; one bad element
    /// refuses the whole submission. A book that already has a job not yet ended gets that job
    /// back rather than a second one.
    /// - Parameter body: JSON.
    /// - Returns: The jobs, in the order given, committed to the database.
    /// - Throws: ``SubmissionError`` naming each bad element; ``BookCacheError`` when the
    ///   database cannot be written.
    public func submit(_ body: Data) throws -> [ServiceJob] {
        let parsed = try Self.parseSubmission(body, limit: configuration.maxJobsPerSubmission)
        let store = try store()
        let time = now()
        var jobs: [ServiceJob] = []
        var new: [JobStore.NewJob] = []
        var seen: [String: Int] = [:]
        for (request, entry, priority) in parsed {
            let bookId = request.id.description
            if let position = seen[bookId] {
                jobs.append(jobs[position])
                continue
            }
            if let active = try store.activeJob(forBook: bookId) {
                seen[bookId] = jobs.count
                jobs.append(active)
                continue
            }
            let job = ServiceJob(
                id: Self.newID(), bookId: bookId, url: URLRedaction.redacted(request.url), title: request.title, priority: priority,
                state: .queued, bytes: 0, total: nil, error: nil, attempts: 0, createdAt: time, updatedAt: time, nextAttemptAt: nil)
            seen[bookId] = jobs.count
            jobs.append(job)
            new.append(JobStore.NewJob(job: job, entry: entry))
        }
        try store.insert(new)
        for item in new { broadcast.yield(.job(item.job)) }
        logger.info("accepted jobs", metadata: ["new": "\(new.count)", "submitted": "\(parsed.count)"])
        wakeup.signal()
        return jobs
    }

    /// Every job, oldest first (with live progress); the newest `limit` when given.
    public func jobs(limit: Int? = nil) throws(BookCacheError) -> [ServiceJob] {
        try store().jobs(limit: limit).map(withLiveProgress)
    }

    /// One job, or `nil`.
    public func job(_ id: String) throws(BookCacheError) -> ServiceJob? {
        try store().job(id).map(withLiveProgress)
    }

    /// Waits until a job has ended (cached, failed or cancelled) or `timeout` passes.
    /// - Returns: The job as it is then; `nil` when there is no such job.
    public func waitForEnd(of id: String, timeout: Duration) async throws(BookCacheError) -> ServiceJob? {
        // Listen first, then look: an end between the two is not missed.
        let events = broadcast.stream()
        guard let job = try self.job(id) else { return nil }
        guard !job.state.isFinal else { return job }
        let ended = await withTaskGroup(of: ServiceJob?.self) { group in
            group.addTask {
                for await event in events {
                    if case .job(let changed) = event, changed.id == id, changed.state.isFinal { return changed }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first
        }
        if let ended { return ended }
        return try self.job(id)
    }

    /// How many jobs are in each state.
    public func jobCounts() throws(BookCacheError) -> [ServiceJob.State: Int] {
        try store().counts()
    }

    /// Cancels a job that has not ended (a running download stops; its partial file is kept).
    /// - Returns: The job as it is now; `nil` when there is no such job.
    public func cancel(_ id: String) throws(BookCacheError) -> ServiceJob? {
        guard var job = try store().job(id) else { return nil }
        guard !job.state.isFinal else { return job }
        if let entry = running[id] {
            running[id] = (entry.task, true)
            entry.task.cancel()
            return withLiveProgress(job)
        }
        job.state = .cancelled
        job.updatedAt = now()
        try store().update(job)
        broadcast.yield(.job(job))
        return job
    }

    /// Queues a failed or cancelled job again, with its attempts counted from zero: its URL, id
    /// and title (a login or headers it was submitted with are not kept once a job ends — they
    /// are not stored at rest — so submit such a job again with them). A job that has not ended,
    /// or ended cached, is returned as it is; a book with another job not yet ended gets that job.
    /// - Returns: The job as it is now; `nil` when there is no such job.
    public func retry(_ id: String) throws(BookCacheError) -> ServiceJob? {
        guard var job = try store().job(id) else { return nil }
        guard job.state == .failed || job.state == .cancelled else { return withLiveProgress(job) }
        if let active = try store().activeJob(forBook: job.bookId) { return withLiveProgress(active) }
        let book = try BookID(parsing: job.bookId)
        // The job keeps its URL with the login shown as ***: without it
        var url = URLComponents(string: job.url)
        url?.user = nil
        url?.password = nil
        let entry = String(decoding: Self.manifestLine(url: url?.string ?? job.url, id: book, title: job.title), as: UTF8.self)
        job.state = .queued
        job.error = nil
        job.attempts = 0
        job.bytes = 0
        job.total = nil
        job.nextAttemptAt = nil
        job.updatedAt = now()
        try store().requeue(job, entry: entry)
        broadcast.yield(.job(job))
        wakeup.signal()
        return job
    }

    /// Queues a cached book to be fetched again as a high-priority job (the page's Refresh): its
    /// cached copy stays readable until the new one is validated, then is replaced; a pinned book
    /// stays pinned. The record's URL carries the login it was downloaded with, if any.
    /// - Returns: The job (the one not yet ended, when the book has one).
    package func refresh(_ book: CachedBookMetadata) throws -> [ServiceJob] {
        var fields: [String: Any] = ["refresh": true, "priority": DownloadPriority.high.word]
        if book.pinned { fields["pin"] = true }
        return try submit(Self.manifestLine(url: book.fileUrl, id: try book.bookID, title: book.title, adding: fields))
    }

    /// A job's manifest line: the book's URL, id, type and title, and `fields`.
    private static func manifestLine(url: String, id: BookID, title: String?, adding fields: [String: Any] = [:]) -> Data {
        var line = fields
        line["url"] = url
        line["id"] = id.bookId
        line["type"] = id.type.rawValue
        if let title { line["title"] = title }
        do {
            return try JSONSerialization.data(withJSONObject: line)
        } catch {
            preconditionFailure("strings and booleans always make JSON: \(error)")
        }
    }

    /// Forgets the jobs that have ended (cached, failed or cancelled); their books stay as they
    /// are. Jobs still queued or running are kept.
    /// - Returns: How many jobs were forgotten.
    public func removeEndedJobs() throws(BookCacheError) -> Int {
        try store().removeEnded()
    }

    /// What happens to jobs, books and sources from now on.
    public nonisolated func events() -> AsyncStream<ServiceEvent> {
        broadcast.stream()
    }

    /// Tells listeners a book was removed (by a caller that deleted it through the manager).
    public nonisolated func bookRemoved(_ id: String) {
        broadcast.yield(.book(id: id, cached: false))
    }

    // MARK: - Running

    /// Runs jobs and scheduled syncs until the calling task is cancelled; then stops the
    /// running downloads (their partial files are kept, their jobs queued for the next run)
    /// and returns.
    /// - Throws: ``BookCacheError`` when the database cannot be opened.
    public func run() async throws(BookCacheError) {
        // A book being judged when the service died left its mark: counted, then removed.
        let layout = manager.layout
        var marks: [URL] = []
        let interrupted = try store().requeueInterrupted(now: now()) { book in
            guard let id = try? BookID(parsing: book) else { return false }
            let mark = layout.judgingMark(for: id)
            guard FileManager.default.fileExists(atPath: mark.path) else { return false }
            marks.append(mark)
            return true
        }
        for mark in marks { unlink(mark.path) }
        if interrupted.requeued > 0 {
            logger.notice("queued again the jobs a previous run left downloading", metadata: ["jobs": "\(interrupted.requeued)"])
        }
        if interrupted.failed > 0 {
            logger.error(
                "failed the jobs the service died running \(JobStore.maxInterruptions) times; they are not started again",
                metadata: ["jobs": "\(interrupted.failed)"])
        }
        // Books cached (by a job, a scheduled sync or anyone else using the manager) and evicted,
        // from the manager's one stream of book events.
        let books = Task { [manager, broadcast] in
            for await event in manager.events() {
                switch event {
                case .cached(let book, _): broadcast.yield(.book(id: book.id, cached: true))
                case .evicted(let gone): broadcast.yield(.book(id: gone.metadata.id, cached: false))
                default: break
                }
            }
        }
        defer { books.cancel() }
        while !Task.isCancelled {
            var wake: Date?
            do {
                try startRunnableJobs()
                wake = try startDueSources()
                if let next = try store().nextAttempt() { wake = min(wake ?? next, next) }
            } catch {
                logger.error("the service cannot read its queue; trying again in 5 seconds", metadata: ["error": "\(error)"])
                wake = now().addingTimeInterval(5)
            }
            let deadline = wake.map { ContinuousClock.now + .seconds(max(0, $0.timeIntervalSince(now()))) }
            await wakeup.wait(until: deadline, clock: ContinuousClock())
        }
        for entry in running.values { entry.task.cancel() }
        for task in syncing.values { task.cancel() }
        while let (_, entry) = running.first { await entry.task.value }
        while let (_, task) = syncing.first { await task.value }
    }

    private func startRunnableJobs() throws(BookCacheError) {
        let free = configuration.concurrency - running.count
        guard free > 0 else { return }
        for (var job, entry) in try store().runnable(limit: free, now: now()) {
            guard let entry else {
                job.state = .failed
                job.error = ServiceJob.Failure(kind: "invalidArgument", message: "the job has no manifest line to run")
                try store().update(job)
                continue
            }
            job.state = .downloading
            job.updatedAt = now()
            try store().update(job)
            broadcast.yield(.job(job))
            live.withLock { $0[job.id] = LiveProgress(state: .downloading, bytes: job.bytes, total: job.total) }
            let started = job
            running[job.id] = (Task { await self.execute(started, entry: entry) }, false)
        }
    }

    private func execute(_ job: ServiceJob, entry: String) async {
        var job = job
        let outcome: Result<BookDownloadResult, BookCacheError>
        do {
            var request = try Self.request(fromEntry: entry)
            request.priority = job.priority
            let id = job.id
            outcome = .success(try await manager.download(request) { event in self.observe(event, job: id) })
        } catch {
            outcome = .failure(error)
        }
        let progress = live.withLock { $0.removeValue(forKey: job.id) }
        job.bytes = progress?.bytes ?? job.bytes
        job.total = progress?.total ?? job.total
        let cancelledByUser = running[job.id]?.cancelled ?? false
        running[job.id] = nil
        job.updatedAt = now()
        switch outcome {
        case .success(let result):
            job.state = .cached
            job.error = nil
            job.nextAttemptAt = nil
            job.bytes = result.metadata.fileSize
            job.total = result.metadata.fileSize
        case .failure(let error) where error.kind == .cancelled || Task.isCancelled:
            // Cancelled by the user: final. Stopped with the service: queued for the next run.
            job.state = cancelledByUser ? .cancelled : .queued
        case .failure(let error):
            schedule(&job, after: error)
        }
        do {
            try store().update(job)
        } catch {
            logger.error("cannot record a job's outcome", metadata: ["job": "\(job.id)", "error": "\(error)"])
        }
        broadcast.yield(.job(job))
        wakeup.signal()
    }

    /// Decides what a failed job does next: wait for the network, wait for a busy server, or fail.
    private func schedule(_ job: inout ServiceJob, after error: BookCacheError) {
        job.error = ServiceJob.Failure(kind: error.kind.description, message: error.message)
        let connection = error.kind == .networkUnavailable || error.kind == .offline
        // A busy server, or a transfer that failed without an HTTP status (cut short, reset).
        let busy = error.isServerBusy || (error.kind == .downloadFailed && error.httpStatus == nil)
        guard connection || (busy && job.attempts < configuration.maxServerAttempts) else {
            job.state = .failed
            job.nextAttemptAt = nil
            return
        }
        job.attempts += 1
        // The queue's backoff (one home for it), without jitter: a job's delays are few and long.
        let delay = RetryPolicy(baseDelay: configuration.firstNetworkDelay, maxDelay: configuration.maxNetworkDelay, jitter: 0)
            .backoff(beforeRetry: job.attempts, random: 0).seconds
        job.state = connection ? .waitingForNetwork : .retrying
        job.nextAttemptAt = now().addingTimeInterval(delay)
        logger.info(
            "a job waits before its next attempt",
            metadata: ["job": "\(job.id)", "state": "\(job.state.rawValue)", "seconds": "\(Int(delay))", "error": "\(error.kind)"])
    }

    private nonisolated func observe(_ event: BookEvent, job id: String) {
        let send = live.withLock { live -> ServiceEvent? in
            guard var entry = live[id] else { return nil }
            var changedState = false
            switch event {
            case .progress(_, let progress):
                entry.bytes = progress.receivedBytes
                entry.total = progress.totalBytes
                if entry.state != .downloading {
                    entry.state = .downloading
                    changedState = true
                }
            case .retrying(_, _, _, let reason):
                // The queue's own retries: of a connection failure, the job is waiting for the network.
                entry.state = reason.kind == .connectionFailed ? .waitingForNetwork : .retrying
                changedState = true
            default:
                return nil
            }
            let clock = ContinuousClock.now
            // At most 4 progress events a second per job; state changes always.
            if !changedState, let last = entry.lastSent, clock - last < .milliseconds(250) {
                live[id] = entry
                return nil
            }
            entry.lastSent = clock
            live[id] = entry
            return .progress(jobId: id, bytes: entry.bytes, total: entry.total, state: entry.state)
        }
        if let send { broadcast.yield(send) }
    }

    private func withLiveProgress(_ job: ServiceJob) -> ServiceJob {
        guard let progress = live.withLock({ $0[job.id] }) else { return job }
        var job = job
        job.state = job.state.isFinal ? job.state : progress.state
        job.bytes = progress.bytes
        job.total = progress.total
        return job
    }

}
