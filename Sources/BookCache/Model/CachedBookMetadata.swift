import Foundation

/// What the cache records about one book, in the index and in the sidecar beside its file.
public struct CachedBookMetadata: Sendable, Codable, Hashable, Identifiable {
    /// The full id, `{type}-{bookId}`.
    public var id: String
    /// The book's type.
    public var bookType: BookType
    /// The caller's id within the type.
    public var bookId: String
    /// A title to show; the id when none was given.
    public var title: String
    /// Where the cover image can be fetched, if known.
    public var coverUrl: String?
    /// The URL the user asked for.
    public var fileUrl: String
    /// The file's path relative to the cache root, such as `ebooks/123.epub`.
    public var localPath: String
    /// The file's size in bytes.
    public var fileSize: Int64
    /// When the file was downloaded.
    public var downloadedAt: Date
    /// When the file was last opened or asked for; drives LRU eviction.
    public var lastAccessedAt: Date
    /// The lowercase hex SHA-256 of the file.
    public var checksum: String
    /// The format, decided from the file's bytes.
    public var format: BookFormat
    /// The server's `ETag` when the file was downloaded.
    public var etag: String?
    /// The server's `Last-Modified` when the file was downloaded.
    public var lastModified: String?
    /// Pinned books are never evicted automatically.
    public var pinned: Bool = false
    /// Set when a check found that the server has a newer copy.
    public var outdated: Bool = false
    /// The cached cover image, relative to the cache root, if one was fetched.
    public var coverPath: String?
    /// The sync sources (manifest or feed URLs) that brought this book in; empty when it was
    /// downloaded directly. Sync only ever removes books that it alone brought in.
    public var syncSources: [String] = []
    /// The authors, as the catalogue named them; empty when unknown.
    public var authors: [String] = []
    /// The book's language as a BCP 47 tag (`en`, `de-CH`): the catalogue's, else the EPUB's own
    /// (its package document's `dc:language`); `nil` when unknown.
    public var language: String?
    /// The book's publication date in W3C date form (`1818`, `1818-01`, `1818-01-01`): the
    /// catalogue's (`dc:issued`, OPDS 2 `published`), else the EPUB's own (its package
    /// document's `dc:date`); `nil` when unknown.
    public var published: String?
    /// What validation warned about when the book was cached: rules it breaks that no reader
    /// needs (see ``ValidationReport/warnings``). Empty for a conformant book.
    public var warnings: [String] = []

    // Coded field by field as ``BookField/all`` says (the index's columns come from the same table).
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: BookField.Key.self)
        var record = CachedBookMetadata()
        for field in BookField.all { try field.decode(from: container, into: &record) }
        self = record
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: BookField.Key.self)
        for field in BookField.all { try field.encode(self, to: &container) }
    }

    /// The typed id.
    public var bookID: BookID {
        get throws(BookCacheError) { try BookID(type: bookType, bookId: bookId) }
    }

    /// A record with every field empty, for readers that fill it field by field.
    init() {
        (id, bookType, bookId, title, fileUrl, localPath, fileSize, checksum, format) = ("", .ebook, "", "", "", "", 0, "", .epub)
        (downloadedAt, lastAccessedAt) = (Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 0))
    }

    /// Creates a record.
    public init(
        id: BookID, title: String, coverUrl: String?, fileUrl: String, localPath: String,
        fileSize: Int64, downloadedAt: Date, lastAccessedAt: Date, checksum: String,
        format: BookFormat, etag: String?, lastModified: String?
    ) {
        self.id = id.description
        self.bookType = id.type
        self.bookId = id.bookId
        self.title = title
        self.coverUrl = coverUrl
        self.fileUrl = fileUrl
        self.localPath = localPath
        self.fileSize = fileSize
        self.downloadedAt = downloadedAt
        self.lastAccessedAt = lastAccessedAt
        self.checksum = checksum
        self.format = format
        self.etag = etag
        self.lastModified = lastModified
    }
}
