import CQPDF
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Judges a PDF as a reader opens it, with qpdf (Debian's `libqpdf-dev`): the `%PDF-` header,
/// then qpdf reads the cross-reference table (rebuilding it when it is damaged, as readers do)
/// and walks the page tree to count the pages, without decoding any stream.
///
/// Refused: no header; a file qpdf cannot read or whose pages it cannot find (a cut download, an
/// HTML page after a `%PDF-` line); a PDF with no pages; a page whose content streams cannot
/// be decoded (a CRLF-converted file's deflate streams). Images and fonts are not decoded.
///
/// Warned (refused only when strict): a cross-reference table qpdf had to rebuild; bytes after
/// the last `%%EOF` (a server's junk), read past as readers do; a missing or wrong `startxref`
/// whose cross-reference section is still in the file; a password-protected PDF, whose pages
/// cannot be counted without the password.
///
/// Not seen by any structure check: a changed byte inside content that still parses (a flipped
/// bit in a compressed image, or in uncompressed text). Only a checksum sees that: give the
/// expected SHA-256 (`--sha256`, a manifest's `sha256`).
struct PDFValidator {
    static let window = 1024
    /// Past this size a PDF without a usable `startxref` is not copied to repair its end.
    static let maxRepairCopyBytes = 512 << 20

    /// How far into a file the `%PDF-` header is looked for. Readers look anywhere: poppler and
    /// MuPDF open a PDF after a preamble of any length (poppler tried here up to 1 MiB); a
    /// Google Docs export carries about 2 KiB. Past this, a file is not taken for a PDF.
    static let headerSearchLimit = 1 << 20

    func validate(path: String) throws(ValidationFailure) -> [String] {
        let file = try MappedFile(path: path)
        let all = file.bytes
        guard
            let headerRange = UnsafeRawBufferPointer(rebasing: all[..<min(all.count, Self.headerSearchLimit)]).firstRange(
                of: Array("%PDF-".utf8))
        else {
            throw ValidationFailure("no %PDF- header in the first 1 MiB", kind: .notABook)
        }
        let versionStart = headerRange.upperBound
        guard versionStart + 2 < all.count, all[versionStart].isASCIIDigit, all[versionStart + 1] == UInt8(ascii: "."),
            all[versionStart + 2].isASCIIDigit
        else {
            throw ValidationFailure("the %PDF- header has no version number", kind: .notABook)
        }
        // qpdf finds a header in the first KiB itself; one further on (a preamble before it) is
        // judged from the header, as readers read it.
        guard headerRange.lowerBound >= Self.window else { return try judge(all, path: path) }
        let preamble = "\(headerRange.lowerBound) bytes come before the %PDF- header (readers skip them)"
        return [preamble] + (try judge(UnsafeRawBufferPointer(rebasing: all[headerRange.lowerBound...]), path: path))
    }

    /// Reads `bytes` (from the `%PDF-` header on) with qpdf as a reader would, repairing its end
    /// where a reader does.
    private func judge(_ bytes: UnsafeRawBufferPointer, path: String) throws(ValidationFailure) -> [String] {
        // A linearized file says its own length: one that arrived shorter is a cut download, even
        // when qpdf can rebuild what is left (an update appended later makes it longer, not shorter).
        if let length = Self.linearizedLength(in: bytes), bytes.count < length {
            throw ValidationFailure(
                "the file is cut short: its linearization data gives \(length) bytes; \(bytes.count) arrived", kind: .damaged)
        }

        // Bytes after the last %%EOF other than white space: a server's junk, said once.
        let end = Self.endOfLastEOF(in: bytes)
        let junk = end.flatMap { end in
            bytes[end...].contains { !$0.isASCIIWhitespace }
                ? "\(bytes.count - end) bytes after the last %%EOF are not part of the PDF (readers ignore them)" : nil
        }
        let whole = QPDFReading(bytes, name: path)
        if case .read(_, let warnings) = whole, warnings.isEmpty { return junk.map { [$0] } ?? [] }

        // Junk after the last %%EOF hides startxref from a parser that looks in the last KiB;
        // readers look further back. Read the file up to its last %%EOF.
        if let end, let junk,
            case .read(_, let warnings) = QPDFReading(UnsafeRawBufferPointer(rebasing: bytes[..<end]), name: path), warnings.isEmpty
        {
            return [junk]
        }
        if case .read(_, let warnings) = whole {
            return ["qpdf had to rebuild the cross-reference table (\(warnings.first ?? "damaged")); readers do the same"]
                + (junk.map { [$0] } ?? [])
        }
        // startxref missing or wrong: point a new one at the last cross-reference section, as a
        // reader's repair finds it.
        if bytes.count <= Self.maxRepairCopyBytes, let section = Self.lastCrossReferenceSection(in: bytes) {
            var repaired = [UInt8](bytes[..<(end ?? bytes.count)])
            repaired += Array("\nstartxref\n\(section)\n%%EOF\n".utf8)
            let reading = repaired.withUnsafeBytes { QPDFReading($0, name: path) }
            if case .read = reading {
                return ["startxref is missing or wrong; the cross-reference section at byte \(section) was used, as readers find it"]
            }
        }
        switch whole {
        case .read:
            return []
        case .encrypted:
            return ["the PDF is protected by a password, so its pages could not be counted"]
        case .failed(let reason):
            throw ValidationFailure(reason)
        }
    }

    /// The file length a linearized PDF's first object gives (`<< /Linearized 1 /L 12345 … >>`),
    /// if the file is linearized: looked for in its first KiB, where the specification puts it.
    static func linearizedLength(in bytes: UnsafeRawBufferPointer) -> Int? {
        let head = UnsafeRawBufferPointer(rebasing: bytes[..<min(bytes.count, window)])
        guard let marker = head.firstRange(of: Array("/Linearized".utf8)) else { return nil }
        let dictionary = head[marker.upperBound...]
        let end = dictionary.firstRange(of: Array(">>".utf8))?.lowerBound ?? head.count
        var position = marker.upperBound
        while position + 2 < end {
            // `/L` followed by white space, then the digits of the length.
            if head[position] == UInt8(ascii: "/"), head[position + 1] == UInt8(ascii: "L"), head[position + 2].isASCIIWhitespace {
                var digit = position + 2
                while digit < end, head[digit].isASCIIWhitespace { digit += 1 }
                var value = 0
                var digits = 0
                while digit < end, head[digit].isASCIIDigit, digits < 18 {
                    value = value * 10 + Int(head[digit] - UInt8(ascii: "0"))
                    digit += 1
                    digits += 1
                }
                return digits > 0 ? value : nil
            }
            position += 1
        }
        return nil
    }

    /// The offset just past the last `%%EOF` (and its line end), if there is one.
    static func endOfLastEOF(in bytes: UnsafeRawBufferPointer) -> Int? {
        guard let range = bytes.lastRange(of: Array("%%EOF".utf8)) else { return nil }
        var end = range.upperBound
        if end < bytes.count, bytes[end] == 0x0D { end += 1 }
        if end < bytes.count, bytes[end] == 0x0A { end += 1 }
        return end
    }

    /// The offset of the last cross-reference section: a classic `xref` table at a line start,
    /// or the object holding a cross-reference stream (`/Type /XRef`).
    static func lastCrossReferenceSection(in bytes: UnsafeRawBufferPointer) -> Int? {
        var table: Int?
        var search = bytes.count
        while let range = bytes[..<search].lastRange(of: Array("xref".utf8)) {
            let before = range.lowerBound > 0 ? bytes[range.lowerBound - 1] : 0x0A
            let after = range.upperBound < bytes.count ? bytes[range.upperBound] : 0x0A
            if (before == 0x0A || before == 0x0D) && (after == 0x0A || after == 0x0D || after == 0x20) {
                table = range.lowerBound
                break
            }
            search = range.lowerBound
        }
        var stream: Int?
        if let type = bytes.lastRange(of: Array("/XRef".utf8)),
            let object = bytes[..<type.lowerBound].lastRange(of: Array(" obj".utf8))
        {
            // Back from " obj" over "N G" to the start of its line.
            var start = object.lowerBound
            while start > 0, bytes[start - 1] != 0x0A, bytes[start - 1] != 0x0D { start -= 1 }
            stream = start
        }
        return [table, stream].compactMap { $0 }.max()
    }
}

/// One read of a PDF by qpdf: the page count and qpdf's warnings, or why it failed.
private enum QPDFReading {
    case read(pages: Int, warnings: [String])
    case encrypted
    case failed(String)

    init(_ bytes: UnsafeRawBufferPointer, name: String) {
        var handle: qpdf_data? = qpdf_init()
        defer { qpdf_cleanup(&handle) }
        guard let qpdf = handle else {
            self = .failed("qpdf could not start (out of memory)")
            return
        }
        qpdf_silence_errors(qpdf)
        qpdf_set_suppress_warnings(qpdf, QPDF_TRUE)
        qpdf_set_attempt_recovery(qpdf, QPDF_TRUE)
        let status = bytes.withMemoryRebound(to: CChar.self) { chars in
            qpdf_read_memory(qpdf, name, chars.baseAddress, UInt64(chars.count), nil)
        }
        if status & QPDF_ERRORS != 0 {
            self = Self.failure(qpdf, reading: true)
            return
        }
        let pages = qpdf_get_num_pages(qpdf)
        if pages < 0 || qpdf_has_error(qpdf) != QPDF_FALSE {
            self = Self.failure(qpdf, reading: false)
            return
        }
        guard pages > 0 else {
            self = .failed("the PDF has no pages")
            return
        }
        var warnings = Self.warnings(qpdf)
        // Each page's content streams are decoded (not its images or fonts): a page a reader
        // would draw blank or half, such as a CRLF-converted deflate stream, is damage.
        for index in 0..<Int(pages) {
            let page = qpdf_get_page_n(qpdf, index)
            var buffer: UnsafeMutablePointer<UInt8>?
            var length = 0
            let status = qpdf_oh_get_page_content_data(qpdf, page, &buffer, &length)
            free(buffer)
            qpdf_oh_release(qpdf, page)
            let decoding = Self.warnings(qpdf)
            // A stream whose length was wrong is found again by its endstream, as readers find
            // it (a warning); a stream that cannot be decoded is damage.
            let undecodable = decoding.first { $0.contains("error decoding stream data") }
            if status & QPDF_ERRORS != 0 || undecodable != nil {
                let detail = qpdf_get_error(qpdf).map { Self.text(qpdf, $0) } ?? "cannot be decoded"
                self = .failed("the content of page \(index + 1) is damaged: \(undecodable ?? detail)")
                return
            }
            warnings += decoding
        }
        self = .read(pages: Int(pages), warnings: warnings)
    }

    /// The warnings qpdf gathered since they were last taken.
    private static func warnings(_ qpdf: qpdf_data) -> [String] {
        var warnings: [String] = []
        while qpdf_more_warnings(qpdf) != QPDF_FALSE {
            guard let warning = qpdf_next_warning(qpdf) else { break }
            warnings.append(text(qpdf, warning))
        }
        return warnings
    }

    private static func failure(_ qpdf: qpdf_data, reading: Bool) -> QPDFReading {
        _ = warnings(qpdf)
        guard let error = qpdf_get_error(qpdf) else { return .failed("qpdf cannot read the PDF") }
        if qpdf_get_error_code(qpdf, error) == qpdf_e_password { return .encrypted }
        let detail = text(qpdf, error)
        return .failed(reading ? "the PDF is damaged or truncated: \(detail)" : "the PDF's pages cannot be found: \(detail)")
    }

    /// qpdf's message without the file name it starts with.
    private static func text(_ qpdf: qpdf_data, _ error: qpdf_error) -> String {
        guard let detail = qpdf_get_error_message_detail(qpdf, error) else { return "unknown damage" }
        return String(cString: detail)
    }
}

/// A file mapped read-only into memory for as long as the value lives.
private final class MappedFile {
    let bytes: UnsafeRawBufferPointer
    private let base: UnsafeMutableRawPointer?

    init(path: String) throws(ValidationFailure) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw ValidationFailure("cannot open the file (\(String(cString: strerror(errno))))", kind: .unreadable) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else {
            throw ValidationFailure("cannot read the file (\(String(cString: strerror(errno))))", kind: .unreadable)
        }
        let size = Int(info.st_size)
        guard size > 0 else { throw ValidationFailure("the file is empty", kind: .notABook) }
        guard let mapped = mmap(nil, size, PROT_READ, MAP_PRIVATE, fd, 0), mapped != MAP_FAILED else {
            throw ValidationFailure("cannot map the file (\(String(cString: strerror(errno))))", kind: .unreadable)
        }
        base = mapped
        bytes = UnsafeRawBufferPointer(start: mapped, count: size)
    }

    deinit {
        if let base { munmap(base, bytes.count) }
    }
}

extension UInt8 {
    var isASCIIDigit: Bool { self >= 0x30 && self <= 0x39 }
    var isASCIIWhitespace: Bool { self == 0x20 || self == 0x0A || self == 0x0D || self == 0x09 || self == 0x0C || self == 0x00 }
}

extension Collection where Element == UInt8, Index == Int {
    /// The last occurrence of `pattern`.
    func lastRange(of pattern: [UInt8]) -> Range<Int>? {
        guard pattern.count <= count else { return nil }
        var start = endIndex - pattern.count
        while start >= startIndex {
            if self[start..<(start + pattern.count)].elementsEqual(pattern) { return start..<(start + pattern.count) }
            start -= 1
        }
        return nil
    }
}
