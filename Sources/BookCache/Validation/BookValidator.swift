import DownloadQueue
import Foundation

/// Decides a file's format from its bytes and checks it is a whole book a reader can open.
///
/// ZIP local-header magic means EPUB, `%PDF-` in the first KiB (or, after a preamble that is not an HTML page, the first MiB) means PDF; anything else is
/// refused, with a hint when it looks like an HTML error page. What makes a book unreadable or
/// unsafe is refused; what breaks a packaging rule no reader needs is a warning, refused only
/// when ``strict`` is set.
public struct BookValidator: Sendable {
    /// The bounds applied to EPUB archives and to what a PDF's streams decode to.
    public var limits: ValidationLimits
    /// Refuse books with warnings too (packaging rules readers do not need).
    public var strict: Bool

    /// Creates a validator.
    /// - Parameters:
    ///   - limits: Bounds on archive sizes and ratios.
    ///   - strict: Refuse books with warnings too; `false` by default.
    public init(limits: ValidationLimits = ValidationLimits(), strict: Bool = false) {
        self.limits = limits
        self.strict = strict
    }

    /// Validates the file at `path` and returns its format and warnings.
    /// - Parameter path: A file on disk.
    /// - Returns: The format the bytes show, and the warnings (empty when ``strict``: a warning
    ///   is then a refusal).
    /// - Throws: ``ValidationFailure`` naming what is wrong.
    public func check(path: String) throws(ValidationFailure) -> ValidationReport {
        try check(path: path, arrived: nil)
    }

    /// ``check(path:)``, leaving out of the CRC pass the entries an ``ArrivingZIP`` saw whole
    /// and right as the file arrived.
    func check(path: String, arrived: ZIPStreamReader.Verdict?) throws(ValidationFailure) -> ValidationReport {
        do {
            return try judge(path: path, arrived: arrived)
        } catch  where error.isOutOfMemory {
            // Memory refused (a worker's bound, or the machine's): no verdict on the book itself.
            throw ValidationFailure("could not be judged safely: the validator ran out of memory on it", kind: .unjudgeable)
        }
    }

    private func judge(path: String, arrived: ZIPStreamReader.Verdict?) throws(ValidationFailure) -> ValidationReport {
        let format = try Self.detectFormat(path: path)
        let warnings: [String]
        var metadata = PackageDocumentParser.Metadata()
        switch format {
        case .epub: (warnings, metadata) = try EPUBValidator(limits: limits).validate(path: path, arrived: arrived)
        case .pdf: warnings = try PDFValidator(limits: limits).validate(path: path)
        }
        if strict, let first = warnings.first {
            throw ValidationFailure("\(first) — refused because strict validation is on", kind: .strictRule)
        }
        return ValidationReport(format: format, warnings: warnings, language: metadata.language, published: metadata.published)
    }

    /// Validates the file at `path` and returns its format; ``check(path:)`` also returns the
    /// warnings.
    /// - Throws: ``ValidationFailure`` naming what is wrong.
    public func validate(path: String) throws(ValidationFailure) -> BookFormat {
        try check(path: path).format
    }

    /// The format shown by the first bytes of the file.
    /// - Parameter path: A file on disk.
    /// - Throws: ``ValidationFailure`` when the file is neither an EPUB nor a PDF.
    public static func detectFormat(path: String) throws(ValidationFailure) -> BookFormat {
        let head = try FileBytes.read(path: path, offset: 0, count: 1024)
        if head.isEmpty { throw ValidationFailure("the file is empty", kind: .notABook) }
        if head.starts(with: [0x50, 0x4B, 0x03, 0x04]) { return .epub }
        if head.firstRange(of: Array("%PDF-".utf8)) != nil { return .pdf }
        let text = String(decoding: head.prefix(512), as: UTF8.self).lowercased()
        if text.contains("<html") || text.contains("<!doctype html") || text.contains("<head") || text.contains("<body") {
            throw ValidationFailure("the server sent an HTML page, not an EPUB or PDF (often a login or error page)", kind: .htmlPage)
        }
        if head.starts(with: [0x50, 0x4B, 0x05, 0x06]) { throw ValidationFailure("the file is an empty ZIP archive", kind: .notABook) }
        // A PDF after a preamble (a Google Docs export's): readers find its header further on.
        if head.count == 1024,
            try FileBytes.read(path: path, offset: 0, count: PDFValidator.headerSearchLimit).firstRange(of: Array("%PDF-".utf8)) != nil
        {
            return .pdf
        }
        throw ValidationFailure("the file is neither an EPUB (ZIP) nor a PDF", kind: .notABook)
    }
}

/// What validation found in a book it accepts.
public struct ValidationReport: Sendable, Hashable {
    /// The format the bytes show.
    public var format: BookFormat
    /// Rules the book breaks that no reader needs (EPUB packaging, a PDF's rebuilt
    /// cross-reference table), in words; empty for a conformant book.
    public var warnings: [String]
    /// The book's language as its EPUB package document names it: its first `dc:language` that
    /// reads as a BCP 47 tag; `nil` for a PDF or an EPUB that names none.
    public var language: String? = nil
    /// The book's publication date as its EPUB package document gives it (its `dc:date`, the
    /// publication event's in EPUB 2), in W3C date form (`1818`, `1818-01`, `1818-01-01`); `nil`
    /// for a PDF, an EPUB that gives none, or a value that is not a date.
    public var published: String? = nil
}

/// Reads byte ranges of a file without loading it whole.
enum FileBytes {
    static func read(path: String, offset: Int64, count: Int) throws(ValidationFailure) -> [UInt8] {
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw ValidationFailure("cannot open the file", kind: .unreadable)
        }
        defer { try? handle.close() }
        do {
            if offset > 0 { try handle.seek(toOffset: UInt64(offset)) }
            return [UInt8](try handle.read(upToCount: count) ?? Data())
        } catch {
            throw ValidationFailure("cannot read the file (\(error))", kind: .unreadable)
        }
    }
}
