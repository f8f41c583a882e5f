import Foundation

/// Why a file is not a book the cache will keep.
public struct ValidationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of refusal, for code that reacts to it (an app that says "sign in again" for a
    /// login page and "the file is damaged" for a CRC error).
    public enum Kind: String, Sendable, Hashable, Codable {
        /// The server sent an HTML page (often a login or error page) where a book should be.
        case htmlPage
        /// The bytes are neither an EPUB (ZIP) nor a PDF, or the file is empty.
        case notABook
        /// The archive or the PDF is damaged or cut short.
        case damaged
        /// An entry of the archive fails its CRC or cannot be read.
        case damagedEntry
        /// An entry is encrypted (DRM).
        case encrypted
        /// Over a limit: entries, declared sizes, compression ratio (a zip bomb), document sizes.
        case tooLarge
        /// `META-INF/container.xml` or the package document it names is missing or unusable.
        case missingPackageDocument
        /// The package document is malformed, or its spine names chapters that are not there.
        case invalidPackageDocument
        /// An entry name is unsafe (absolute, `..`, backslashes, control characters, duplicates).
        case unsafeEntryName
        /// A packaging rule that readers do not need, refused because strict validation is on.
        case strictRule
        /// The file could not be read from the disk.
        case unreadable
        /// The book could not be judged safely: the validator crashed, ran out of memory or of
        /// time on it (in a worker process, which it cost nothing else; see ``ValidationWorkers``).
        case unjudgeable
    }

    /// The reason, such as `CRC error in OEBPS/chapter1.xhtml`.
    public let reason: String
    /// The kind of refusal.
    public let kind: Kind

    /// Creates a failure.
    /// - Parameters:
    ///   - reason: What is wrong with the file.
    ///   - kind: Its kind; ``Kind/damaged`` when not given.
    public init(_ reason: String, kind: Kind = .damaged) {
        self.reason = reason
        self.kind = kind
    }

    public var description: String { reason }

    /// Whether the failure is memory refused to the validator (`mmap` failing with `ENOMEM`, said
    /// as "(Cannot allocate memory)"; qpdf's `std::bad_alloc`) rather than anything in the book.
    var isOutOfMemory: Bool {
        kind != .unjudgeable && (reason.contains("(\(String(cString: strerror(ENOMEM))))") || reason.contains("std::bad_alloc"))
    }
}

extension ValidationFailure.Kind {
    /// The kind's name for a person, in `locale`'s language (English, German or Simplified
    /// Chinese): "an HTML page (a login or error page?), not a book" for ``htmlPage``.
    public func localizedName(in locale: Locale) -> String {
        let key: String
        switch self {
        case .htmlPage: key = "an HTML page (a login or error page?), not a book"
        case .notABook: key = "neither an EPUB nor a PDF"
        case .damaged: key = "the file is damaged or cut short"
        case .damagedEntry: key = "a part of the book is damaged"
        case .encrypted: key = "the book is encrypted (DRM)"
        case .tooLarge: key = "the book is over a size limit"
        case .missingPackageDocument: key = "the book's package document is missing"
        case .invalidPackageDocument: key = "the book's package document is malformed"
        case .unsafeEntryName: key = "the book has an unsafe file name inside"
        case .strictRule: key = "the book breaks a packaging rule (strict validation)"
        case .unreadable: key = "the file cannot be read"
        case .unjudgeable: key = "the book could not be judged safely"
        }
        return LocalizedText.format(key, locale, [])
    }
}
