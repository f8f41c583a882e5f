import DownloadQueue
import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The cache: downloads books, validates them, keeps the index, and serves them offline.
///
/// Every method is safe to call from many tasks at once, and several managers (in one process
/// or many) may share a cache directory: each index update is one SQLite transaction.
///
/// ```swift
/// let manager = BookCacheManager(configuration: .init(rootDirectory: CacheLayout.defaultRoot()), logger: logger)
/// let request = try BookDownloadRequest(url: "https://example.com/moby.epub", id: BookID(type: .ebook, bookId: "moby"))
/// let result = try await manager.download(request, onProgress: { progress in
///     print(progress.fractionCompleted ?? 0)
/// })
/// print(result.fileURL.path)
/// ```
public actor BookCacheManager {
    /// The manager's methods read and write the index with blocking calls (SQLite, file reads,
    /// `fsync`), so the actor runs on the blocking-work threads, never on the cooperative pool.
    private nonisolated let executor = BlockingWork.SerialExecutor()
    /// The executor the actor runs on (the blocking-work threads, not the cooperative pool).
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// Where the cache keeps its files.
    public nonisolated let layout: CacheLayout
    private let configuration: BookCacheConfiguration
    let store: IndexStore
    private let queue: DownloadQueue
    /// The HTTP stack, for revalidation requests.
    nonisolated let transport: any HTTPTransport
    let settingsStore: SettingsStore
    let usageTracker = UsageTracker()
    let evictionObservers = EvictionObservers()
    let bookEvents = Broadcast<BookEvent>()
    let evictionRunner: Evictor
    /// Publishes the books this manager downloads, in groups when several are ready together.
    nonisolated let publisher: GroupPublisher
    /// Places for books whose body has arrived, until they are published or refused: a book
    /// takes one before its transfer's slot goes to the next book, so validation and publishing
    /// run behind the transfers, and a full window (a slow disk) holds the transfers back.
    nonisolated let awaitingPublish: Places
    /// How many downloads to keep in the manager at once so that no transfer waits for the disk:
    /// the transfers (``BookCacheConfiguration/maxConcurrentDownloads``), twice as many books
    /// past their transfer (being validated or published, or waiting to be), and as many again
    /// in line to start the moment a transfer ends. `bookcache download` and the service keep
    /// this many; more only wait in line.
    public nonisolated let pipelineDepth: Int
    let logger: Logger
    private var inFlight: [BookID: InFlight] = [:]
    private var swept = false
    /// Whether the cache's folders were found to be this user's alone (they stay so: only their owner can change them).
    private var foldersTrusted = false
    private var backgroundWork: [UUID: Task<Void, Never>] = [:]

    private struct InFlight {
        let task: Task<BookDownloadResult, any Error>
        let progress: ProgressBox
        let url: URL
        /// The download's events, for callers that join it.
        let listeners: Broadcast<BookEvent>
        /// How many callers joined it.
        var joined = 0
    }

    /// How many callers joined the running download of a book (for tests).
    func joinedCallers(_ id: BookID) -> Int {
        inFlight[id]?.joined ?? 0
    }

    /// Creates a manager. Nothing is read or created on disk until it is needed.
    /// - Parameters:
    ///   - configuration: The root directory and limits.
    ///   - transport: The HTTP stack; `CurlTransport.shared` (libcurl) by default.
    ///   - logger: Where the library logs; it never prints.
    public init(
        configuration: BookCacheConfiguration,
        transport: any HTTPTransport = CurlTransport.shared,
        logger: Logger = Logger(label: "bookcache", factory: { _ in SwiftLogNoOpLogHandler() })
    ) {
        self.layout = CacheLayout(root: configuration.rootDirectory)
        self.configuration = configuration
        self.transport = transport
        self.logger = logger
        self.store = IndexStore(layout: layout, logger: logger)
        self.settingsStore = SettingsStore(layout: layout)
        self.evictionRunner = Evictor(
            layout: layout, store: store, settings: settingsStore, configuration: configuration, usage: usageTracker,
            observers: evictionObservers, events: bookEvents, logger: logger)
        self.publisher = GroupPublisher(layout: layout, store: store, evictor: evictionRunner, logger: logger)
        let transfers = max(1, configuration.maxConcurrentDownloads)
        self.awaitingPublish = Places(2 * transfers)
        self.pipelineDepth = 4 * transfers
        self.queue = DownloadQueue(
            maxConcurrent: configuration.maxConcurrentDownloads, retryPolicy: configuration.retryPolicy,
            transport: transport, clock: configuration.downloadClock, logger: logger)
    }

    // MARK: - Reading

    /// Where a book stands: downloading, cached, or not cached.
    /// - Parameter id: The book.
    /// - Throws: ``BookCacheError`` when the cache cannot be read.
    public func status(of id: BookID) throws(BookCacheError) -> BookCacheStatus {
        if let flight = inFlight[id] {
            return .downloading(progress: flight.progress.value.fractionCompleted)
        }
        guard let record = try cachedRecord(id) else { return .notCached }
        if record.outdated { return .outdated }
        return .cached(size: record.fileSize, date: record.downloadedAt)
    }

    /// The cached file for a book, or `nil` when it is not cached. Records the access for LRU: the
    /// first since the book was cached, then at most once a minute a book (``accessResolution``),
    /// so a reader paging through a shelf, or a server asked for the same file again and again,
    /// does not pay an index write and a synced sidecar each time. A crash loses at most that
    /// minute of LRU order; ``touch(_:)`` records every call.
    /// - Parameter id: The book.
    /// - Returns: The file's URL.
    /// - Throws: ``BookCacheError`` when the cache cannot be read or written.
    /// On a cache that cannot be written (a read-only mount), the file is still returned and
    /// the access is not recorded; a warning is logged.
    public func cachedFile(for id: BookID) throws(BookCacheError) -> URL? {
        try read(id).map { layout.url(forRelativePath: $0.localPath) }
    }

    /// The record of a cached book about to be read, its access recorded as
    /// ``cachedFile(for:)`` records it: one call where a server needs both the record and the
    /// read. `nil` when the book is not cached.
    package func read(_ id: BookID) throws(BookCacheError) -> CachedBookMetadata? {
        guard let record = try cachedRecord(id) else { return nil }
        let firstRead = record.lastAccessedAt == record.downloadedAt
        guard firstRead || configuration.now().timeIntervalSince(record.lastAccessedAt) >= Self.accessResolution else {
            return record
        }
        do {
            try touch(id)
        } catch  where error.kind == .cacheDirectoryUnusable {
            logger.warning(
                "could not record the access; the book is still readable", metadata: ["id": "\(id)", "error": "\(error.message)"])
        }
        return record
    }

    /// The record of a cached book, or `nil`.
    /// - Parameter id: The book.
    public func metadata(for id: BookID) throws(BookCacheError) -> CachedBookMetadata? {
        try cachedRecord(id)
    }

    /// Every cached book, sorted by id.
    public func allBooks() throws(BookCacheError) -> [CachedBookMetadata] {
        try checkRootIsUsable()
        return try store.allRecords()
    }

    /// Calls `body` with every cached book (or every book of a type), in id order, reading the
    /// index one row at a time: memory does not grow with the cache, so a listing of a million
    /// books stays small. The rows are read on a blocking-work thread, where `body` is called;
    /// the calling task waits without holding a thread.
    /// - Parameters:
    ///   - type: Only books of this type, or all when `nil`.
    ///   - body: Called with each record, one at a time.
    /// - Throws: ``BookCacheError`` when the index cannot be read.
    public nonisolated func forEachBook(
        ofType type: BookType? = nil, _ body: @escaping @Sendable (CachedBookMetadata) -> Void
    ) async throws(BookCacheError) {
        try await BlockingWork.run { () throws(BookCacheError) in try self.blockingForEachBook(ofType: type, body) }
    }

    /// ``forEachBook(ofType:_:)`` on the calling thread, which it blocks: for callers already on
    /// blocking work (checked in debug builds).
    package nonisolated func blockingForEachBook(ofType type: BookType? = nil, _ body: (CachedBookMetadata) -> Void) throws(BookCacheError)
    {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: layout.root.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw .cacheDirectoryUnusable(layout.root.path, "it is a file, not a directory")
        }
        try store.forEachRecord(ofType: type, body)
    }

    /// The total size of the cached books, in bytes.
    public func totalSize() throws(BookCacheError) -> Int64 {
        try checkRootIsUsable()
        return try store.totals().values.reduce(0) { $0 + $1.bytes }
    }

    /// Counts and bytes per type, and the free space on the cache's filesystem.
    public func statistics() throws(BookCacheError) -> CacheStatistics {
        try checkRootIsUsable()
        // From the totals the index keeps per type: no book is read.
        let totals = try store.totals()
        var byType: [BookType: CacheStatistics.TypeTotals] = [:]
        for type in BookType.allCases {
            byType[type] = .init(count: totals[type]?.count ?? 0, bytes: totals[type]?.bytes ?? 0)
        }
        let available = try evictionRunner.freeSpace()
        let limits = try evictionRunner.limits()
        return CacheStatistics(
            byType: byType, totalCount: totals.values.reduce(0) { $0 + $1.count }, totalBytes: totals.values.reduce(0) { $0 + $1.bytes },
            availableBytes: available, pinnedBytes: totals.values.reduce(0) { $0 + $1.pinnedBytes },
            pinnedCount: totals.values.reduce(0) { $0 + $1.pinnedCount },
            maxSize: limits.maxSize, keep: limits.keep, reserve: limits.reserve, rootPath: layout.root.path)
    }

    // MARK: - Changing

    var validationLimits: ValidationLimits { configuration.validationLimits }
    /// Where books are judged.
    nonisolated var validation: BookValidation { configuration.validation }
    func now() -> Date { configuration.now() }

    /// Changes one record in one index transaction.
    /// - Returns: Whether the book was in the index.
    @discardableResult
    func updateRecord(_ id: BookID, _ change: (inout CachedBookMetadata) -> Void) throws(BookCacheError) -> Bool {
        var found = false
        try store.update { index throws(BookCacheError) in
            guard var record = index[id] else { return }
            found = true
            change(&record)
            index[id] = record
            updateSidecar(record)
        }
        return found
    }

    /// Rewrites a book's sidecar after its record changed (a pin, an access, a sync source), so an
    /// index rebuilt from sidecars keeps it. Called inside the index transaction, so the two agree. A
    /// failure is logged, not thrown: the index, the primary copy, already holds the change.
    func updateSidecar(_ record: CachedBookMetadata) {
        do {
            try layout.writeSidecar(record)
        } catch {
            logger.warning(
                "the index has the change, but the book's sidecar could not be updated; an index rebuilt from sidecars would miss it",
                metadata: ["id": "\(record.id)", "error": "\(error)"])
        }
    }

    /// How close together two accesses of a book may be recorded as one (``cachedFile(for:)``).
    public static let accessResolution: TimeInterval = 60

    /// Records that a book was used now, for LRU eviction.
    /// - Parameter id: The book.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/notCached`` if it is not cached.
    public func touch(_ id: BookID) throws(BookCacheError) {
        let now = configuration.now()
        guard try updateRecord(id, { $0.lastAccessedAt = now }) else { throw .notCached(id) }
    }

    /// Removes a book's file, sidecar and record; cancels its download if one is running.
    /// - Parameter id: The book.
    /// - Returns: `true` when something was removed.
    @discardableResult
    public func delete(_ id: BookID) throws(BookCacheError) -> Bool {
        inFlight[id]?.task.cancel()
        try checkRootIsUsable()
        guard store.exists else { return false }
        var removed = false
        try store.update { index throws(BookCacheError) in
            removed = try layout.removeBookFiles(of: id, record: index[id])
            if index[id] != nil {
                index[id] = nil
                removed = true
            }
        }
        if removed { logger.info("deleted", metadata: ["id": "\(id)"]) }
        return removed
    }

    /// Removes every cached book, or every book of one type.
    /// - Parameter type: Only this type, or all when `nil`.
    /// - Returns: The ids removed.
    @discardableResult
    public func clear(type: BookType? = nil) throws(BookCacheError) -> [BookID] {
        try checkRootIsUsable()
        guard store.exists else { return [] }
        var removed: [BookID] = []
        try store.update { index throws(BookCacheError) in
            for record in index.records(ofType: type) {
                let id = try record.bookID
                inFlight[id]?.task.cancel()
                _ = try layout.removeBookFiles(of: id, record: record)
                index[id] = nil
                removed.append(id)
            }
        }
        return removed.sorted()
    }

    /// Cancels a running download of a book; its partial file is kept so a later download resumes it.
    /// - Parameter id: The book.
    public func cancelDownload(_ id: BookID) {
        inFlight[id]?.task.cancel()
    }

    // MARK: - Downloading

    /// Downloads a book into the cache, or returns at once when it is already cached.
    ///
    /// The body streams into `partial/` while it is hashed, is validated (EPUB via libzip, PDF
    /// structure, the expected checksum), then moved into place; only then is the index updated.
    /// A failed or invalid download leaves nothing in the type folders or the index. Two calls
    /// for the same book share one download.
    ///
    /// - Parameters:
    ///   - request: What to download.
    ///   - onProgress: Called as bytes arrive (for the call that started the download).
    /// - Returns: The record and file, and whether it was already cached.
    /// - Throws: ``BookCacheError``: `downloadFailed`, `networkUnavailable`, `insufficientStorage`,
    ///   `fileCorrupted`, `checksumMismatch`, `cacheDirectoryUnusable` or `cancelled`.
    // Disfavoured, so `download(request) { event in … }` with a trailing closure means the
    // `onEvent:` variant instead of being ambiguous between the two.
    @_disfavoredOverload
    public func download(
        _ request: BookDownloadRequest,
        onProgress: @escaping @Sendable (DownloadProgress) -> Void
    ) async throws(BookCacheError) -> BookDownloadResult {
        try await download(request) { event in
            if case .progress(_, let progress) = event { onProgress(progress) }
        }
    }

    /// Downloads a book into the cache, reporting each of its events (``BookEvent``): queued,
    /// started (with the attempt number), progress, retrying (with the delay and the attempt's
    /// error), validating, then cached (with the record) or failed (with the error) — the same
    /// events ``events()`` carries for this book, to the caller that started the download and to
    /// every caller that joined it.
    ///
    /// Failed attempts are retried by the configuration's `RetryPolicy`, resuming the partial
    /// file with `Range`/`If-Range`. A partial file left by a failed or cancelled download (or a
    /// killed process) is resumed by the next download of the same book. Another process
    /// downloading the same book is waited for, and its result is reported as already cached.
    ///
    /// One URL, one book: when the request's id is derived from its URL (or a sync asks), and
    /// that URL is cached already under another id of the same type, that book is the answer
    /// (its record names its id) and nothing is fetched.
    ///
    /// - Parameters:
    ///   - request: What to download.
    ///   - onEvent: Called with each event of the download, from when the call starts or joins it.
    /// - Returns: The record and file, and whether it was already cached.
    /// - Throws: ``BookCacheError`` as ``download(_:onProgress:)``.
    public func download(
        _ request: BookDownloadRequest,
        onEvent: @escaping @Sendable (BookEvent) -> Void = { _ in }
    ) async throws(BookCacheError) -> BookDownloadResult {
        var request = request
        // The book's record, read once (the index's lock is shared with the publishing of other
        // books: a second read per book made a batch of 2,000 half again as slow). One URL, one
        // book: a URL cached under another id (by hand, or by another source) is that book,
        // unless the caller named the id itself; the same read finds it.
        var known: CachedBookMetadata?
        if !request.replaceExisting, inFlight[request.id] == nil {
            try checkRootIsUsable()
            let sameURL = request.idDerivedFromURL || request.syncSource != nil
            let found = try store.record(request.id, orSameURLAs: sameURL ? request.url : nil)
            if found.own == nil, let same = found.sameURL {
                request.id = try same.bookID
                known = same
            } else {
                known = found.own
            }
        }
        let id = request.id
        if let flight = inFlight[id] {
            try request.checkSameBook(asFrom: flight.url.absoluteString)
            // A caller joining a download another started sees its events from now on.
            let events = flight.listeners.stream()
            inFlight[id]?.joined += 1
            let forward = Task {
                for await event in events { onEvent(event) }
            }
            let outcome: Result<BookDownloadResult, BookCacheError>
            do {
                outcome = .success(try await Self.value(of: flight.task, id: id))
            } catch {
                outcome = .failure(error)
            }
            // The stream ends when the caller that started the download returns: every event is delivered.
            await forward.value
            return try outcome.get()
        }
        if !request.replaceExisting, var record = onDisk(known) {
            try request.checkSameBook(asFrom: record.fileUrl)
            if request.syncSource == nil && !record.syncSources.isEmpty {
                // Asked for directly: the book is the user's now, and no sync will remove it.
                try updateRecord(id) { $0.syncSources = [] }
                record.syncSources = []
            } else if let source = request.syncSource, !record.syncSources.isEmpty, !record.syncSources.contains(source) {
                try updateRecord(id) { $0.syncSources.append(source) }
                record.syncSources.append(source)
            }
            let cached = BookEvent.cached(record, alreadyCached: true)
            bookEvents.yield(cached)
            onEvent(cached)
            return BookDownloadResult(metadata: record, fileURL: layout.url(forRelativePath: record.localPath), wasAlreadyCached: true)
        }
        try prepareDirectories()
        let feed = DownloadFeed(everyone: bookEvents, joined: Broadcast(), progress: ProgressBox(), starter: onEvent)
        let context = DownloadContext(
            layout: layout, store: store, queue: queue, configuration: configuration, evictor: evictionRunner, usage: usageTracker,
            feed: feed, publisher: publisher, awaitingPublish: awaitingPublish, logger: logger)
        let asked = request
        let task = Task { try await context.run(asked) }
        let listeners = feed.joined
        inFlight[id] = InFlight(task: task, progress: feed.progress, url: request.url, listeners: listeners)
        defer {
            inFlight[id] = nil
            listeners.finish()
        }
        do {
            let result = try await withTaskCancellationHandler {
                try await Self.value(of: task, id: id)
            } onCancel: {
                task.cancel()
            }
            if !result.wasAlreadyCached, let cover = request.coverURL {
                fetchCoverInBackground(for: id, from: cover, of: request)
            }
            return result
        } catch let error as BookCacheError {
            throw error
        } catch is CancellationError {
            throw .cancelled(id)
        } catch {
            throw .unexpected(id, cause: error)
        }
    }

    /// Fetches a cover at low priority without holding up the book's download.
    private func fetchCoverInBackground(for id: BookID, from url: URL, of book: BookDownloadRequest) {
        // The book's login and headers go with its cover only on the book's own origin.
        let access = OriginAccess(credentials: book.credentials, headers: book.headers, origin: book.url)
        let fetcher = CoverFetcher(layout: layout, store: store, queue: queue, logger: logger)
        let key = UUID()
        backgroundWork[key] = Task {
            await fetcher.fetch(for: id, from: url, access: access)
            self.finishBackgroundWork(key)
        }
    }

    private func finishBackgroundWork(_ key: UUID) {
        backgroundWork[key] = nil
    }

    /// Every book the cache removes on its own from now on — for the budget, for free space, by
    /// `prune`, or because a sync source dropped it — as it happens. A bookshelf app listens
    /// to take those books off its shelf. Books removed by ``delete(_:)`` and ``clear(type:)``
    /// are not reported: the caller asked for it.
    ///
    /// ```swift
    /// for await gone in manager.evictions() {
    ///     shelf.remove(gone.metadata.id)     // gone.reason: .budget, .freeSpace, .prune, .syncSource
    /// }
    /// ```
    public nonisolated func evictions() -> AsyncStream<EvictedBook> {
        evictionObservers.stream()
    }

    /// Every download's life and every eviction from now on (see ``BookEvent``), for as many
    /// listeners as ask: a second caller of a book another caller is downloading sees its
    /// progress here. A listener that falls behind keeps the newest 4,096 events.
    public nonisolated func events() -> AsyncStream<BookEvent> {
        bookEvents.stream()
    }

    /// How many downloads wait in the queue for a slot.
    public func queuedDownloads() async -> Int {
        await queue.waitingCount
    }

    /// Waits for background work started by downloads (covers) to finish. A command-line tool
    /// calls it before it exits.
    public func waitForBackgroundWork() async {
        while let (_, task) = backgroundWork.first {
            await task.value
        }
    }

    private static func value(of task: Task<BookDownloadResult, any Error>, id: BookID) async throws(BookCacheError) -> BookDownloadResult {
        do {
            return try await task.value
        } catch let error as BookCacheError {
            throw error
        } catch is CancellationError {
            throw .cancelled(id)
        } catch {
            throw .unexpected(id, cause: error)
        }
    }

    // MARK: - Helpers

    /// The record of `id` if it is in the index and its file is on disk, whole (``CacheLayout/holdsWhole(_:)``).
    private func cachedRecord(_ id: BookID) throws(BookCacheError) -> CachedBookMetadata? {
        try checkRootIsUsable()
        return onDisk(try store.record(id))
    }

    /// `record` when its file is there with its size; `nil` (and a warning) otherwise.
    private func onDisk(_ record: CachedBookMetadata?) -> CachedBookMetadata? {
        guard let record else { return nil }
        guard layout.holdsWhole(record) else {
            logger.warning("a cached book's file is missing or not whole; treating it as not cached", metadata: ["id": "\(record.id)"])
            return nil
        }
        return record
    }

    /// Fails when the root exists but is not a directory, or when it or a folder in it is not
    /// this user's alone (``CacheLayout/untrustedFolderProblem()``). A missing root is fine for reading.
    private func checkRootIsUsable() throws(BookCacheError) {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: layout.root.path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw .cacheDirectoryUnusable(layout.root.path, "it is a file, not a directory")
        }
        // Checked until it passes with the folders there: only their owner can change them after.
        guard !foldersTrusted else { return }
        if let problem = layout.untrustedFolderProblem() {
            throw .cacheDirectoryUnusable(layout.root.path, problem)
        }
        foldersTrusted = BookType.allCases.allSatisfy { FileManager.default.fileExists(atPath: layout.folder(for: $0).path) }
    }

    /// Creates the cache's folders if needed, for anything that writes.
    func prepareDirectories() throws(BookCacheError) {
        try checkRootIsUsable()
        do {
            for folder in [layout.root, layout.partialFolder] + BookType.allCases.map(layout.folder(for:)) {
                try FileSystem.createDirectory(folder)
            }
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "\(error)")
        }
        guard access(layout.root.path, W_OK) == 0 else {
            throw .cacheDirectoryUnusable(layout.root.path, "it is not writable")
        }
        if !swept {
            swept = true
            sweepLeftovers()
        }
    }

    /// Removes what killed processes left behind: temporary files of atomic writes whose writer
    /// is gone, and lock files nobody holds. Partial downloads stay, to be resumed.
    private func sweepLeftovers() {
        for folder in [layout.root, layout.partialFolder] {
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            } catch {
                logger.warning("cannot list a cache folder to tidy it", metadata: ["folder": "\(folder.path)", "error": "\(error)"])
                continue
            }
            for name in names {
                let url = folder.appending(path: name, directoryHint: .notDirectory)
                if FileSystem.isStaleTemporary(name) {
                    logger.info("removing a temporary file left by a process that died", metadata: ["path": "\(url.path)"])
                    do {
                        try FileSystem.removeFile(url)
                    } catch {
                        logger.warning("cannot remove a leftover temporary file", metadata: ["path": "\(url.path)", "error": "\(error)"])
                    }
                } else if name.hasSuffix(".lock"), folder == layout.partialFolder {
                    BookLock.removeIfUnheld(lockFile: url)
                }
            }
        }
    }
}

/// The latest progress of a download, readable from any thread.
final class ProgressBox: Sendable {
    private let storage = Mutex(DownloadProgress(receivedBytes: 0, totalBytes: nil))

    var value: DownloadProgress {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}
