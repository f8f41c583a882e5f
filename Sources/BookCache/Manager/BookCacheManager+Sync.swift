import DownloadQueue
import Foundation

extension BookCacheManager {
    /// Keeps the first `keep` books of a source cached, and removes the books an earlier sync of
    /// the same source brought in that are no longer among them — never books added by
    /// ``download(_:onEvent:)``, and never pinned ones.
    ///
    /// Downloads run at low priority, so a concurrent ``open(_:onEvent:)`` is served first.
    /// Within `minInterval` of the last successful sync of this source nothing is done (the
    /// report says `skipped`), unless `force`. A sync is successful when every wanted book ended
    /// in the cache; failures are skipped and the others go on.
    ///
    /// - Parameters:
    ///   - source: A JSON Lines manifest or an OPDS 1.2/2.0 feed (detected from the content).
    ///   - keep: How many of the source's first books to keep cached.
    ///   - type: The type for books whose source does not say.
    ///   - minInterval: Seconds that must pass between successful syncs of this source.
    ///   - force: Sync even within `minInterval`.
    ///   - onEvent: Download events, with the book they belong to.
    /// - Returns: What was synced, already cached, failed and removed.
    /// - Throws: ``BookCacheError`` when the source cannot be read or parsed at all.
    public func sync(
        _ source: SyncSource,
        keep: Int,
        type: BookType = .ebook,
        minInterval: TimeInterval? = nil,
        force: Bool = false,
        onEvent: @escaping @Sendable (BookID, DownloadEvent) -> Void = { _, _ in }
    ) async throws(BookCacheError) -> SyncReport {
        let state = SyncStateStore(layout: layout)
        let last = try state.read().sources[source.key]?.lastSuccess
        if !force, let minInterval, let last, now().timeIntervalSince(last) < minInterval {
            return SyncReport(source: source.key, format: nil, skipped: true, lastSuccess: last, wanted: 0, items: [], removed: [])
        }
        let data = try await read(source)
        let (format, listed) = try FeedParser(defaultType: type, baseURL: source.baseURL).entries(in: data)
        let wanted = Array(Self.distinctBooks(listed).prefix(max(0, keep)))
        try prepareDirectories()

        var items = [SyncReport.Item?](repeating: nil, count: wanted.count)
        await withTaskGroup(of: (Int, SyncReport.Item).self) { group in
            for (position, entry) in wanted.enumerated() {
                group.addTask {
                    switch entry.request {
                    case .failure(let problem):
                        return (position, SyncReport.Item(id: nil, status: "failed", error: problem.description))
                    case .success(let listed):
                        var request = listed
                        request.priority = .low
                        request.syncSource = source.key
                        let id = request.id
                        do throws(BookCacheError) {
                            let result = try await self.download(request, onEvent: { onEvent(id, $0) })
                            return (
                                position,
                                SyncReport.Item(
                                    id: request.id.description, status: result.wasAlreadyCached ? "already-cached" : "cached", evicted: result.evicted)
                            )
                        } catch {
                            return (position, SyncReport.Item(id: request.id.description, status: "failed", error: error.message, evicted: error.evicted))
                        }
                    }
                }
            }
            for await (position, item) in group { items[position] = item }
        }
        let finished = items.compactMap { $0 }
        let keepIDs = Set(finished.compactMap(\.id))
        let removed = try removeSyncedBooks(of: source.key, except: keepIDs)
        var report = SyncReport(
            source: source.key, format: format.rawValue, skipped: false, lastSuccess: last, wanted: wanted.count, items: finished, removed: removed)
        if report.isComplete {
            try state.recordSuccess(of: source.key, at: now())
            report.lastSuccess = now()
        }
        return report
    }

    /// The entries with the first of each book: an entry whose id an earlier entry already has
    /// (a book listed twice, in two sections) is the same book, counted and fetched once.
    static func distinctBooks(_ entries: [SyncEntry]) -> [SyncEntry] {
        var seen: Set<BookID> = []
        return entries.filter { entry in
            guard case .success(let request) = entry.request else { return true }
            return seen.insert(request.id).inserted
        }
    }

    /// Drops `key` from books that are not in `keep`; removes those that no source and no user
    /// keeps. Pinned books lose the source but stay.
    private func removeSyncedBooks(of key: String, except keep: Set<String>) throws(BookCacheError) -> [String] {
        var gone: [CachedBookMetadata] = []
        try store.update { index throws(BookCacheError) in
            for record in index.books.values where record.syncSources.contains(key) && !keep.contains(record.id) {
                var updated = record
                updated.syncSources.removeAll { $0 == key }
                if updated.syncSources.isEmpty && !updated.pinned && !usageTracker.inUse.contains(record.id) {
                    gone.append(record)
                } else {
                    index[key: record.id] = updated
                    updateSidecar(updated)
                }
            }
            try evictionRunner.remove(gone, from: &index, reason: .syncSource)
        }
        return gone.map(\.id).sorted()
    }

    /// The bytes of a source: a file, given bytes, or an HTTP download (at most 16 MiB).
    private nonisolated func read(_ source: SyncSource) async throws(BookCacheError) -> Data {
        switch source {
        case .data(let data, _):
            return data
        case .file(let url):
            do {
                return try Data(contentsOf: url)
            } catch {
                throw .invalidArgument("cannot read the sync source \(url.path) (\(error))")
            }
        case .url(let url):
            do {
                let response = try await transport.send(TransportRequest(url: url))
                guard response.statusCode == 200 else {
                    throw DownloadError(kind: .httpStatus, url: url, statusCode: response.statusCode)
                }
                return try await response.body.collect(maxBytes: 16 << 20, url: url)
            } catch let error as DownloadError {
                if error.kind == .connectionFailed {
                    throw .invalidArgument("cannot reach the sync source: \(error)")
                }
                throw .invalidArgument("cannot fetch the sync source: \(error)")
            } catch {
                throw .invalidArgument("cannot fetch the sync source: \(error)")
            }
        }
    }
}
