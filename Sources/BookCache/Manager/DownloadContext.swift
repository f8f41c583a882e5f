import DownloadQueue
import Foundation
import Logging

/// The steps of one book download, run off the manager's actor so it stays responsive, top to
/// bottom: the queue admits the job; the book's lock is taken; a book another process cached
/// meanwhile is returned as it is; the response head is read and room made on the disk; the
/// body streams into `partial/` while it is hashed (resuming what an earlier attempt left); the
/// transfer's slot goes to the next book once this one has a place among the books awaiting
/// publish (``BookCacheManager/pipelineDepth``); the file is validated, then published in one
/// index update — the same one that evicts what the budget can no longer hold, so a download that
/// does not end cached evicts nothing for the budget. ``DownloadMachine`` orders the steps. Every
/// blocking step (index, validation, files) runs on ``BlockingWork``.
struct DownloadContext: Sendable {
    let layout: CacheLayout
    let store: IndexStore
    let queue: DownloadQueue
    let configuration: BookCacheConfiguration
    let evictor: Evictor
    let usage: UsageTracker
    /// Where the download's events go; every one is sent through it.
    let feed: DownloadFeed
    let publisher: GroupPublisher
    let awaitingPublish: Places
    let logger: Logger

    func run(_ request: BookDownloadRequest) async throws(BookCacheError) -> BookDownloadResult {
        let id = request.id
        // The book is in use until it is published (``GroupPublisher``) or this returns.
        let download = usage.beginDownload(id)
        defer { download.end() }
        let partial = layout.partialFile(for: id)
        // An EPUB's entries are checked as they arrive, so its validation need not read them back.
        let arriving = ArrivingZIP(limits: configuration.validationLimits)
        // Books evicted for free space before the body is written; told to the caller whether
        // the download then succeeds or fails.
        var evictedForSpace: [EvictedBook] = []
        let feed = self.feed
        do throws(BookCacheError) {
            let job = job(for: request, to: partial, observer: arriving)
            var result = try await queue.withSlot(for: job, onEvent: { feed.send($0, of: id) }) { slot throws(BookCacheError) in
                try await steps(of: request, with: slot, into: partial, arriving: arriving, download: download) {
                    evictedForSpace += $0
                }
            }
            result.evicted = evictedForSpace + result.evicted
            return result
        } catch {
            var failure = error
            failure.evicted = evictedForSpace
            failure.displayLocale = configuration.locale
            feed.send(.failed(id, failure))
            throw failure
        }
    }

