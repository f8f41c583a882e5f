import BookCacheTestSupport
import Foundation
import Testing

/// curl's network habits, run as a user would: the built `bookcache` against loopback servers,
/// one of them a test-owned proxy that logs what it is asked for.
@Suite("bookcache speaks to the network as curl does")
struct NetworkCLITests {
    func bookcache(_ arguments: [String], _ cache: String, environment: [String: String] = [:]) async throws -> ProcessResult {
        var environment = environment
        environment["BOOKCACHE_RESERVE"] = "0"
        return try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: environment)
    }

    let alice: Data
    init() throws { alice = try Fixtures.data("alice.epub") }

    @Test("--header arrives with the request; a manifest line's headers too")
    func headers() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice, "b.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            let result = try await bookcache(
                ["download", "\(server.baseURL)/alice.epub", "-H", "Authorization: Bearer t0ken", "--header", "X-Library: north"], cache)
            #expect(result.status == 0, "\(result.stderr)")
            let request = try #require(server.requests.last { $0.path == "/alice.epub" })
            #expect(request.headers["authorization"] == "Bearer t0ken")
            #expect(request.headers["x-library"] == "north")

            let manifest = dir.path("m.jsonl")
            try Data(#"{"url": "\#(server.baseURL)/b.epub", "id": "b", "headers": {"X-Api-Key": "k1"}}"#.utf8).write(to: manifest)
            let batch = try await bookcache(["download", "--from", manifest.path], cache)
            #expect(batch.status == 0, "\(batch.stderr)")
            #expect(server.requests.last { $0.path == "/b.epub" }?.headers["x-api-key"] == "k1")

            for bad in ["NoColon", "Range: bytes=0-", "Bad Name: x"] {
                let refused = try await bookcache(["download", "\(server.baseURL)/alice.epub", "-H", bad], cache)
                #expect(refused.status == 64, "\(bad): \(refused.stderr)")
                #expect(refused.stderr.contains("--header"))
            }
        }
    }

    @Test("a book's header goes with its cover on the same host, not with a cover on another host")
    func coverHeaders() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice, "pride.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            let same = try await bookcache(
                ["download", "\(server.baseURL)/alice.epub", "-H", "X-Token: t0ken", "--cover-url", "\(server.baseURL)/same-cover.jpg"],
                cache)
            #expect(same.status == 0, "\(same.stderr)")
            let other = try await bookcache(
                [
                    "download", "\(server.baseURL)/pride.epub", "-H", "X-Token: t0ken", "--cover-url",
                    "http://localhost:\(server.port)/other-cover.jpg",
                ],
                cache)
            #expect(other.status == 0, "\(other.stderr)")
            let seen = Dictionary(server.requests.map { ($0.path, $0.headers["x-token"]) }, uniquingKeysWith: { first, _ in first })
            #expect(seen["/same-cover.jpg"] == .some("t0ken"))
            #expect(seen["/other-cover.jpg"] == .some(nil), "the cover on localhost got no header")
        }
    }

    @Test("sync -H: the header goes with the catalogue and its own books, not with a book it links on another host")
    func syncHeadersStayWithTheSource() async throws {
        try await withServerAndDirectory(files: ["a.epub": alice, "b.epub": alice]) { server, dir in
            let manifest = "\(server.baseURL)/a.epub\nhttp://localhost:\(server.port)/b.epub\n"
            server.setFile(Data(manifest.utf8), at: "list.jsonl")
            let result = try await bookcache(
                ["sync", "\(server.baseURL)/list.jsonl", "--keep", "2", "-H", "X-Token: t0ken"], dir.path("cache").path)
            #expect(result.status == 0, "\(result.stdout) \(result.stderr)")
            let seen = Dictionary(server.requests.map { ($0.path, $0.headers["x-token"]) }, uniquingKeysWith: { first, _ in first })
            #expect(seen["/list.jsonl"] == .some("t0ken"))
            #expect(seen["/a.epub"] == .some("t0ken"))
            #expect(seen["/b.epub"] == .some(nil), "the book on localhost got no header")
        }
    }

    @Test("a bearer header stays with its host: a redirect from 127.0.0.1 to localhost does not carry it")
    func bearerStaysWithItsHost() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            server.enqueueFault(.redirect(to: "http://localhost:\(server.port)/alice.epub"), for: "/moved.epub")
            let result = try await bookcache(
                ["download", "\(server.baseURL)/moved.epub", "--id", "moved", "-H", "Authorization: Bearer t0ken"], cache)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(server.requests.first { $0.path == "/moved.epub" }?.headers["authorization"] == "Bearer t0ken")
            let landed = try #require(server.requests.last { $0.path == "/alice.epub" })
            #expect(landed.headers["host"]?.hasPrefix("localhost") == true)
            #expect(landed.headers["authorization"] == nil, "\(landed.headers)")
        }
    }

    @Test("--user stays with its host: when localhost asks after a redirect from 127.0.0.1, the login is not answered")
    func loginStaysWithItsHost() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            // Only the redirect's target asks for a login, so only a login sent on would answer it.
            server.requireBasicAuth(user: "reader", password: "s3cret", below: "/alice.epub")
            server.enqueueFault(.redirect(to: "http://localhost:\(server.port)/alice.epub"), for: "/moved.epub")
            let result = try await bookcache(
                ["download", "\(server.baseURL)/moved.epub", "--id", "moved", "--user", "reader:s3cret"], cache)
            #expect(result.status == 69)
            #expect(result.stderr.contains("401"), "\(result.stderr)")
            let asked = server.requests.filter { $0.path == "/alice.epub" }
            #expect(!asked.isEmpty)
            #expect(asked.allSatisfy { $0.headers["authorization"] == nil }, "\(asked)")
        }
    }

    @Test("a login from --netrc-file is answered when the server asks; without it the server's 401 stands")
    func netrc() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            server.requireBasicAuth(user: "reader", password: "s3cret")
            let refused = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "a"], cache)
            #expect(refused.status == 69)
            #expect(refused.stderr.contains("401"), "\(refused.stderr)")

            let netrc = dir.path("netrc")
            try Data("machine 127.0.0.1 login reader password s3cret\n".utf8).write(to: netrc)
            let answered = try await bookcache(
                ["download", "\(server.baseURL)/alice.epub", "--id", "a", "--netrc-file", netrc.path], cache)
            #expect(answered.status == 0, "\(answered.stderr)")
            // The password went only in answer to the server's 401, not with the first request.
            let asked = server.requests.filter { $0.path == "/alice.epub" }
            #expect(asked.last?.headers["authorization"] == "Basic " + Data("reader:s3cret".utf8).base64EncodedString())
            #expect(asked.dropLast().allSatisfy { $0.headers["authorization"] == nil })

            // Kept with the cache as a setting, it is used without the option.
            #expect(try await bookcache(["config", "set", "netrc", netrc.path], cache).status == 0)
            #expect(try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "b"], cache).status == 0)
        }
    }

    @Test("http_proxy sends the request through the proxy; no_proxy and --noproxy bypass it; --proxy and the setting come first")
    func proxies() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { origin, dir in
            let proxy = TestHTTPServer()
            proxy.setFile(alice, at: "alice.epub")
            try await proxy.start()
            do {
                let cache = dir.path("cache").path
                let proxyURL = "http://127.0.0.1:\(proxy.port)"
                // A host that does not resolve: only a proxy can fetch it.
                let remote = "http://books.example/alice.epub"

                let viaEnvironment = try await bookcache(["download", remote, "--id", "env"], cache, environment: ["http_proxy": proxyURL])
                #expect(viaEnvironment.status == 0, "\(viaEnvironment.stderr)")
                #expect(proxy.requests.map(\.proxiedURL) == [remote])

                // no_proxy names the origin: it is reached directly.
                let bypassed = try await bookcache(
                    ["download", "\(origin.baseURL)/alice.epub", "--id", "direct"], cache,
                    environment: ["http_proxy": proxyURL, "no_proxy": "127.0.0.1"])
                #expect(bypassed.status == 0, "\(bypassed.stderr)")
                #expect(proxy.requests.count == 1, "the proxy saw nothing more")
                #expect(origin.requests.contains { $0.path == "/alice.epub" })

                let noproxy = try await bookcache(
                    ["download", "\(origin.baseURL)/alice.epub", "--id", "direct2", "--noproxy", "*"], cache,
                    environment: ["http_proxy": proxyURL])
                #expect(noproxy.status == 0, "\(noproxy.stderr)")
                #expect(proxy.requests.count == 1)

                let viaOption = try await bookcache(["download", remote, "--id", "opt", "--proxy", proxyURL], cache)
                #expect(viaOption.status == 0, "\(viaOption.stderr)")
                #expect(proxy.requests.count == 2)

                #expect(try await bookcache(["config", "set", "proxy", proxyURL], cache).status == 0)
                let viaSetting = try await bookcache(
                    ["download", remote, "--id", "set"], cache, environment: ["http_proxy": "http://127.0.0.1:9"])
                #expect(viaSetting.status == 0, "the setting comes before the environment: \(viaSetting.stderr)")
                #expect(proxy.requests.count == 3)

                // An unreachable proxy is a connection failure that names where to look.
                let dead = try await bookcache(
                    ["download", remote, "--id", "dead", "--proxy", "http://127.0.0.1:9", "--retries", "0"], cache)
                #expect(dead.status == 69)
                #expect(dead.stderr.contains("network unavailable") || dead.stderr.contains("could not connect"), "\(dead.stderr)")
            } catch {
                try await proxy.shutdown()
                throw error
            }
            try await proxy.shutdown()
        }
    }

    @Test("--limit-rate and --connect-timeout are taken (rates are measured in the benchmark); bad values are refused")
    func rateAndTimeout() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            let result = try await bookcache(
                ["download", "\(server.baseURL)/alice.epub", "--limit-rate", "10MB", "--connect-timeout", "2.5"], cache)
            #expect(result.status == 0, "\(result.stderr)")
            for bad in [
                ["--limit-rate", "fast"], ["--limit-rate", "10B"], ["--connect-timeout", "0"], ["--cacert", "/nonexistent.pem"],
            ] {
                let refused = try await bookcache(["download", "\(server.baseURL)/alice.epub"] + bad, cache)
                #expect(refused.status == 64, "\(bad): \(refused.stderr)")
            }
        }
    }
}

