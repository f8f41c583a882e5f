import Foundation
import Logging

/// Keeps the cache within its limits: makes room before a download writes, enforces the budget
/// and count after one, and prunes on request. Every decision and removal happens under the
/// index lock, so two processes never evict the same book twice or race a download.
struct Evictor: Sendable {
    let layout: CacheLayout
    let store: IndexStore
    let settings: SettingsStore
    let configuration: BookCacheConfiguration
    let usage: UsageTracker
    let logger: Logger

    /// The limits in force: the configuration's overrides, else the persisted settings.
    func limits() throws(BookCacheError) -> (maxSize: Int64?, keep: Int?, reserve: Int64) {
        let saved = try settings.read()
        return (
            configuration.maxSizeBytes ?? saved.maxSize,
            configuration.keepCount ?? saved.keep,
            configuration.storageReserveBytes ?? saved.reserve ?? BookCacheConfiguration.defaultReserveBytes
        )
    }

    /// Ids that must not be evicted: in use here, or locked by a download in any process.
    private func protected(besides extra: BookID?) -> Set<String> {
        var ids = usage.inUse
        if let extra { ids.insert(extra.description) }
        return ids
    }

    private func lockedElsewhere(_ record: CachedBookMetadata) -> Bool {
        guard let id = try? record.bookID else { return false }
        return BookLock.isHeld(id, in: layout)
    }

    /// Before a body of `incoming` bytes is written for `id`: checks the budget and the free
    /// space, evicting least-recently-used books when that makes it fit.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/insufficientStorage`` when it
    ///   cannot fit (pinned or busy books fill the budget, or the disk).
    func makeRoom(for incoming: Int64, id: BookID) throws(BookCacheError) {
        let limits = try limits()
        if let maxSize = limits.maxSize, incoming > maxSize {
            throw .overBudget(id, size: incoming, budget: maxSize)
        }
        let available = try freeSpace()
        let (needed, overflow) = incoming.addingReportingOverflow(limits.reserve)
        let shortfall = overflow ? Int64.max : max(0, needed - available)
        let budgetBound = limits.maxSize != nil || limits.keep != nil
        guard budgetBound || shortfall > 0 else { return }
        if shortfall > 0 && !configuration.evictForSpace {
            throw .insufficientStorage(needed: overflow ? .max : needed, available: available, path: layout.root.path)
        }
        try store.update { index throws(BookCacheError) in
            let others = index.books.values.filter { $0.id != id.description }
            let plan = planSkippingLocked(
                others, limits: .init(maxSize: limits.maxSize, keep: limits.keep, bytesToFree: shortfall),
                incomingBytes: incoming, incomingCount: 1, protected: protected(besides: id))
            guard plan.satisfied else {
                if shortfall > 0 {
                    throw .insufficientStorage(needed: needed, available: available + plan.freedBytes, path: layout.root.path)
                }
                throw .budgetFull(id, size: incoming, budget: limits.maxSize, keep: limits.keep)
            }
            try remove(plan.victims, from: &index, reason: shortfall > 0 ? "free space" : "budget")
        }
    }

    /// Plans eviction, then checks only the chosen books' locks (not every book's): a victim
    /// that another process is downloading is protected and the plan is made again.
    private func planSkippingLocked(
        _ books: [CachedBookMetadata], limits: EvictionPlanner.Limits, incomingBytes: Int64 = 0, incomingCount: Int = 0,
        protected initial: Set<String>
    ) -> EvictionPlanner.Plan {
        var protected = initial
        while true {
            let plan = EvictionPlanner.plan(
                books: books, limits: limits, incomingBytes: incomingBytes, incomingCount: incomingCount, protected: protected)
            let busy = plan.victims.filter(lockedElsewhere).map(\.id)
            if busy.isEmpty { return plan }
            protected.formUnion(busy)
        }
    }

    /// After `id` was added: evicts others until the budget and count hold again.
    func enforce(after id: BookID) throws(BookCacheError) {
        let limits = try limits()
        guard limits.maxSize != nil || limits.keep != nil else { return }
        try store.update { index throws(BookCacheError) in
            let plan = planSkippingLocked(
                Array(index.books.values), limits: .init(maxSize: limits.maxSize, keep: limits.keep), protected: protected(besides: id))
            if !plan.satisfied {
                logger.warning("the cache is over its limits; pinned or busy books keep it there", metadata: ["id": "\(id)"])
            }
            try remove(plan.victims, from: &index, reason: "budget")
        }
    }

    /// Evicts by explicit limits (for `prune`); with `dryRun`, only says what would go.
    func prune(_ limits: EvictionPlanner.Limits, dryRun: Bool) throws(BookCacheError) -> EvictionPlanner.Plan {
        var result = EvictionPlanner.Plan(victims: [], freedBytes: 0, satisfied: true)
        let body = { (index: inout MetadataIndex) throws(BookCacheError) in
            result = planSkippingLocked(Array(index.books.values), limits: limits, protected: protected(besides: nil))
            if !dryRun { try remove(result.victims, from: &index, reason: "prune") }
        }
        if dryRun {
            var index = try store.read()
            try body(&index)
        } else {
            try store.update(body)
        }
        return result
    }

    /// Removes books' files, sidecars and covers, then their records. Called under the lock.
    func remove(_ victims: [CachedBookMetadata], from index: inout MetadataIndex, reason: String) throws(BookCacheError) {
        for record in victims {
            let id = try record.bookID
            _ = try layout.removeBookFiles(of: id, record: record)
            index[id] = nil
            logger.info("evicted", metadata: ["id": "\(id)", "bytes": "\(record.fileSize)", "reason": "\(reason)"])
        }
    }

    func freeSpace() throws(BookCacheError) -> Int64 {
        do {
            return try configuration.freeSpace(layout.root)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot measure its free space (\(error))")
        }
    }
}
