import DownloadQueue
import Foundation
import Logging

/// Keeps the cache within its limits: makes room on the disk before a download writes, enforces
/// the budget and count when a book is published, and prunes on request. Every decision and removal happens inside
/// an index transaction (SQLite's write lock), so two processes never evict the same book twice or race a download.
struct Evictor: Sendable {
    let layout: CacheLayout
    let store: IndexStore
    let settings: SettingsStore
    let configuration: BookCacheConfiguration
    let usage: UsageTracker
    let observers: EvictionObservers
    let events: Broadcast<BookEvent>
    let logger: Logger

    /// The limits in force: the configuration's overrides, else the persisted settings.
    typealias Limits = (maxSize: Int64?, keep: Int?, reserve: Int64)

    /// Reads the limits in force (the settings file, unless the configuration overrides all three).
    func limits() throws(BookCacheError) -> Limits {
        limits(from: try settings.read())
    }

    /// The limits in force, given the persisted settings.
    func limits(from saved: CacheSettings) -> Limits {
        (
            configuration.maxSizeBytes ?? saved.maxSize,
            configuration.keepCount ?? saved.keep,
            configuration.storageReserveBytes ?? saved.reserve ?? BookCacheConfiguration.defaultReserveBytes
        )
    }

    /// Ids that must not be evicted: in use here, or locked by a download in any process.
    private func protected(besides extra: [BookID]) -> Set<String> {
        usage.inUse.union(extra.map(\.description))
    }

    /// Before a body of `incoming` bytes is written for `id`: refuses a book the budget could
    /// never hold, and makes room on the disk for the body plus the reserve.
    ///
    /// Books are evicted here only when the disk cannot hold the body plus the reserve, and only
    /// as many as that needs (least recently used first). The budget (`max-size`, `keep`) is
    /// not enforced here but when the book is published (``evictForBudget(in:keeping:limits:)``),
    /// so a download that fails evicts nothing for it.
    /// - Returns: The books evicted for free space, in the order they went.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/insufficientStorage`` when it
    ///   cannot fit (pinned or busy books fill the budget, or the disk).
    func admit(_ incoming: Int64, for id: BookID, limits: Limits) throws(BookCacheError) -> [EvictedBook] {
        if let maxSize = limits.maxSize, incoming > maxSize {
            throw .overBudget(id, size: incoming, budget: maxSize)
        }
        let available = try freeSpace()
        let (needed, overflow) = incoming.addingReportingOverflow(limits.reserve)
        let shortfall = overflow ? Int64.max : max(0, needed - available)
        let budgetBound = limits.maxSize != nil || limits.keep != nil
        guard budgetBound || shortfall > 0 else { return [] }
        if shortfall > 0 && !configuration.evictForSpace {
            throw .insufficientStorage(bookBytes: incoming, reserve: limits.reserve, available: available, path: layout.root.path)
        }
        var evicted: [EvictedBook] = []
        let decide = { (index: IndexTransaction) throws(BookCacheError) in
            // The book's own copy, if it is being replaced, does not count: the new one takes its place.
            let replaced = index[id]
            let protected = protected(besides: [id])
            if budgetBound {
                // Only a check: could the budget hold the book once it is cached?
                let plan = planSkippingLocked(
                    index, limits: .init(maxSize: limits.maxSize, keep: limits.keep),
                    incomingBytes: incoming - (replaced?.fileSize ?? 0), incomingCount: replaced == nil ? 1 : 0, protected: protected)
                guard plan.satisfied else { throw .budgetFull(id, size: incoming, budget: limits.maxSize, keep: limits.keep) }
            }
            guard shortfall > 0 else { return }
            let plan = planSkippingLocked(index, limits: .init(bytesToFree: shortfall), protected: protected)
            guard plan.satisfied else {
                var error = BookCacheError.insufficientStorage(
                    bookBytes: incoming, reserve: limits.reserve, available: available, path: layout.root.path)
                error.reason = "pinned or busy books hold the rest of the disk's room"
                throw error
            }
            evicted = try remove(plan.victims, from: index, reason: .freeSpace, madeRoomFor: id)
        }
        if shortfall > 0 {
            try store.update(decide)
        } else {
            try store.reading(decide)
        }
        return evicted
    }

