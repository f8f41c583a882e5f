import BookCache
import Foundation
import Synchronization
import Testing

@testable import BookCacheHTTP

/// The OPDS catalogue's parts on their own: escaping, file names, the reader login and its limits.
@Suite("OPDS parts")
struct OPDSTests {
    func book(title: String, format: BookFormat = .epub) throws -> CachedBookMetadata {
        CachedBookMetadata(
            id: try BookID(type: .ebook, bookId: "b1"), title: title, coverUrl: nil, fileUrl: "https://x/b1", localPath: "ebooks/b1.epub",
            fileSize: 10, downloadedAt: Date(timeIntervalSince1970: 0), lastAccessedAt: Date(timeIntervalSince1970: 0),
            checksum: String(repeating: "a", count: 64), format: format, etag: nil, lastModified: nil)
    }

    @Test("text for XML: markup escaped, characters XML 1.0 cannot hold dropped (a control character would make readers refuse the feed)")
    func escaping() throws {
        #expect(OPDSCatalogue.Feed.escape("a\u{1}b\u{7}c\u{1B}[31m\u{FFFE}\u{FFFF}") == "abc[31m")
        #expect(OPDSCatalogue.Feed.escape("<a href=\"x\">'&'</a>") == "&lt;a href=&quot;x&quot;&gt;&apos;&amp;&apos;&lt;/a&gt;")
        #expect(OPDSCatalogue.Feed.escape("tab\tline\nreturn\r 中文 😀") == "tab\tline\nreturn\r 中文 😀")
        var record = try book(title: "Bad\u{0}title <b>")
        record.authors = ["A\u{8}uthor"]
        let feed = OPDSCatalogue.Feed(id: "urn:x", title: "T\u{2}", links: [], books: [record])
        let xml = feed.atom(updated: Date(timeIntervalSince1970: 0))
        #expect(xml.contains("<title>Badtitle &lt;b&gt;</title>"))
        #expect(xml.contains("<name>Author</name>"))
        #expect(!xml.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" })
        // The same feed as JSON keeps the text (JSON escapes what it must)
        let json = try #require(try JSONSerialization.jsonObject(with: feed.json(emptyText: "")) as? [String: Any])
        let publication = try #require((json["publications"] as? [[String: Any]])?.first)
        #expect((publication["metadata"] as? [String: Any])?["title"] as? String == "Bad\u{0}title <b>")
    }

    @Test(
        "a book's publication date: dc:issued in OPDS 1.2 in any W3C form, published in 2.0 only as a whole day (the schema's date); none when unknown"
    )
    func publicationDate() throws {
        for (published, atom, json) in [
            ("1818-01-01", "<dc:issued>1818-01-01</dc:issued>", "1818-01-01"), ("1818", "<dc:issued>1818</dc:issued>", nil),
            (nil, nil, nil),
            // What no date is (an index or sidecar changed behind the cache's back): left out of both
            ("1818-13-45", nil, nil), ("<x>&</x>ab", nil, nil),
        ] as [(String?, String?, String?)] {
            var record = try book(title: "Frankenstein")
            record.published = published
            let feed = OPDSCatalogue.Feed(id: "urn:x", title: "T", links: [], books: [record])
            let xml = feed.atom(updated: Date(timeIntervalSince1970: 0))
            if let atom { #expect(xml.contains(atom), "\(xml)") } else { #expect(!xml.contains("dc:issued"), "\(xml)") }
            let document = try #require(try JSONSerialization.jsonObject(with: feed.json(emptyText: "")) as? [String: Any])
            let metadata = (document["publications"] as? [[String: Any]])?.first?["metadata"] as? [String: Any]
            #expect(metadata?["published"] as? String == json, "\(published ?? "none")")
        }
    }

    @Test("an empty feed in OPDS 2.0 leads back to the start instead of an empty list (the schema wants one item at least)")
    func emptyJSONFeed() throws {
        let feed = OPDSCatalogue.Feed(
            id: "urn:x", title: "Pinned", links: [.init(rel: "start", href: "/opds/v2", type: "application/opds+json")], books: [])
        let json = try #require(try JSONSerialization.jsonObject(with: feed.json(emptyText: "Nothing here")) as? [String: Any])
        #expect(json["publications"] == nil)
        let navigation = try #require(json["navigation"] as? [[String: Any]])
        #expect(
            navigation.count == 1 && navigation[0]["href"] as? String == "/opds/v2" && navigation[0]["title"] as? String == "Nothing here")
    }

