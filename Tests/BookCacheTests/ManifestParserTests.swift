import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

@Suite("Manifest parsing")
struct ManifestParserTests {
    let parser = ManifestParser()

    @Test("objects, bare URLs, comments and blank lines")
    func wellFormed() {
        let text = """
            # a comment
            {"url": "https://e.com/a.epub", "id": "a", "type": "magazine", "title": "A", "sha256": "\(String(repeating: "f", count: 64))", "coverUrl": "https://e.com/a.jpg", "size": 12}

               https://e.com/b.pdf  
            {"url": "https://e.com/c.epub", "title": null}
            """
        let result = parser.parse(Data(text.utf8))
        #expect(result.problems.isEmpty)
        #expect(result.warnings.isEmpty)
        #expect(result.entries.map(\.line) == [2, 4, 5])
        #expect(
            result.entries[0]
                == ManifestEntry(
                    line: 2, url: "https://e.com/a.epub", id: "a", type: .magazine, title: "A", sha256: String(repeating: "f", count: 64),
                    coverUrl: "https://e.com/a.jpg", size: 12))
        #expect(result.entries[1].url == "https://e.com/b.pdf")
        #expect(result.entries[2].title == nil)
    }

    @Test(
        "each malformed line is reported with its line number; the rest still parse",
        arguments: [
            ("{\"url\": 5}", "'url' must be a string"),
            ("{\"id\": \"x\"}", "'url' is missing"),
            ("{\"url\": \"https://e.com/a\", \"type\": \"comic\"}", "'type' must be"),
            ("{\"url\": \"https://e.com/a\", \"size\": -1}", "'size'"),
            ("{\"url\": \"https://e.com/a\", \"size\": true}", "'size'"),
            ("{\"url\": \"https://e.com/a\", \"size\": 1.5}", "'size'"),
            ("{\"url\": \"https://e.com/a\"", "invalid JSON"),
            ("[\"https://e.com/a\"]", "expected a JSON object or a URL"),
            ("\"https://e.com/a\"", "expected a JSON object or a URL"),
            ("just words", "expected a JSON object or a URL"),
            ("{\"url\": [\"x\"]}", "'url' must be a string"),
        ])
    func malformed(line: String, message: String) {
        let text = "https://e.com/first.epub\n\(line)\nhttps://e.com/last.epub\n"
        let result = parser.parse(Data(text.utf8))
        #expect(result.entries.map(\.line) == [1, 3])
        #expect(result.problems.count == 1)
        #expect(result.problems.first?.line == 2)
        #expect(result.problems.first?.description.contains(message) == true, "\(result.problems)")
    }

    @Test("headers: an object or a list of \"Name: value\"; bad ones are the line's problem")
    func headers() throws {
        let text = """
            {"url": "https://e.com/a.epub", "headers": {"X-Api-Key": "k1", "Authorization": "Bearer t"}}
            {"url": "https://e.com/b.epub", "headers": ["Authorization: Bearer u", "X-Library:  north "]}
            {"url": "https://e.com/c.epub", "headers": ["NoColon"]}
            {"url": "https://e.com/d.epub", "headers": {"Range": "bytes=0-"}}
            {"url": "https://e.com/e.epub", "headers": {"X-A": 5}}
            {"url": "https://e.com/f.epub", "headers": "X-A: 1"}
            """
        let result = parser.parse(Data(text.utf8))
        #expect(result.entries.map(\.line) == [1, 2])
        #expect(result.entries[0].headers.map(\.name) == ["Authorization", "X-Api-Key"])
        #expect(result.entries[1].headers.map { "\($0.name)=\($0.value)" } == ["Authorization=Bearer u", "X-Library=north"])
        #expect(try result.entries[1].request(defaultType: .ebook).headers == result.entries[1].headers)
        #expect(result.problems.map(\.line) == [3, 4, 5, 6])
        #expect(result.problems.allSatisfy { $0.message.contains("'headers'") }, "\(result.problems)")
        #expect(result.problems[1].message.contains("set by the downloader"))
    }

    @Test("\"refresh\": true asks for the book again even when cached; anything but a boolean is a problem of its line")
    func refresh() throws {
        let text = """
            {"url": "https://e.com/a.epub", "refresh": true}
            {"url": "https://e.com/b.epub", "refresh": false}
            {"url": "https://e.com/c.epub"}
            {"url": "https://e.com/d.epub", "refresh": "yes"}
            {"url": "https://e.com/e.epub", "refresh": 1}
            """
        let result = parser.parse(Data(text.utf8))
        #expect(try result.entries.map { try $0.request(defaultType: .ebook).replaceExisting } == [true, false, false])
        #expect(result.problems.map(\.line) == [4, 5])
        #expect(result.problems.allSatisfy { $0.message == "'refresh' must be true or false" }, "\(result.problems)")
        #expect(result.warnings.isEmpty)
    }

    @Test("unknown keys are ignored with a warning")
    func unknownKeys() {
        let result = parser.parse(Data(#"{"url": "https://e.com/a.epub", "colour": "red", "pages": 3}"#.utf8))
        #expect(result.entries.count == 1)
        #expect(result.warnings.first?.description == "line 1: ignoring unknown keys 'colour', 'pages'")
    }

    @Test("an overlong line is refused without being held whole, from a file descriptor")
    func hugeLine() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = dir.path("m.jsonl")
        var data = Data("https://e.com/a.epub\n".utf8)
        data.append(Data(repeating: UInt8(ascii: "x"), count: 1_000_000))
        data.append(Data("\nhttps://e.com/b.epub".utf8))
        try data.write(to: file)
        let handle = try FileHandle(forReadingFrom: file)
        defer { try? handle.close() }
        let result = try ManifestParser(maxLineBytes: 4096).parse(fileDescriptor: handle.fileDescriptor)
        #expect(result.entries.map(\.line) == [1, 3])
        #expect(result.problems == [ManifestProblem(line: 2, message: "the line is longer than 4096 bytes")])
    }

    @Test("an empty manifest has nothing in it", arguments: ["", "\n\n", "# only a comment\n"])
    func empty(text: String) {
        let result = parser.parse(Data(text.utf8))
        #expect(result.entries.isEmpty && result.problems.isEmpty)
    }

    @Test("invalid UTF-8 is a problem for that line only")
    func invalidUTF8() {
        var data = Data("https://e.com/a.epub\n".utf8)
        data.append(contentsOf: [0xFF, 0xFE, 0x0A])
        let result = parser.parse(data)
        #expect(result.entries.count == 1)
        #expect(result.problems.first?.line == 2)
    }

    @Test("entry fields are checked when the request is made, naming the line")
    func requestValidation() throws {
        let bad = ManifestEntry(line: 7, url: "https://e.com/a.epub", id: "../x")
        let error = #expect(throws: ManifestProblem.self) { try bad.request(defaultType: .ebook) }
        #expect(error?.line == 7)
        #expect(error?.message.contains("invalid book id") == true)
        let good = try ManifestEntry(line: 1, url: "https://e.com/books/moby.epub").request(defaultType: .magazine)
        #expect(good.id.description.hasPrefix("magazine-moby-"))
        #expect(good.idDerivedFromURL)
    }
}
