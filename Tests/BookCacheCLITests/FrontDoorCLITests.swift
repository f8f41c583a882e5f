import BookCacheTestSupport
import Foundation
import Testing

/// The service's front door as an attacker on the same machine and a web page in the user's
/// browser would try it: a real `bookcache serve`, talked to with curl (`--path-as-is`, so every
/// spelling reaches the server as written).
@Suite("bookcache serve: the front door", .serialized, .timeLimit(.minutes(5)))
struct FrontDoorCLITests {
    typealias Service = ServiceCLITests.Service

    /// Every route of the API, as method and path (ids that exist or not: the door is the same).
    static let routes: [(String, String)] = [
        ("GET", "/api/v1/stats"), ("GET", "/api/v1/jobs"), ("POST", "/api/v1/jobs"), ("GET", "/api/v1/jobs/0123456789abcdef"),
        ("DELETE", "/api/v1/jobs/0123456789abcdef"), ("GET", "/api/v1/books"), ("GET", "/api/v1/books/ebook-alice"),
        ("DELETE", "/api/v1/books/ebook-alice"), ("PUT", "/api/v1/books/ebook-alice/pin"), ("DELETE", "/api/v1/books/ebook-alice/pin"),
        ("GET", "/api/v1/books/ebook-alice/file"), ("HEAD", "/api/v1/books/ebook-alice/file"), ("GET", "/api/v1/sources"),
        ("POST", "/api/v1/sources"), ("DELETE", "/api/v1/sources/abc"), ("GET", "/api/v1/events"), ("POST", "/api/v1/login-links"),
        ("GET", "/api/v1/books/ebook-alice/cover"), ("POST", "/api/v1/books/ebook-alice/refresh"), ("DELETE", "/api/v1/books"),
        ("POST", "/api/v1/jobs/0123456789abcdef/retry"), ("DELETE", "/api/v1/jobs"),
    ]

    /// Other spellings of `path` that a lenient router could take for it.
    static func spellings(of path: String) -> [String] {
        let rest = String(path.dropFirst("/api/v1/".count))
        let encodedSlashes = rest.contains("/") ? ["/api/v1/" + rest.replacingOccurrences(of: "/", with: "%2f")] : []
        return encodedSlashes + [
            "/" + path, "/api//v1/" + rest, "/api/v1//" + rest, "/./api/v1/" + rest, "/api/./v1/" + rest, "/x/../api/v1/" + rest,
            "/api/v1/" + rest + "/", "/api/v1/" + rest + "/.", "/%61pi/v1/" + rest, "/api%2Fv1/" + rest,
            "/api/v1;x/" + rest, "/api/v1/" + rest + "%00", "/api\\v1/" + rest,
        ]
    }