@Suite("bookcache connections: reuse and IPv6")
struct ConnectionCLITests {
    @Test("a batch reuses connections to its host instead of opening one per book")
    func reuse() async throws {
        let alice = try Fixtures.data("alice.epub")
        let files = Dictionary(uniqueKeysWithValues: (0..<6).map { ("b\($0).epub", alice) })
        try await withServerAndDirectory(files: files) { server, dir in
            let manifest = dir.path("m.jsonl")
            try Data((0..<6).map { "\(server.baseURL)/b\($0).epub\n" }.joined().utf8).write(to: manifest)
            let result = try await ProcessRunner.run(
                "bookcache", ["download", "--from", manifest.path, "--concurrency", "1", "--cache-dir", dir.path("cache").path],
                environment: ["BOOKCACHE_RESERVE": "0"])
            #expect(result.status == 0, "\(result.stderr)")
            #expect(server.requests.count == 6)
            #expect(server.connectionCount < 6, "\(server.connectionCount) connections for 6 books one after another")
        }
    }

    @Test("an IPv6 literal URL is downloaded (skipped when this machine has no ::1)")
    func ipv6() async throws {
        let server = TestHTTPServer()
        server.setFile(try Fixtures.data("alice.epub"), at: "alice.epub")
        do {
            try await server.start(host: "::1")
        } catch {
            print("skipped: no IPv6 loopback here (\(error))")
            return
        }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let result = try await ProcessRunner.run(
            "bookcache", ["download", "http://[::1]:\(server.port)/alice.epub", "--cache-dir", dir.path("cache").path],
            environment: ["BOOKCACHE_RESERVE": "0"])
        try await server.shutdown()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(server.requests.map(\.path) == ["/alice.epub"])
    }
}

