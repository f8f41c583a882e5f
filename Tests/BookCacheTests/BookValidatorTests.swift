import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

@Suite("Book validation")
struct BookValidatorTests {
    let validator = BookValidator()

    @Test(
        "each refusal has a kind an app can act on",
        arguments: [
            ("corrupt/error-page.epub", ValidationFailure.Kind.htmlPage),
            ("corrupt/crc-flip.epub", .damagedEntry),
            ("corrupt/truncated.epub", .damaged),
            ("corrupt/no-container.epub", .missingPackageDocument),
            ("corrupt/missing-spine-item.epub", .invalidPackageDocument),
            ("corrupt/path-traversal.epub", .unsafeEntryName),
            ("corrupt/encrypted-entry.epub", .encrypted),
            ("corrupt/zip-bomb.epub", .tooLarge),
            ("corrupt/empty.pdf", .notABook),
        ])
    func refusalKinds(name: String, kind: ValidationFailure.Kind) {
        let path = Fixtures.books.appendingPathComponent(name).path
        let failure = #expect(throws: ValidationFailure.self) { try validator.check(path: path) }
        #expect(failure?.kind == kind, "\(name): \(failure?.reason ?? "")")
    }

    @Test(
        "valid books pass and their format comes from the bytes",
        arguments: [
            ("alice.epub", BookFormat.epub),
            ("pride.epub", .epub),
            ("fixture-monthly-2024-05.pdf", .pdf),
            ("trailing-junk.pdf", .pdf),
            ("nfc-nfd-names.epub", .epub),
        ])
    func validBooks(name: String, format: BookFormat) throws {
        let path = Fixtures.books.appendingPathComponent(name).path
        #expect(try validator.validate(path: path) == format)
    }

