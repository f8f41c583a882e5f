import Foundation

/// Decides which books to evict, least recently used first, without touching the disk.
///
/// Pinned books and protected ones (being downloaded, or held open) are never chosen. Books go
/// in order of `lastAccessedAt` (oldest first, then by id) until every limit is met.
struct EvictionPlanner: Sendable {
    /// What must hold after eviction.
    public struct Limits: Sendable, Hashable {
        /// The size budget, if any.
        public var maxSize: Int64?
        /// The most books, if any.
        public var keep: Int?
        /// Evict every book last used before this date.
        public var olderThan: Date?
        /// Bytes that must be freed whatever the budget (for free space on the disk).
        public var bytesToFree: Int64

        /// Creates limits.
        public init(maxSize: Int64? = nil, keep: Int? = nil, olderThan: Date? = nil, bytesToFree: Int64 = 0) {
            self.maxSize = maxSize
            self.keep = keep
            self.olderThan = olderThan
            self.bytesToFree = bytesToFree
        }
    }

    /// The decision.
    public struct Plan: Sendable, Hashable {
        /// The books to evict, in eviction order.
        public var victims: [CachedBookMetadata]
        /// The bytes they free.
        public var freedBytes: Int64
        /// Whether the limits hold once they are gone; `false` when pinned or protected books
        /// alone break them.
        public var satisfied: Bool
    }

    /// Plans eviction.
    /// - Parameters:
    ///   - books: Every cached book.
    ///   - limits: What must hold afterwards.
    ///   - incomingBytes: The size of a book about to be added (it counts against the budget).
    ///   - incomingCount: 1 when a book is about to be added.
    ///   - protected: Ids that must not be evicted (`ebook-123` form).
    public static func plan(
        books: [CachedBookMetadata],
        limits: Limits,
        incomingBytes: Int64 = 0,
        incomingCount: Int = 0,
        protected: Set<String> = []
    ) -> Plan {
        var planning = Planning(
            total: books.reduce(Int64(0)) { $0 + $1.fileSize } + incomingBytes, count: books.count + incomingCount, limits: limits)
        let candidates =
            books
            .filter { !$0.pinned && !protected.contains($0.id) }
            .sorted { ($0.lastAccessedAt, $0.id) < ($1.lastAccessedAt, $1.id) }
        for book in candidates where !planning.consider(book) { break }
        return planning.plan
    }

    /// A plan made one candidate at a time, least recently used first, so a caller reading
    /// candidates from an ordered index stops as soon as the plan is complete.
    struct Planning {
        private var total: Int64
        private var count: Int
        private var freed: Int64 = 0
        private var victims: [CachedBookMetadata] = []
        private let limits: Limits

        /// - Parameters:
        ///   - total: The bytes of every cached book, plus the incoming one.
        ///   - count: The number of cached books, plus the incoming one.
        init(total: Int64, count: Int, limits: Limits) {
            self.total = total
            self.count = count
            self.limits = limits
        }

        private var overLimit: Bool {
            if let maxSize = limits.maxSize, total > maxSize { return true }
            if let keep = limits.keep, count > keep { return true }
            return freed < limits.bytesToFree
        }

        /// Takes the next candidate (never pinned or protected) if the limits want it.
        /// - Returns: Whether later candidates could still be wanted: a later one is used more
        ///   recently, so once the limits hold and this one was not stale, none is.
        mutating func consider(_ book: CachedBookMetadata) -> Bool {
            let stale = limits.olderThan.map { book.lastAccessedAt < $0 } ?? false
            guard stale || overLimit else { return false }
            victims.append(book)
            total -= book.fileSize
            count -= 1
            freed += book.fileSize
            return true
        }

        var plan: Plan { Plan(victims: victims, freedBytes: freed, satisfied: !overLimit) }
    }
}