    /// The download's steps once the queue has admitted it, in the order ``DownloadMachine``
    /// gives them: each action is performed here and its outcome fed back, so every path — a retry,
    /// a restart from byte 0, a failure at any step — goes through the same decisions.
    ///
    /// The book's lock is taken once the queue admits the job (thousands of waiting jobs hold no
    /// file descriptors) and held until the book is published or given up; the place among the
    /// books awaiting publish is held from the body's arrival to the same end.
    ///
    /// Over 80 lines on purpose: the download's steps are one switch, read top to bottom in the
    /// order the machine gives them; each case is a step and what it feeds back.
    private func steps(
        of request: BookDownloadRequest, with slot: DownloadSlot, into partial: URL, arriving: ArrivingZIP,
        download: UsageTracker.Download, evicted: ([EvictedBook]) -> Void
    ) async throws(BookCacheError) -> BookDownloadResult {
        let id = request.id
        var machine = DownloadMachine()
        var lock: BookLock?
        var holdsPlace = false
        defer {
            if holdsPlace { awaitingPublish.give() }
            lock?.release()
        }
        // What the steps found, for the steps after them; the settings are read once, with the index.
        var found: CachedBookMetadata?
        var limits: Evictor.Limits = (maxSize: nil, keep: nil, reserve: 0)
        var strict = false
        var opened: OpenedDownload?
        var file: DownloadedFile?
        var entry: GroupPublisher.Entry?
        var published: BookDownloadResult?
        var failure: BookCacheError?
        var action = machine.next(.admitted)
        while true {
            if action == .fail { throw failure ?? .unexpected(id, cause: DownloadMachine.Stuck(phase: machine.phase)) }
            do throws(BookCacheError) {
                switch action {
                case .lock:
                    lock = try await lockBook(id)
                    action = machine.next(.locked)
                case .readIndex:
                    let (record, settings) = try await cachedMeanwhile(request)
                    (found, limits) = (record, evictor.limits(from: settings))
                    strict = configuration.strictValidation ?? settings.strict ?? false
                    action = machine.next(.found(cached: record != nil))
                case .returnCached:
                    let record = try Self.carried(found, id: id, machine)
                    feed.send(.cached(record, alreadyCached: true))
                    return BookDownloadResult(
                        metadata: record, fileURL: layout.url(forRelativePath: record.localPath), wasAlreadyCached: true)
                case .open:
                    // Fetched again from the start after a refusal: the place goes back meanwhile.
                    if holdsPlace {
                        awaitingPublish.give()
                        holdsPlace = false
                    }
                    switch try await translated(request, { () throws(DownloadError) in try await slot.open() }) {
                    case .head(let response):
                        opened = response
                        action = machine.next(.opened)
                    case .retrying:
                        action = machine.next(.transferRetrying)
                    }
                case .makeRoom:
                    try await makeRoom(for: try Self.carried(opened, id: id, machine), of: request, limits: limits, evicted: evicted)
                    action = machine.next(.roomMade)
                case .receive:
                    let response = try Self.carried(opened, id: id, machine)
                    switch try await translated(request, { () throws(DownloadError) in try await slot.receive(response) }) {
                    case .file(let arrived):
                        file = arrived
                        action = machine.next(.bodyArrived)
                    case .retrying:
                        action = machine.next(.transferRetrying)
                    }
                case .takePlace:
                    // Every byte has arrived: from here the book is validated and published even when
                    // the download is cancelled (a signal, a caller), which costs less than fetching it
                    // again. A full window holds this transfer's slot, and so the transfers, back.
                    await awaitingPublish.take()
                    holdsPlace = true
                    await slot.release()
                    feed.send(.validating(id))
                    action = machine.next(.placeTaken)
                case .validate:
                    let arrived = try Self.carried(file, id: id, machine)
                    do {
                        entry = try await judge(arrived, of: request, from: partial, seen: arriving, limits: limits, strict: strict)
                        action = machine.next(.validated)
                    } catch  where [.fileCorrupted, .checksumMismatch].contains(error.kind) {
                        // The refused partial is gone (validate removes it): a next attempt starts at byte 0.
                        failure = error
                        action = machine.next(.refused(resumed: arrived.resumedFrom > 0))
                        if action == .open {
                            logger.notice(
                                "a resumed download was refused; fetching it once more from the start",
                                metadata: ["id": "\(id)", "resumedFrom": "\(arrived.resumedFrom)", "reason": "\(error.message)"])
                        }
                    }
                case .publish:
                    var ready = try Self.carried(entry, id: id, machine)
                    ready.download = download
                    ready.lock = lock
                    published = try await publish(ready, from: partial, resumedFrom: file?.resumedFrom ?? 0)
                    action = machine.next(.published)
                case .returnPublished:
                    let result = try Self.carried(published, id: id, machine)
                    feed.send(.cached(result.metadata, alreadyCached: false))
                    return result
                case .fail:
                    // Thrown before the switch; never reached.
                    action = machine.next(.failed)
                }
            } catch {
                failure = error
                action = machine.next(.failed)
            }
        }
    }

    /// Publishes a validated book with the other books ready now, in one index transaction; a
    /// book the group could not take leaves neither its file nor its sidecar behind.
    private func publish(
        _ ready: GroupPublisher.Entry, from partial: URL, resumedFrom: Int64
    ) async throws(BookCacheError) -> BookDownloadResult {
        switch await publisher.publish(ready) {
        case .success(let (stored, evicted)):
            logger.info(
                "cached",
                metadata: [
                    "id": "\(stored.id)", "bytes": "\(stored.fileSize)", "sha256": "\(stored.checksum)", "resumedFrom": "\(resumedFrom)",
                ])
            return BookDownloadResult(
                metadata: stored, fileURL: layout.url(forRelativePath: stored.localPath), wasAlreadyCached: false, evicted: evicted)
        case .failure(let error):
            await BlockingWork.run {
                FileDownloader.discard(partial.path)
                // Gone already when the publisher placed it before the group failed.
                if let sidecar = ready.sidecar { unlink(sidecar.path) }
            }
            throw error
        }
    }

