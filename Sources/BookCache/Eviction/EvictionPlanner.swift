import Foundation

/// Decides which books to evict, least recently used first, without touching the disk.
///
/// Pinned books and protected ones (being downloaded, or held open) are never chosen. Books go
/// in order of `lastAccessedAt` (oldest first, then by id) until every limit is met.
public struct EvictionPlanner: Sendable {
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
        var total = books.reduce(Int64(0)) { $0 + $1.fileSize } + incomingBytes
        var count = books.count + incomingCount
        var freed: Int64 = 0
        var victims: [CachedBookMetadata] = []
        let candidates = books
            .filter { !$0.pinned && !protected.contains($0.id) }
            .sorted { ($0.lastAccessedAt, $0.id) < ($1.lastAccessedAt, $1.id) }
        func overLimit() -> Bool {
            if let maxSize = limits.maxSize, total > maxSize { return true }
            if let keep = limits.keep, count > keep { return true }
            return freed < limits.bytesToFree
        }
        for book in candidates {
            let stale = limits.olderThan.map { book.lastAccessedAt < $0 } ?? false
            guard stale || overLimit() else { continue }
            victims.append(book)
            total -= book.fileSize
            count -= 1
            freed += book.fileSize
        }
        return Plan(victims: victims, freedBytes: freed, satisfied: !overLimit())
    }
}
