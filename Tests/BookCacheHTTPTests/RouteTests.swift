import BookCache
import BookCacheTestSupport
import Foundation
import HTTPTypes
import Testing

@testable import BookCacheHTTP

/// The HTTP API's routes in process (``RouteTester``): each collection's answers and the errors
/// that carry their status. What only a process shows — signals, sockets, limits, sendfile — stays
/// in the spawned-process tests (`BookCacheCLITests`).
@Suite("HTTP routes, in process")
struct RouteTests {
    @Test("default deny: the page, the login link and the proof open; every other route and unknown path needs the token")
    func defaultDeny() async throws {
        try await RouteTester.with { (routes: RouteTester) async throws in
            #expect(try await routes.send(.get, "/", token: false).status == .ok)
            #expect(try await routes.send(.get, "/login?code=nope", token: false).status == .unauthorized)
            let nonce = String(repeating: "ab", count: 32)
            let proof = try await routes.send(.get, "/api/v1/proof?nonce=\(nonce)", token: false)
            #expect(proof.json["proof"] as? String == ServiceAccess.proof(token: routes.access.token, nonce: nonce))
            #expect(try await routes.send(.get, "/api/v1/proof?nonce=short", token: false).errorKind == "invalidNonce")
            for path in ["/api/v1/books", "/api/v1/jobs", "/api/v1/sources", "/api/v1/stats", "/api/v1/nothing", "/nothing"] {
                #expect(try await routes.send(.get, path, token: false).status == .unauthorized, "\(path)")
            }
            let wrong = try await routes.send(
                .get, "/api/v1/books", token: false, headers: [.authorization: "Bearer \(String(repeating: "0", count: 64))"])
            #expect(wrong.status == .unauthorized)
            #expect(try await routes.send(.get, "/api/v1/books").status == .ok)
            let unknown = try await routes.send(.get, "/api/v1/nothing")
            #expect(unknown.status == .notFound)
        }
    }

    @Test("the front door: a foreign Host is 421, a target in another spelling 400, before any route")
    func frontDoor() async throws {
        try await RouteTester.with { (routes: RouteTester) async throws in
            #expect(try await routes.send(.get, "/api/v1/books", host: "evil.example:8787").status == .misdirectedRequest)
            for path in ["//api/v1/books", "/api/v1/./books", "/api/v1/../v1/books", "/api/v1/books/", "/api/v1/%62ooks"] {
                #expect(try await routes.send(.get, path).status == .badRequest, "\(path)")
            }
        }
    }