    /// Room on the disk for what is still to come of `opened`; a book the budget could never hold
    /// is refused here (the response is cancelled). The budget evicts only at publishing.
    private func makeRoom(
        for opened: OpenedDownload, of request: BookDownloadRequest, limits: Evictor.Limits, evicted: ([EvictedBook]) -> Void
    ) async throws(BookCacheError) {
        guard let length = opened.head.remainingLength ?? opened.head.expectedLength ?? request.expectedSize else { return }
        let (evictor, id) = (self.evictor, request.id)
        do throws(BookCacheError) {
            evicted(try await BlockingWork.run { () throws(BookCacheError) in try evictor.admit(length, for: id, limits: limits) })
        } catch {
            opened.cancel()
            throw error
        }
    }

    /// Runs a step of the queue's, its error made the cache's.
    private func translated<T>(
        _ request: BookDownloadRequest, _ step: () async throws(DownloadError) -> T
    ) async throws(BookCacheError) -> T {
        do {
            return try await step()
        } catch {
            throw Self.translate(error, id: request.id, root: layout.root.path, loginGiven: request.credentials != nil)
        }
    }

    /// A value an earlier step left for this one; its absence is the machine's or this file's bug.
    private static func carried<T>(_ value: T?, id: BookID, _ machine: DownloadMachine) throws(BookCacheError) -> T {
        guard let value else { throw .unexpected(id, cause: DownloadMachine.Stuck(phase: machine.phase)) }
        return value
    }

    /// The queue's job for a book: into `partial/`, resumable, with its login and headers, its
    /// bytes read by `observer` as they are written.
    private func job(for request: BookDownloadRequest, to partial: URL, observer: ArrivingZIP) -> DownloadRequest {
        var job = DownloadRequest(
            url: request.url, destination: partial.path, priority: request.priority, maxBytes: configuration.maxBookBytes, resume: true)
        job.observer = observer
        job.credentials = request.credentials
        job.headers = request.headers
        if request.failFastWhenOffline {
            var policy = configuration.retryPolicy
            policy.retriesConnectionFailures = false
            job.retryPolicy = policy
        }
        return job
    }

    /// Takes the book's lock, waiting (without blocking a thread) while another download of it,
    /// in this process or another, holds it.
    private func lockBook(_ id: BookID) async throws(BookCacheError) -> BookLock {
        do {
            return try await BookLock.acquire(id, in: layout)
        } catch is CancellationError {
            throw .cancelled(id)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot lock \(id) (\(error))")
        }
    }

    /// The book's record when another process cached it while this one waited for the lock, and
    /// the cache's settings.
    private func cachedMeanwhile(
        _ request: BookDownloadRequest
    ) async throws(BookCacheError) -> (CachedBookMetadata?, CacheSettings) {
        let (store, layout, settings, id, replacing) = (self.store, self.layout, self.evictor.settings, request.id, request.replaceExisting)
        let (record, saved) = try await BlockingWork.run { () throws(BookCacheError) -> (CachedBookMetadata?, CacheSettings) in
            let saved = try settings.read()
            guard !replacing, let record = try store.record(id), layout.holdsWhole(record) else { return (nil, saved) }
            return (record, saved)
        }
        if let record { try request.checkSameBook(asFrom: record.fileUrl) }
        return (record, saved)
    }

