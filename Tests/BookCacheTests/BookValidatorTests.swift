import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

@Suite("Book validation")
struct BookValidatorTests {
    let validator = BookValidator()

    @Test("valid books pass and their format comes from the bytes", arguments: [
        ("alice.epub", BookFormat.epub),
        ("pride.epub", .epub),
        ("fixture-monthly-2024-05.pdf", .pdf),
        ("trailing-junk.pdf", .pdf),
    ])
    func validBooks(name: String, format: BookFormat) throws {
        let path = Fixtures.books.appendingPathComponent(name).path
        #expect(try validator.validate(path: path) == format)
    }

    @Test("each corrupt or hostile fixture is refused with its reason", arguments: [
        ("corrupt/crc-flip.epub", "CRC"),
        ("corrupt/truncated.epub", "damaged or truncated"),
        ("corrupt/wrong-mimetype.epub", "mimetype"),
        ("corrupt/no-container.epub", "container.xml is missing"),
        ("corrupt/mimetype-compressed.epub", "compressed"),
        ("corrupt/mimetype-not-first.epub", "not 'mimetype'"),
        ("corrupt/mimetype-extra-field.epub", "extra field"),
        ("corrupt/malformed-container.epub", "not well-formed"),
        ("corrupt/missing-rootfile.epub", "not in the archive"),
        ("corrupt/path-traversal.epub", ".."),
        ("corrupt/backslash-name.epub", "backslash"),
        ("corrupt/absolute-name.epub", "absolute"),
        ("corrupt/duplicate-name.epub", "twice"),
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

    @Test("PDF edge cases", arguments: [
        ("%PDF-1.7\nbody\nstartxref\n9\n%%EOF", true),
        ("junk before the header %PDF-1.4\nx\nstartxref\n1\n%%EOF\n\n\n", true),
        ("%PDF-1.4\nno trailer at all\n", false),
        ("%PDF-1.4\nbody\n%%EOF", false),
        ("%PDF-1.4\nstartxref\nabc\n%%EOF", false),
        ("%PDF-1.4\nstartxref\n999999\n%%EOF", false),
        ("%PDF-x\nstartxref\n1\n%%EOF", false),
    ])
    func pdfEdges(content: String, valid: Bool) throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path("doc.pdf")
        try Data(content.utf8).write(to: file)
        if valid {
            #expect(try validator.validate(path: file.path) == .pdf)
        } else {
            #expect(throws: ValidationFailure.self) { try validator.validate(path: file.path) }
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

    @Test("container.xml parsing catches what XMLParser lets through on Linux", arguments: [
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
