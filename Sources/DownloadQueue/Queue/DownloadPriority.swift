/// How urgently a job should start.
public enum DownloadPriority: Int, Sendable, Comparable, CaseIterable, Codable {
    /// Background work such as covers and sync.
    case low = 0
    /// Batches.
    case normal = 1
    /// A reader is waiting to open the book.
    case high = 2

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}
