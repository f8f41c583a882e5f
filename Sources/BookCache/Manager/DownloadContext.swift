import DownloadQueue
import Foundation
import Logging

/// The steps of one book download, run off the manager's actor so it stays responsive, top to
/// bottom: the queue admits the job; the book's lock is taken; a book another process cached
/// meanwhile is returned as it is; the response head is read and room made on the disk; the
/// body streams into `partial/` while it is hashed (resuming what an earlier attempt left); the
/// transfer's slot goes to the next book once this one has a place among the books awaiting
/// publish (``BookCacheManager/pipelineDepth``); the file is validated, then published in one index update — the same one that evicts what the
/// budget can no longer hold, so a download that does not end cached evicts nothing for the
/// budget. Every blocking step (index, validation, files) runs on ``BlockingWork``.
struct DownloadContext: Sendable {
    let layout: CacheLayout
    let store: IndexStore
    let queue: DownloadQueue
    let configuration: BookCacheConfiguration
    let evictor: Evictor
    let usage: UsageTracker
    let events: Broadcast<BookEvent>
    let publisher: GroupPublisher
    let awaitingPublish: Places
    let logger: Logger

    func run(
        _ request: BookDownloadRequest,
        onEvent: @escaping @Sendable (DownloadEvent) -> Void
    ) async throws(BookCacheError) -> BookDownloadResult {
        let id = request.id
        usage.begin(id)
        defer { usage.end(id) }
        let partial = layout.partialFile(for: id)
        // Books evicted for free space before the body is written; told to the caller whether
        // the download then succeeds or fails.
        var evictedForSpace: [EvictedBook] = []
        let events = self.events
        let report: @Sendable (DownloadEvent) -> Void = { event in
            if let bookEvent = BookEvent(event, id: id) { events.yield(bookEvent) }
            onEvent(event)
        }
        do throws(BookCacheError) {
            var result = try await queue.withSlot(for: job(for: request, to: partial), onEvent: report) { slot throws(BookCacheError) in
                // The lock is taken once the queue admits the job, so thousands of waiting jobs
                // hold no file descriptors; it is held until the book is published or given up.
                let lock = try await lockBook(id)
                defer { lock.release() }
                // The settings are read once per download, with the index.
                let (meanwhile, settings) = try await cachedMeanwhile(request)
                let limits = evictor.limits(from: settings)
                let strict = configuration.strictValidation ?? settings.strict ?? false
                if let record = meanwhile {
                    return BookDownloadResult(
                        metadata: record, fileURL: layout.url(forRelativePath: record.localPath), wasAlreadyCached: true)
                }
                let (file, entry) = try await receiveAndValidate(request, slot: slot, partial: partial, limits: limits, strict: strict) {
                    evictedForSpace += $0
                }
                defer { awaitingPublish.give() }
                // Published with the other books ready now, in one index transaction.
                switch await publisher.publish(entry) {
                case .success(let (stored, evicted)):
                    logger.info(
                        "cached",
                        metadata: [
                            "id": "\(id)", "bytes": "\(file.byteCount)", "sha256": "\(file.sha256)", "resumedFrom": "\(file.resumedFrom)",
                        ])
                    return BookDownloadResult(
                        metadata: stored, fileURL: layout.url(forRelativePath: stored.localPath), wasAlreadyCached: false,
                        evicted: evicted)
                case .failure(let error):
                    await BlockingWork.run {
                        FileDownloader.discard(partial.path)
                        // Gone already when the publisher placed it before the group failed.
                        if let sidecar = entry.sidecar { unlink(sidecar.path) }
                    }
                    throw error
                }
            }
            result.evicted = evictedForSpace + result.evicted
            events.yield(.cached(result.metadata, alreadyCached: result.wasAlreadyCached))
            return result
        } catch {
            var failure = error
            failure.evicted = evictedForSpace
            failure.displayLocale = configuration.locale
            events.yield(.failed(id, failure))
            throw failure
        }
    }

