import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// What a hostile catalogue, manifest or book can make the cache pay: every cost bounded before it
/// is paid, and a source never changing the user's own books.
@Suite("Hostile catalogues and metadata", .timeLimit(.minutes(2)))
struct HostileCatalogueTests {
    static func feed(_ entries: String, doctype: String = "", next: String? = nil) -> Data {
        let link = next.map { #"<link rel="next" href="\#($0)" type="application/atom+xml;profile=opds-catalog"/>"# } ?? ""
        return Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            \(doctype)<feed xmlns="http://www.w3.org/2005/Atom"><id>x</id><title>T</title>\(link)\(entries)</feed>
            """.utf8)
    }

    /// An EPUB whose package document (`content.opf`) is `package`, with a chapter beside it.
    static func epub(package: [UInt8], in dir: TemporaryDirectory) throws -> URL {
        let entries: [(name: String, bytes: [UInt8])] = [
            ("mimetype", Array("application/epub+zip".utf8)),
            (
                "META-INF/container.xml",
                Array(
                    #"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#
                        .utf8)
            ),
            ("content.opf", package),
            ("c.xhtml", Array("<html xmlns=\"http://www.w3.org/1999/xhtml\"><body>x</body></html>".utf8)),
        ]
        let file = dir.path("book.epub")
        try Data(StoredZIP.make(entries)).write(to: file)
        return file
    }

    @Test("an OPDS feed with a DTD of its own (where entities are declared) is refused before it is parsed; a plain DOCTYPE is not")
    func feedWithEntities() throws {
        let entry =
            #"<entry><id>1</id><title>&a;</title><link rel="http://opds-spec.org/acquisition" href="http://e.com/a.epub" type="application/epub+zip"/></entry>"#
        let doctype = #"<!DOCTYPE feed [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>"#
        let error = #expect(throws: BookCacheError.self) { try FeedParser().page(in: Self.feed(entry, doctype: doctype)) }
        #expect(error?.message.contains("DTD") == true, "\(error?.message ?? "")")
        // A DOCTYPE without an internal subset, and a "[" inside a comment or a quoted string, are fine.
        let plain = #"<!-- <!DOCTYPE x [ --><!DOCTYPE feed SYSTEM "a[b">"#
        let page = try FeedParser().page(in: Self.feed(entry.replacingOccurrences(of: "&a;", with: "A"), doctype: plain))
        #expect(page.entries.count == 1)
    }

    @Test("the prolog scan: only what comes before the root element is read")
    func prologScan() {
        #expect(UntrustedXML.dtdProblem(Array("<?xml version='1.0'?>\n<!DOCTYPE a [<!ENTITY x 'y'>]><a/>".utf8)) != nil)
        #expect(UntrustedXML.dtdProblem(Array("\u{FEFF}<!DOCTYPE a [ ]><a/>".utf8)) != nil)
        #expect(UntrustedXML.dtdProblem(Array("<a><![CDATA[<!DOCTYPE a [ ]>]]></a>".utf8)) == nil)
        #expect(UntrustedXML.dtdProblem(Array("<!DOCTYPE html PUBLIC \"-//W3C//DTD XHTML 1.1//EN\" \"x.dtd\"><a/>".utf8)) == nil)
        #expect(UntrustedXML.dtdProblem(Array("<!-- unterminated".utf8)) == nil)
    }

    @Test("an EPUB whose package document declares entities is refused, saying why")
    func packageWithEntities() throws {
        let package = Array(
            #"<?xml version="1.0"?><!DOCTYPE package [<!ENTITY t "Title">]><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>&t;</dc:title></metadata><manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c"/></spine></package>"#
                .utf8)
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try Self.epub(package: package, in: dir)
        let error = #expect(throws: ValidationFailure.self) { try BookValidator().check(path: file.path) }
        #expect(error?.reason.contains("DTD") == true, "\(error?.reason ?? "")")
    }

    @Test("a package document whose names are not UTF-8 is refused before XMLParser (which traps on them on Linux) sees it")
    func packageNotUTF8() throws {
        var package = Array(
            #"<?xml version="1.0" encoding="UTF-8"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata><"#.utf8)
        package += [0xFF, 0xFE] + Array(#"/></metadata><manifest/><spine/></package>"#.utf8)
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try Self.epub(package: package, in: dir)
        let error = #expect(throws: ValidationFailure.self) { try BookValidator().check(path: file.path) }
        #expect(error?.reason.contains("UTF-8") == true, "\(error?.reason ?? "")")
        // In another declared encoding, libxml2 decodes it first: not refused for its encoding.
        #expect(
            UntrustedXML.encodingProblem(Array(#"<?xml version="1.0" encoding="ISO-8859-1"?><a"#.utf8) + [0xE9] + Array("/>".utf8)) == nil)
        // The declaration alone is not trusted: libxml2 passes these bytes through unconverted, and
        // XMLParser traps on them just the same
        for declared in ["UTF-16", "UTF_8", "utf-8 x", "UCS-4"] {
            let bytes = Array(#"<?xml version="1.0" encoding="\#(declared)"?><feed><a"#.utf8) + [0xFF, 0xFE] + Array("b/></feed>".utf8)
            #expect(UntrustedXML.encodingProblem(bytes) != nil, "\(declared)")
            #expect(throws: BookCacheError.self, "\(declared)") { try FeedParser().page(in: Data(bytes)) }
        }
    }

    @Test("titles and names are bounded in bytes after normalisation, whoever sets them")
    func boundedMetadata() throws {
        let accents = "e" + String(repeating: "\u{301}", count: 200_000)
        var request = try BookDownloadRequest(url: "http://e.com/a.epub", id: BookID(parsing: "ebook-a"), title: accents)
        // At most four marks on a character: "é" and three more, 8 bytes where there were 400,001.
        #expect(request.title == "e" + String(repeating: "\u{301}", count: 4).precomposedStringWithCanonicalMapping)
        #expect(request.title?.utf8.count == 8)
        // Joiners count as marks: a character cannot be made huge with them either (it was cut away whole)
        request.title = "e" + String(repeating: "\u{200D}", count: 10_000) + " x"
        #expect(request.title?.unicodeScalars.first == "e" && (request.title?.utf8.count ?? 0) < 32, "\(request.title?.utf8.count ?? 0)")
        request.title = String(repeating: "长", count: 5000)
        #expect((request.title?.utf8.count ?? 0) <= MetadataText.maxTitleBytes)
        request.title = "  Über\r\n\tGröße  "
        #expect(request.title == "Über Größe")
        // Plain ASCII at the edges of its quick path: double and outer spaces, DEL, the byte limit
        for (text, expected) in [("a  b", "a b"), (" a", "a"), ("a ", "a"), ("a\u{7F}b", "a b"), ("Plain Title 2", "Plain Title 2")] {
            #expect(MetadataText.bounded(text, maxBytes: 64) == expected, "\(text)")
        }
        #expect(MetadataText.bounded(String(repeating: "a", count: 65), maxBytes: 64) == String(repeating: "a", count: 64))
        request.authors = [String(repeating: "a", count: 10_000), "", "B"] + Array(repeating: "C", count: 100)
        #expect(request.authors.count == MetadataText.maxNames)
        #expect(request.authors[0].utf8.count == MetadataText.maxNameBytes && request.authors[1] == "B")
    }

    @Test("an endless catalogue: pages stop at the limit, and its skipped entries are counted, only the first named")
    func endlessCatalogue() async throws {
        try await withServerAndDirectory { server, dir in
            // Given a catalogue whose next page never ends, every page full of entries without a book
            let skipped = (0..<50).map { #"<entry><id>s\#($0)</id><title>No book \#($0)</title></entry>"# }.joined()
            for page in 0...BookCacheManager.maxSyncPages + 1 {
                server.setFile(Self.feed(skipped, next: "\(server.baseURL)/page\(page + 1).xml"), at: "page\(page).xml")
            }
            // When it is synced
            let report = try await makeManager(dir).sync(.url(URL(string: "\(server.baseURL)/page0.xml")!), keep: 5)
            // Then it stopped after the last page it reads, counting every skipped entry and naming a few
            #expect(server.requestCount(for: "/page\(BookCacheManager.maxSyncPages).xml") == 0)
            #expect(report.skippedCount == BookCacheManager.maxSyncPages * 50)
            #expect(report.skippedEntries.count == SyncReport.maxNamedSkips)
            #expect(report.summary.contains("\(BookCacheManager.maxSyncPages * 50) entries skipped"))
        }
    }

    @Test("a source's refresh never replaces a book the user downloaded or pinned; it does replace its own")
    func sourceLeavesTheUsersBooks() async throws {
        let alice = try Fixtures.data("alice.epub")
        let pride = try Fixtures.data("pride.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice, "evil.epub": pride, "evil2.epub": pride, "own.epub": alice]) {
            server, dir in
            // Given the user's own book, pinned, and a book a source brought
            let manager = makeManager(dir)
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            try await manager.pin(try BookID(parsing: "ebook-alice"))
            let first = #"{"id": "own", "url": "\#(server.baseURL)/own.epub"}"#
            _ = try await manager.sync(.data(Data(first.utf8), name: "src"), keep: 5)

            // When the source asks to refresh both, from other bytes
            let lines = [
                #"{"id": "alice", "refresh": true, "url": "\#(server.baseURL)/evil.epub"}"#,
                #"{"id": "own", "refresh": true, "url": "\#(server.baseURL)/evil2.epub"}"#,
            ]
            _ = try await manager.sync(.data(Data(lines.joined(separator: "\n").utf8), name: "src"), keep: 5, force: true)

            // Then the user's book is untouched, and the source's own book was refreshed
            let users = try await manager.open(try BookID(parsing: "ebook-alice"))
            #expect(try Data(contentsOf: users) == alice)
            let own = try await manager.open(try BookID(parsing: "ebook-own"))
            #expect(try Data(contentsOf: own) == pride)
            #expect(server.requestCount(for: "/evil2.epub") == 1)
            #expect(server.requestCount(for: "/evil.epub") == 0, "the user's book was not even fetched again")
        }
    }
}
