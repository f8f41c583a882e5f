import DownloadQueue
import Foundation

/// One book to download: where from, under which id, and what to check.
public struct BookDownloadRequest: Sendable, Hashable {
    /// The book's id.
    public var id: BookID
    /// The absolute `http` or `https` URL of the EPUB or PDF.
    public var url: URL
    /// A title to show; the id when `nil`. Normalised (Unicode NFC, whitespace folded, at most four
    /// combining marks on a character) and cut to at most 1 KiB of UTF-8, whoever sets it.
    public var title: String? {
        didSet { title = MetadataText.title(title) }
    }
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
    /// Whether ``id`` was derived from the URL (``derivedBookId(for:)``) rather than given.
    ///
    /// A derived id stands for this URL only: a cached record under it that came from another
    /// URL is a different book, and the download is refused with
    /// ``BookCacheError/Kind/identifierInUse`` instead of being answered with that book. A given
    /// id stands for the book whatever its URL, so a new (signed, expiring) URL for a cached id
    /// downloads nothing.
    public var idDerivedFromURL: Bool = false
    /// The authors, kept in the record (a catalogue names them). Normalised as ``title`` is, each
    /// cut to at most 256 bytes of UTF-8; empty names dropped; at most 32.
    public var authors: [String] = [] {
        didSet { authors = MetadataText.names(authors) }
    }
    /// The book's language as a BCP 47 tag, kept in the record (a catalogue gives it); without
    /// one, an EPUB's own `dc:language` is kept. White space around it is dropped, and a value
    /// that is not a language tag (letters, digits and hyphens, starting with a letter, at most
    /// 35 characters) is not kept: reading it back gives `nil`.
    public var language: String? {
        get { languageTag }
        set { languageTag = newValue.flatMap(LanguageTag.normalized) }
    }
    private var languageTag: String?
    /// The book's publication date, kept in the record (a catalogue gives it); without one, an
    /// EPUB's own `dc:date` is kept. Kept in W3C date form: `1818`, `1818-01` or `1818-01-01`
    /// (a date and time keeps its date part); anything else is not kept, and reading it back
    /// gives `nil`.
    public var published: String? {
        get { publicationDate }
        set { publicationDate = newValue.flatMap(PublicationDate.normalized) }
    }
    private var publicationDate: String?
    /// Credentials for the book's host (a catalogue's login), sent when the server asks for
    /// them (Basic or Digest) and never to another host. Not stored in the index.
    public var credentials: HTTPCredentials?
    /// Extra headers sent with each request for the book (not its cover on another host), such
    /// as a bearer token. Not stored in the index.
    public var headers: [HTTPHeader] = []

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
        self.title = MetadataText.title(title)
        self.coverURL = try coverURL.map { url throws(BookCacheError) in try Self.parseURL(url) }
        if let expectedSHA256 {
            let normalized = expectedSHA256.lowercased()
            guard normalized.utf8.count == 64, normalized.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
            else {
                var error = BookCacheError(
                    .invalidChecksum, "invalid SHA-256 '\(expectedSHA256.debugEscaped)': expected 64 hexadecimal digits")
                error.reason = "malformed checksum"
                throw error
            }
            self.expectedSHA256 = normalized
        } else {
            self.expectedSHA256 = nil
        }
        self.priority = priority
    }

    /// Creates a request whose id is derived from the URL (see ``derivedBookId(for:)``).
    /// - Parameters:
    ///   - url: The file's URL, `http` or `https`.
    ///   - type: The book's type, which decides its folder.
    ///   - title: A title to show.
    ///   - coverURL: The cover's URL, `http` or `https`.
    ///   - expectedSHA256: 64 hex digits, any case.
    ///   - priority: `.normal` by default.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidURL`` or
    ///   ``BookCacheError/Kind/invalidChecksum``.
    public init(
        url: String,
        type: BookType,
        title: String? = nil,
        coverURL: String? = nil,
        expectedSHA256: String? = nil,
        priority: DownloadPriority = .normal
    ) throws(BookCacheError) {
        let parsed = try Self.parseURL(url)
        try self.init(
            url: url, id: BookID(type: type, bookId: Self.derivedBookId(for: parsed)), title: title, coverURL: coverURL,
            expectedSHA256: expectedSHA256, priority: priority)
        idDerivedFromURL = true
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

    /// The book id for a URL when none is given: the URL's file name without its extension,
    /// then `-` and 12 hex digits of the SHA-256 of the URL, such as `alice-3f2a9c01b7de`.
    ///
    /// File names alone collide (`/a/book.epub` and `/b/book.epub`; calibre-server's links all
    /// end in the library's name, the OPDS 2 test catalogue's in `file.epub`), so the hash
    /// keeps two URLs two books. The hash covers the scheme, host, port, path and query, with
    /// the scheme and host lowercased; credentials and the fragment are left out, so they do
    /// not change the id. Characters outside `A–Z a–z 0–9 . _ -` become `_`; a URL without a
    /// file name uses its host. Pass an id of your own to keep one book across changing URLs.
    /// - Parameter url: The book's URL.
    /// - Returns: An id that ``BookID`` accepts.
    public static func derivedBookId(for url: URL) -> String {
        var stem = url.deletingPathExtension().lastPathComponent
        if stem.isEmpty || stem == "/" { stem = url.host ?? "book" }
        let suffix = "-" + shortHash(identityKey(for: url))
        return safeStem(stem, maxLength: BookID.maxLength - suffix.count, fallback: "book") + suffix
    }

    /// The book id for a book a sync source identifies (an OPDS entry's `<id>`, an OPDS 2
    /// `metadata.identifier`).
    ///
    /// An identifier that is already a valid book id is kept as it is; `urn:uuid:` is dropped
    /// first, so a UUID becomes the id. Any other identifier is made safe — scheme and `urn:`
    /// dropped, other characters replaced by `_`, at most 64 characters — and followed by `-`
    /// and 12 hex digits of its SHA-256, so two identifiers never share an id.
    /// - Parameter identifier: The identifier as the source gives it.
    /// - Returns: An id that ``BookID`` accepts.
    public static func bookId(forSourceIdentifier identifier: String) -> String {
        var text = identifier.trimmingCharacters(in: .whitespacesAndNewlines)
        if text.lowercased().hasPrefix("urn:uuid:") { text.removeFirst("urn:uuid:".count) }
        if BookID.problem(with: text) == nil { return text }
        if let scheme = text.range(of: "://") {
            text = String(text[scheme.upperBound...])
        } else if text.lowercased().hasPrefix("urn:") {
            text.removeFirst(4)
        }
        return safeStem(text, maxLength: 64, fallback: "book") + "-" + shortHash(identifier)
    }

    /// A URL reduced to what names the file: no credentials, no fragment, scheme and host
    /// lowercased. Two URLs with the same key are the same download.
    static func identityKey(for url: URL) -> String {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url.absoluteString }
        components.user = nil
        components.password = nil
        components.fragment = nil
        components.scheme = components.scheme?.lowercased()
        components.host = components.host?.lowercased()
        return components.string ?? url.absoluteString
    }

    /// Refuses a cached or in-flight book under this request's id that came from `otherURL`,
    /// when the id was derived from the URL: a derived id stands for its URL only, so that book
    /// is another one (see ``idDerivedFromURL``).
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/identifierInUse``.
    func checkSameBook(asFrom otherURL: String) throws(BookCacheError) {
        guard idDerivedFromURL else { return }
        if let other = URL(string: otherURL), Self.identityKey(for: other) == Self.identityKey(for: url) { return }
        throw .identifierInUse(id, cachedFrom: otherURL, wanted: url)
    }

    private static func shortHash(_ text: String) -> String {
        String(SHA256Hasher.hex(of: Data(text.utf8)).prefix(12))
    }

    /// `text` with characters outside `A–Z a–z 0–9 . _ -` replaced by `_` (runs collapsed), no
    /// leading dots, no `..`, cut to `maxLength`; `fallback` when nothing is left.
    private static func safeStem(_ text: String, maxLength: Int, fallback: String) -> String {
        var cleaned = ""
        for scalar in text.unicodeScalars {
            let allowed = scalar.isASCII && BookID.isAllowed(UInt8(scalar.value))
            if allowed {
                cleaned.unicodeScalars.append(scalar)
            } else if !cleaned.hasSuffix("_") {
                cleaned += "_"
            }
        }
        while cleaned.contains("..") { cleaned = cleaned.replacingOccurrences(of: "..", with: "_") }
        var trimmed = Substring(cleaned.drop { $0 == "." || $0 == "_" }.prefix(maxLength))
        while let last = trimmed.last, last == "_" || last == "." { trimmed.removeLast() }
        return trimmed.isEmpty ? fallback : String(trimmed)
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
    /// The books removed to make room for this one, in the order they went: for free space on
    /// the disk before the body was written, then for the budget (`max-size`, `keep`) when the
    /// book was published. Empty when nothing was evicted.
    public var evicted: [EvictedBook] = []
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
