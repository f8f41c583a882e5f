import BookCacheTestSupport
import Foundation
import Testing

/// Verdicts that match readers, run as a user would: a book that breaks only packaging rules
/// is cached with a warning said once, kept in the record and in `list --json` and
/// `verify --json`; `--strict` and `config set strict true` refuse it.
@Suite("bookcache warns about packaging quirks and refuses them when strict")
struct ValidationCLITests {
    func bookcache(_ arguments: [String], _ cache: String) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"])
    }

    func json(_ text: String) throws -> Any {
        try JSONSerialization.jsonObject(with: Data(text.utf8))
    }

    @Test("a Finder-style EPUB (container.xml first) is cached with a warning, said once, kept in the record")
    func cachedWithWarning() async throws {
        let quirk = try Fixtures.data("quirks/mimetype-not-first.epub")
        try await withServerAndDirectory(files: ["finder.epub": quirk]) { server, dir in
            let cache = dir.path("cache").path
            let url = "\(server.baseURL)/finder.epub"
            let first = try await bookcache(["download", url, "--id", "finder"], cache)
            #expect(first.status == 0, "\(first.stderr)")
            #expect(first.stdout.contains("cached ebook-finder"))
            #expect(first.stderr.contains("warning: ebook-finder: the first entry is 'META-INF/container.xml', not 'mimetype'"))

            let again = try await bookcache(["download", url, "--id", "finder"], cache)
            #expect(again.status == 0)
            #expect(!again.stderr.contains("warning"), "said once, when it was cached: \(again.stderr)")

            let list = try #require(try json(try await bookcache(["list", "--json"], cache).stdout) as? [[String: Any]])
            let warnings = try #require(list.first?["warnings"] as? [String])
            #expect(warnings.count == 1)
            #expect(warnings.first?.contains("not 'mimetype'") == true)

            let verify = try await bookcache(["verify", "--json"], cache)
            #expect(verify.status == 0, "a book cached with a warning is not corrupt: \(verify.stdout)")
            let report = try #require(try json(verify.stdout) as? [String: Any])
            #expect(report["ok"] as? Bool == true)
            #expect((report["warnings"] as? [String: [String]])?["ebook-finder"]?.count == 1)
        }
    }

    @Test("a PDF whose page content cannot be decoded is refused with one line: nothing of qpdf's own on stderr")
    func undecodableContentSaysOneThing() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // A CRLF-converted copy: its deflated content streams no longer inflate
        let bytes = try Data(contentsOf: Fixtures.books.appendingPathComponent("compressed.pdf"))
        var converted = Data()
        for byte in bytes where byte != 0x0D {
            if byte == 0x0A { converted.append(0x0D) }
            converted.append(byte)
        }
        let file = dir.path("crlf.pdf")
        try converted.write(to: file)
        let result = try await ProcessRunner.run("bookcache", ["validate", file.path])
        #expect(result.status != 0)
        #expect(result.stdout.contains("refused: the content of page"), "\(result.stdout)")
        #expect(!result.stderr.contains("application did not handle error"), "\(result.stderr)")
    }

    @Test("sync says a quirk once, and --json carries it")
    func syncWarns() async throws {
        let quirk = try Fixtures.data("quirks/mimetype-extra-field.epub")
        try await withServerAndDirectory(files: ["zip.epub": quirk]) { server, dir in
            let cache = dir.path("cache").path
            let feed = dir.path("feed.jsonl")
            try Data(#"{"url": "\#(server.baseURL)/zip.epub", "id": "zipped"}"#.utf8).write(to: feed)
            let first = try await bookcache(["sync", feed.path, "--keep", "1", "--json"], cache)
            #expect(first.status == 0, "\(first.stderr)")
            let report = try #require(try json(first.stdout) as? [String: Any])
            let items = try #require(report["items"] as? [[String: Any]])
            #expect((items.first?["warnings"] as? [String])?.first?.contains("extra field") == true, "\(first.stdout)")
            let again = try await bookcache(["sync", feed.path, "--keep", "1", "--force"], cache)
            #expect(again.status == 0)
            #expect(!again.stderr.contains("warning"), "already cached: not said again")
        }
    }

    @Test("--strict refuses the same book, and so does config set strict true; a conformant book still passes")
    func strictRefuses() async throws {
        let quirk = try Fixtures.data("quirks/mimetype-newline.epub")
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["echo.epub": quirk, "alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            let refused = try await bookcache(["download", "\(server.baseURL)/echo.epub", "--id", "echo", "--strict"], cache)
            #expect(refused.status != 0)
            #expect(refused.stderr.contains("with white space around it"), "\(refused.stderr)")
            #expect(refused.stderr.contains("strict"))
            #expect(try await bookcache(["path", "ebook-echo"], cache).status != 0, "nothing was cached")

            #expect(try await bookcache(["config", "set", "strict", "true"], cache).status == 0)
            #expect(try await bookcache(["config", "get", "strict"], cache).stdout.contains("true"))
            let bySetting = try await bookcache(["download", "\(server.baseURL)/echo.epub", "--id", "echo"], cache)
            #expect(bySetting.status != 0)
            #expect(bySetting.stderr.contains("strict"))
            let conformant = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice"], cache)
            #expect(conformant.status == 0, "\(conformant.stderr)")

            #expect(try await bookcache(["config", "set", "strict", "maybe"], cache).status == 64)
            #expect(try await bookcache(["config", "unset", "strict"], cache).status == 0)
            let lenient = try await bookcache(["download", "\(server.baseURL)/echo.epub", "--id", "echo"], cache)
            #expect(lenient.status == 0, "\(lenient.stderr)")
        }
    }

    @Test("ok, ok with warnings, refused: exit 1 when any is refused; --strict and --json (with an EPUB's language and publication date)")
    func validate() async throws {
        let books = Fixtures.books
        let ok = books.appendingPathComponent("alice.epub").path
        let quirk = books.appendingPathComponent("quirks/mimetype-compressed.epub").path
        let bad = books.appendingPathComponent("corrupt/crc-flip.epub").path
        let good = try await ProcessRunner.run("bookcache", ["validate", ok, quirk])
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("\(ok): ok (epub)"))
        #expect(good.stdout.contains("\(quirk): ok, with warnings (epub)"))
        #expect(good.stdout.contains("warning: the mimetype entry is compressed"))

        let mixed = try await ProcessRunner.run("bookcache", ["validate", ok, bad])
        #expect(mixed.status == 1)
        #expect(mixed.stdout.contains("\(bad): refused: "))

        let strict = try await ProcessRunner.run("bookcache", ["validate", "--strict", quirk])
        #expect(strict.status == 1)

        let json = try await ProcessRunner.run("bookcache", ["validate", "--json", quirk, bad, ok])
        let lines = json.stdout.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(lines.count == 3)
        #expect(lines.last??["language"] as? String == "en", "alice.epub's dc:language")
        #expect(lines.last??["published"] == nil, "alice.epub has no dc:date")

        // An EPUB with its publication date (calibre writes it as a date and time): its day
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        try StoredZIP.epub(metadata: "<dc:date>2015-04-26T22:00:00+00:00</dc:date>").write(to: dir.path("dated.epub"))
        let dated = try await ProcessRunner.run("bookcache", ["validate", "--json", dir.path("dated.epub").path])
        let object = try JSONSerialization.jsonObject(with: Data(dated.stdout.utf8)) as? [String: Any]
        #expect(object?["published"] as? String == "2015-04-26", "\(dated.stdout)")
        #expect(lines.first??["verdict"] as? String == "warned")
        #expect(lines[1]?["verdict"] as? String == "refused")
        #expect((lines[1]?["reason"] as? String)?.contains("CRC") == true)
    }

    @Test(
        "hostile books (a page tree 20,000 deep, stacked deflate layers, 40,000 catalogs) get a verdict each and the command survives; a served one is refused with exit 65 and the next book is cached"
    )
    func hostileBooks() async throws {
        // A 20,000-level page tree ended `bookcache validate` with SIGSEGV (exit 139) and the
        // service at every start; the bomb took it past 3 GiB.
        let books: [String: Data] = [
            "deep.pdf": Data(HostileBooks.deepPageTree(levels: 20_000)),
            "bomb.pdf": Data(HostileBooks.nestedFlate(layers: 2, decodedBytes: 64 << 20)),
            "catalogs.pdf": Data(HostileBooks.catalogsWithoutObjects(count: 40_000)),
            "alice.epub": try Fixtures.data("alice.epub"),
        ]
        try await withServerAndDirectory(files: books) { server, dir in
            let cache = dir.path("cache").path
            var paths: [String] = []
            for (name, bytes) in books where name.hasSuffix(".pdf") {
                let path = dir.path(name).path
                try bytes.write(to: URL(fileURLWithPath: path))
                paths.append(path)
            }
            let validated = try await bookcache(["validate", "--json"] + paths.sorted(), cache)
            #expect(validated.status == 1, "\(validated.stderr)")
            let verdicts = validated.stdout.split(separator: "\n").compactMap { try? json(String($0)) as? [String: Any] }
            #expect(verdicts.count == 3)
            #expect(verdicts.allSatisfy { $0["verdict"] as? String == "refused" }, "\(verdicts)")
            #expect(verdicts.contains { ($0["reason"] as? String)?.contains("page tree is nested more than 256 levels") == true })

            let deep = try await bookcache(["download", "\(server.baseURL)/deep.pdf", "--id", "deep"], cache)
            #expect(deep.status == 65, "\(deep.stderr)")
            #expect(deep.stderr.contains("nested more than 256 levels"))
            let next = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice"], cache)
            #expect(next.status == 0, "\(next.stderr)")
        }
    }
}

@Suite("bookcache validate checks local files")
struct ValidateCommandTests {
}
