import CBookCacheShims
import CQPDF
import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Judges a PDF as a reader opens it, with qpdf (Debian's `libqpdf-dev`): the `%PDF-` header,
/// then qpdf reads the cross-reference table (rebuilding it when it is damaged, as readers do),
/// walks the page tree, and decodes what each page is drawn from: its content streams, embedded
/// fonts, images (not JPEG), forms and annotations' appearances, each shared stream once; zlib
/// checks each deflate stream to its end, checksum included.
///
/// Refused: no header; a file qpdf cannot read or whose pages it cannot find (a cut download, an
/// HTML page after a `%PDF-` line); a PDF with no pages; a stream a page needs that cannot be
/// decoded (a CRLF-converted file's deflate streams, a flipped byte in a compressed font).
///
/// Warned (refused only when strict): a cross-reference table qpdf had to rebuild; bytes after
/// the last `%%EOF` (a server's junk), read past as readers do; a missing or wrong `startxref`
/// whose cross-reference section is still in the file; a password-protected PDF, whose pages
/// cannot be counted without the password.
///
/// Not seen by any structure check: a changed byte inside content that still parses (a flipped
/// bit in a JPEG image, or in uncompressed text). Only a checksum sees that: give the
/// expected SHA-256 (`--sha256`, a manifest's `sha256`).
struct PDFValidator {
    /// The bounds on what decoding the streams may produce (``ValidationLimits/maxPDFDecodingRatio``,
    /// ``ValidationLimits/maxTotalUncompressedBytes``).
    var limits = ValidationLimits()

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
        let whole = QPDFReading(bytes, name: path, limits: limits)
        if case .read(_, let warnings) = whole, warnings.isEmpty { return junk.map { [$0] } ?? [] }

        // Junk after the last %%EOF hides startxref from a parser that looks in the last KiB;
        // readers look further back. Read the file up to its last %%EOF.
        if let end, let junk,
            case .read(_, let warnings) = QPDFReading(UnsafeRawBufferPointer(rebasing: bytes[..<end]), name: path, limits: limits),
            warnings.isEmpty
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
            let reading = repaired.withUnsafeBytes { QPDFReading($0, name: path, limits: limits) }
            if case .read = reading {
                return ["startxref is missing or wrong; the cross-reference section at byte \(section) was used, as readers find it"]
            }
        }
        // No trailer dictionary at all, so qpdf's reconstruction has no /Root to start from:
        // readers (poppler, MuPDF) find the document catalog by scanning the objects. Name the
        // catalog found so in a trailer of our own and let qpdf rebuild the rest.
        // Only for a file written to its end — a `trailer` or `startxref` keyword after its last
        // object, damaged since — never for one cut off before its trailer (a cut download looks
        // like that, and is refused as damaged). Not when an object is numbered past PDF's limit,
        // 8,388,607: readers part ways there.
        if case .failed(let reason, _) = whole, reason.contains("trailer"), bytes.count <= Self.maxRepairCopyBytes,
            Self.wasWrittenToItsEnd(bytes), let catalog = Self.catalogObject(in: bytes), !Self.hasObjectBeyondLimit(in: bytes)
        {
            var repaired = [UInt8](bytes)
            repaired += Array("\ntrailer\n<< /Root \(catalog.number) \(catalog.generation) R >>\n%%EOF\n".utf8)
            let reading = repaired.withUnsafeBytes { QPDFReading($0, name: path, limits: limits) }
            if case .read = reading {
                return [
                    "the PDF has no trailer; its catalog (object \(catalog.number)) was found by scanning the file, as readers find it"
                ]
            }
        }
        switch whole {
        case .read:
            return []
        case .encrypted:
            return ["the PDF is protected by a password, so its pages could not be counted"]
        case .failed(let reason, let kind):
            throw ValidationFailure(reason, kind: kind)
        }
    }

    /// The object that holds the document catalog (`<< /Type /Catalog … >>`), found as a
    /// reader's repair finds it: the last `/Type /Catalog` in the file, in the object whose
    /// `N G obj` comes before it.
    static func catalogObject(in bytes: UnsafeRawBufferPointer) -> (number: Int, generation: Int)? {
        // One pass back through the file: the candidates come in decreasing order, and so do the
        // places looked at for their `obj` — each byte is looked at a bounded number of times
        // (a file of 40,000 catalogs and no object cost 20 s when each looked back to byte 0).
        var objects = LastOccurrence(of: Array("obj".utf8), in: bytes)
        var triedObject: Int?
        var searchEnd = bytes.count
        while let type = bytes[..<searchEnd].lastRange(of: Array("/Catalog".utf8)) {
            searchEnd = type.lowerBound
            // `/Type` before it, with nothing but white space between
            var before = type.lowerBound
            while before > 0, bytes[before - 1].isASCIIWhitespace { before -= 1 }
            guard before >= 5, bytes[(before - 5)..<before].elementsEqual(Array("/Type".utf8)),
                let object = objects.last(before: before - 5), object.lowerBound != triedObject
            else { continue }
            // A candidate in the same object as the one before it reads the same numbers.
            triedObject = object.lowerBound
            // "N G obj": two numbers before it, separated by white space
            var cursor = object.lowerBound
            func number() -> Int? {
                var spaces = 0
                while cursor > 0, bytes[cursor - 1].isASCIIWhitespace, spaces < 256 {
                    cursor -= 1
                    spaces += 1
                }
                var start = cursor
                while start > 0, bytes[start - 1].isASCIIDigit, cursor - start <= 10 { start -= 1 }
                guard start < cursor, cursor - start <= 10 else { return nil }
                defer { cursor = start }
                return Int(String(decoding: bytes[start..<cursor], as: UTF8.self))
            }
            guard let generation = number(), let objectNumber = number(), objectNumber > 0 else { continue }
            return (objectNumber, generation)
        }
        return nil
    }

    /// The last occurrence of a pattern before a bound that only moves back: each search starts
    /// where the one before it left off, so all of them together read the file once.
    struct LastOccurrence {
        let pattern: [UInt8]
        let bytes: UnsafeRawBufferPointer
        /// The last occurrence found, and the bound it was found before.
        private var found: Range<Int>?
        private var bound: Int

        init(of pattern: [UInt8], in bytes: UnsafeRawBufferPointer) {
            self.pattern = pattern
            self.bytes = bytes
            bound = bytes.count
            found = bytes.lastRange(of: pattern)
        }

        /// The last occurrence that ends at or before `limit` (which is never more than the last call's).
        mutating func last(before limit: Int) -> Range<Int>? {
            precondition(limit <= bound, "the bound only moves back")
            bound = limit
            guard let current = found else { return nil }
            if current.upperBound <= limit { return current }
            // Nothing between the last occurrence's end and the old bound: look back from the new one.
            found = bytes[..<limit].lastRange(of: pattern)
            return found
        }
    }

    /// Whether the file goes on past its last `endobj` to a `trailer` or `startxref` keyword: its
    /// writer reached the end, whatever was damaged afterwards.
    static func wasWrittenToItsEnd(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let lastObject = bytes.lastRange(of: Array("endobj".utf8))?.upperBound ?? 0
        let tail = bytes[lastObject...]
        return tail.firstRange(of: Array("trailer".utf8)) != nil || tail.firstRange(of: Array("startxref".utf8)) != nil
    }

    /// Whether an `N G obj` in the file numbers an object past 8,388,607, the most indirect
    /// objects a PDF may have (ISO 32000-1, annex C).
    static func hasObjectBeyondLimit(in bytes: UnsafeRawBufferPointer) -> Bool {
        var searchEnd = bytes.count
        while let object = bytes[..<searchEnd].lastRange(of: Array(" obj".utf8)) {
            searchEnd = object.lowerBound
            var cursor = object.lowerBound
            // The generation, then white space, then the number
            while cursor > 0, bytes[cursor - 1].isASCIIDigit { cursor -= 1 }
            while cursor > 0, bytes[cursor - 1].isASCIIWhitespace { cursor -= 1 }
            let end = cursor
            while cursor > 0, bytes[cursor - 1].isASCIIDigit { cursor -= 1 }
            guard cursor < end else { continue }
            if end - cursor > 7 || Int(String(decoding: bytes[cursor..<end], as: UTF8.self)) ?? 0 > 8_388_607 { return true }
        }
        return false
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
    case failed(String, kind: ValidationFailure.Kind = .damaged)

    /// The deepest page tree read. A real book's is a few levels (a balanced tree of a million
    /// pages is under ten); qpdf walks it recursively, and 20,000 levels overflow a stack.
    static let maxPageTreeDepth = 256

    init(_ bytes: UnsafeRawBufferPointer, name: String, limits: ValidationLimits) {
        var handle: qpdf_data? = qpdf_init()
        defer { if handle != nil { qpdf_cleanup(&handle) } }
        guard let qpdf = handle else {
            self = .failed("qpdf could not start (\(String(cString: strerror(ENOMEM))))")
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
        // The page tree walked without recursion, its depth bounded, before anything of qpdf's
        // that recurses through it is asked.
        if let problem = Self.pageTreeProblem(qpdf) {
            _ = Self.warnings(qpdf)
            self = .failed(problem, kind: .tooLarge)
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
        // Readers find a page through the page tree's /Count (MuPDF: "cannot find page 0 in page
        // tree"); qpdf walks /Kids and does without it. A /Count that is not a number is damage.
        // (qpdf reads a /Count it cannot resolve, such as one through a loop of references, as null:
        // no such key.)
        if let pageTree = Self.value(qpdf, qpdf_get_root(qpdf), "/Pages"),
            Self.value(qpdf, pageTree, "/Count").map({ qpdf_oh_is_integer(qpdf, $0) == QPDF_FALSE }) ?? true
        {
            self = .failed("the page tree's /Count is not a number, so readers cannot find its pages")
            return
        }
        warnings += Self.warnings(qpdf)
        // Each page's content streams, then what the page draws from: embedded font programs,
        // images, forms and annotations' appearances, each stream once however many pages share
        // it. A page a reader would draw blank or half (a CRLF-converted deflate stream, a
        // flipped byte in a compressed font or image) is damage. Flate and the other general
        // filters are decoded; a JPEG is left to the reader's decoder. zlib checks the deflate
        // streams on a second lane while qpdf walks the pages (a large file's fonts alone inflate
        // to tens of megabytes); the first damage in page order is the verdict either way.
        let budget = DecodingBudget(limits: limits)
        let checks = InflateChecks(alongside: bytes.count >= Self.parallelCheckBytes && Lanes.available > 1, budget: budget)
        let decoder = BoundedDecoder(bytes: bytes)
        let walk = Self.walkPages(qpdf, pages: Int(pages), checks: checks, decoder: decoder, budget: budget)
        // qpdf's teardown (a quarter of a large file's read: every object it parsed is freed) is
        // not waited for: it runs on another blocking-work thread while the last checks finish and
        // the verdict is given. The checks have their own copies of the bytes.
        if let finished = handle.take() {
            let teardown = QPDFTeardown(finished)
            BlockingPool.shared.submit { _ in teardown.run() }
        }
        checks.finish()
        let damage = [walk.damage, checks.firstDamage].compactMap { $0 }.min { $0.position < $1.position }
        if let damage {
            self = .failed(damage.reason, kind: damage.kind)
            return
        }
        self = .read(pages: Int(pages), warnings: warnings + walk.warnings)
    }

    /// Why the page tree cannot be read safely: deeper than ``maxPageTreeDepth``. Walked with a
    /// stack of its own; a node met again (a loop, or a node two parents share) is not walked
    /// twice — qpdf says what it makes of that.
    private static func pageTreeProblem(_ qpdf: qpdf_data) -> String? {
        defer { qpdf_oh_release_all(qpdf) }
        guard let root = value(qpdf, qpdf_get_root(qpdf), "/Pages") else { return nil }
        var pending: [(node: qpdf_oh, depth: Int)] = [(root, 1)]
        var seen = Set<Int32>()
        while let (node, depth) = pending.popLast() {
            let id = qpdf_oh_get_object_id(qpdf, node)
            if id != 0, !seen.insert(id).inserted { continue }
            let kids = items(qpdf, value(qpdf, node, "/Kids"))
            if kids.isEmpty { continue }
            if depth >= maxPageTreeDepth {
                return "its page tree is nested more than \(maxPageTreeDepth) levels deep (a real book's is a few); it is not read further"
            }
            for kid in kids { pending.append((kid, depth + 1)) }
        }
        return nil
    }

    /// Below this size a PDF's deflate streams are checked on the validating thread alone.
    private static let parallelCheckBytes = 1 << 20

    /// Walks the pages in order, hands each deflate stream's bytes to `checks`, and has qpdf
    /// decode the others (and those with a predictor to undo). Returns qpdf's first damage (in
    /// the order streams were met) and its warnings; ends early once `checks` has found damage.
    /// `checks` may still be checking when it returns.
    private static func walkPages(
        _ qpdf: qpdf_data, pages: Int, checks: InflateChecks, decoder: BoundedDecoder, budget: DecodingBudget
    ) -> (damage: InflateChecks.Damage?, warnings: [String]) {
        var warnings: [String] = []
        _ = qpdf_push_inherited_attributes_to_page(qpdf)
        _ = Self.warnings(qpdf)
        var seen = Visited()
        var position = 0
        for index in 0..<pages {
            if checks.firstDamage != nil { break }
            let page = qpdf_get_page_n(qpdf, index)
            let contents = Self.value(qpdf, page, "/Contents")
            let contentStreams = (contents.map { Self.items(qpdf, $0).isEmpty ? [$0] : Self.items(qpdf, $0) } ?? [])
                .filter { qpdf_oh_is_stream(qpdf, $0) != QPDF_FALSE }
                .map { ($0, "the content of", qpdf_dl_specialized) }
            let drawn = (Self.resourceStreams(qpdf, of: page, depth: 0, seen: &seen) + Self.annotationStreams(qpdf, of: page, seen: &seen))
                .map { ($0.0, "\($0.1) on", qpdf_dl_generalized) }
            // What qpdf said while the page's objects were looked up is about those objects, read
            // already; only what reading and decoding their streams says counts below.
            _ = Self.warnings(qpdf)
            for (stream, what, level) in contentStreams + drawn {
                position += 1
                let description = "\(what) page \(index + 1) is damaged"
                if Self.isFlateOnly(qpdf, stream), let raw = Self.rawData(qpdf, stream) {
                    warnings += raw.warnings
                    checks.add(InflateChecks.Item(position: position, bytes: raw.bytes, count: raw.count, description: description))
                    // zlib inflates it to its end: qpdf would only do it again, unless a
                    // predictor is to be undone
                    if Self.value(qpdf, stream, "/DecodeParms") == nil { continue }
                }
                // Decoded through a counting bound on a reading of its own: what comes out is
                // counted and dropped, never gathered into one buffer (nested filters can make
                // gigabytes of a few KiB).
                let decoding = decoder.decode(
                    object: qpdf_oh_get_object_id(qpdf, stream), generation: qpdf_oh_get_generation(qpdf, stream),
                    specialized: level == qpdf_dl_specialized, budget: budget)
                switch decoding {
                case .decoded(let said):
                    warnings += said
                case .overBound(let what):
                    return (
                        InflateChecks.Damage(
                            position: position, reason: "\(description.replacingOccurrences(of: " is damaged", with: "")) \(what)",
                            kind: .tooLarge), warnings
                    )
                case .damaged(let damage):
                    return (InflateChecks.Damage(position: position, reason: "\(description): \(damage)"), warnings)
                }
            }
            // The handles this page took (every key looked up makes one) are not needed again:
            // kept, they would grow with the pages and make clean-up slow.
            qpdf_oh_release_all(qpdf)
        }
        return (nil, warnings)
    }

    /// The objects already looked into, by object number: the streams checked, the fonts and
    /// annotations followed, and the resource dictionaries with the smallest form depth they were
    /// read at (pages commonly share one).
    private struct Visited {
        var objects = Set<Int32>()
        var resources: [Int32: Int] = [:]

        /// Whether `object` is new (a direct object, with no number, always is).
        mutating func first(_ qpdf: qpdf_data, _ object: qpdf_oh) -> Bool {
            let id = qpdf_oh_get_object_id(qpdf, object)
            return id == 0 || objects.insert(id).inserted
        }

        /// Whether the resource dictionary `resources` has not been read at `depth` or less.
        mutating func first(_ qpdf: qpdf_data, resources: qpdf_oh, depth: Int) -> Bool {
            let id = qpdf_oh_get_object_id(qpdf, resources)
            guard id != 0 else { return true }
            if let earlier = self.resources[id], earlier <= depth { return false }
            self.resources[id] = depth
            return true
        }
    }

    /// The font programs and images `owner` (a page or a form) draws with, and its forms'
    /// content and theirs (three levels at most), each object once (`seen`), with what it is.
    private static func resourceStreams(
        _ qpdf: qpdf_data, of owner: qpdf_oh, depth: Int, seen: inout Visited
    ) -> [(qpdf_oh, String)] {
        guard let resources = value(qpdf, owner, "/Resources"), seen.first(qpdf, resources: resources, depth: depth) else { return [] }
        var streams: [(qpdf_oh, String)] = []
        if let fonts = value(qpdf, resources, "/Font") {
            for name in keys(qpdf, fonts) {
                guard var font = value(qpdf, fonts, name), seen.first(qpdf, font) else { continue }
                // A composite (Type0) font's program is in its descendant font
                if let descendant = items(qpdf, value(qpdf, font, "/DescendantFonts")).first { font = descendant }
                let descriptor = value(qpdf, font, "/FontDescriptor")
                for key in ["/FontFile", "/FontFile2", "/FontFile3"] {
                    if let program = value(qpdf, descriptor, key), qpdf_oh_is_stream(qpdf, program) != QPDF_FALSE, seen.first(qpdf, program)
                    {
                        streams.append((program, "the font \(name)"))
                    }
                }
            }
        }
        if let objects = value(qpdf, resources, "/XObject") {
            for name in keys(qpdf, objects) {
                guard let object = value(qpdf, objects, name), qpdf_oh_is_stream(qpdf, object) != QPDF_FALSE, seen.first(qpdf, object)
                else { continue }
                guard let subtype = value(qpdf, object, "/Subtype") else { continue }
                if qpdf_oh_is_name_and_equals(qpdf, subtype, "/Image") != QPDF_FALSE {
                    streams.append((object, "the image \(name)"))
                } else if qpdf_oh_is_name_and_equals(qpdf, subtype, "/Form") != QPDF_FALSE {
                    streams.append((object, "the form \(name)"))
                    if depth < 3 { streams += resourceStreams(qpdf, of: object, depth: depth + 1, seen: &seen) }
                }
            }
        }
        return streams
    }

    /// The appearance streams a page's annotations are drawn with (`/Annots` → `/AP` → `/N`, a
    /// stream or a dictionary of states), and what they draw with, each once.
    private static func annotationStreams(_ qpdf: qpdf_data, of page: qpdf_oh, seen: inout Visited) -> [(qpdf_oh, String)] {
        var streams: [(qpdf_oh, String)] = []
        for (index, annotation) in items(qpdf, value(qpdf, page, "/Annots")).enumerated() where seen.first(qpdf, annotation) {
            guard let normal = value(qpdf, value(qpdf, annotation, "/AP"), "/N") else { continue }
            let appearances =
                qpdf_oh_is_stream(qpdf, normal) != QPDF_FALSE ? [normal] : keys(qpdf, normal).compactMap { value(qpdf, normal, $0) }
            for appearance in appearances where qpdf_oh_is_stream(qpdf, appearance) != QPDF_FALSE && seen.first(qpdf, appearance) {
                streams.append((appearance, "annotation \(index + 1)'s appearance"))
                streams += resourceStreams(qpdf, of: appearance, depth: 1, seen: &seen)
            }
        }
        return streams
    }

    /// Whether a stream is kept with FlateDecode alone: zlib can check it to its end, checksum
    /// included, where qpdf hands back what inflated before a wrong checksum without a word (as
    /// poppler does).
    private static func isFlateOnly(_ qpdf: qpdf_data, _ stream: qpdf_oh) -> Bool {
        guard let filter = value(qpdf, stream, "/Filter") else { return false }
        let names = items(qpdf, filter)
        return qpdf_oh_is_name_and_equals(qpdf, filter, "/FlateDecode") != QPDF_FALSE
            || (names.count == 1 && qpdf_oh_is_name_and_equals(qpdf, names[0], "/FlateDecode") != QPDF_FALSE)
    }

    /// A stream's bytes as stored (to be freed by the caller), and what qpdf said reading them
    /// (its /Length was wrong and its endstream found instead); `nil` when they cannot be read.
    private static func rawData(
        _ qpdf: qpdf_data, _ stream: qpdf_oh
    ) -> (bytes: UnsafeMutablePointer<UInt8>, count: Int, warnings: [String])? {
        var buffer: UnsafeMutablePointer<UInt8>?
        var length = 0
        let status = qpdf_oh_get_stream_data(qpdf, stream, qpdf_dl_none, nil, &buffer, &length)
        let reading = warnings(qpdf)
        guard status & QPDF_ERRORS == 0, let buffer else {
            // Taken, or qpdf prints it at clean-up; the decoding that follows says it again.
            _ = qpdf_get_error(qpdf)
            free(buffer)
            return nil
        }
        return (buffer, length, reading)
    }

    /// The value of `key` in `object` (a dictionary, or a stream's dictionary); `nil` when it has
    /// no such key or is neither. (qpdf warns about a key asked of anything else, and those
    /// warnings would read as damage.)
    private static func value(_ qpdf: qpdf_data, _ object: qpdf_oh?, _ key: String) -> qpdf_oh? {
        guard let object else { return nil }
        let dictionary = qpdf_oh_is_stream(qpdf, object) != QPDF_FALSE ? qpdf_oh_get_dict(qpdf, object) : object
        guard qpdf_oh_is_dictionary(qpdf, dictionary) != QPDF_FALSE, qpdf_oh_has_key(qpdf, dictionary, key) != QPDF_FALSE else {
            return nil
        }
        return qpdf_oh_get_key(qpdf, dictionary, key)
    }

    /// The items of `object` when it is an array (at most 10,000); none otherwise.
    private static func items(_ qpdf: qpdf_data, _ object: qpdf_oh?) -> [qpdf_oh] {
        guard let object, qpdf_oh_is_array(qpdf, object) != QPDF_FALSE else { return [] }
        return (0..<min(qpdf_oh_get_array_n_items(qpdf, object), 10_000)).map { qpdf_oh_get_array_item(qpdf, object, $0) }
    }

    /// The keys of a dictionary (none when `dictionary` is not one).
    private static func keys(_ qpdf: qpdf_data, _ dictionary: qpdf_oh) -> [String] {
        guard qpdf_oh_is_dictionary(qpdf, dictionary) != QPDF_FALSE else { return [] }
        var keys: [String] = []
        qpdf_oh_begin_dict_key_iter(qpdf, dictionary)
        while qpdf_oh_dict_more_keys(qpdf) != QPDF_FALSE {
            guard let key = qpdf_oh_dict_next_key(qpdf) else { break }
            keys.append(String(cString: key))
        }
        return keys
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

/// A qpdf handle nobody uses any more, handed to another thread to be freed.
// Unchecked: the handle is given up by the thread that read with it before it is sent.
private struct QPDFTeardown: @unchecked Sendable {
    private let handle: qpdf_data

    init(_ handle: qpdf_data) {
        self.handle = handle
    }

    func run() {
        var handle: qpdf_data? = handle
        qpdf_cleanup(&handle)
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
