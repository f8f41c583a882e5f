import BookCache
import BookCacheTestSupport
import Foundation
import HTTPTypes
import Testing

@testable import BookCacheHTTP

/// Which requests the connection's own file route takes: only those the router would answer with
/// the file route behind the token; everything else goes on to the router (whose answers the
/// spawned-process tests compare with the taken ones').
@Suite("The file route in the connection's pipeline")
struct FastFileRouteTests {
    @Test(
        "it takes GET and HEAD of a book's file with the token (or, in the catalogue, a reader login let in), to an allowed Host, in the one spelling, and nothing else"
    )
    func takesOnlyTheFileRouteBehindTheToken() async throws {
        let directory = try TemporaryDirectory("fast-file-route")
        defer { directory.remove() }
        let root = directory.path("cache")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let manager = BookCacheManager(configuration: .init(rootDirectory: root))
        let access = try ServiceAccess(tokenFile: root.appendingPathComponent("service.token"))
        let readers = ReaderLogins(cacheRoot: root)
        let door = FastFileRoute.Door(
            allowedHosts: HostList(APIServer.allowedHosts(host: "127.0.0.1", port: 8787)), access: access, readers: readers,
            manager: manager,
            served: ServedBooks(layout: manager.layout), dates: HTTPDates())
        func request(
            _ method: HTTPRequest.Method = .get, _ path: String = "/api/v1/books/ebook-alice/file", host: String = "127.0.0.1:8787",
            _ fields: HTTPFields = [:], token: Bool = true
        ) -> HTTPRequest {
            var head = HTTPRequest(method: method, scheme: "http", authority: host, path: path, headerFields: fields)
            if token { head.headerFields[.authorization] = "Bearer \(access.token)" }
            return head
        }
        // A browser's session: the router decides what it may do (its origin checks)
        let session = try #require(access.redeem(access.newLoginCode()))
        #expect(access.credential(of: [.cookie: "\(ServiceAccess.cookieName)=\(session)"]) == .session)
        let taken = try #require(door.takes(request()))
        #expect(taken.id.description == "ebook-alice" && !taken.headOnly)
        #expect(door.takes(request(.head))?.headOnly == true)
        #expect(
            door.takes(request(.get, "/api/v1/books/ebook-alice/file", host: "LOCALHOST:8787")) != nil, "Host as the front door reads it")
        #expect(door.takes(request(.get, "/api/v1/books/ebook-alice/file", [.range: "bytes=0-3", .ifRange: "\"x\""])) != nil)

        let refused: [(String, HTTPRequest)] = [
            ("POST", request(.post)), ("DELETE", request(.delete)), ("OPTIONS", request(.options)),
            ("no token", request(token: false)),
            ("another token", request(.get, "/api/v1/books/ebook-alice/file", [.authorization: "Bearer nope"], token: false)),
            (
                "an open session",
                request(.get, "/api/v1/books/ebook-alice/file", [.cookie: "\(ServiceAccess.cookieName)=\(session)"], token: false)
            ),
            ("Basic", request(.get, "/api/v1/books/ebook-alice/file", [.authorization: "Basic cmVhZGVyOnB3"], token: false)),
            ("a foreign Host", request(.get, "/api/v1/books/ebook-alice/file", host: "evil.example:8787")),
            ("another port", request(.get, "/api/v1/books/ebook-alice/file", host: "127.0.0.1:1")),
            ("a query", request(.get, "/api/v1/books/ebook-alice/file?x=1")),
            ("a trailing /", request(.get, "/api/v1/books/ebook-alice/file/")), ("//", request(.get, "//api/v1/books/ebook-alice/file")),
            ("..", request(.get, "/api/v1/books/../books/ebook-alice/file")), ("%2F", request(.get, "/api/v1/books/ebook%2Falice/file")),
            ("upper case", request(.get, "/API/v1/books/ebook-alice/file")),
            ("the cover", request(.get, "/api/v1/books/ebook-alice/cover")),
            ("not an id", request(.get, "/api/v1/books/alice/file")),
            ("a body", request(.get, "/api/v1/books/ebook-alice/file", [.contentLength: "4"])),
            ("an empty body's length", request(.get, "/api/v1/books/ebook-alice/file", [.contentLength: "0"])),
            ("chunked", request(.get, "/api/v1/books/ebook-alice/file", [.transferEncoding: "chunked"])),
            ("Expect", request(.get, "/api/v1/books/ebook-alice/file", [.expect: "100-continue"])),
            ("Connection", request(.get, "/api/v1/books/ebook-alice/file", [.connection: "close"])),
        ]
        for (name, head) in refused {
            #expect(door.takes(head) == nil, "\(name)")
        }

        // The catalogue's file: the token, or a reader login its door let in (and only while it is
        // still the login on disk)
        let opds = "/opds/books/ebook-alice/file"
        #expect(door.takes(request(.get, opds))?.id.description == "ebook-alice")
        let basic = "Basic " + Data("kobo:correct horse".utf8).base64EncodedString()
        let wrong = "Basic " + Data("kobo:wrong".utf8).base64EncodedString()
        #expect(door.takes(request(.get, opds, [.authorization: basic], token: false)) == nil, "no reader login is set")
        try ReaderPassword(user: "kobo", password: "correct horse").write(in: root)
        #expect(door.takes(request(.get, opds, [.authorization: basic], token: false)) == nil, "not let in by the door yet")
        #expect(await readers.check(basic: wrong, client: "127.0.0.1") == .wrong)
        #expect(door.takes(request(.get, opds, [.authorization: wrong], token: false)) == nil)
        #expect(await readers.check(basic: basic, client: "127.0.0.1") == .reader)
        #expect(door.takes(request(.head, opds, [.authorization: basic], token: false))?.headOnly == true)
        #expect(door.takes(request(.get, "/api/v1/books/ebook-alice/file", [.authorization: basic], token: false)) == nil, "not the API's")
        #expect(door.takes(request(.get, "/opds/books/ebook-alice/cover", [.authorization: basic], token: false)) == nil)
        #expect(
            door.takes(request(.get, opds, [.cookie: "\(ServiceAccess.cookieName)=\(session)"], token: false)) == nil,
            "a session: the door's origin checks")
        try ReaderPassword(user: "kobo", password: "another one").write(in: root)
        #expect(door.takes(request(.get, opds, [.authorization: basic], token: false)) == nil, "the login changed on disk")
    }

    @Test("the Date field is an IMF-fixdate of now")
    func date() throws {
        // Whole seconds, as the field has them: the date made lies between the two. The field
        // reads the coarse clock (`time`), which may lag the fine one a tick (a few ms) past a
        // second's turn — the second before is allowed then.
        let before = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 - 0.05).rounded(.down))
        let text = HTTPDates().now
        let after = Date()
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        let parsed = formatter.date(from: text)
        let date = try #require(parsed, "\(text)")
        #expect(before <= date && date <= after, "\(text)")
    }
}
