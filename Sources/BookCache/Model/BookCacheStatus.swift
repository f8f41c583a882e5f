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

extension BookCacheStatus {
    /// The status for a person, in `locale`'s language (English, German or Simplified Chinese):
    /// "not cached", "downloading 45%", "cached", "outdated".
    public func localizedName(in locale: Locale) -> String {
        switch self {
        case .notCached: return LocalizedText.format("not cached", locale, [])
        case .downloading(let progress?):
            return LocalizedText.format("downloading %1$@%%", locale, ["\(Int((progress * 100).rounded(.down)))"])
        case .downloading(nil): return LocalizedText.format("downloading", locale, [])
        case .cached: return LocalizedText.format("cached", locale, [])
        case .outdated: return LocalizedText.format("outdated", locale, [])
        }
    }
}