    /// Inside the index update that publishes `id`: evicts the least-recently-used books the
    /// budget can no longer hold. Pinned and busy books stay, and so do the books of `group`
    /// (published in the same update); when they alone keep the cache over its limits, a
    /// warning is logged and the new book stays too.
    /// - Returns: The books evicted, in the order they went.
    func evictForBudget(
        in index: IndexTransaction, keeping id: BookID, group: [BookID] = [], limits: (maxSize: Int64?, keep: Int?, reserve: Int64)
    ) throws(BookCacheError) -> [EvictedBook] {
        guard limits.maxSize != nil || limits.keep != nil else { return [] }
        let plan = planSkippingLocked(
            index, limits: .init(maxSize: limits.maxSize, keep: limits.keep), protected: protected(besides: [id] + group))
        if !plan.satisfied {
            logger.warning("the cache is over its limits; pinned or busy books keep it there", metadata: ["id": "\(id)"])
        }
        return try remove(plan.victims, from: index, reason: .budget, madeRoomFor: id)
    }

    /// Plans eviction, then checks only the chosen books' locks (not every book's): a victim
    /// that another process is downloading is protected and the plan is made again.
    private func planSkippingLocked(
        _ index: IndexTransaction, limits: EvictionPlanner.Limits, incomingBytes: Int64 = 0, incomingCount: Int = 0,
        protected initial: Set<String>
    ) -> EvictionPlanner.Plan {
        var protected = initial
        // A book a download here has published is not busy, though its lock goes only once its group's
        // update has committed (the publisher then releases it, and the book leaves `publishedHere`).
        let ownPublished = usage.publishedHere
        while true {
            let plan = index.plan(limits: limits, incomingBytes: incomingBytes, incomingCount: incomingCount, protected: protected)
            let busy = BookLock.held(
                among: plan.victims.compactMap { try? $0.bookID }.filter { !ownPublished.contains($0.description) }, in: layout)
            if busy.isEmpty { return plan }
            protected.formUnion(busy.map(\.description))
        }
    }

    /// Evicts by explicit limits (for `prune`); with `dryRun`, only says what would go.
    func prune(_ limits: EvictionPlanner.Limits, dryRun: Bool) throws(BookCacheError) -> EvictionPlanner.Plan {
        var result = EvictionPlanner.Plan(victims: [], freedBytes: 0, satisfied: true)
        let body = { (index: IndexTransaction) throws(BookCacheError) in
            result = planSkippingLocked(index, limits: limits, protected: protected(besides: []))
            if !dryRun { _ = try remove(result.victims, from: index, reason: .prune) }
        }
        if dryRun {
            try store.reading(body)
        } else {
            try store.update(body)
        }
        return result
    }

    /// Removes books' files, sidecars and covers, then their records, and tells
    /// ``BookCacheManager/evictions()``. Called inside the index transaction.
    /// - Returns: What was removed, in order.
    @discardableResult
    func remove(
        _ victims: [CachedBookMetadata], from index: IndexTransaction, reason: EvictedBook.Reason, madeRoomFor: BookID? = nil
    ) throws(BookCacheError) -> [EvictedBook] {
        var evicted: [EvictedBook] = []
        for record in victims {
            let id = try record.bookID
            _ = try layout.removeBookFiles(of: id, record: record)
            index[id] = nil
            logger.info("evicted", metadata: ["id": "\(id)", "bytes": "\(record.fileSize)", "reason": "\(reason.rawValue)"])
            let book = EvictedBook(metadata: record, reason: reason, madeRoomFor: madeRoomFor?.description)
            observers.yield(book)
            events.yield(.evicted(book))
            evicted.append(book)
        }
        return evicted
    }

    func freeSpace() throws(BookCacheError) -> Int64 {
        do {
            return try configuration.freeSpace(layout.root)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot measure its free space (\(error))")
        }
    }
}
