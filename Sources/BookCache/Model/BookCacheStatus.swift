import Foundation

/// Where a book stands in the cache.
public enum BookCacheStatus: Sendable, Hashable {
    /// Not in the cache and not being downloaded.
    case notCached
    /// Being downloaded now; `progress` is 0–1, or `nil` while the size is unknown.
    case downloading(progress: Double?)
    /// In the cache: its size in bytes and when it was downloaded.
    case cached(size: Int64, date: Date)
    /// In the cache, but the server has a newer copy.
    case outdated
}