    @Test("the file is named after its title: no path separators, quotes or control characters; a UTF-8 name beside an ASCII one")
    func attachmentNames() throws {
        #expect(
            APIServer.attachment(try book(title: "Pride and Prejudice"))
                == #"attachment; filename="Pride and Prejudice.epub"; filename*=UTF-8''Pride%20and%20Prejudice.epub"#)
        let hostile = APIServer.attachment(try book(title: "a/../b\\c\"\r\nSet-Cookie: x=1; y%", format: .pdf))
        #expect(!hostile.contains("\r") && !hostile.contains("\n"))
        #expect(
            hostile
                == #"attachment; filename="a_.._b_c_ Set-Cookie: x=1_ y_.pdf"; filename*=UTF-8''a_.._b_c_%20Set-Cookie%3A%20x%3D1%3B%20y%25.pdf"#,
            "\(hostile)")
        // A title of one character and 200,000 combining accents (a record made before titles were
        // bounded): the header stays small.
        let accents = APIServer.attachment(try book(title: "e" + String(repeating: "\u{301}", count: 200_000)))
        #expect(accents.utf8.count < 1024, "\(accents.utf8.count) bytes")
        #expect(APIServer.attachment(try book(title: "../../etc/passwd")).contains(#"filename="b1.epub""#), "a name that starts with a dot")
        // The ASCII name, for readers that ignore filename* (KOReader), is transliterated
        #expect(
            APIServer.attachment(try book(title: "Émile 中文")).contains(
                #"filename="Emile zhong wen.epub"; filename*=UTF-8''%C3%89mile%20%E4%B8%AD%E6%96%87.epub"#))
        #expect(APIServer.attachment(try book(title: "Über Größe & Maß")).contains(#"filename="Uber Grosse & Mass.epub""#))
        #expect(APIServer.attachment(try book(title: "红楼梦")).contains(#"filename="hong lou meng.epub""#))
        // Transliteration makes no path separator: ½, ⁄ and the full-width solidus become slashes in Latin-ASCII
        let fractions = APIServer.attachment(try book(title: "½ cup a⁄b ｆｕｌｌ／width"))
        #expect(fractions.contains(#"filename="1_2 cup a_b full_width.epub""#), "\(fractions)")
        // Where nothing transliterates, the book's id stands in
        #expect(
            APIServer.attachment(try book(title: "🙂🙂")).contains(#"filename="b1.epub"; filename*=UTF-8''%F0%9F%99%82%F0%9F%99%82.epub"#))
        // A title that is nothing, or a hidden file's name, is the book's id
        #expect(APIServer.attachment(try book(title: "  ")).contains(#"filename="b1.epub""#))
        #expect(APIServer.attachment(try book(title: ".bashrc")).contains(#"filename="b1.epub""#))
    }

    @Test("transliterated names are kept, a bounded number: the same name again, and never more than the bound")
    func latinNamesKept() throws {
        #expect(APIServer.latin("红楼梦") == "hong lou meng")
        #expect(APIServer.latinNames.withLock { $0["红楼梦"] } == "hong lou meng")
        #expect(APIServer.latin("红楼梦") == "hong lou meng", "from what was kept")
        #expect(APIServer.latin("Plain") == "Plain")
        #expect(APIServer.latinNames.withLock { $0["Plain"] } == nil, "ASCII is not kept: nothing to transliterate")
        for index in 0...APIServer.maxLatinNames { _ = APIServer.latin("é\(index)") }
        #expect(APIServer.latinNames.withLock { $0.count } <= APIServer.maxLatinNames)
    }

    @Test("Basic values: base64 of user:password, the first colon splits; anything else is no login")
    func basicValues() {
        func basic(_ text: String) -> String { "Basic " + Data(text.utf8).base64EncodedString() }
        #expect(ReaderLogins.decodeBasic(basic("kobo:pa:ss")).map { [$0.0, $0.1] } == ["kobo", "pa:ss"])
        #expect(ReaderLogins.decodeBasic("basic " + Data("u:p".utf8).base64EncodedString()).map { [$0.0, $0.1] } == ["u", "p"])
        #expect(ReaderLogins.decodeBasic(basic("no colon")) == nil)
        #expect(ReaderLogins.decodeBasic("Basic !!!") == nil)
        #expect(ReaderLogins.decodeBasic("Bearer " + Data("u:p".utf8).base64EncodedString()) == nil)
        #expect(ReaderLogins.decodeBasic("Basic " + String(repeating: "QUFB", count: 2000)) == nil, "over 4 KiB")
        #expect(ReaderLogins.decodeBasic("Basic " + Data([0x75, 0x3A, 0xFF, 0xFE]).base64EncodedString()) == nil, "not UTF-8")
        // Which values the doors take as a reader login (the scheme in any case), not as the token.
        for value in ["Basic dTpw", "basic", "BASIC x", "bAsIcdTpw"] { #expect(ReaderLogins.isBasic(value), "\(value)") }
        for value in ["Bearer x", "Basi", "", " Basic x", "Bäsic", "Ba\u{17F}ic"] { #expect(!ReaderLogins.isBasic(value), "\(value)") }
    }

    @Test("the reader password: kept as a salted hash; the right user and password pass, anything else fails; unusable ones are refused")
    func readerPassword() throws {
        let login = try ReaderPassword(user: "kobo", password: "correct horse")
        let again = try ReaderPassword(user: "kobo", password: "correct horse")
        #expect(login.hash != again.hash, "a salt of its own")
        #expect(login.verify(user: "kobo", password: "correct horse"))
        #expect(!login.verify(user: "kobo", password: "correct horsE"))
        #expect(!login.verify(user: "Kobo", password: "correct horse"))
        #expect(!login.verify(user: "kobo", password: ""))
        for (user, password) in [("", "12345678"), ("a:b", "12345678"), ("u\u{1}", "12345678"), ("u", "1234567"), ("u", "pass\nword")] {
            #expect(throws: ServiceSetupError.self) { try ReaderPassword(user: user, password: password) }
        }
    }

    @Test("the login file: 0600 when written; refused when others may read it; a login set or removed while serving takes effect")
    func loginFile() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("opds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        let clock = Mutex(ContinuousClock.now)
        let readers = ReaderLogins(cacheRoot: root, now: { clock.withLock { $0 } })
        let value = "Basic " + Data("kobo:correct horse".utf8).base64EncodedString()
        #expect(await readers.check(basic: value, client: "a") == .notSet(nil))

        try ReaderPassword(user: "kobo", password: "correct horse").write(in: root)
        let file = root.appendingPathComponent("opds-password.json")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)
        #expect(await readers.check(basic: value, client: "a") == .reader)

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file.path)
        #expect(throws: ServiceSetupError.self) { try ReaderPassword.read(in: root) }
        guard case .notSet(let problem?) = await readers.check(basic: value, client: "a") else {
            Issue.record("a login file others may read is not used")
            return
        }
        #expect(problem.contains("chmod 600"))

        try ReaderPassword(user: "kobo", password: "another one").write(in: root)
        #expect(await readers.check(basic: value, client: "a") == .wrong, "the old password no longer opens it")
        #expect(try ReaderPassword.remove(in: root))
        #expect(await readers.check(basic: value, client: "b") == .notSet(nil))
        #expect(try !ReaderPassword.remove(in: root))
    }

    /// Runs `body` with a fresh cache folder whose reader login is `kobo` / `correct horse`.
    static func withReaderLogin(_ body: (URL) async throws -> Void) async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("opds-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: root) }
        try ReaderPassword(user: "kobo", password: "correct horse").write(in: root)
        try await body(root)
    }

    @Test("ten failures in a minute block that address's network (its /24, not others) until the minute has passed")
    func failureWindow() async throws {
        try await Self.withReaderLogin { root in
            let start = ContinuousClock.now
            let clock = Mutex(start)
            let readers = ReaderLogins(cacheRoot: root, now: { clock.withLock { $0 } })
            let right = "Basic " + Data("kobo:correct horse".utf8).base64EncodedString()
            let wrong = "Basic " + Data("kobo:guess".utf8).base64EncodedString()
            for _ in 0..<ReaderLogins.maxFailures { #expect(await readers.check(basic: wrong, client: "10.0.0.9") == .wrong) }
            #expect(await readers.check(basic: right, client: "10.0.0.9") == .tooMany(retryAfter: 61))
            #expect(await readers.check(basic: wrong, client: "10.0.0.8") == .tooMany(retryAfter: 61), "the same /24 is blocked")
            #expect(await readers.check(basic: wrong, client: "10.0.1.8") == .wrong, "another network is not blocked")
            clock.withLock { $0 = start + .seconds(30) }
            #expect(await readers.check(basic: right, client: "10.0.0.9") == .tooMany(retryAfter: 31))
            clock.withLock { $0 = start + .seconds(61) }
            #expect(await readers.check(basic: right, client: "10.0.0.9") == .reader)
        }
    }

    @Test("wrong logins are counted before they are hashed: forty at once from one address hash at most ten; the rest are 429")
    func countedBeforeHashing() async throws {
        try await Self.withReaderLogin { root in
            // A clock that stands still: however slowly a loaded machine hashes, the minute never passes.
            let start = ContinuousClock.now
            let readers = ReaderLogins(cacheRoot: root, now: { start })
            let wrong = "Basic " + Data("kobo:guess".utf8).base64EncodedString()
            // When forty wrong logins arrive at once from one address
            let outcomes = await withTaskGroup(of: ReaderLogins.Outcome.self) { group in
                for _ in 0..<40 { group.addTask { await readers.check(basic: wrong, client: "10.0.0.9") } }
                return await group.reduce(into: [ReaderLogins.Outcome]()) { $0.append($1) }
            }
            // Then at most ten were hashed (a .wrong is a hash); the others were turned away before it
            #expect(outcomes.filter { $0 == .wrong }.count <= ReaderLogins.maxFailures)
            #expect(
                outcomes.allSatisfy { outcome in
                    switch outcome {
                    case .wrong, .tooMany, .busy: true
                    default: false
                    }
                })
        }
    }

    @Test("a reader logged in already keeps reading while wrong passwords lock its address out (a NAT, a TLS proxy)")
    func verifiedReaderThroughLockout() async throws {
        try await Self.withReaderLogin { root in
            let start = ContinuousClock.now
            let readers = ReaderLogins(cacheRoot: root, now: { start })
            let right = "Basic " + Data("kobo:correct horse".utf8).base64EncodedString()
            let wrong = "Basic " + Data("kobo:guess".utf8).base64EncodedString()
            #expect(await readers.check(basic: right, client: "127.0.0.1") == .reader)
            for _ in 0..<ReaderLogins.maxFailures { #expect(await readers.check(basic: wrong, client: "127.0.0.1") == .wrong) }
            #expect(await readers.check(basic: wrong, client: "127.0.0.1") == .tooMany(retryAfter: 61))
            #expect(await readers.check(basic: right, client: "127.0.0.1") == .reader)
        }
    }

    @Test("the login gate: one hash a lane; an attempt counts before its hash (for its network) and is forgiven when it passes")
    func loginGate() {
        let at = ContinuousClock.now
        var gate = ReaderLogins.Gate()
        let a = "10.0.0.1"
        let network = ReaderLogins.network(of: a)
        #expect(gate.admit(client: a, key: "right", at: at) == .hash(.clean, generation: 0))
        #expect(gate.admit(client: "10.0.1.1", key: "other", at: at) == .busy, "the clean lane holds one hash")
        #expect(gate.failures[network]?.count == 1, "counted before the hash")
        let passed = gate.finish(client: a, key: "right", matched: true, lane: .clean, generation: 0, at: at)
        #expect(passed)
        #expect(gate.failures[network]?.count == 0, "forgiven: it passed")
        #expect(gate.admit(client: a, key: "right", at: at) == .known)
        for attempt in 0..<ReaderLogins.maxFailures {
            // Another address of the same /24 counts with it
            let admitted = gate.admit(client: "10.0.0.\(2 + attempt)", key: "wrong\(attempt)", at: at)
            #expect(admitted == .hash(attempt == 0 ? .clean : .failing, generation: 0))
            gate.finish(client: a, key: "wrong\(attempt)", matched: false, lane: attempt == 0 ? .clean : .failing, generation: 0, at: at)
        }
        #expect(gate.admit(client: a, key: "wrong", at: at) == .blocked(61))
        #expect(gate.admit(client: "10.0.0.200", key: "wrong", at: at) == .blocked(61), "the whole /24")
        #expect(gate.admit(client: a, key: "right", at: at) == .known)
        #expect(gate.admit(client: a, key: "wrong", at: at + .seconds(61)) == .hash(.clean, generation: 0), "the window has passed")
    }

    @Test("a first login gets the clean lane while networks that keep failing fill theirs (60 addresses flooding)")
    func fairLane() {
        let at = ContinuousClock.now
        var gate = ReaderLogins.Gate()
        // Given 60 networks that have each failed once, one of them hashing now
        for index in 0..<60 {
            let client = "192.0.\(index).1"
            #expect(gate.admit(client: client, key: "flood\(index)", at: at) == .hash(.clean, generation: 0))
            gate.finish(client: client, key: "flood\(index)", matched: false, lane: .clean, generation: 0, at: at)
        }
        #expect(gate.admit(client: "192.0.7.1", key: "flood again", at: at) == .hash(.failing, generation: 0))
        for index in 0..<60 { #expect(gate.admit(client: "192.0.\(index).9", key: "more", at: at) == .busy) }
        // When a reader's first login comes from a network with no failure, it is hashed at once
        #expect(gate.admit(client: "198.51.100.7", key: "reader", at: at) == .hash(.clean, generation: 0))
        let passed = gate.finish(client: "198.51.100.7", key: "reader", matched: true, lane: .clean, generation: 0, at: at)
        #expect(passed)
    }

    @Test("a password changed while a login is hashed voids it: not passed, not remembered")
    func passwordChangeVoidsHash() {
        let at = ContinuousClock.now
        var gate = ReaderLogins.Gate()
        #expect(gate.admit(client: "10.0.0.1", key: "old", at: at) == .hash(.clean, generation: 0))
        gate.loginChanged()
        let passed = gate.finish(client: "10.0.0.1", key: "old", matched: true, lane: .clean, generation: 0, at: at)
        #expect(!passed)
        #expect(gate.admit(client: "10.0.0.1", key: "old", at: at) != .known)
    }

    @Test("addresses are counted by network: IPv4 /24 (mapped too), IPv6 /64")
    func networks() {
        #expect(ReaderLogins.network(of: "192.0.2.77") == "192.0.2.0/24")
        #expect(ReaderLogins.network(of: "::ffff:192.0.2.77") == "192.0.2.0/24")
        #expect(ReaderLogins.network(of: "2001:db8:1:2:3:4:5:6") == ReaderLogins.network(of: "2001:db8:1:2:ffff::1"))
        #expect(ReaderLogins.network(of: "2001:db8:1:2::1") != ReaderLogins.network(of: "2001:db8:1:3::1"))
        #expect(ReaderLogins.network(of: "unknown") == "unknown")
    }
}
