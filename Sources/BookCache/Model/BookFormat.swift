/// The file format of a cached book, decided by its bytes and never by its URL.
public enum BookFormat: String, Sendable, Codable, CaseIterable, Hashable {
    /// An EPUB (a ZIP container).
    case epub
    /// A PDF document.
    case pdf

    /// The file extension used in the cache.
    public var fileExtension: String { rawValue }
}
