import DownloadQueue
import Foundation

/// One book to download: where from, under which id, and what to check.
public struct BookDownloadRequest: Sendable, Hashable {
    /// The book's id.
    public var id: BookID
    /// The absolute `http` or `https` URL of the EPUB or PDF.
    public var url: URL
    /// A title to show; the id when `nil`.
    public var title: String?
    /// Where the cover image can be fetched.
    public var coverURL: URL?
    /// The expected lowercase hex SHA-256; the download is refused when it differs.
    public var expectedSHA256: String?
    /// Where the download goes in the queue.
    public var priority: DownloadPriority
    /// Pin the book, so it is never evicted automatically.
    public var pin: Bool = false
    /// The size the caller expects (from a manifest); used for the free-space check when the
    /// server does not announce one.
    public var expectedSize: Int64?
    /// The sync source (manifest or feed) that asks for the book, if any.
    public var syncSource: String?
    /// Do not retry when the server cannot be reached at all (``BookCacheManager/open(_:onEvent:)``
    /// sets it: a waiting reader learns at once that it is offline).
    public var failFastWhenOffline: Bool = false
    /// Download again even when the book is cached (a refresh). The cached copy stays readable
    /// until the new one is validated, then is replaced atomically.
    public var replaceExisting: Bool = false

    /// Creates a request, checking every field before any I/O.
    /// - Parameters:
    ///   - url: The file's URL, `http` or `https`.
    ///   - id: The book's id.
    ///   - title: A title to show.
    ///   - coverURL: The cover's URL, `http` or `https`.
    ///   - expectedSHA256: 64 hex digits, any case.
    ///   - priority: `.normal` by default.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidURL`` or
    ///   ``BookCacheError/Kind/invalidIdentifier`` (a bad checksum is reported as invalid input too).
    public init(
        url: String,
        id: BookID,
        title: String? = nil,
        coverURL: String? = nil,
        expectedSHA256: String? = nil,
        priority: DownloadPriority = .normal
    ) throws(BookCacheError) {
        self.url = try Self.parseURL(url)
        self.id = id
        self.title = title
        self.coverURL = try coverURL.map { url throws(BookCacheError) in try Self.parseURL(url) }
        if let expectedSHA256 {
            let normalized = expectedSHA256.lowercased()
            guard normalized.utf8.count == 64, normalized.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }) else {
                var error = BookCacheError(.invalidChecksum, "invalid SHA-256 '\(expectedSHA256.debugEscaped)': expected 64 hexadecimal digits")
                error.reason = "malformed checksum"
                throw error
            }
            self.expectedSHA256 = normalized
        } else {
            self.expectedSHA256 = nil
        }
        self.priority = priority
    }

    /// Checks that `string` is an absolute `http` or `https` URL with a host.
    /// - Parameter string: The URL as typed.
    /// - Returns: The parsed URL.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidURL``.
    public static func parseURL(_ string: String) throws(BookCacheError) -> URL {
        guard !string.isEmpty else { throw .invalidURL(string, reason: "it is empty") }
        guard string.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F }) else {
            throw .invalidURL(string, reason: "it contains spaces or control characters; percent-encode them")
        }
        guard let url = URL(string: string), let scheme = url.scheme?.lowercased() else {
            throw .invalidURL(string, reason: "it is not an absolute URL such as https://example.com/book.epub")
        }
        guard scheme == "http" || scheme == "https" else {
            throw .invalidURL(string, reason: "only http and https URLs are supported, not '\(scheme)'")
        }
        guard let host = url.host, !host.isEmpty else {
            throw .invalidURL(string, reason: "it has no host")
        }
        return url
    }

    /// The default book id for a URL: its file name without the extension, with characters
    /// outside `A–Z a–z 0–9 . _ -` replaced by `_`.
    /// - Parameter url: The book's URL.
    /// - Returns: A candidate id; still checked by ``BookID``.
    public static func defaultBookId(for url: URL) -> String {
        var stem = url.deletingPathExtension().lastPathComponent
        if stem.isEmpty || stem == "/" { stem = url.host ?? "book" }
        let cleaned = String(stem.unicodeScalars.map { scalar -> Character in
            scalar.isASCII && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || "._-".unicodeScalars.contains(scalar)) ? Character(scalar) : "_"
        })
        let trimmed = cleaned.drop { $0 == "." }
        return String(trimmed.prefix(BookID.maxLength)).replacingOccurrences(of: "..", with: "_")
    }
}

/// The outcome of ``BookCacheManager/download(_:onProgress:)``.
public struct BookDownloadResult: Sendable, Hashable {
    /// The book's record, as in the index.
    public var metadata: CachedBookMetadata
    /// The cached file.
    public var fileURL: URL
    /// `true` when the book was already cached and nothing was downloaded.
    public var wasAlreadyCached: Bool
}

/// Counts and sizes of the cache, as `bookcache stats` shows them.
public struct CacheStatistics: Sendable, Hashable, Codable {
    /// Books and bytes of one type.
    public struct TypeTotals: Sendable, Hashable, Codable {
        /// How many books.
        public var count: Int
        /// Their total size in bytes.
        public var bytes: Int64
    }

    /// Totals per type.
    public var byType: [BookType: TypeTotals]
    /// All books.
    public var totalCount: Int
    /// All bytes.
    public var totalBytes: Int64
    /// Free bytes on the cache's filesystem.
    public var availableBytes: Int64
    /// Bytes held by pinned books.
    public var pinnedBytes: Int64
    /// How many books are pinned.
    public var pinnedCount: Int
    /// The size budget in force, if any.
    public var maxSize: Int64?
    /// The count limit in force, if any.
    public var keep: Int?
    /// The free space kept on the filesystem.
    public var reserve: Int64
    /// The cache root.
    public var rootPath: String
}