@Suite("bookcache over TLS: a real nginx with HTTP/2")
struct TLSCLITests {
    @Test(
        "an untrusted certificate fails at once and says to use --cacert; with --cacert (or the setting) the book comes over HTTP/2",
        .enabled(if: NginxServer.isInstalled, "nginx or openssl is not installed; scripts/test.sh installs them"))
    func cacertAndHTTP2() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let books = dir.path("books")
        try FileManager.default.createDirectory(at: books, withIntermediateDirectories: true)
        try Fixtures.data("alice.epub").write(to: books.appendingPathComponent("alice.epub"))
        let cache = dir.path("cache").path
        func bookcache(_ arguments: [String]) async throws -> ProcessResult {
            try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"])
        }
        try await NginxServer.with(serving: books, work: dir.path("nginx")) { nginx in
            let untrusted = try await bookcache(["download", "\(nginx.baseURL)/alice.epub", "--id", "a", "--json"])
            #expect(untrusted.status == 69)
            #expect(untrusted.stdout.contains("--cacert"), "\(untrusted.stdout)")
            #expect(untrusted.stdout.contains(#""attempts":1"#), "not retried: \(untrusted.stdout)")

            let trusted = try await bookcache([
                "download", "\(nginx.baseURL)/alice.epub", "--id", "a", "--cacert", nginx.certificateFile.path,
            ])
            #expect(trusted.status == 0, "\(trusted.stderr)")
            let log = try nginx.accessLog()
            #expect(log.last == #""GET /alice.epub HTTP/2.0" 200"#, "\(log)")

            #expect(try await bookcache(["config", "set", "cacert", nginx.certificateFile.path]).status == 0)
            let bySetting = try await bookcache(["download", "\(nginx.baseURL)/alice.epub", "--id", "b"])
            #expect(bySetting.status == 0, "\(bySetting.stderr)")
        }
    }
}
