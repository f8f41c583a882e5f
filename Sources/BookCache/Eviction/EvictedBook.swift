import DownloadQueue
import Foundation

/// A book the cache removed on its own: to make room for another, or because a sync source or
/// `prune` no longer wants it.
public struct EvictedBook: Sendable, Hashable {
    /// Why a book was removed.
    public enum Reason: String, Sendable, Hashable, Codable {
        /// The budget (`max-size` or `keep`) could not hold it once a newer book was cached.
        case budget
        /// The disk had no room for a download's body plus the reserve.
        case freeSpace
        /// ``BookCacheManager/prune(maxSize:keep:olderThan:dryRun:)`` removed it.
        case prune
        /// The sync source that brought it in no longer lists it.
        case syncSource
    }

    /// The book's record as it was.
    public var metadata: CachedBookMetadata
    /// Why it went.
    public var reason: Reason
    /// The book whose download made room, for ``Reason/budget`` and ``Reason/freeSpace``.
    public var madeRoomFor: String?

    /// Creates a description of an eviction.
    public init(metadata: CachedBookMetadata, reason: Reason, madeRoomFor: String? = nil) {
        self.metadata = metadata
        self.reason = reason
        self.madeRoomFor = madeRoomFor
    }
}

/// The subscribers of ``BookCacheManager/evictions()``.
typealias EvictionObservers = Broadcast<EvictedBook>
