/// The kind of publication; each kind has its own folder in the cache.
public enum BookType: String, Sendable, Codable, CaseIterable, Hashable {
    /// An ebook, stored under `ebooks/`.
    case ebook
    /// A magazine issue, stored under `magazines/`.
    case magazine

    /// The folder, relative to the cache root, that holds books of this type.
    public var folderName: String {
        switch self {
        case .ebook: "ebooks"
        case .magazine: "magazines"
        }
    }
}

extension BookType: CodingKeyRepresentable {}
