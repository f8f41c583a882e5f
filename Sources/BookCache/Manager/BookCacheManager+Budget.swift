import Foundation

/// What `prune` removed (or would remove, on a dry run).
public struct PruneResult: Sendable, Hashable {
    /// The books removed, in eviction order (least recently used first).
    public var removed: [CachedBookMetadata]
    /// The bytes freed.
    public var freedBytes: Int64
    /// Whether the limits now hold; `false` when pinned or busy books alone break them.
    public var satisfied: Bool
    /// Whether this was a dry run that removed nothing.
    public var dryRun: Bool
}

extension BookCacheManager {
    // MARK: - Settings

    /// The settings kept with the cache (`config.json`).
    public func settings() throws(BookCacheError) -> CacheSettings {
        try settingsStore.read()
    }

    /// Changes the settings kept with the cache, atomically and under the settings lock (`metadata.lock`).
    /// - Parameter change: Edits the settings.
    /// - Returns: The settings as saved.
    @discardableResult
    public func updateSettings(_ change: (inout CacheSettings) throws(BookCacheError) -> Void) throws(BookCacheError) -> CacheSettings {
        try prepareDirectories()
        return try settingsStore.update(change)
    }

    // MARK: - Pinning

    /// Pins a book: it is never evicted automatically (`prune` and the budget leave it alone).
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/notCached``.
    public func pin(_ id: BookID) throws(BookCacheError) {
        try setPinned(id, true)
    }

    /// Unpins a book, so the budget may evict it again.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/notCached``.
    public func unpin(_ id: BookID) throws(BookCacheError) {
        try setPinned(id, false)
    }

    private func setPinned(_ id: BookID, _ pinned: Bool) throws(BookCacheError) {
        guard try metadata(for: id) != nil, try updateRecord(id, { $0.pinned = pinned }) else { throw .notCached(id) }
    }

    // MARK: - Holding books open

    /// Marks a cached book as in use, so eviction leaves it alone until ``release(_:)``.
    /// Records the access, like ``cachedFile(for:)``.
    /// - Returns: The file's URL.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/notCached``.
    public func hold(_ id: BookID) throws(BookCacheError) -> URL {
        guard let url = try cachedFile(for: id) else { throw .notCached(id) }
        usageTracker.begin(id)
        return url
    }

    /// Ends one ``hold(_:)`` of a book.
    public func release(_ id: BookID) {
        usageTracker.end(id)
    }

    // MARK: - Pruning

    /// Evicts least-recently-used books until the limits hold, and books unused for longer
    /// than `olderThan`. Pinned, held and downloading books are never removed.
    /// - Parameters:
    ///   - maxSize: The size to get under; the cache's `max-size` setting when `nil`.
    ///   - keep: The most books to keep; the cache's `keep` setting when `nil`.
    ///   - olderThan: Also remove books last used more than this many seconds ago.
    ///   - dryRun: Only report what would be removed.
    public func prune(
        maxSize: Int64? = nil, keep: Int? = nil, olderThan: TimeInterval? = nil, dryRun: Bool = false
    ) throws(BookCacheError) -> PruneResult {
        guard store.exists else { return PruneResult(removed: [], freedBytes: 0, satisfied: true, dryRun: dryRun) }
        let inForce = try evictionRunner.limits()
        let limits = EvictionPlanner.Limits(
            maxSize: maxSize ?? inForce.maxSize,
            keep: keep ?? inForce.keep,
            olderThan: olderThan.map { now().addingTimeInterval(-$0) })
        let plan = try evictionRunner.prune(limits, dryRun: dryRun)
        return PruneResult(removed: plan.victims, freedBytes: plan.freedBytes, satisfied: plan.satisfied, dryRun: dryRun)
    }
}