    @Test(
        "each corrupt or hostile fixture is refused with its reason",
        arguments: [
            ("corrupt/crc-flip.epub", "CRC"),
            ("corrupt/truncated.epub", "damaged or truncated"),
            ("corrupt/no-container.epub", "container.xml is missing"),
            ("corrupt/malformed-container.epub", "not well-formed"),
            ("corrupt/missing-spine-item.epub", "names 'OEBPS/chapter2.xhtml', which is not in the archive"),
            ("corrupt/malformed-package.epub", "'OEBPS/content.opf' is not well-formed"),
            ("corrupt/spine-unknown-item.epub", "the item 'nope', which its manifest does not list"),
            ("corrupt/missing-rootfile.epub", "not in the archive"),
            ("corrupt/path-traversal.epub", ".."),
            ("corrupt/backslash-name.epub", "backslash"),
            ("corrupt/absolute-name.epub", "absolute"),
            ("corrupt/duplicate-name.epub", "appears twice, byte for byte"),
            ("corrupt/zip-bomb.epub", "zip bomb"),
            ("corrupt/encrypted-entry.epub", "encrypted"),
            ("corrupt/deep-container.epub", "deeper"),
            ("corrupt/huge-container.epub", "more than the limit"),
            ("corrupt/error-page.epub", "HTML page"),
            ("corrupt/truncated.pdf", "truncated"),
            ("corrupt/empty.pdf", "empty"),
        ])
    func corruptBooks(name: String, reason: String) throws {
        let path = Fixtures.books.appendingPathComponent(name).path
        let failure = #expect(throws: ValidationFailure.self) {
            try validator.validate(path: path)
        }
        #expect(failure?.reason.contains(reason) == true, "\(name): \(failure?.reason ?? "no failure")")
    }

    @Test(
        "packaging quirks readers do not mind are accepted with a warning, and refused when strict",
        arguments: [
            ("quirks/mimetype-compressed.epub", "compressed"),
            ("quirks/mimetype-not-first.epub", "the first entry is 'META-INF/container.xml', not 'mimetype'"),
            ("quirks/mimetype-extra-field.epub", "extra field"),
            ("quirks/wrong-mimetype.epub", "says 'application/zip'"),
            ("quirks/mimetype-newline.epub", "with white space around it"),
            ("quirks/mimetype-crlf.epub", "with white space around it"),
            ("quirks/no-mimetype.epub", "no mimetype entry"),
        ])
    func quirks(name: String, warning: String) throws {
        let path = Fixtures.books.appendingPathComponent(name).path
        let report = try validator.check(path: path)
        #expect(report.format == .epub)
        #expect(report.warnings.count == 1)
        #expect(report.warnings.first?.contains(warning) == true, "\(name): \(report.warnings)")
        let strict = BookValidator(strict: true)
        let failure = #expect(throws: ValidationFailure.self) { try strict.check(path: path) }
        #expect(failure?.reason.contains(warning) == true)
        #expect(failure?.reason.contains("strict") == true)
    }

    @Test(
        "real-world files get the verdict readers give them",
        arguments: [
            ("real/epubcheck-filename-not-utf8.epub", "warn: not stored as UTF-8"),
            ("real/epubcheck-mimetype-extra-field.epub", "warn: extra field"),
            ("real/epubcheck-mimetype-missing.epub", "warn: no mimetype entry"),
            ("real/epubcheck-names-equal-after-normalization.epub", "ok"),
            ("real/epubcheck-spine-in-another-normalization.epub", "warn: in another Unicode normalisation"),
            ("real/pdfjs-issue5954.pdf", "ok"),
            ("real/pdfjs-xref-command-missing.pdf", "warn: rebuild the cross-reference table"),
            ("real/pdfjs-issue6108.pdf", "warn: rebuild the cross-reference table"),
            ("real/pdfjs-bug1980958.pdf", "refuse: damaged or truncated"),
            ("real/pdfjs-bug1250079.pdf", "warn: no trailer; its catalog (object 1) was found by scanning"),
            ("real/pdfjs-poppler-85140-0.pdf", "refuse: damaged or truncated"),
            ("real/pdfjs-poppler-91414-0-54.pdf", "refuse: the page tree's /Count is not a number"),
        ])
    func realWorld(name: String, verdict: String) throws {
        let path = Fixtures.books.appendingPathComponent(name).path
        if verdict == "ok" {
            #expect(try validator.check(path: path).warnings == [], "\(name)")
        } else if verdict.hasPrefix("warn: ") {
            let warnings = try validator.check(path: path).warnings
            #expect(warnings.count == 1 && warnings[0].contains(verdict.dropFirst(6)), "\(name): \(warnings)")
        } else {
            let failure = #expect(throws: ValidationFailure.self, "\(name)") { try validator.check(path: path) }
            #expect(failure?.reason.contains(verdict.dropFirst(8)) == true, "\(name): \(failure?.reason ?? "")")
        }
    }

    @Test(
        "a byte changed in the compressed data of an image, or of a form an annotation draws, is damage (zlib's checksum; qpdf and poppler pass it silently, MuPDF warns), and so is a cut content stream; the whole file is fine"
    )
    func damagedStreams() throws {
        let flipped = Fixtures.books.appendingPathComponent("corrupt/image-byte-flipped.pdf").path
        let failure = #expect(throws: ValidationFailure.self) { try validator.check(path: flipped) }
        #expect(
            failure?.reason == "the image /Im0 on page 1 is damaged: its compressed data is wrong (incorrect data check)",
            "\(failure?.reason ?? "")")
        // The same file with the byte as it was
        #expect(try validator.check(path: Fixtures.books.appendingPathComponent("image.pdf").path).warnings == [])
        // A form drawn by an annotation's appearance (MuPDF: "zlib error"; poppler: "Unknown operator")
        let annotation = Fixtures.books.appendingPathComponent("corrupt/annotation-byte-flipped.pdf").path
        let annotationFailure = #expect(throws: ValidationFailure.self) { try validator.check(path: annotation) }
        #expect(
            annotationFailure?.reason == "the form /Inner on page 1 is damaged: its compressed data is wrong (incorrect data check)",
            "\(annotationFailure?.reason ?? "")")
        // An annotation without an appearance is drawn by the reader itself: nothing to decode, nothing to warn about
        // (looking up its missing /AP made qpdf warn, which read as a rebuilt cross-reference table)
        var plain = try Data(contentsOf: Fixtures.books.appendingPathComponent("annotation.pdf"))
        let appearance = Data("/AP << /N 5 0 R >>".utf8)
        let at = try #require(plain.range(of: appearance))
        plain.replaceSubrange(at, with: Data(repeating: 0x20, count: appearance.count))
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let noAppearance = directory.path("no-appearance.pdf")
        try plain.write(to: noAppearance)
        #expect(try validator.check(path: noAppearance.path).warnings == [])
        // A content stream whose compressed data stops early (its /Length made to fit)
        var bytes = try Data(contentsOf: Fixtures.books.appendingPathComponent("compressed.pdf"))
        let marker = Data("stream\n".utf8)
        let start = try #require(bytes.range(of: marker)).upperBound
        let end = try #require(bytes.range(of: Data("\nendstream".utf8), in: start..<bytes.count)).lowerBound
        let length = end - start
        bytes.replaceSubrange((start + length / 2)..<end, with: Data(repeating: 0x20, count: length - length / 2))
        let cut = directory.path("cut-stream.pdf")
        try bytes.write(to: cut)
        let cutFailure = #expect(throws: ValidationFailure.self) { try validator.check(path: cut.path) }
        #expect(cutFailure?.reason.hasPrefix("the content of page 1 is damaged") == true, "\(cutFailure?.reason ?? "")")
    }

    @Test(
        "a large PDF's deflate streams are checked alongside its pages: the first damaged one in page order is named, whichever lane finds it",
        arguments: [[], [57], [3, 57], [57, 58], [1, 2, 80]])
    func largePDFFirstDamage(flipped pages: [Int]) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path("large.pdf")
        // 80 pages of 24 KiB of content each (about 2 MiB: past the size where the checks run alongside)
        try Data(Self.pdfWithDeflatedPages(80, contentBytes: 24 << 10, flipping: Set(pages))).write(to: file)
        guard let first = pages.min() else {
            #expect(try validator.check(path: file.path) == ValidationReport(format: .pdf, warnings: []))
            return
        }
        let failure = #expect(throws: ValidationFailure.self) { try validator.check(path: file.path) }
        #expect(
            failure?.reason == "the content of page \(first) is damaged: its compressed data is wrong (incorrect data check)",
            "\(failure?.reason ?? "")")
    }

    /// A PDF whose pages each have a content stream kept as deflate's stored blocks (so no
    /// compressor is needed), with one byte changed in the streams of `flipping`: zlib's
    /// checksum then fails, and nothing else does.
    static func pdfWithDeflatedPages(_ count: Int, contentBytes: Int, flipping: Set<Int>) -> [UInt8] {
        var pdf = Array("%PDF-1.7\n".utf8)
        var offsets: [Int] = []
        func object(_ number: Int, _ body: [UInt8]) {
            offsets.append(pdf.count)
            pdf += Array("\(number) 0 obj\n".utf8) + body + Array("\nendobj\n".utf8)
        }
        let kids = (0..<count).map { "\(3 + 2 * $0) 0 R" }.joined(separator: " ")
        object(1, Array("<< /Type /Catalog /Pages 2 0 R >>".utf8))
        object(2, Array("<< /Type /Pages /Kids [\(kids)] /Count \(count) >>".utf8))
        var generator = SystemRandomNumberGenerator()
        for page in 1...count {
            // A content stream of comment lines: decoding it is all a structure check does
            var content: [UInt8] = []
            while content.count < contentBytes {
                content += Array("% ".utf8) + (0..<62).map { _ in UInt8.random(in: 0x41...0x5A, using: &generator) } + [0x0A]
            }
            var deflated: [UInt8] = [0x78, 0x01]
            var start = 0
            while start < content.count {
                let end = min(start + 65535, content.count)
                let length = UInt16(end - start)
                deflated += [
                    end == content.count ? 1 : 0, UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8(~length >> 8),
                ]
                deflated += content[start..<end]
                start = end
            }
            var a: UInt32 = 1
            var b: UInt32 = 0
            for byte in content {
                a = (a + UInt32(byte)) % 65521
                b = (b + a) % 65521
            }
            let adler = (b << 16) | a
            deflated += [UInt8(adler >> 24), UInt8((adler >> 16) & 0xFF), UInt8((adler >> 8) & 0xFF), UInt8(adler & 0xFF)]
            if flipping.contains(page) { deflated[deflated.count / 2] ^= 0x01 }
            let number = 3 + 2 * (page - 1)
            object(number, Array("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents \(number + 1) 0 R >>".utf8))
            object(
                number + 1,
                Array("<< /Length \(deflated.count) /Filter /FlateDecode >>\nstream\n".utf8) + deflated + Array("\nendstream".utf8))
        }
        let xref = pdf.count
        pdf += Array("xref\n0 \(offsets.count + 1)\n0000000000 65535 f \n".utf8)
        for offset in offsets { pdf += Array(String(format: "%010d 00000 n \n", offset).utf8) }
        pdf += Array("trailer\n<< /Size \(offsets.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n".utf8)
        return pdf
    }

    @Test("an EPUB's language is its package document's first dc:language that is a language tag; a PDF has none")
    func languageFromThePackageDocument() throws {
        #expect(try validator.check(path: Fixtures.books.appendingPathComponent("alice.epub").path).language == "en")
        #expect(try validator.check(path: Fixtures.books.appendingPathComponent("fixture-monthly-2024-05.pdf").path).language == nil)
        for (written, kept) in [("<dc:language> de-CH </dc:language>", "de-CH"), ("<dc:language>en\"><x/></dc:language>", "fr")]
            as [(String, String?)]
        {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try StoredZIP.epub(metadata: written + "<dc:language>fr</dc:language>").write(to: directory.path("b.epub"))
            #expect(try validator.check(path: directory.path("b.epub").path).language == kept, "\(written)")
        }
    }

    @Test(
        "an EPUB's publication date is its package document's dc:date (EPUB 2: the publication event's), its date part; calibre's unknown date and other events are not"
    )
    func publishedFromThePackageDocument() throws {
        for (written, kept) in [
            ("<dc:date>1818-01-01</dc:date>", "1818-01-01"),
            ("<dc:date> 2005-03-14T00:00:00+00:00 </dc:date>", "2005-03-14"),
            ("<dc:date>0101-01-01T00:00:00+00:00</dc:date>", nil),
            ("<dc:date opf:event=\"modification\">2020-05-01</dc:date><dc:date opf:event=\"publication\">1851</dc:date>", "1851"),
            ("<dc:date>yesterday</dc:date>", nil),
            ("<dc:date>1818-13-01</dc:date>", nil),
            ("", nil),
        ] as [(String, String?)] {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try StoredZIP.epub(metadata: written + "<dc:language>fr</dc:language>").write(to: directory.path("b.epub"))
            let report = try validator.check(path: directory.path("b.epub").path)
            #expect(report.published == kept, "\(written)")
            #expect(report.language == "fr")
        }
        #expect(try validator.check(path: Fixtures.books.appendingPathComponent("fixture-monthly-2024-05.pdf").path).published == nil)
    }

    @Test(
        "a large stored entry is read in pieces on several cores: whole it passes; a byte changed in its first or its last piece, or at a piece's edge, is a CRC error naming it"
    )
    func largeStoredEntryInPieces() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let size = Int(EPUBValidator.splitStoredBytes) + 12_345
        let video = StoredZIP.noise(count: size, seed: 11)
        let book = StoredZIP.epub(files: [("OEBPS/video.bin", video), ("OEBPS/after.bin", StoredZIP.noise(count: 4096, seed: 12))])
        let path = directory.path("big.epub").path
        try Data(book).write(to: URL(fileURLWithPath: path))
        #expect(try validator.check(path: path).format == .epub)
        // Where the entry's bytes start in the archive: after its local header and name.
        let start = try #require(book.firstRange(of: Array("OEBPS/video.bin".utf8))).upperBound
        for offset in [0, size / 2 - 1, size / 2, size - 1] {
            var damaged = book
            damaged[start + offset] ^= 0x5A
            try Data(damaged).write(to: URL(fileURLWithPath: path))
            let failure = #expect(throws: ValidationFailure.self, "byte \(offset)") { try validator.validate(path: path) }
            #expect(failure?.reason == "the entry 'OEBPS/video.bin' is damaged (CRC error)", "byte \(offset)")
        }
    }

    @Test("a password-protected PDF is accepted with a warning: its pages cannot be counted without the password")
    func passwordPDF() throws {
        let report = try validator.check(path: Fixtures.books.appendingPathComponent("quirks/password.pdf").path)
        #expect(report.format == .pdf)
        #expect(report.warnings == ["the PDF is protected by a password, so its pages could not be counted"])
    }

    @Test("a conformant book has no warnings")
    func conformantHasNoWarnings() throws {
        for name in [
            "alice.epub", "pride.epub", "nfc-nfd-names.epub", "fixture-monthly-2024-05.pdf", "compressed.pdf", "image.pdf",
            "annotation.pdf",
        ] {
            #expect(try validator.check(path: Fixtures.books.appendingPathComponent(name).path).warnings == [], "\(name)")
        }
    }

    @Test("the zip bomb is refused from its declared sizes, before inflating")
    func bombRefusedByRatio() throws {
        // Given limits that would allow the declared total but not the ratio
        let path = Fixtures.books.appendingPathComponent("corrupt/zip-bomb.epub").path
        let strict = BookValidator(limits: ValidationLimits(maxCompressionRatio: 50))
        let failure = #expect(throws: ValidationFailure.self) { try strict.validate(path: path) }
        #expect(failure?.reason.contains("expands") == true)
        // And a total limit below the declared size refuses it too
        let small = BookValidator(limits: ValidationLimits(maxTotalUncompressedBytes: 1 << 20, maxCompressionRatio: 10_000))
        let total = #expect(throws: ValidationFailure.self) { try small.validate(path: path) }
        #expect(total?.reason.contains("declare more than") == true)
    }

    /// A variant of a real PDF (the fixture magazine) and the verdict readers give it:
    /// `nil` for accepted without warnings, `"warn: …"` for accepted with that warning,
    /// `"refuse: …"` for refused with that reason.
    static let pdfVariants: [(String, String?)] = [
        ("as is", nil),
        ("4 KiB of junk after %%EOF", "warn: bytes after the last %%EOF"),
        ("600 bytes of junk after %%EOF", "warn: bytes after the last %%EOF"),
        ("startxref removed", "warn: rebuild the cross-reference table"),
        ("startxref past the end", "warn: rebuild the cross-reference table"),
        ("cut at two thirds", "refuse: damaged or truncated"),
        ("every LF made CRLF", "warn: rebuild the cross-reference table"),
        ("an HTML page after a %PDF- line", "refuse: damaged or truncated"),
        ("no version in the header", "refuse: no version number"),
    ]

    static func variant(_ name: String, of pdf: [UInt8]) -> [UInt8] {
        let text = Array("startxref".utf8)
        let xref = pdf.lastRange(of: text)!.lowerBound
        switch name {
        case "4 KiB of junk after %%EOF": return pdf + [UInt8](repeating: UInt8(ascii: "x"), count: 4096)
        case "600 bytes of junk after %%EOF": return pdf + [UInt8](repeating: UInt8(ascii: "x"), count: 600)
        case "startxref removed": return Array(pdf[..<xref]) + Array("%%EOF\n".utf8)
        case "startxref past the end": return Array(pdf[..<xref]) + Array("startxref\n99999999\n%%EOF\n".utf8)
        case "cut at two thirds": return Array(pdf.prefix(pdf.count * 2 / 3))
        case "every LF made CRLF": return pdf.flatMap { $0 == 0x0A ? [0x0D, 0x0A] : [$0] }
        case "an HTML page after a %PDF- line": return Array("%PDF-1.4\n<html><body>Please log in</body></html>\n".utf8)
        case "no version in the header": return Array("%PDF-x\n".utf8) + pdf.dropFirst(8)
        default: return pdf
        }
    }

    @Test(
        "a PDF after a preamble (a Google Docs export carries 2 KiB): accepted with a warning, as poppler opens it; strict refuses; past 1 MiB it is no PDF",
        arguments: [2048, 65536, 2 << 20])
    func preamble(size: Int) async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let line = Array("preamble text before the document\n".utf8)
        var bytes = [UInt8]()
        while bytes.count < size { bytes += line }
        bytes = Array(bytes.prefix(size)) + Array(try Fixtures.data("compressed.pdf"))
        let path = dir.path("preamble.pdf").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        guard size <= PDFValidator.headerSearchLimit else {
            let error = #expect(throws: ValidationFailure.self) { try BookValidator().check(path: path) }
            #expect(error?.kind == .notABook)
            return
        }
        let report = try BookValidator().check(path: path)
        #expect(report.format == .pdf)
        #expect(report.warnings.contains("\(size) bytes come before the %PDF- header (readers skip them)"), "\(report.warnings)")
        #expect(throws: ValidationFailure.self) { try BookValidator(strict: true).check(path: path) }
        // The independent judge: poppler opens it and counts its pages.
        if FileManager.default.isExecutableFile(atPath: "/usr/bin/pdfinfo") {
            let info = try await ProcessRunner.run(at: URL(fileURLWithPath: "/usr/bin/pdfinfo"), [path])
            #expect(info.status == 0 && info.stdout.contains("Pages:"), "\(info.stdout)\(info.stderr)")
        }
    }

    @Test(
        "a linearized PDF shorter than its linearization data says is a cut download; whole, or longer (an update appended), it is fine",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/qpdf"), "needs qpdf's command (scripts/test.sh installs it)"))
    func linearizedLength() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let linearized = dir.path("linearized.pdf").path
        let made = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/qpdf"),
            ["--linearize", Fixtures.books.appendingPathComponent("fixture-monthly-2024-05.pdf").path, linearized])
        try #require(made.status == 0, "\(made.stderr)")
        let whole = try Data(contentsOf: URL(fileURLWithPath: linearized))
        #expect(try BookValidator().check(path: linearized).format == .pdf)

        let cut = dir.path("cut.pdf").path
        try whole.prefix(whole.count - 40).write(to: URL(fileURLWithPath: cut))
        let error = #expect(throws: ValidationFailure.self) { try BookValidator().check(path: cut) }
        #expect(error?.kind == .damaged)
        #expect(
            error?.reason.contains("its linearization data gives \(whole.count) bytes; \(whole.count - 40) arrived") == true,
            "\(error?.reason ?? "")")

        let longer = dir.path("longer.pdf").path
        try (whole + Data("\n% an incremental update would follow here\n".utf8)).write(to: URL(fileURLWithPath: longer))
        #expect(try BookValidator().check(path: longer).format == .pdf)
    }

    @Test("PDFs are judged as readers open them (uncompressed content)", arguments: pdfVariants)
    func pdfVerdicts(name: String, expected: String?) throws {
        try checkPDF("fixture-monthly-2024-05.pdf", variant: name, expected: expected)
    }

    @Test(
        "PDFs are judged as readers open them (deflated content)",
        arguments: [
            ("as is", nil),
            ("cut at two thirds", "refuse: damaged or truncated"),
            // The deflate streams take the CRs too: page content readers cannot draw.
            ("every LF made CRLF", "refuse: the content of page 1 is damaged"),
            ("4 KiB of junk after %%EOF", "warn: bytes after the last %%EOF"),
        ] as [(String, String?)])
    func compressedPDFVerdicts(name: String, expected: String?) throws {
        try checkPDF("compressed.pdf", variant: name, expected: expected)
    }

    func checkPDF(_ fixture: String, variant name: String, expected: String?) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path("doc.pdf")
        let pdf = [UInt8](try Fixtures.data(fixture))
        try Data(Self.variant(name, of: pdf)).write(to: file)
        switch expected {
        case nil:
            #expect(try validator.check(path: file.path) == ValidationReport(format: .pdf, warnings: []), "\(name)")
        case let verdict? where verdict.hasPrefix("warn: "):
            let report = try validator.check(path: file.path)
            #expect(report.warnings.count == 1, "\(name): \(report.warnings)")
            #expect(report.warnings.first?.contains(verdict.dropFirst(6)) == true, "\(name): \(report.warnings)")
            #expect(throws: ValidationFailure.self, "strict refuses it") { try BookValidator(strict: true).check(path: file.path) }
        case let verdict?:
            let failure = #expect(throws: ValidationFailure.self, "\(name)") { try validator.check(path: file.path) }
            #expect(failure?.reason.contains(verdict.dropFirst(8)) == true, "\(name): \(failure?.reason ?? "")")
        }
    }

    @Test("bytes decide the format, not the name")
    func formatFromBytes() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let misnamed = directory.path("really-a-pdf.epub")
        try Fixtures.data("fixture-monthly-2024-05.pdf").write(to: misnamed)
        #expect(try BookValidator.detectFormat(path: misnamed.path) == .pdf)
        let other = directory.path("plain.epub")
        try Data("just some text".utf8).write(to: other)
        #expect(throws: ValidationFailure.self) { try BookValidator.detectFormat(path: other.path) }
    }

    @Test(
        "container.xml parsing catches what XMLParser lets through on Linux",
        arguments: [
            "<a><b></a>",
            "<container><rootfiles>",
            "<container></container><container></container>",
            "<package><rootfile full-path='x'/></package>",
            "not xml at all",
        ])
    func malformedContainer(xml: String) {
        #expect(throws: ValidationFailure.self) {
            try ContainerXMLParser(maxDepth: 32).rootfiles(in: Array(xml.utf8))
        }
    }

    @Test("container.xml with a namespace prefix is read")
    func prefixedContainer() throws {
        let xml = """
            <?xml version="1.0"?><c:container xmlns:c="urn:oasis:names:tc:opendocument:xmlns:container">
            <c:rootfiles><c:rootfile full-path="OPS/book.opf"/></c:rootfiles></c:container>
            """
        #expect(try ContainerXMLParser(maxDepth: 32).rootfiles(in: Array(xml.utf8)) == ["OPS/book.opf"])
    }
}
