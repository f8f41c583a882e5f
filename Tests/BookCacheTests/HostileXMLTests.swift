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

    @Test("a document whose declared encoding hides its DTD from a byte scan (UTF-7) is refused before it is parsed")
    func hiddenByDeclaredEncoding() throws {
        // "<!DOCTYPE feed [<!ENTITY …>]>" in UTF-7: its "<" is "+ADw-", which a byte scan for "<!DOCTYPE" does not see
        let feed = """
            <?xml version="1.0" encoding="UTF-7"?>+ADw-!DOCTYPE feed +AFs-+ADw-!ENTITY big "aaaaaaaaaaaaaaaaaaaaaaaaaaaa"+AD4-+AF0-+AD4-
            <feed xmlns="http://www.w3.org/2005/Atom"><id>urn:x</id><title>&big;</title><updated>2026-01-01T00:00:00Z</updated>
            <entry><id>urn:b</id><title>&big;&big;</title><updated>2026-01-01T00:00:00Z</updated>
            <link rel="http://opds-spec.org/acquisition" href="http://127.0.0.1:1/b.epub" type="application/epub+zip"/></entry></feed>
            """
        #expect(UntrustedXML.problem(Array(feed.utf8)) != nil)
        do {
            let page = try FeedParser().page(in: Data(feed.utf8))
            Issue.record("a UTF-7 feed with a DTD of its own was parsed: \(page.entries.count) entries")
        } catch {
            #expect(error.message.contains("encoding"), "\(error.message)")
        }
    }
}