    /// Judges the downloaded file where the configuration says (a worker, or this process) —
    /// leaving out of the CRC pass what `seen` checked as it arrived — and makes its record, ready
    /// to publish, on the thread that waited for the verdict.
    private func judge(
        _ file: DownloadedFile, of request: BookDownloadRequest, from partial: URL, seen: ArrivingZIP, limits: Evictor.Limits,
        strict: Bool
    ) async throws(BookCacheError) -> GroupPublisher.Entry {
        let id = request.id
        // Marked while it is judged, for a service: a process that dies judging it leaves the mark,
        // and the service that finds it at its next start counts the death against the book's job.
        let mark = configuration.marksBooksBeingJudged ? layout.judgingMark(for: id) : nil
        let (context, logger) = (self, logger)
        return try await configuration.validation.judge(
            path: partial.path, limits: configuration.validationLimits, strict: strict,
            arrived: {
                if let mark {
                    let descriptor = open(mark.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
                    if descriptor >= 0 {
                        close(descriptor)
                    } else {
                        logger.debug("cannot mark a book as being judged", metadata: ["id": "\(id)", "errno": "\(errno)"])
                    }
                }
                return seen.verdict()
            },
            then: { judgement throws(BookCacheError) -> GroupPublisher.Entry in
                if let mark { unlink(mark.path) }
                let judged: Result<ValidationReport, BookCacheError>
                switch judgement {
                case .accepted(let report):
                    judged = .success(report)
                case .refused(let failure):
                    logger.notice(
                        "refused an invalid download", metadata: ["id": "\(id)", "reason": "\(failure.reason)", "kind": "\(failure.kind)"])
                    judged = .failure(
                        failure.kind == .unjudgeable
                            ? .unjudgeable(id, reason: failure.reason) : .fileCorrupted(id, reason: failure.reason, refusal: failure.kind))
                case .cancelled:
                    // Cancelled while it was judged: the worker was ended, and so is the download.
                    judged = .failure(.cancelled(id))
                case .unusable(let error):
                    judged = .failure(error)
                }
                return try context.record(file, judged: judged, of: request, from: partial, limits: limits)
            })
    }

    /// Makes the record of a judged file, ready to publish; the partial file is removed when it
    /// was refused.
    private func record(
        _ file: DownloadedFile, judged: Result<ValidationReport, BookCacheError>, of request: BookDownloadRequest, from partial: URL,
        limits: Evictor.Limits
    ) throws(BookCacheError) -> GroupPublisher.Entry {
        let id = request.id
        // The file is whole; from here on it is either handed on to be published or removed.
        var handedOn = false
        defer {
            if !handedOn { FileDownloader.discard(partial.path) }
        }
        let validation = try judged.get()
        if let expected = request.expectedSHA256, expected != file.sha256 {
            throw .checksumMismatch(id, expected: expected, actual: file.sha256)
        }
        if let budget = limits.maxSize, file.byteCount > budget {
            // The size was not announced; now that it is known, the book cannot fit at all.
            throw .overBudget(id, size: file.byteCount, budget: budget)
        }

        let now = configuration.now()
        let format = validation.format
        if !validation.warnings.isEmpty {
            logger.notice("cached with warnings", metadata: ["id": "\(id)", "warnings": "\(validation.warnings)"])
        }
        var record = CachedBookMetadata(
            id: id,
            title: request.title ?? id.description,
            coverUrl: request.coverURL.map { $0.absoluteString },
            fileUrl: request.url.absoluteString,
            localPath: layout.relativePath(for: id, format: format),
            fileSize: file.byteCount,
            downloadedAt: now,
            lastAccessedAt: now,
            checksum: file.sha256,
            format: format,
            etag: file.etag,
            lastModified: file.lastModified
        )
        record.authors = request.authors
        record.language = request.language ?? validation.language
        record.published = request.published ?? validation.published
        record.warnings = validation.warnings
        // As a new book is published (the publisher keeps what a replaced one had).
        record.pinned = request.pin
        record.syncSources = request.syncSource.map { [$0] } ?? []
        let sidecar: URL
        do {
            sidecar = try layout.prepareSidecar(record)
        } catch let error as FileSystem.CallError where error.code == ENOSPC || error.code == EDQUOT {
            throw .diskFull(id, path: layout.root.path, needed: file.byteCount)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot write the sidecar of \(id) (\(error))")
        }
        handedOn = true
        return GroupPublisher.Entry(
            record: record, partial: partial, sidecar: sidecar, pin: request.pin, syncSource: request.syncSource, limits: limits)
    }

    /// Maps queue and transport errors to the cache's error.
    static func translate(_ error: any Error, id: BookID, root: String, loginGiven: Bool = true) -> BookCacheError {
        if let error = error as? BookCacheError { return error }
        guard let error = error as? DownloadError else {
            return error is CancellationError ? .cancelled(id) : .unexpected(id, cause: error)
        }
        if let inner = error.underlying as? BookCacheError { return inner }
        if error.kind == .fileSystem, let code = error.errnoCode, code == ENOSPC || code == EDQUOT {
            var full = BookCacheError.diskFull(id, path: root)
            full.underlying = error
            return full
        }
        switch error.kind {
        case .cancelled: return .cancelled(id)
        case .connectionFailed: return .networkUnavailable(id, cause: error)
        default: return .downloadFailed(id, cause: error, loginGiven: loginGiven)
        }
    }
}