    @Test("books: the shelf, one book, its file whole, by range, outside it and with a stale If-Range; HEAD; no cover; delete")
    func books() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, _ in
            try await RouteTester.with { (routes: RouteTester) async throws in
                try await routes.cache("alice.epub", id: "ebook-alice", from: server)
                let alice = try Fixtures.data("alice.epub")

                let shelf = try await routes.send(.get, "/api/v1/books")
                #expect((shelf.json["books"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == ["ebook-alice"])
                #expect(try await routes.send(.get, "/api/v1/books/ebook-alice").json["id"] as? String == "ebook-alice")

                let whole = try await routes.send(.get, "/api/v1/books/ebook-alice/file")
                #expect(whole.status == .ok)
                #expect(whole.body == alice)
                #expect(whole.headers[.contentType] == "application/epub+zip")
                #expect(whole.headers[.contentDisposition]?.hasPrefix("attachment; filename=\"") == true)
                let etag = try #require(whole.headers[.eTag])
                let part = try await routes.send(.get, "/api/v1/books/ebook-alice/file", headers: [.range: "bytes=100-1099"])
                #expect(part.status == .partialContent)
                #expect(part.body == alice[100..<1100])
                #expect(part.headers[.contentRange] == "bytes 100-1099/\(alice.count)")
                let tail = try await routes.send(.get, "/api/v1/books/ebook-alice/file", headers: [.range: "bytes=-7", .ifRange: etag])
                #expect(tail.body == alice.suffix(7))
                let stale = try await routes.send(
                    .get, "/api/v1/books/ebook-alice/file", headers: [.range: "bytes=0-3", .ifRange: "\"0\""])
                #expect(stale.status == .ok && stale.body == alice)
                let outside = try await routes.send(.get, "/api/v1/books/ebook-alice/file", headers: [.range: "bytes=\(alice.count)-"])
                #expect(outside.status == .rangeNotSatisfiable)
                #expect(outside.headers[.contentRange] == "bytes */\(alice.count)")
                // The refusal of a range carries the file's headers too, as it did before the file route was shared
                #expect(outside.headers[.contentSecurityPolicy] == "sandbox; default-src 'none'")
                #expect(outside.headers[.contentDisposition]?.hasPrefix("attachment; filename=\"") == true)
                let head = try await routes.send(.head, "/api/v1/books/ebook-alice/file")
                #expect(head.status == .ok && head.body.isEmpty && head.headers[.contentLength] == String(alice.count))

                let cover = try await routes.send(.get, "/api/v1/books/ebook-alice/cover")
                #expect(cover.status == .notFound && cover.errorKind == "noCover")
                #expect(try await routes.send(.get, "/api/v1/books/ebook-nope").errorKind == "notCached")
                #expect(try await routes.send(.get, "/api/v1/books/not%20an%20id").status == .badRequest)
                #expect(try await routes.send(.delete, "/api/v1/books/ebook-alice").status == .ok)
                #expect(try await routes.send(.get, "/api/v1/books/ebook-alice/file").status == .notFound)
            }
        }
    }

    @Test(
        "a book's file asked for again is the same; a book published again meanwhile (by another process) is served as the new file, with its own entity tag"
    )
    func servedAgainAndReplaced() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, _ in
            try await RouteTester.with { (routes: RouteTester) async throws in
                try await routes.cache("alice.epub", id: "ebook-alice", from: server)
                let alice = try await routes.send(.get, "/api/v1/books/ebook-alice/file")
                let again = try await routes.send(.get, "/api/v1/books/ebook-alice/file")
                #expect(again.body == alice.body && again.headers[.eTag] == alice.headers[.eTag])
                // Another process replaces the book with other bytes under the same id
                let other = BookCacheManager(configuration: .init(rootDirectory: routes.directory.path("cache")))
                #expect(try await other.delete(BookID(parsing: "ebook-alice")))
                _ = try await other.download(
                    try BookDownloadRequest(url: "\(server.baseURL)/pride.epub", id: BookID(parsing: "ebook-alice")))
                let replaced = try await routes.send(.get, "/api/v1/books/ebook-alice/file")
                #expect(replaced.status == .ok)
                #expect(replaced.body == (try Fixtures.data("pride.epub")))
                let record = try #require(try await other.metadata(for: BookID(parsing: "ebook-alice")))
                #expect(replaced.headers[.eTag] == "\"\(record.checksum)\"", "the new file's tag, not the old one's")
                #expect(replaced.headers[.eTag] != alice.headers[.eTag])
            }
        }
    }

    @Test("the shelf's query: every value outside the documented ones is a 400 that names them")
    func shelfQuery() async throws {
        try await RouteTester.with { (routes: RouteTester) async throws in
            for query in ["limit=0", "limit=x", "limit=100000", "sort=colour", "type=comic", "status=lost"] {
                let answer = try await routes.send(.get, "/api/v1/books?\(query)")
                #expect(answer.status == .badRequest, "\(query)")
                #expect(answer.errorKind != nil, "\(query): \(answer.text)")
            }
            let page = try await routes.send(.get, "/api/v1/books?limit=5&sort=title")
            #expect(page.status == .ok)
            #expect(page.json.keys.contains("next"))
        }
    }

    @Test("jobs: a bad batch is refused whole, naming each bad element, and nothing is queued; unknown jobs are 404")
    func jobs() async throws {
        try await RouteTester.with { (routes: RouteTester) async throws in
            let bad = try await routes.send(
                .post, "/api/v1/jobs",
                body: #"[{"url": "http://127.0.0.1:1/a.epub"}, {"url": "ftp://x/y.epub"}, {"url": "http://x/a.epub", "colour": 1}]"#)
            #expect(bad.status == .badRequest)
            let problems = ((bad.json["error"] as? [String: Any])?["problems"] as? [[String: Any]]) ?? []
            #expect(problems.compactMap { $0["index"] as? Int } == [1, 2], "\(bad.text)")
            #expect((try await routes.send(.get, "/api/v1/jobs").json["jobs"] as? [Any])?.isEmpty == true)
            #expect(try await routes.send(.post, "/api/v1/jobs", body: "not json").status == .badRequest)
            #expect(try await routes.send(.get, "/api/v1/jobs/0123456789abcdef").status == .notFound)
            #expect(try await routes.send(.delete, "/api/v1/jobs/0123456789abcdef").status == .notFound)
            #expect(try await routes.send(.post, "/api/v1/jobs/0123456789abcdef/retry").status == .notFound)

            let accepted = try await routes.send(.post, "/api/v1/jobs", body: #"{"url": "http://127.0.0.1:1/a.epub", "id": "a"}"#)
            #expect(accepted.status == .accepted)
            let id = try #require((accepted.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(try await routes.send(.get, "/api/v1/jobs/\(id)").json["state"] as? String == "queued")
            #expect(try await routes.send(.delete, "/api/v1/jobs/\(id)").json["state"] as? String == "cancelled")
            #expect(try await routes.send(.delete, "/api/v1/jobs").json["removed"] as? Int == 1)
        }
    }

    @Test("sources: a bad one is 400 and not kept; a good one is 201, listed without its password, and removed once")
    func sources() async throws {
        try await RouteTester.with { (routes: RouteTester) async throws in
            #expect(try await routes.send(.post, "/api/v1/sources", body: #"{"keep": 5}"#).status == .badRequest)
            let soon = try await routes.send(
                .post, "/api/v1/sources", body: #"{"source": "http://127.0.0.1:1/feed", "keep": 5, "every": "soon"}"#)
            #expect(soon.status == .badRequest, "\(soon.text)")
            #expect((try await routes.send(.get, "/api/v1/sources").json["sources"] as? [Any])?.isEmpty == true)

            let added = try await routes.send(
                .post, "/api/v1/sources", body: #"{"source": "http://reader:s3cret@127.0.0.1:1/feed", "keep": 5, "every": "1h"}"#)
            #expect(added.status == .created, "\(added.text)")
            let id = try #require(added.json["id"] as? String, "\(added.text)")
            let listed = try await routes.send(.get, "/api/v1/sources")
            #expect((listed.json["sources"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])
            #expect(!added.text.contains("s3cret") && !listed.text.contains("s3cret"))
            #expect(try await routes.send(.delete, "/api/v1/sources/\(id)").status == .ok)
            #expect(try await routes.send(.delete, "/api/v1/sources/\(id)").status == .notFound)
        }
    }

    @Test("a body larger than the limit is 413, told to split it")
    func bodyLimit() async throws {
        try await RouteTester.with { (routes: RouteTester) async throws in
            let huge = "[" + String(repeating: " ", count: APIServer.Options().maxBodyBytes + 1) + "]"
            let answer = try await routes.send(.post, "/api/v1/jobs", body: huge)
            #expect(answer.status == .contentTooLarge)
            #expect(answer.text.contains("several requests"))
        }
    }

    @Test(
        "OPDS: every feed and file route answers HEAD as GET behind the same door — 401 with its challenge without a login, the head alone with one; the reader login and the token both open it"
    )
    func opdsDoorAndHead() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, _ in
            try await RouteTester.with { (routes: RouteTester) async throws in
                try await routes.cache("alice.epub", id: "ebook-alice", from: server)
                try ReaderPassword(user: "reader", password: "correct horse").write(in: routes.manager.layout.root)
                let basic = "Basic " + Data("reader:correct horse".utf8).base64EncodedString()
                let wrong = "Basic " + Data("reader:wrong horse!".utf8).base64EncodedString()
                var paths = ["/opds/search.xml", "/opds/books/ebook-alice/file"]
                for root in ["/opds", "/opds/v2"] {
                    paths += [root, root + "/new", root + "/ebooks", root + "/magazines", root + "/pinned", root + "/authors"]
                    paths += [root + "/author?name=Lewis%20Carroll", root + (root == "/opds" ? "/search?q=alice" : "/search?query=alice")]
                }
                for path in paths {
                    for method in [HTTPRequest.Method.get, .head] {
                        let refused = try await routes.send(method, path, token: false)
                        #expect(refused.status == .unauthorized, "\(method) \(path)")
                        #expect(refused.headers[.wwwAuthenticate]?.hasPrefix("Basic realm=") == true, "\(method) \(path)")
                    }
                    let get = try await routes.send(.get, path, token: false, headers: [.authorization: basic])
                    let head = try await routes.send(.head, path, token: false, headers: [.authorization: basic])
                    #expect(get.status == .ok && !get.body.isEmpty, "GET \(path): \(get.status)")
                    #expect(head.status == .ok && head.body.isEmpty, "HEAD \(path): \(head.status)")
                    #expect(head.headers[.contentType] == get.headers[.contentType], "\(path)")
                    #expect(try await routes.send(.get, path).status == .ok, "the token opens \(path) too")
                }
                // A wrong password is a 401 (ten in a minute from one client, and it is 429: the login
                // limit's own test is OPDSTests')
                #expect(try await routes.send(.get, "/opds/new", token: false, headers: [.authorization: wrong]).status == .unauthorized)
                #expect(
                    try await routes.send(.get, "/opds/books/ebook-alice/cover", token: false, headers: [.authorization: basic]).status
                        == .notFound)
            }
        }
    }
}
