import Foundation
import Testing

@testable import BookCache

@Suite("Book ids and request checks")
struct BookIDTests {
    @Test("valid ids parse", arguments: ["ebook-123", "magazine-2024-05", "ebook-A.b_c-d", "ebook-" + String(repeating: "x", count: 128)])
    func valid(text: String) throws {
        let id = try BookID(parsing: text)
        #expect(id.description == text)
    }

    @Test(
        "invalid ids are refused",
        arguments: [
            "123", "book-1", "ebook-", "ebook-.hidden", "ebook-a..b", "ebook-a/b", "ebook-a b", "ebook-ébook",
            "ebook-\u{0430}bc",  // Cyrillic look-alike
            "ebook-" + String(repeating: "x", count: 129), "ebook-a\\b", "ebook-a\u{0}b", "",
        ])
    func invalid(text: String) {
        let error = #expect(throws: BookCacheError.self) { try BookID(parsing: text) }
        #expect(error?.kind == .invalidIdentifier)
    }

    @Test(
        "URLs: only absolute http and https",
        arguments: [
            ("https://example.com/a.epub", true),
            ("http://127.0.0.1:8080/b.pdf", true),
            ("ftp://example.com/a.epub", false),
            ("file:///etc/passwd", false),
            ("example.com/a.epub", false),
            ("https:///nohost", false),
            ("https://exa mple.com/a.epub", false),
            ("", false),
        ])
    func urls(text: String, ok: Bool) {
        if ok {
            #expect(throws: Never.self) { try BookDownloadRequest.parseURL(text) }
        } else {
            let error = #expect(throws: BookCacheError.self) { try BookDownloadRequest.parseURL(text) }
            #expect(error?.kind == .invalidURL)
        }
    }

    @Test("a malformed checksum is refused before any I/O")
    func badChecksum() throws {
        let id = try BookID(parsing: "ebook-1")
        let error = #expect(throws: BookCacheError.self) {
            try BookDownloadRequest(url: "https://example.com/a.epub", id: id, expectedSHA256: "abc")
        }
        #expect(error?.kind == .invalidChecksum)
        let upper = try BookDownloadRequest(url: "https://example.com/a.epub", id: id, expectedSHA256: String(repeating: "AB", count: 32))
        #expect(upper.expectedSHA256 == String(repeating: "ab", count: 32))
    }

    @Test(
        "the derived id starts with the URL's file name, then a hash of the URL",
        arguments: [
            ("https://example.com/books/moby-dick.epub", "moby-dick"),
            ("https://example.com/get?id=7", "get"),
            ("https://example.com/a%20b.pdf", "a_b"),
            ("https://example.com/.hidden.epub", "hidden"),
        ])
    func defaultID(url: String, expected: String) throws {
        let derived = BookDownloadRequest.derivedBookId(for: URL(string: url)!)
        #expect(derived.hasPrefix(expected + "-"))
        #expect(derived.count == expected.count + 13)
    }

    @Test("cache root resolution order")
    func rootResolution() {
        #expect(CacheLayout.defaultRoot(explicit: "/x", environment: ["BOOKCACHE_DIR": "/y"]).path == "/x")
        #expect(CacheLayout.defaultRoot(environment: ["BOOKCACHE_DIR": "/y", "XDG_CACHE_HOME": "/z"]).path == "/y")
        #if !canImport(Darwin)
            #expect(CacheLayout.defaultRoot(environment: ["XDG_CACHE_HOME": "/z", "HOME": "/h"]).path == "/z/BookCache")
            #expect(CacheLayout.defaultRoot(environment: ["HOME": "/h"]).path == "/h/.cache/BookCache")
        #endif
    }
}
