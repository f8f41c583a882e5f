import DownloadQueue
import Foundation

/// Everything that can go wrong in the cache, each with a message that says what to do next.
///
/// A struct rather than an enum, so new kinds can be added without breaking callers: match on
/// ``kind`` (`error.kind == .checksumMismatch`) and read the fields that kind fills in.
public struct BookCacheError: Error, Sendable, CustomStringConvertible {
    /// The category of a ``BookCacheError``.
    public struct Kind: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// The download failed; see ``BookCacheError/httpStatus`` and ``BookCacheError/underlying``.
        public static let downloadFailed = Kind("downloadFailed")
        /// Not enough free space; see ``BookCacheError/neededBytes`` and ``BookCacheError/availableBytes``.
        public static let insufficientStorage = Kind("insufficientStorage")
        /// The file is not a valid EPUB or PDF; see ``BookCacheError/reason``.
        public static let fileCorrupted = Kind("fileCorrupted")
        /// The book could not be judged safely: the validator crashed, ran out of memory or of
        /// time on it; see ``BookCacheError/reason``. Nothing else was affected, and the book was not
        /// cached.
        public static let unjudgeable = Kind("unjudgeable")
        /// The file's SHA-256 differs from the expected one.
        public static let checksumMismatch = Kind("checksumMismatch")
        /// The server could not be reached.
        public static let networkUnavailable = Kind("networkUnavailable")
        /// The book is not cached and the network is unavailable.
        public static let offline = Kind("offline")
        /// The cache directory cannot be created, read or written.
        public static let cacheDirectoryUnusable = Kind("cacheDirectoryUnusable")
        /// The index is from a newer BookCache, or cannot be read or written.
        public static let indexUnusable = Kind("indexUnusable")
        /// The cache's settings (`config.json`) or sync state (`sync.json`) cannot be read; fix or
        /// delete the file.
        public static let settingsUnusable = Kind("settingsUnusable")
        /// A book id is malformed.
        public static let invalidIdentifier = Kind("invalidIdentifier")
        /// A URL is not an absolute http or https URL.
        public static let invalidURL = Kind("invalidURL")
        /// An expected checksum is not 64 hexadecimal digits.
        public static let invalidChecksum = Kind("invalidChecksum")
        /// A size, duration, count or setting given by the user is malformed or out of range.
        public static let invalidArgument = Kind("invalidArgument")
        /// The book is not in the cache.
        public static let notCached = Kind("notCached")
        /// The download was cancelled.
        public static let cancelled = Kind("cancelled")
        /// The id derived from a URL names a book cached from another URL; give an id of your own.
        public static let identifierInUse = Kind("identifierInUse")
        /// Something failed that the cache does not know how to classify; ``BookCacheError/underlying``
        /// keeps the cause. (Such errors were once reported as cancelled.)
        public static let unexpected = Kind("unexpected")
    }

    /// What a person can do about an error, for a tool that words it as its own instruction (the
    /// `bookcache` command line names its options and commands for these). The ``message``
    /// already says it in plain words, for an app to show as it is.
    public enum Remedy: String, Sendable, Hashable {
        /// Download the book first.
        case downloadFirst
        /// Raise the size budget (`max-size`).
        case raiseBudget
        /// Lower the free-space reserve, or free space.
        case lowerReserve
        /// Give the book an id of its own.
        case giveOwnID
        /// Trust the server's certificate authority (a CA file).
        case trustAuthority
        /// Give the catalogue's login.
        case giveLogin
        /// Choose one of a navigation feed's sections.
        case chooseSection
        /// Upgrade BookCache: the index is from a newer version.
        case upgrade
    }

    /// The category.
    public let kind: Kind
    /// What to do about it, when there is one thing to do.
    public var remedy: Remedy?
    /// The whole message, in English: what happened and what to do next. For logs and machine
    /// output (it never changes with the language); ``message(in:)`` says it in a reader's
    /// language, and `localizedDescription` in the app's.
    public var message: String { message(in: BookCacheLanguage.english.locale) }
    /// What the message is made of: English text as it is, or a template other languages can say.
    private let text: Text
    private enum Text: Sendable {
        case english(String)
        case template(MessageTemplate)
    }
    /// The locale of `localizedDescription`: the manager's configured one, for download errors.
    var displayLocale: Locale?
    /// The book concerned, when there is one.
    public var bookID: String?
    /// The HTTP status, for a download the server refused.
    public var httpStatus: Int?
    /// Bytes needed, for ``Kind/insufficientStorage``.
    public var neededBytes: Int64?
    /// Bytes available, for ``Kind/insufficientStorage``.
    public var availableBytes: Int64?
    /// Why the file was judged corrupt.
    public var reason: String?
    /// The kind of that refusal, for ``Kind/fileCorrupted``: a login page (``ValidationFailure/Kind/htmlPage``), a damaged
    /// entry, a missing package document… so an app can react to each without reading ``reason``.
    public var refusal: ValidationFailure.Kind?
    /// The expected SHA-256, for ``Kind/checksumMismatch``.
    public var expectedChecksum: String?
    /// The actual SHA-256, for ``Kind/checksumMismatch``.
    public var actualChecksum: String?
    /// The cause underneath, such as a `DownloadError`.
    public var underlying: (any Error)?
    /// Books evicted for free space on the disk before this download failed. The budget never
    /// evicts for a download that fails; only a disk too full for the body does.
    public var evicted: [EvictedBook] = []

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.text = .english(message)
    }

    init(_ kind: Kind, _ template: MessageTemplate) {
        self.kind = kind
        self.text = .template(template)
    }

    /// The message in `locale`'s language: English, German (`de`) or Simplified Chinese (`zh`);
    /// other languages get English. Ids, paths, URLs and technical causes stay as they are.
    ///
    /// ```swift
    /// Text(error.message(in: Locale(identifier: "de_DE")))
    /// ```
    public func message(in locale: Locale) -> String {
        switch text {
        case .english(let message): message
        case .template(let template): template.text(locale)
        }
    }

    public var description: String { message }

    /// Whether the server answered with a status that means "try again later" (408, 429, 5xx).
    public var isServerBusy: Bool {
        kind == .downloadFailed && httpStatus.map(DownloadError.isRetryable(status:)) == true
    }

    /// - Parameters:
    ///   - loginGiven: Whether the download had a login to answer a `401` with (when not, a `401`
    ///     asks for one).
    static func downloadFailed(_ id: BookID, cause: DownloadError, loginGiven: Bool = true) -> BookCacheError {
        var hint = MessageTemplate("check the URL and try again")
        var remedy: Remedy?
        if let status = cause.statusCode {
            switch status {
            case 401 where !loginGiven:
                hint = MessageTemplate("the server asks for a login")
                remedy = .giveLogin
            case 401: hint = MessageTemplate("the server refused the login; check the user name and password")
            case 403: hint = MessageTemplate("the server refused access; check the URL or its credentials")
            case 429:
                if let wait = cause.retryAfter {
                    let seconds = max(1, Int(wait.components.seconds))
                    hint = MessageTemplate("the server says too many requests; try again in %@", .verbatim("\(seconds) s"))
                } else {
                    hint = MessageTemplate("the server says too many requests; try again later")
                }
            case 404, 410: hint = MessageTemplate("the server has no such file; check the URL")
            case _ where DownloadError.isRetryable(status: status): hint = MessageTemplate("the server is busy or failing; try again later")
            default: break
            }
        } else if cause.kind == .fileSystem {
            hint = MessageTemplate("check that the cache directory is writable and the disk is not full")
        } else if cause.kind == .untrustedServer {
            hint = MessageTemplate("check the URL, or trust the server's certificate authority")
        } else if cause.isRetryable {
            hint = MessageTemplate("the transfer was interrupted; try again")
        }
        var error = BookCacheError(
            .downloadFailed,
            MessageTemplate("download of %1$@ failed: %2$@; %3$@", .verbatim(id.description), .verbatim(cause.description), .phrase(hint)))
        if cause.kind == .untrustedServer { error.remedy = .trustAuthority }
        if let remedy { error.remedy = remedy }
        error.bookID = id.description
        error.httpStatus = cause.statusCode
        error.underlying = cause
        return error
    }

    /// A sync source could not be fetched: ``Kind/networkUnavailable`` when its server could not
    /// be reached, else ``Kind/downloadFailed`` with the HTTP status.
    static func syncSourceFailed(_ message: String, status: Int?, connection: Bool = false, cause: (any Error)?) -> BookCacheError {
        var error = BookCacheError(connection ? .networkUnavailable : .downloadFailed, message)
        error.httpStatus = status
        error.underlying = cause
        return error
    }

    static func networkUnavailable(_ id: BookID, cause: DownloadError) -> BookCacheError {
        var error = BookCacheError(
            .networkUnavailable,
            MessageTemplate("network unavailable: %1$@; check the connection and the server, then try again", .verbatim("\(cause)")))
        error.bookID = id.description
        error.underlying = cause
        return error
    }

    static func offline(_ id: BookID, cause: any Error) -> BookCacheError {
        var error = BookCacheError(
            .offline,
            MessageTemplate(
                "%1$@ is not cached and the network is unavailable (%2$@); connect and try again", .verbatim(id.description),
                .verbatim("\(cause)")))
        error.bookID = id.description
        error.underlying = cause
        return error
    }

    static func insufficientStorage(bookBytes: Int64, reserve: Int64, available: Int64, path: String) -> BookCacheError {
        let (needed, overflow) = bookBytes.addingReportingOverflow(reserve)
        let template =
            reserve > 0
            ? MessageTemplate(
                "insufficient storage: %1$@ for the book + %2$@ reserve; %3$@ free at %4$@; free some space, delete cached books, or lower the reserve",
                .size(bookBytes), .size(reserve), .size(available), .verbatim(path))
            : MessageTemplate(
                "insufficient storage: %1$@ for the book; %2$@ free at %3$@; free some space, delete cached books",
                .size(bookBytes), .size(available), .verbatim(path))
        var error = BookCacheError(.insufficientStorage, template)
        error.neededBytes = overflow ? .max : needed
        error.availableBytes = available
        if reserve > 0 { error.remedy = .lowerReserve }
        return error
    }

    static func identifierInUse(_ id: BookID, cachedFrom other: String, wanted url: URL) -> BookCacheError {
        var error = BookCacheError(
            .identifierInUse,
            MessageTemplate(
                "%1$@ is already cached from another URL (%2$@), so %3$@ is a different book; give it an id of its own",
                .verbatim(id.description), .verbatim(URL(string: other).map(URLRedaction.redacted) ?? other),
                .verbatim(URLRedaction.redacted(url))))
        error.remedy = .giveOwnID
        error.bookID = id.description
        return error
    }

    static func overBudget(_ id: BookID, size: Int64, budget: Int64) -> BookCacheError {
        var error = BookCacheError(
            .insufficientStorage,
            MessageTemplate(
                "insufficient storage: %1$@ is %2$@, more than the whole cache budget of %3$@; raise the budget (max-size)",
                .verbatim(id.description), .size(size), .size(budget)))
        error.remedy = .raiseBudget
        error.bookID = id.description
        error.neededBytes = size
        error.availableBytes = budget
        return error
    }

    static func budgetFull(_ id: BookID, size: Int64, budget: Int64?, keep: Int?) -> BookCacheError {
        let limits: MessageTemplate
        switch (budget, keep) {
        case (let budget?, let keep?):
            limits = MessageTemplate("a budget of %1$@ and at most %2$@ books", .size(budget), .verbatim("\(keep)"))
        case (let budget?, nil): limits = MessageTemplate("a budget of %1$@", .size(budget))
        case (nil, let keep?): limits = MessageTemplate("at most %1$@ books", .verbatim("\(keep)"))
        case (nil, nil): limits = MessageTemplate("the cache's limits")
        }
        var error = BookCacheError(
            .insufficientStorage,
            MessageTemplate(
                "insufficient storage: %1$@ (%2$@) does not fit in %3$@ because pinned or busy books fill it; unpin some, delete some, or raise the limit",
                .verbatim(id.description), .size(size), .phrase(limits)))
        error.bookID = id.description
        error.neededBytes = size
        error.availableBytes = budget
        return error
    }

    /// The disk filled up while writing. `availableBytes` is what is free now (when it can be
    /// read), `neededBytes` the book's size when it is known.
    static func diskFull(_ id: BookID?, path: String, needed: Int64? = nil) -> BookCacheError {
        var error = BookCacheError(
            .insufficientStorage,
            id.map {
                MessageTemplate(
                    "insufficient storage: the disk holding %1$@ filled up while storing %2$@; nothing was cached — free some space or delete cached books, then try again",
                    .verbatim(path), .verbatim($0.description))
            }
                ?? MessageTemplate(
                    "insufficient storage: the disk holding %1$@ filled up; nothing was cached — free some space or delete cached books, then try again",
                    .verbatim(path)))
        error.bookID = id?.description
        error.neededBytes = needed
        do {
            error.availableBytes = try FileSystem.availableBytes(at: URL(filePath: path, directoryHint: .notDirectory))
        } catch {
            // The free space cannot be read either; the message stands without the figure.
        }
        return error
    }

    static func fileCorrupted(_ id: BookID, reason: String, refusal: ValidationFailure.Kind = .damaged) -> BookCacheError {
        var error = BookCacheError(
            .fileCorrupted,
            MessageTemplate(
                "%1$@ is not a valid book: %2$@; it was not cached — check that the URL points at the EPUB or PDF itself",
                .verbatim(id.description), .refusal(refusal, reason)))
        error.bookID = id.description
        error.reason = reason
        error.refusal = refusal
        return error
    }

    static func unjudgeable(_ id: BookID, reason: String) -> BookCacheError {
        var error = BookCacheError(
            .unjudgeable,
            MessageTemplate(
                "%1$@ was refused: it %2$@; it was not cached, and nothing else was affected — if you trust its source, raise the validator's limits (validation-memory, validation-cpu)",
                .verbatim(id.description), .verbatim(reason)))
        error.bookID = id.description
        error.reason = reason
        error.refusal = .unjudgeable
        return error
    }

    static func checksumMismatch(_ id: BookID, expected: String, actual: String) -> BookCacheError {
        var error = BookCacheError(
            .checksumMismatch,
            MessageTemplate(
                "checksum mismatch for %1$@: expected sha256 %2$@, got %3$@; the file was not cached — check the expected checksum or the URL",
                .verbatim(id.description), .verbatim(expected), .verbatim(actual)))
        error.bookID = id.description
        error.expectedChecksum = expected
        error.actualChecksum = actual
        return error
    }

    static func cacheDirectoryUnusable(_ path: String, _ problem: String) -> BookCacheError {
        BookCacheError(
            .cacheDirectoryUnusable,
            MessageTemplate(
                "cache directory %1$@ is unusable: %2$@; choose another with --cache-dir or BOOKCACHE_DIR, or fix its permissions",
                .verbatim(path), .verbatim(problem)))
    }

    static func indexUnusable(_ path: String, _ problem: String) -> BookCacheError {
        BookCacheError(.indexUnusable, "the index \(path) \(problem)")
    }

    static func settingsUnusable(_ path: String, _ problem: String) -> BookCacheError {
        BookCacheError(.settingsUnusable, "the settings file \(path) \(problem)")
    }

    static func invalidIdentifier(_ value: String, reason: String) -> BookCacheError {
        var error = BookCacheError(
            .invalidIdentifier, MessageTemplate("invalid book id '%1$@': %2$@", .verbatim(value.debugEscaped), .verbatim(reason)))
        error.reason = reason
        return error
    }

    static func invalidURL(_ value: String, reason: String) -> BookCacheError {
        var error = BookCacheError(
            .invalidURL, MessageTemplate("invalid URL '%1$@': %2$@", .verbatim(value.debugEscaped), .verbatim(reason)))
        error.reason = reason
        return error
    }

    static func invalidArgument(_ message: String) -> BookCacheError {
        BookCacheError(.invalidArgument, message)
    }

    /// A navigation feed's section must be chosen.
    static func chooseSection(_ message: String) -> BookCacheError {
        var error = BookCacheError(.invalidArgument, message)
        error.remedy = .chooseSection
        return error
    }

    static func notCached(_ id: BookID) -> BookCacheError {
        var error = BookCacheError(.notCached, MessageTemplate("%1$@ is not cached; download it first", .verbatim(id.description)))
        error.remedy = .downloadFirst
        error.bookID = id.description
        return error
    }

    /// An error of a kind the cache does not classify, with its cause kept.
    static func unexpected(_ id: BookID, cause: any Error) -> BookCacheError {
        var error = BookCacheError(
            .unexpected,
            MessageTemplate(
                "download of %1$@ failed unexpectedly (%2$@); try again, and report it if it persists", .verbatim(id.description),
                .verbatim("\(cause)")))
        error.bookID = id.description
        error.underlying = cause
        return error
    }

    static func cancelled(_ id: BookID) -> BookCacheError {
        var error = BookCacheError(
            .cancelled, MessageTemplate("download of %1$@ was cancelled; run it again to fetch the book", .verbatim(id.description)))
        error.bookID = id.description
        return error
    }
}

extension BookCacheError: LocalizedError {
    /// The message in the language of ``BookCacheConfiguration/locale`` for download errors, else
    /// in the app's (`Locale.current`); see ``BookCacheError/message(in:)``.
    public var errorDescription: String? { message(in: displayLocale ?? .current) }
}

extension String {
    /// The string with control and format characters escaped, safe to print in one line.
    var debugEscaped: String {
        let limited = count > 200 ? String(prefix(200)) + "…" : self
        // Control and format characters (such as a right-to-left override) are escaped; letters
        // in any script are shown as they are.
        return limited.unicodeScalars.map { scalar in
            let hidden = scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar.properties.generalCategory == .format
            return hidden ? scalar.escaped(asASCII: true) : String(scalar)
        }.joined()
    }
}
