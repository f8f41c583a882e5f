import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

/// XML from outside — package documents, feeds — judged on its decoded text (issue 55): UTF-16
/// with or without its byte order mark is transcoded before its DTD is looked at.
@Suite("Hostile XML", .timeLimit(.minutes(1)))
struct HostileXMLTests {
    /// Writes `bytes` into a fresh folder and validates them in process.
    static func verdict(_ bytes: [UInt8], name: String) throws -> Result<ValidationReport, ValidationFailure> {
        let dir = try TemporaryDirectory("bookcache-hostile")
        defer { dir.remove() }
        let path = dir.path(name).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return Result { () throws(ValidationFailure) in try BookValidator().check(path: path) }
    }

    @Test(
        "a package document in UTF-16 that declares an entity is refused, with or without its byte order mark",
        arguments: [(false, true), (false, false), (true, true), (true, false)])
    func utf16PackageDocument(bigEndian: Bool, byteOrderMark: Bool) throws {
        let opf = HostileBooks.packageDocumentWithEntity(encodingDeclaration: "UTF-16")
        let epub = HostileBooks.epub(packageDocument: HostileBooks.utf16(opf, bigEndian: bigEndian, byteOrderMark: byteOrderMark))
        let verdict = try Self.verdict([UInt8](epub), name: "utf16.epub")
        guard case .failure(let failure) = verdict else {
            Issue.record("a UTF-16 package document with an entity was accepted")
            return
        }
        #expect(failure.kind == .invalidPackageDocument)
        #expect(failure.reason.contains("DTD of its own"), "\(failure.reason)")
    }

    @Test("a package document in UTF-16 without a DTD is read as it was (transcoded to UTF-8)", arguments: [true, false])
    func utf16PackageDocumentRead(byteOrderMark: Bool) throws {
        let opf = """
            <?xml version="1.0" encoding="UTF-16"?>
            <package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
            <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier><dc:title>Ünïcode</dc:title><dc:language>de</dc:language></metadata>
            <manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c"/></spine></package>
            """
        let epub = HostileBooks.epub(packageDocument: HostileBooks.utf16(opf, byteOrderMark: byteOrderMark))
        let report = try Self.verdict([UInt8](epub), name: "utf16.epub").get()
        #expect(report.language == "de")
    }

    @Test("XML is judged on its decoded text: UCS-4, EBCDIC, broken UTF-16 and NUL are refused")
    func encodings() {
        #expect(UntrustedXML.problem([0x00, 0x00, 0x00, 0x3C] + Array(repeating: 0, count: 8)) != nil)
        #expect(UntrustedXML.problem([0x4C, 0x6F, 0xA7, 0x94, 0x93]) != nil)
        #expect(UntrustedXML.problem(HostileBooks.utf16("<a/>") + [0x41]) != nil, "an odd number of bytes")
        #expect(UntrustedXML.problem([0xFF, 0xFE, 0x00, 0xD8, 0x3C, 0x00]) != nil, "a lone surrogate")
        #expect(UntrustedXML.problem(Array("<a>\u{0}</a>".utf8)) != nil)
        #expect(UntrustedXML.problem(HostileBooks.utf16("<?xml version='1.0' encoding='UTF-16'?><a/>", byteOrderMark: false)) == nil)
        let text = try? UntrustedXML.text(HostileBooks.utf16("<?xml version='1.0' encoding='UTF-16'?><a/>", bigEndian: true))
        #expect(text.map { String(decoding: $0, as: UTF8.self) } == "<?xml version='1.0' encoding=\"UTF-8\"?><a/>")
    }

    @Test("an OPDS feed in UTF-16 with an entity is refused, with or without its byte order mark", arguments: [true, false])
    func utf16Feed(byteOrderMark: Bool) throws {
        let feed = HostileBooks.feedWithEntity(encodingDeclaration: "UTF-16", bookURL: "http://127.0.0.1:1/book.epub")
        let bytes = Data(HostileBooks.utf16(feed, byteOrderMark: byteOrderMark))
        #expect(throws: BookCacheError.self) { try FeedParser().page(in: bytes) }
    }
}
