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

    /// The typed id.
    public var bookID: BookID {
        get throws(BookCacheError) { try BookID(type: bookType, bookId: bookId) }
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