    /// Opens the response, makes room for it, receives the body and validates the file. A book
    /// that resumed a partial file and is then refused is fetched once more from the start before
    /// it is called damaged: the fault may be the partial's (bytes an earlier version of the file
    /// left, however carefully they were checked), not the URL's.
    ///
    /// Once the body has arrived the book takes a place among those awaiting publish and gives its
    /// transfer's slot to the next book; it returns holding that place, for the caller to give
    /// back once the book is published or refused.
    private func receiveAndValidate(
        _ request: BookDownloadRequest, slot: DownloadSlot, partial: URL, limits: Evictor.Limits, strict: Bool,
        evicted: ([EvictedBook]) -> Void
    ) async throws(BookCacheError) -> (DownloadedFile, GroupPublisher.Entry) {
        let id = request.id
        var fromStart = false
        while true {
            let opened: OpenedDownload
            do {
                opened = try await slot.open()
            } catch {
                throw Self.translate(error, id: id, root: layout.root.path, loginGiven: request.credentials != nil)
            }
            // Room on the disk for what is still to come; a book the budget could never hold
            // is refused here. The budget evicts only at publishing.
            if let length = opened.head.remainingLength ?? opened.head.expectedLength ?? request.expectedSize {
                let evictor = self.evictor
                do throws(BookCacheError) {
                    evicted(try await BlockingWork.run { () throws(BookCacheError) in try evictor.admit(length, for: id, limits: limits) })
                } catch {
                    opened.cancel()
                    throw error
                }
            }
            let file: DownloadedFile
            do {
                file = try await slot.receive(opened)
            } catch {
                throw Self.translate(error, id: id, root: layout.root.path, loginGiven: request.credentials != nil)
            }
            // Every byte has arrived: from here the book is validated and published even when the
            // download is cancelled (a signal, a caller), which costs less than fetching it again.
            await awaitingPublish.take()
            await slot.release()
            let context = self
            events.yield(.validating(id))
            do {
                let entry = try await BlockingWork.run { () throws(BookCacheError) in
                    try context.validate(file, of: request, from: partial, limits: limits, strict: strict)
                }
                return (file, entry)
            } catch  where file.resumedFrom > 0 && !fromStart && [.fileCorrupted, .checksumMismatch].contains(error.kind) {
                awaitingPublish.give()
                // The refused partial is gone (validate removes it): the next attempt starts at byte 0.
                logger.notice(
                    "a resumed download was refused; fetching it once more from the start",
                    metadata: ["id": "\(id)", "resumedFrom": "\(file.resumedFrom)", "reason": "\(error.message)"])
                fromStart = true
            } catch {
                awaitingPublish.give()
                throw error
            }
        }
    }

    /// The queue's job for a book: into `partial/`, resumable, with its login and headers.
    private func job(for request: BookDownloadRequest, to partial: URL) -> DownloadRequest {
        var job = DownloadRequest(
            url: request.url, destination: partial.path, priority: request.priority, maxBytes: configuration.maxBookBytes, resume: true)
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
            guard !replacing, let record = try store.record(id),
                FileSystem.fileSize(layout.url(forRelativePath: record.localPath)) == record.fileSize
            else { return (nil, saved) }
            return (record, saved)
        }
        if let record { try request.checkSameBook(asFrom: record.fileUrl) }
        return (record, saved)
    }

    /// Validates the downloaded file and makes its record, ready to publish; the partial file is
    /// removed when it is refused.
    private func validate(
        _ file: DownloadedFile, of request: BookDownloadRequest, from partial: URL, limits: Evictor.Limits, strict: Bool
    ) throws(BookCacheError) -> GroupPublisher.Entry {
        let id = request.id
        // The file is whole; from here on it is either handed on to be published or removed.
        var handedOn = false
        defer {
            if !handedOn { FileDownloader.discard(partial.path) }
        }
        let validation: ValidationReport
        do {
            validation = try BookValidator(limits: configuration.validationLimits, strict: strict).check(path: partial.path)
        } catch {
            logger.notice("refused an invalid download", metadata: ["id": "\(id)", "reason": "\(error.reason)"])
            throw .fileCorrupted(id, reason: error.reason, refusal: error.kind)
        }
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