    @Test(
        "default deny: without credentials every route and every other spelling of it is refused (401, or 400 for a spelling); nothing but the page and /login is open"
    )
    func noWayInWithoutTheToken() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Service.start(cache: dir.path("cache").path)
            defer { service.process.send(SIGKILL) }
            _ = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}"#)
            _ = try await service.http("GET", "/api/v1/jobs?wait=30")
            let body = #"{"url": "\#(server.baseURL)/pride.epub"}"#
            for (method, path) in Self.routes {
                let plain = try await service.http(method, path, body: method == "POST" ? body : nil, token: .some(nil))
                #expect(plain.status == 401, "\(method) \(path) without a token: \(plain.status)")
                for spelling in Self.spellings(of: path) {
                    let answer = try await service.http(method, spelling, body: method == "POST" ? body : nil, token: .some(nil))
                    #expect([400, 401].contains(answer.status), "\(method) \(spelling) without a token: \(answer.status) \(answer.body)")
                    // With the token, a spelling is refused too: it never reaches a handler
                    let withToken = try await service.http(method, spelling, body: method == "POST" ? body : nil)
                    #expect(withToken.status == 400, "\(method) \(spelling) with the token: \(withToken.status)")
                }
                let upper = try await service.http(method, path.uppercased(), body: method == "POST" ? body : nil, token: .some(nil))
                #expect(upper.status == 401, "\(method) \(path.uppercased()): \(upper.status)")
            }
            // Unknown paths need credentials too; the page and the login route do not
            for path in ["/nope", "/api/v1/nope", "/api", "/favicon.ico", "/.env"] {
                #expect(try await service.http("GET", path, token: .some(nil)).status == 401, "\(path)")
            }
            #expect(try await service.http("GET", "/", token: .some(nil)).status == 200)
            #expect(try await service.http("GET", "/login?code=nope", token: .some(nil)).status == 401)
            // Request targets not in origin form: the absolute form is read as its authority and
            // path (by NIO's codec, for the check and the router alike), the asterisk form refused
            let port = try #require(service.base.split(separator: ":").last)
            for target in ["http://127.0.0.1:\(port)/api/v1/stats", "http://127.0.0.1:\(port)//api/v1/stats", "*"] {
                let answer = try await service.curl(["-X", "GET", "--request-target", target, service.base + "/"])
                #expect([400, 401].contains(answer.status), "\(target): \(answer.status)")
                let withToken = try await service.curl([
                    "-X", "GET", "-H", "Authorization: Bearer \(service.token)", "--request-target", target, service.base + "/",
                ])
                #expect(
                    withToken.status == (target.hasSuffix(":\(port)/api/v1/stats") ? 200 : 400),
                    "\(target) with the token: \(withToken.status)")
            }
            // (NIO's codec keeps the Host header as the authority and drops the target's own: the
            // Host check still decides, and without a token it is still a 401.)
            let foreign = try await service.curl(["-X", "GET", "--request-target", "http://evil.example/api/v1/stats", service.base + "/"])
            #expect(foreign.status == 401, "an absolute target naming another host: \(foreign.status)")
            let foreignHost = try await service.curl([
                "-X", "GET", "-H", "Authorization: Bearer \(service.token)", "-H", "Host: evil.example", "--request-target",
                "http://127.0.0.1:\(port)/api/v1/stats",
                service.base + "/",
            ])
            #expect(foreignHost.status == 421)
            // A wrong scheme or a token with no scheme is not a token, and does not fall back to the cookie
            for authorization in ["Basic \(service.token)", service.token, "Bearer", "Bearer \(service.token)x"] {
                let answer = try await service.http("GET", "/api/v1/stats", token: .some(nil), headers: ["Authorization: \(authorization)"])
                #expect(answer.status == 401, "\(authorization.prefix(12))")
            }
            #expect(
                try await service.http("GET", "/api/v1/stats", token: .some(nil), headers: ["Authorization: bearer \(service.token)"])
                    .status == 200)
            // No job was made by any of it: only alice's
            let jobs = try await service.http("GET", "/api/v1/jobs").json["jobs"] as? [[String: Any]] ?? []
            #expect(jobs.count == 1, "\(jobs.count) jobs")
            #expect(server.requestCount(for: "/pride.epub") == 0)
        }
    }

    @Test("cross-site writes with the session cookie: only JSON from the service's own Origin is taken; the token is not held to it")
    func csrfMatrix() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Service.start(cache: dir.path("cache").path)
            defer { service.process.send(SIGKILL) }
            let path = String(service.loginLink[service.loginLink.range(of: "/login")!.lowerBound...])
            let login = try await service.http("GET", path, token: .some(nil))
            let cookie = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
            let port = try #require(service.base.split(separator: ":").last.map(String.init))
            let own = "http://127.0.0.1:\(port)"
            let otherPort = "http://127.0.0.1:\(Int(port)! == 1 ? 2 : Int(port)! - 1)"
            let origins: [String?] = [nil, own, otherPort, "http://localhost:\(port)", "https://evil.example", "null", own.uppercased()]
            let types: [String?] = [
                "application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded",
                "multipart/form-data; boundary=x", nil,
            ]
            let body = #"{"url": "\#(server.baseURL)/alice.epub", "id": "csrf"}"#
            var accepted: [String] = []
            for origin in origins {
                for type in types {
                    var headers = ["Cookie: \(cookie)", "Content-Type: \(type ?? "")"]
                    if let origin { headers.append("Origin: \(origin)") }
                    let answer = try await service.http("POST", "/api/v1/jobs", body: body, token: .some(nil), headers: headers)
                    let name = "\(origin ?? "no Origin") × \(type ?? "no type")"
                    if answer.status == 202 {
                        accepted.append(name)
                    } else {
                        #expect(answer.status == 403, "\(name): \(answer.status) \(answer.body)")
                    }
                }
            }
            #expect(
                Set(accepted) == [
                    "\(own) × application/json", "\(own) × application/json; charset=utf-8", "\(own.uppercased()) × application/json",
                    "\(own.uppercased()) × application/json; charset=utf-8",
                ], "\(accepted)")
            // Without Origin, the browser's own Sec-Fetch-Site decides
            let sameOrigin = try await service.http(
                "POST", "/api/v1/jobs", body: body, token: .some(nil), headers: ["Cookie: \(cookie)", "Sec-Fetch-Site: same-origin"])
            #expect(sameOrigin.status == 202)
            for site in ["same-site", "cross-site"] {
                let write = try await service.http(
                    "POST", "/api/v1/jobs", body: body, token: .some(nil),
                    headers: ["Cookie: \(cookie)", "Sec-Fetch-Site: \(site)", "Origin: \(own)"])
                #expect(write.status == 403, "\(site)")
                let read = try await service.http(
                    "GET", "/api/v1/books", token: .some(nil), headers: ["Cookie: \(cookie)", "Sec-Fetch-Site: \(site)"])
                #expect(read.status == 403, "\(site)")
            }
            // Other writes: DELETE and PUT with the cookie from another origin are refused
            for (method, target) in [
                ("DELETE", "/api/v1/books/ebook-csrf"), ("PUT", "/api/v1/books/ebook-csrf/pin"), ("POST", "/api/v1/login-links"),
            ] {
                let answer = try await service.http(
                    method, target, token: .some(nil),
                    headers: ["Cookie: \(cookie)", "Origin: \(otherPort)", "Content-Type: application/json"])
                #expect(answer.status == 403, "\(method) \(target)")
            }
            // Reads with the cookie still work, and the page's own writes
            #expect(try await service.http("GET", "/api/v1/jobs", token: .some(nil), headers: ["Cookie: \(cookie)"]).status == 200)
            // A cookie of the same name set by a page on another port, sent first, does not displace the page's
            let tossed = try await service.http(
                "GET", "/api/v1/jobs", token: .some(nil), headers: ["Cookie: \(ServiceCLITests.cookieName)=tossed; \(cookie)"])
            #expect(tossed.status == 200)
            // The token is not held to Origin or content type
            let bearer = try await service.http(
                "POST", "/api/v1/jobs", body: body, headers: ["Content-Type: text/plain", "Origin: https://evil.example"])
            #expect(bearer.status == 202)
            // Every answer says nosniff and same-origin
            for answer in [
                bearer, try await service.http("GET", "/", token: .some(nil)), try await service.http("GET", "/nope", token: .some(nil)),
            ] {
                #expect(answer.headers["x-content-type-options"] == "nosniff")
                #expect(answer.headers["cross-origin-resource-policy"] == "same-origin")
            }
        }
    }

    @Test(
        "a book's file: HEAD gives the head without a body and records no access; If-Range that is not the file's entity tag gets the whole file (RFC 9110); whole and ranged bodies byte for byte on one connection; a link in place of the file is not followed"
    )
    func fileHeadAndIfRange() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Self.serviceWithAlice(cache: dir.path("cache").path, from: server)
            defer { service.process.send(SIGKILL) }
            let alice = try Fixtures.data("alice.epub")
            let file = "/api/v1/books/ebook-alice/file"
            let readBefore = try await service.http("GET", "/api/v1/books/ebook-alice").json["lastAccessedAt"] as? String
            let head = try await service.curl(["-I", "-H", "Authorization: Bearer \(service.token)", service.base + file])
            let readAfter = try await service.http("GET", "/api/v1/books/ebook-alice").json["lastAccessedAt"] as? String
            #expect(readBefore != nil && readAfter == readBefore, "a HEAD is not a read: it records no access")
            // A GET right after the HEAD is a read, and records its access
            #expect(try await service.http("GET", file).status == 200)
            let readNow = try await service.http("GET", "/api/v1/books/ebook-alice").json["lastAccessedAt"] as? String
            #expect(readNow != nil && readNow != readBefore, "\(readNow ?? "nil") \(readBefore ?? "nil")")
            #expect(head.status == 200)
            #expect(head.headers["content-length"] == String(alice.count))
            #expect(head.headers["accept-ranges"] == "bytes")
            let etag = try #require(head.headers["etag"])
            let ranged = try await service.http("GET", file, headers: ["Range: bytes=0-3", "If-Range: \(etag)"])
            #expect(ranged.status == 206)
            #expect(ranged.body == "PK\u{03}\u{04}")
            for stale in ["\"0000\"", "W/\(etag)", "Wed, 21 Oct 2015 07:28:00 GMT"] {
                let whole = try await service.http("GET", file, headers: ["Range: bytes=0-3", "If-Range: \(stale)"])
                #expect(whole.status == 200, "If-Range: \(stale)")
                #expect(whole.headers["content-length"] == String(alice.count))
                #expect(whole.headers["content-range"] == nil)
            }
            let headRange = try await service.curl([
                "-I", "-H", "Authorization: Bearer \(service.token)", "-H", "Range: bytes=0-3", service.base + file,
            ])
            #expect(headRange.status == 206)
            #expect(headRange.headers["content-length"] == "4")

            // The bytes themselves (sent with sendfile): the whole file, then a range from its middle
            // and one to its end, on one kept-alive connection; the handler's mark is never sent
            let auth = "Authorization: Bearer \(service.token)"
            let (whole, middle, tail) = (dir.path("whole.epub").path, dir.path("middle").path, dir.path("tail").path)
            let three = try await ProcessRunner.run(
                at: URL(fileURLWithPath: "/usr/bin/curl"),
                [
                    "-sS", "-D", "-", "-w", "connects=%{num_connects}\n", "-H", auth, "-o", whole, service.base + file, "--next", "-sS",
                    "-D", "-",
                    "-w", "connects=%{num_connects}\n", "-H", auth, "-r", "100-1099", "-o", middle, service.base + file, "--next", "-sS",
                    "-D", "-", "-w", "connects=%{num_connects}\n", "-H", auth, "-r", "-7", "-o", tail, service.base + file,
                ])
            #expect(three.status == 0, "\(three.stderr)")
            #expect(
                three.stdout.components(separatedBy: "connects=").dropFirst().map { $0.prefix(1) } == ["1", "0", "0"], "\(three.stdout)")
            #expect(!three.stdout.lowercased().contains("x-bookcache"), "\(three.stdout)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: whole)) == alice)
            #expect(try Data(contentsOf: URL(fileURLWithPath: middle)) == alice[100..<1100])
            #expect(try Data(contentsOf: URL(fileURLWithPath: tail)) == alice.suffix(7))

            // Pipelined: five requests in one write, before any answer, the file's ranges among
            // requests the router answers (a book's record, a book not cached); each answer is its
            // own, in order
            let port = try #require(service.base.split(separator: ":").last)
            let asks: [(path: String, range: (Int, Int)?)] = [
                (file, (0, 99)), ("/api/v1/books/ebook-alice", nil), (file, (200, 1199)), ("/api/v1/books/ebook-nope/file", nil),
                (file, (alice.count - 7, alice.count - 1)),
            ]
            let requests = asks.enumerated().map { index, ask in
                "GET \(ask.path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(auth)\r\n"
                    + (ask.range.map { "Range: bytes=\($0.0)-\($0.1)\r\n" } ?? "")
                    + (index == asks.count - 1 ? "Connection: close\r\n" : "") + "\r\n"
            }
            let socket = try Self.connect(service.base, sending: requests.joined())
            defer { close(socket) }
            // Each answer: a head, then exactly Content-Length bytes
            var rest = Self.readUntilClosed(socket).bytes[...]
            for ask in asks {
                let (head, bodyBytes) = try Self.nextAnswer(from: &rest, headOnly: false)
                let body = Data(bodyBytes)
                switch (ask.path, ask.range) {
                case (file, let range?):
                    #expect(head.hasPrefix("http/1.1 206"), "\(head)")
                    #expect(head.contains("content-range: bytes \(range.0)-\(range.1)/\(alice.count)"), "\(head)")
                    #expect(body == alice[range.0...range.1], "each pipelined answer is its own range")
                case ("/api/v1/books/ebook-alice", _):
                    #expect(
                        head.hasPrefix("http/1.1 200") && String(decoding: body, as: UTF8.self).contains("\"id\":\"ebook-alice\""),
                        "\(head)")
                default:
                    #expect(head.hasPrefix("http/1.1 404") && String(decoding: body, as: UTF8.self).contains("notCached"), "\(head)")
                }
            }
            #expect(rest.isEmpty)

            // The file answered in the connection's pipeline (with the token, on the API's and the
            // catalogue's path) and by the router (the page's session, which the pipeline leaves to
            // the router's door) are the same answer, head and body, for every way of asking
            let loginPath = String(service.loginLink[service.loginLink.range(of: "/login")!.lowerBound...])
            let login = try await service.http("GET", loginPath, token: .some(nil))
            let cookie = try #require(login.headers["set-cookie"]?.split(separator: ";").first.map(String.init))
            let asked: [[String]] = [
                [], ["Range: bytes=0-3"], ["Range: bytes=100-1099"], ["Range: bytes=-7"], ["Range: bytes=\(alice.count)-"],
                ["Range: bytes=0-3", "If-Range: \(etag)"], ["Range: bytes=0-3", "If-Range: \"0\""], ["Range: bytes=0-1,5-6"],
                ["Range: bytes=5-2"], ["Range: items=0-3"], ["If-Range: \(etag)"],
            ]
            for headers in asked {
                for method in ["GET", "HEAD"] {
                    let routed = try await service.http(method, file, token: .some(nil), headers: headers + ["Cookie: \(cookie)"])
                    var routedHead = routed.headers
                    routedHead["date"] = nil
                    for path in [file, "/opds/books/ebook-alice/file"] {
                        let fast = try await service.http(method, path, headers: headers)
                        var fastHead = fast.headers
                        fastHead["date"] = nil
                        #expect(fast.status == routed.status, "\(method) \(path) \(headers)")
                        #expect(fastHead == routedHead, "\(method) \(path) \(headers)")
                        #expect(fast.body == routed.body, "\(method) \(path) \(headers)")
                        #expect(fast.headers["date"] != nil)
                    }
                }
            }

            // A link put where the book's file was is not followed, even to the same bytes: the
            // service sends only files that are in the cache
            let books = dir.path("cache/ebooks").path
            let name = try #require(try FileManager.default.contentsOfDirectory(atPath: books).first { $0.hasSuffix(".epub") })
            let elsewhere = dir.path("elsewhere.epub").path
            try FileManager.default.moveItem(atPath: books + "/" + name, toPath: elsewhere)
            try FileManager.default.createSymbolicLink(atPath: books + "/" + name, withDestinationPath: elsewhere)
            let linked = try await service.http("GET", file)
            #expect(linked.status == 404, "\(linked.status) \(linked.headers)")
            #expect(!linked.body.contains(dir.path("").path), "no path shown: \(linked.body)")
        }
    }

    @Test(
        "HTTP/1.0: a request without keep-alive is answered and its connection closed, so a client asking again (curl --http1.0) gets its second answer too"
    )
    func http10() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Self.serviceWithAlice(cache: dir.path("cache").path, from: server)
            defer { service.process.send(SIGKILL) }
            // The router's answers and the file's (answered in the pipeline), two of each, one curl
            let paths = ["/api/v1/stats", "/api/v1/stats", "/api/v1/books/ebook-alice/file", "/api/v1/books/ebook-alice/file"]
            let answers = try await ProcessRunner.run(
                at: URL(fileURLWithPath: "/usr/bin/curl"),
                ["-s", "--http1.0", "-w", "%{http_code}\n", "-H", "Authorization: Bearer \(service.token)"]
                    + paths.flatMap { ["-o", "/dev/null", service.base + $0] })
            #expect(answers.stdout.split(separator: "\n") == ["200", "200", "200", "200"], "\(answers.stdout)")
        }
    }

    @Test(
        "pipelined at random: 150 requests the pipeline answers (ranges, HEAD) and the router answers (a record, stats, a book not cached, a wrong token), sent in pieces of random size; every answer its own, in order"
    )
    func pipelinedAtRandom() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Self.serviceWithAlice(cache: dir.path("cache").path, from: server)
            defer { service.process.send(SIGKILL) }
            let alice = try Fixtures.data("alice.epub")
            let port = try #require(service.base.split(separator: ":").last)
            enum Ask { case range(Int, Int), head, record, stats, notCached, wrongToken }
            var generator = SplitMix64(seed: 0xF11E)
            var asks: [Ask] = []
            for _ in 0..<150 {
                switch Int.random(in: 0..<8, using: &generator) {
                case 0, 1, 2:
                    let from = Int.random(in: 0..<alice.count, using: &generator)
                    asks.append(.range(from, Int.random(in: from..<alice.count, using: &generator)))
                case 3: asks.append(.head)
                case 4: asks.append(.record)
                case 5: asks.append(.stats)
                case 6: asks.append(.notCached)
                default: asks.append(.wrongToken)
                }
            }
            let auth = "Authorization: Bearer \(service.token)"
            var stream = ""
            for (index, ask) in asks.enumerated() {
                let (method, path, fields): (String, String, String) =
                    switch ask {
                    case .range(let from, let to): ("GET", "/api/v1/books/ebook-alice/file", "\(auth)\r\nRange: bytes=\(from)-\(to)")
                    case .head: ("HEAD", "/api/v1/books/ebook-alice/file", auth)
                    case .record: ("GET", "/api/v1/books/ebook-alice", auth)
                    case .stats: ("GET", "/api/v1/stats", auth)
                    case .notCached: ("GET", "/api/v1/books/ebook-nope/file", auth)
                    case .wrongToken: ("GET", "/api/v1/books/ebook-alice/file", "Authorization: Bearer nope")
                    }
                stream += "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(fields)\r\n"
                stream += index == asks.count - 1 ? "Connection: close\r\n\r\n" : "\r\n"
            }
            // Sent in pieces of 1 to 600 bytes, so requests arrive split and several at once
            let socket = try Self.connect(service.base, sending: "")
            defer { close(socket) }
            var bytes = Array(stream.utf8)[...]
            while !bytes.isEmpty {
                let piece = bytes.prefix(Int.random(in: 1...600, using: &generator))
                let sent = piece.withUnsafeBytes { send(socket, $0.baseAddress, $0.count, 0) }
                try #require(sent > 0)
                bytes = bytes.dropFirst(sent)
            }
            var rest = Self.readUntilClosed(socket).bytes[...]
            for (index, ask) in asks.enumerated() {
                var headOnly = false
                if case .head = ask { headOnly = true }
                let (head, bodyBytes) = try Self.nextAnswer(from: &rest, headOnly: headOnly, "answer \(index)")
                let body = Data(bodyBytes)
                let length = try #require(Self.contentLength(head))
                switch ask {
                case .range(let from, let to):
                    #expect(head.hasPrefix("http/1.1 206") && body == alice[from...to], "answer \(index): \(head)")
                case .head:
                    #expect(head.hasPrefix("http/1.1 200") && length == alice.count, "answer \(index): \(head)")
                case .record:
                    #expect(
                        head.hasPrefix("http/1.1 200") && String(decoding: body, as: UTF8.self).contains("\"ebook-alice\""),
                        "answer \(index)")
                case .stats:
                    #expect(
                        head.hasPrefix("http/1.1 200") && String(decoding: body, as: UTF8.self).contains("totalCount"), "answer \(index)")
                case .notCached:
                    #expect(head.hasPrefix("http/1.1 404"), "answer \(index): \(head)")
                case .wrongToken:
                    #expect(head.hasPrefix("http/1.1 401"), "answer \(index): \(head)")
                }
            }
            #expect(rest.isEmpty)
        }
    }

    /// Everything `socket` receives until the server closes it (or resets it), and whether it did
    /// before nothing came for `limit` ms.
    static func readUntilClosed(_ socket: Int32, limit: Int32 = 60_000) -> (bytes: [UInt8], closed: Bool) {
        var answers = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            var poller = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, limit) == 1 else { return (answers, false) }
            let count = recv(socket, &buffer, buffer.count, 0)
            if count == 0 { return (answers, true) }
            if count < 0 { return (answers, errno == ECONNRESET) }
            answers += buffer[..<count]
        }
    }

    /// The next HTTP/1.1 answer at the start of `rest`, taken off it: its head (lowercased) and
    /// its body, `Content-Length` bytes (none for the answer to a `HEAD`).
    static func nextAnswer(from rest: inout ArraySlice<UInt8>, headOnly: Bool, _ name: String = "an answer") throws -> (
        head: String, body: ArraySlice<UInt8>
    ) {
        let end = try #require(
            rest.indices.first { rest[$0...].starts(with: Array("\r\n\r\n".utf8)) }, "\(name)'s head: \(rest.count) bytes left")
        let head = String(decoding: rest[..<end], as: UTF8.self).lowercased()
        let length = try #require(contentLength(head), "\(head)")
        let body = rest[(end + 4)...].prefix(headOnly ? 0 : length)
        rest = rest[(end + 4 + body.count)...]
        return (head, body)
    }

    /// The `Content-Length` of a lowercased head.
    static func contentLength(_ head: String) -> Int? {
        head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }.flatMap {
            Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces))
        }
    }

    /// A service started on `cache` that has cached alice.epub from `server` (as `ebook-alice`) through a job.
    static func serviceWithAlice(cache: String, from server: TestHTTPServer) async throws -> Service {
        let service = try await Service.start(cache: cache)
        do {
            let job = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}"#)
            let id = try #require((job.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json["state"] as? String == "cached")
            return service
        } catch {
            service.process.send(SIGKILL)
            throw error
        }
    }

    /// A TCP connection to the service that has sent `bytes`.
    static func connect(_ base: String, sending bytes: String) throws -> Int32 {
        let port = try #require(UInt16(base.split(separator: ":").last ?? ""))
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Foundation.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        try #require(connected == 0, "connect: \(errno)")
        _ = bytes.withCString { send(fd, $0, strlen($0), 0) }
        return fd
    }

    @Test(
        "stays up: a connection that sends its head slowly or sits idle is closed after --idle-timeout, a trickling body gets 408; the open-file limit is raised to the hard limit; event streams are capped with 503 and Retry-After; each begins with a snapshot"
    )
    func staysUp() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            // Started as systemd starts a service: a soft limit of 1024 open files
            let binary = ProcessRunner.productsDirectory.appendingPathComponent("bookcache").path
            let process = try ProcessRunner.launch(
                at: URL(fileURLWithPath: "/bin/bash"),
                [
                    "-c",
                    "ulimit -Sn 1024 && exec \(binary) serve --listen 127.0.0.1:0 --cache-dir \(cache) --idle-timeout 1 --max-event-streams 2",
                ])
            defer { process.send(SIGKILL) }
            let line = try #require(await process.line(containing: "login?code="))
            let link = try #require(line.split(separator: " ").last.map(String.init))
            let base = String(link[..<link.range(of: "/login")!.lowerBound])
            let token = try String(contentsOfFile: cache + "/service.token", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            let service = ServiceCLITests.Service(process: process, base: base, token: token, loginLink: link, cache: cache)

            let limits = try String(contentsOfFile: "/proc/\(process.pid)/limits", encoding: .utf8)
            let openFiles = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
            let numbers = openFiles.split(separator: " ").compactMap { Int($0) }
            #expect(numbers.count == 2 && numbers[0] == numbers[1], "the soft limit is raised to the hard one: \(openFiles)")

            // A head sent slowly, and a connection that never sends one, are closed
            let slow = try Self.connect(base, sending: "GET /api/v1/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            let silent = try Self.connect(base, sending: "")
            defer { close(slow); close(silent) }
            #expect(Self.readUntilClosed(slow).closed, "a slow head is closed")
            #expect(Self.readUntilClosed(silent).closed, "an idle connection is closed")

            // A body that trickles in (a byte every 300 ms: never idle for the 1 s) is answered 408
            // once --idle-timeout has passed since its head
            let port = try #require(base.split(separator: ":").last)
            let trickle = try Self.connect(
                base,
                sending: "POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nAuthorization: Bearer \(token)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 4096\r\n\r\n")
            defer { close(trickle) }
            var answer = [UInt8](repeating: 0, count: 512)
            var received = 0
            for _ in 0..<200 where received == 0 {
                _ = " ".withCString { send(trickle, $0, 1, Int32(MSG_NOSIGNAL)) }
                var poller = pollfd(fd: trickle, events: Int16(POLLIN), revents: 0)
                if poll(&poller, 1, 300) == 1 { received = max(0, recv(trickle, &answer, answer.count, 0)) }
            }
            let status = String(decoding: answer.prefix(received), as: UTF8.self).split(separator: "\r\n").first ?? ""
            #expect(status.hasPrefix("HTTP/1.1 408"), "a trickling body: \(status)")

            // Event streams: the first two open with a snapshot; the third is refused for now
            let accepted = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}"#)
            let id = try #require((accepted.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            _ = try await service.http("GET", "/api/v1/jobs/\(id)?wait=60")
            var streams: [RunningProcess] = []
            defer { for stream in streams { stream.send(SIGKILL) } }
            for _ in 0..<2 {
                let stream = try ProcessRunner.launch(
                    at: URL(fileURLWithPath: "/usr/bin/curl"),
                    ["-s", "-N", "--max-time", "60", "-H", "Authorization: Bearer \(token)", base + "/api/v1/events"])
                streams.append(stream)
                let snapshot = try #require(await stream.line(containing: "\"jobs\""), "the stream begins with a snapshot")
                #expect(snapshot.contains(id) && snapshot.contains("\"cached\":1"), "\(snapshot)")
            }
            let third = try await service.http("GET", "/api/v1/events")
            #expect(third.status == 503)
            #expect(third.headers["retry-after"] == "5")
            // Other requests are answered all the while
            #expect(try await service.http("GET", "/api/v1/stats").status == 200)
        }
    }

    /// A page that posts a job for `book` to the service at `service` every way a page on another
    /// origin can: forms (text/plain and urlencoded) and fetch (no-cors, and JSON with a preflight),
    /// to /api/v1/jobs and //api/v1/jobs; it sets its title to "done" when all have answered.
    static func attackPage(service: String, book: String) -> String {
        let json = #"{"url": "\#(book)", "x": ""#
        var forms = ""
        var index = 0
        for path in ["/api/v1/jobs", "//api/v1/jobs"] {
            forms += """
                <iframe name="sink\(index)"></iframe><form method="POST" action="\(service)\(path)" enctype="text/plain" target="sink\(index)">\
                <input name='\(json)' value='"}'></form>
                """
            index += 1
            forms += """
                <iframe name="sink\(index)"></iframe><form method="POST" action="\(service)\(path)" target="sink\(index)">\
                <input name="url" value="\(book)"></form>
                """
            index += 1
        }
        return """
            <!DOCTYPE html><html><head><title>attacking</title></head><body>\(forms)
            <script>
            (async () => {
              const body = JSON.stringify({ url: "\(book)" });
              const results = [];
              for (const path of ["/api/v1/jobs", "//api/v1/jobs"]) {
                for (const init of [{ mode: "no-cors", headers: { "Content-Type": "text/plain" } }, { headers: { "Content-Type": "application/json" } }]) {
                  try { const answer = await fetch("\(service)" + path, Object.assign({ method: "POST", credentials: "include", body }, init)); results.push(answer.type + ":" + answer.status); }
                  catch (error) { results.push("refused"); }
                }
              }
              const frames = [...document.querySelectorAll("iframe")];
              await Promise.all([...document.forms].map((form, i) => new Promise((done) => { frames[i].onload = done; form.submit(); })));
              document.body.dataset.results = results.join(" ");
              document.title = "done";
            })();
            </script></body></html>
            """
    }

    @Test(
        "in a real Chromium: a page on another port of 127.0.0.1 (with the cookie) and a page on another host (without) post jobs by form and fetch — none is made",
        .enabled(if: ServiceCLITests.chromiumInstalled, "chromium is not installed; scripts/test.sh installs Debian's chromium"))
    func browserAttacks() async throws {
        let books = TestHTTPServer(directory: Fixtures.books)
        try await books.start()
        defer { Task { try? await books.shutdown() } }
        let attacker = TestHTTPServer()
        try await attacker.start()
        defer { Task { try? await attacker.shutdown() } }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try await Service.start(cache: dir.path("cache").path)
        defer { service.process.send(SIGKILL) }
        attacker.setFile(Data(Self.attackPage(service: service.base, book: "\(books.baseURL)/alice.epub").utf8), at: "attack.html")
        let script = Fixtures.repositoryRoot.appendingPathComponent("Tests/browser/attack_check.py").path
        let sameSite = "http://127.0.0.1:\(attacker.port)/attack.html"
        let otherSite = "http://localhost:\(attacker.port)/attack.html"
        let result = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/python3"), [script, service.loginLink, sameSite, otherSite])
        #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
        #expect(result.stdout.contains("attacks done"), "\(result.stdout)")
        let jobs = try await service.http("GET", "/api/v1/jobs").json["jobs"] as? [[String: Any]] ?? []
        #expect(jobs.isEmpty, "a page on another origin made jobs: \(jobs)")
        #expect(books.requestCount(for: "/alice.epub") == 0)
        #expect(attacker.requestCount(for: "/attack.html") == 2, "both attack pages were opened")
    }
}
