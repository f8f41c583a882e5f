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

    @Test("default deny: without credentials every route and every other spelling of it is refused (401, or 400 for a spelling); nothing but the page and /login is open")
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
                let withToken = try await service.curl(["-X", "GET", "-H", "Authorization: Bearer \(service.token)", "--request-target", target, service.base + "/"])
                #expect(withToken.status == (target.hasSuffix(":\(port)/api/v1/stats") ? 200 : 400), "\(target) with the token: \(withToken.status)")
            }
            // (NIO's codec keeps the Host header as the authority and drops the target's own: the
            // Host check still decides, and without a token it is still a 401.)
            let foreign = try await service.curl(["-X", "GET", "--request-target", "http://evil.example/api/v1/stats", service.base + "/"])
            #expect(foreign.status == 401, "an absolute target naming another host: \(foreign.status)")
            let foreignHost = try await service.curl([
                "-X", "GET", "-H", "Authorization: Bearer \(service.token)", "-H", "Host: evil.example", "--request-target", "http://127.0.0.1:\(port)/api/v1/stats",
                service.base + "/",
            ])
            #expect(foreignHost.status == 421)
            // A wrong scheme or a token with no scheme is not a token, and does not fall back to the cookie
            for authorization in ["Basic \(service.token)", service.token, "Bearer", "Bearer \(service.token)x"] {
                let answer = try await service.http("GET", "/api/v1/stats", token: .some(nil), headers: ["Authorization: \(authorization)"])
                #expect(answer.status == 401, "\(authorization.prefix(12))")
            }
            #expect(try await service.http("GET", "/api/v1/stats", token: .some(nil), headers: ["Authorization: bearer \(service.token)"]).status == 200)
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
                "application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", nil,
            ]
            let body = #"{"url": "\#(server.baseURL)/alice.epub", "id": "csrf"}"#
            var accepted: [String] = []
            for origin in origins {
                for type in types {
                    var headers = ["Cookie: \(cookie)", "Content-Type: \(type ?? "")"]
                    if let origin { headers.append("Origin: \(origin)") }
                    let answer = try await service.http("POST", "/api/v1/jobs", body: body, token: .some(nil), headers: headers)
                    let name = "\(origin ?? "no Origin") × \(type ?? "no type")"
                    if answer.status == 202 { accepted.append(name) } else { #expect(answer.status == 403, "\(name): \(answer.status) \(answer.body)") }
                }
            }
            #expect(
                Set(accepted) == ["\(own) × application/json", "\(own) × application/json; charset=utf-8", "\(own.uppercased()) × application/json",
                    "\(own.uppercased()) × application/json; charset=utf-8"], "\(accepted)")
            // Without Origin, the browser's own Sec-Fetch-Site decides
            let sameOrigin = try await service.http(
                "POST", "/api/v1/jobs", body: body, token: .some(nil), headers: ["Cookie: \(cookie)", "Sec-Fetch-Site: same-origin"])
            #expect(sameOrigin.status == 202)
            for site in ["same-site", "cross-site"] {
                let write = try await service.http("POST", "/api/v1/jobs", body: body, token: .some(nil), headers: ["Cookie: \(cookie)", "Sec-Fetch-Site: \(site)", "Origin: \(own)"])
                #expect(write.status == 403, "\(site)")
                let read = try await service.http("GET", "/api/v1/books", token: .some(nil), headers: ["Cookie: \(cookie)", "Sec-Fetch-Site: \(site)"])
                #expect(read.status == 403, "\(site)")
            }
            // Other writes: DELETE and PUT with the cookie from another origin are refused
            for (method, target) in [("DELETE", "/api/v1/books/ebook-csrf"), ("PUT", "/api/v1/books/ebook-csrf/pin"), ("POST", "/api/v1/login-links")] {
                let answer = try await service.http(method, target, token: .some(nil), headers: ["Cookie: \(cookie)", "Origin: \(otherPort)", "Content-Type: application/json"])
                #expect(answer.status == 403, "\(method) \(target)")
            }
            // Reads with the cookie still work, and the page's own writes
            #expect(try await service.http("GET", "/api/v1/jobs", token: .some(nil), headers: ["Cookie: \(cookie)"]).status == 200)
            // The token is not held to Origin or content type
            let bearer = try await service.http("POST", "/api/v1/jobs", body: body, headers: ["Content-Type: text/plain", "Origin: https://evil.example"])
            #expect(bearer.status == 202)
            // Every answer says nosniff and same-origin
            for answer in [bearer, try await service.http("GET", "/", token: .some(nil)), try await service.http("GET", "/nope", token: .some(nil))] {
                #expect(answer.headers["x-content-type-options"] == "nosniff")
                #expect(answer.headers["cross-origin-resource-policy"] == "same-origin")
            }
        }
    }

    @Test("a book's file: HEAD gives the head without a body; If-Range that is not the file's entity tag gets the whole file (RFC 9110)")
    func fileHeadAndIfRange() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Service.start(cache: dir.path("cache").path)
            defer { service.process.send(SIGKILL) }
            let job = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}"#)
            let id = try #require((job.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json["state"] as? String == "cached")
            let alice = try Fixtures.data("alice.epub")
            let file = "/api/v1/books/ebook-alice/file"
            let head = try await service.curl(["-I", "-H", "Authorization: Bearer \(service.token)", service.base + file])
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
            let headRange = try await service.curl(["-I", "-H", "Authorization: Bearer \(service.token)", "-H", "Range: bytes=0-3", service.base + file])
            #expect(headRange.status == 206)
            #expect(headRange.headers["content-length"] == "4")
        }
    }
}
