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
    /// What validation warned about when the book was cached: rules it breaks that no reader
    /// needs (see ``ValidationReport/warnings``). Empty for a conformant book.
    public var warnings: [String] = []

    private enum CodingKeys: String, CodingKey {
        case id, bookType, bookId, title, coverUrl, fileUrl, localPath, fileSize, downloadedAt, lastAccessedAt, checksum
        case format, etag, lastModified, pinned, outdated, coverPath, syncSources, authors, language, warnings
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        id = try c.decode(String.self, forKey: .id)
        bookType = try c.decode(BookType.self, forKey: .bookType)
        bookId = try c.decode(String.self, forKey: .bookId)
        title = try c.decode(String.self, forKey: .title)
        coverUrl = try c.decodeIfPresent(String.self, forKey: .coverUrl)
        fileUrl = try c.decode(String.self, forKey: .fileUrl)
        localPath = try c.decode(String.self, forKey: .localPath)
        fileSize = try c.decode(Int64.self, forKey: .fileSize)
        downloadedAt = try c.decode(Date.self, forKey: .downloadedAt)
        lastAccessedAt = try c.decode(Date.self, forKey: .lastAccessedAt)
        checksum = try c.decode(String.self, forKey: .checksum)
        format = try c.decode(BookFormat.self, forKey: .format)
        etag = try c.decodeIfPresent(String.self, forKey: .etag)
        lastModified = try c.decodeIfPresent(String.self, forKey: .lastModified)
        pinned = try c.decodeIfPresent(Bool.self, forKey: .pinned) ?? false
        outdated = try c.decodeIfPresent(Bool.self, forKey: .outdated) ?? false
        coverPath = try c.decodeIfPresent(String.self, forKey: .coverPath)
        syncSources = try c.decodeIfPresent([String].self, forKey: .syncSources) ?? []
        authors = try c.decodeIfPresent([String].self, forKey: .authors) ?? []
        language = try c.decodeIfPresent(String.self, forKey: .language)
        warnings = try c.decodeIfPresent([String].self, forKey: .warnings) ?? []
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(bookType, forKey: .bookType)
        try c.encode(bookId, forKey: .bookId)
        try c.encode(title, forKey: .title)
        try c.encodeIfPresent(coverUrl, forKey: .coverUrl)
        try c.encode(fileUrl, forKey: .fileUrl)
        try c.encode(localPath, forKey: .localPath)
        try c.encode(fileSize, forKey: .fileSize)
        try c.encode(downloadedAt, forKey: .downloadedAt)
        try c.encode(lastAccessedAt, forKey: .lastAccessedAt)
        try c.encode(checksum, forKey: .checksum)
        try c.encode(format, forKey: .format)
        try c.encodeIfPresent(etag, forKey: .etag)
        try c.encodeIfPresent(lastModified, forKey: .lastModified)
        try c.encode(pinned, forKey: .pinned)
        try c.encode(outdated, forKey: .outdated)
        try c.encodeIfPresent(coverPath, forKey: .coverPath)
        if !syncSources.isEmpty { try c.encode(syncSources, forKey: .syncSources) }
        if !authors.isEmpty { try c.encode(authors, forKey: .authors) }
        try c.encodeIfPresent(language, forKey: .language)
        if !warnings.isEmpty { try c.encode(warnings, forKey: .warnings) }
    }

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
