import BookCacheTestSupport
import Foundation
import Testing

/// `bookcache serve` as a client sees it: a real service process on an ephemeral loopback port,
/// talked to with curl (a real HTTP client, which can also send a foreign `Host`).
@Suite("bookcache serve and queue", .serialized, .timeLimit(.minutes(5)))
struct ServiceCLITests {
    /// The service's session cookie.
    static let cookieName = "bookcache_session"

    /// A running `bookcache serve`.
    struct Service {
        let process: RunningProcess
        let base: String
        let token: String
        let loginLink: String
        let cache: String

        static func start(cache: String, extra: [String] = []) async throws -> Service {
            let process = try ProcessRunner.launch("bookcache", ["serve", "--listen", "127.0.0.1:0", "--cache-dir", cache] + extra)
            let line = try #require(await process.line(containing: "login?code="), "serve printed no login link")
            let link = try #require(line.split(separator: " ").last.map(String.init))
            let base = String(link[..<link.range(of: "/login")!.lowerBound])
            let token = try String(contentsOfFile: cache + "/service.token", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            return Service(process: process, base: base, token: token, loginLink: link, cache: cache)
        }

        /// Sends a request with the token (unless `token` is given) and returns status, headers and body.
        func http(
            _ method: String, _ path: String, body: String? = nil, token: String?? = .none, headers: [String] = []
        ) async throws -> HTTPAnswer {
            // curl's -X HEAD would wait for a body; -I sends HEAD and reads the head alone
            var arguments = method == "HEAD" ? ["-I"] : ["-X", method]
            let bearer = token ?? self.token
            if let bearer { arguments += ["-H", "Authorization: Bearer \(bearer)"] }
            if body != nil, !headers.contains(where: { $0.lowercased().hasPrefix("content-type:") }) {
                arguments += ["-H", "Content-Type: application/json"]
            }
            for header in headers { arguments += ["-H", header] }
            if let body { arguments += ["--data-binary", body] }
            arguments.append(base + path)
            return try await curl(arguments)
        }

        /// Runs curl with `arguments` (the path as written: `--path-as-is`) and returns status,
        /// headers and body.
        func curl(_ arguments: [String]) async throws -> HTTPAnswer {
            let arguments = ["-s", "-S", "-D", "-", "--max-time", "70", "--path-as-is"] + arguments
            let result = try await ProcessRunner.run(at: URL(fileURLWithPath: "/usr/bin/curl"), arguments)
            try #require(result.status == 0, "curl \(arguments.joined(separator: " ")) failed: \(result.stderr)")
            return HTTPAnswer(raw: result.stdout)
        }

        func stop() async -> ProcessResult {
            process.send(SIGTERM)
            return await process.wait()
        }
    }

    struct HTTPAnswer {
        var status: Int
        var headers: [String: String]
        var body: String

        init(raw: String) {
            let parts = raw.components(separatedBy: "\r\n\r\n")
            let head = parts.first ?? ""
            body = parts.dropFirst().joined(separator: "\r\n\r\n")
            let lines = head.components(separatedBy: "\r\n")
            status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
            var headers: [String: String] = [:]
            for line in lines.dropFirst() {
                guard let colon = line.firstIndex(of: ":") else { continue }
                headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            self.headers = headers
        }

        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] ?? [:] }
    }

    func jobs(_ answer: HTTPAnswer) -> [[String: Any]] { answer.json["jobs"] as? [[String: Any]] ?? [] }

    @Test(
        "the API: jobs are accepted as a batch, end cached or failed with a kind, and their books are listed"
    )
    func apiContract() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Service.start(cache: dir.path("cache").path)
            // When a batch with a good book, a missing one and a PDF with a priority is posted
            let batch = """
                [{"url": "\(server.baseURL)/alice.epub", "id": "alice", "title": "Alice"},
                 {"url": "\(server.baseURL)/no-such-book.epub", "id": "missing"},
                 {"url": "\(server.baseURL)/fixture-monthly-2024-05.pdf", "type": "magazine", "id": "may", "priority": "high"}]
                """
            let accepted = try await service.http("POST", "/api/v1/jobs", body: batch)
            #expect(accepted.status == 202, "\(accepted.body)")
            let ids = jobs(accepted).compactMap { $0["id"] as? String }
            #expect(ids.count == 3)
            #expect(jobs(accepted).map { $0["bookId"] as? String } == ["ebook-alice", "ebook-missing", "magazine-may"])
            #expect(jobs(accepted).last?["priority"] as? String == "high")

            // Then each ends: cached, failed with the server's 404, cached
            var final: [String: [String: Any]] = [:]
            for id in ids {
                let answer = try await service.http("GET", "/api/v1/jobs/\(id)?wait=60")
                #expect(answer.status == 200)
                final[id] = answer.json
            }
            #expect(final[ids[0]]?["state"] as? String == "cached")
            #expect(final[ids[2]]?["state"] as? String == "cached")
            let failed = try #require(final[ids[1]])
            #expect(failed["state"] as? String == "failed")
            let error = try #require(failed["error"] as? [String: Any])
            #expect(error["kind"] as? String == "downloadFailed")
            #expect((error["message"] as? String)?.contains("404") == true, "\(error)")

            // Bad batches, the shelf's answers and a book's file by range are the routes' own, tested
            // in process (BookCacheHTTPTests/RouteTests); here, the books the batch cached are listed
            let shelf = try await service.http("GET", "/api/v1/books")
            #expect(
                ((shelf.json["books"] as? [[String: Any]]) ?? []).compactMap { $0["id"] as? String } == ["ebook-alice", "magazine-may"])

            // A job for a cached book ends cached without fetching it again
            let fetches = server.requestCount(for: "/alice.epub")
            let again = try await service.http("POST", "/api/v1/jobs", body: #"{"url": "\#(server.baseURL)/alice.epub", "id": "alice"}"#)
            let againID = try #require(jobs(again).first?["id"] as? String)
            #expect(try await service.http("GET", "/api/v1/jobs/\(againID)?wait=60").json["state"] as? String == "cached")
            #expect(server.requestCount(for: "/alice.epub") == fetches)

            // Delete through the API
            #expect(try await service.http("DELETE", "/api/v1/books/magazine-may").status == 200)
            #expect(try await service.http("GET", "/api/v1/books/magazine-may").status == 404)

            // And SIGTERM stops it cleanly, taking service.json with it
            let stopped = await service.stop()
            #expect(stopped.status == 0, "\(stopped.stderr)")
            #expect(!FileManager.default.fileExists(atPath: service.cache + "/service.json"))
        }
    }

    @Test("security: token required, foreign Host refused with 421, no CORS headers, one-time login links, token file 0600")
    func security() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try await Service.start(cache: dir.path("cache").path)
        defer { service.process.send(SIGKILL) }
        #expect(try await service.http("GET", "/api/v1/jobs", token: .some(nil)).status == 401)
        #expect(try await service.http("GET", "/api/v1/jobs", token: .some(String(repeating: "0", count: 64))).status == 401)
        #expect(try await service.http("GET", "/api/v1/jobs").status == 200)
        let port = try #require(service.base.split(separator: ":").last)
        for host in ["evil.example", "evil.example:\(port)", "127.0.0.1.nip.io:\(port)"] {
            let answer = try await service.http("GET", "/api/v1/jobs", headers: ["Host: \(host)"])
            #expect(answer.status == 421, "Host \(host)")
        }
        #expect(try await service.http("GET", "/", headers: ["Host: rebind.example:\(port)"]).status == 421)
        #expect(try await service.http("GET", "/api/v1/jobs", headers: ["Host: localhost:\(port)"]).status == 200)
        let preflight = try await service.http(
            "OPTIONS", "/api/v1/jobs", token: .some(nil), headers: ["Origin: https://evil.example", "Access-Control-Request-Method: POST"])
        let simple = try await service.http("GET", "/api/v1/jobs", headers: ["Origin: https://evil.example"])
        for answer in [preflight, simple] {
            #expect(!answer.headers.keys.contains { $0.hasPrefix("access-control-") }, "\(answer.headers)")
        }
        // The login link opens one session, once
        let path = String(service.loginLink[service.loginLink.range(of: "/login")!.lowerBound...])
        let login = try await service.http("GET", path, token: .some(nil))
        #expect(login.status == 303)
        let cookie = try #require(login.headers["set-cookie"])
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"))
        let session = try #require(cookie.split(separator: ";").first.map(String.init))
        #expect(try await service.http("GET", "/api/v1/jobs", token: .some(nil), headers: ["Cookie: \(session)"]).status == 200)
        #expect(try await service.http("GET", path, token: .some(nil)).status == 401, "a login link works once")
        #expect(
            try await service.http("GET", "/api/v1/jobs", token: .some(nil), headers: ["Cookie: bookcache_session=forged"]).status == 401)
        let mode = try FileManager.default.attributesOfItem(atPath: service.cache + "/service.token")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        // A body over the cap is refused
        let huge = "[" + Array(repeating: #"{"url": "http://127.0.0.1:1/a.epub"}"#, count: 300_000).joined(separator: ",") + "]"
        let file = dir.path("huge.json")
        try Data(huge.utf8).write(to: file)
        let refused = try await service.http("POST", "/api/v1/jobs", body: "@" + file.path)
        #expect(refused.status == 413 || refused.status == 400, "\(refused.status)")
    }

    @Test("a job whose server is down waits for the network, then completes when it is up")
    func waitsForNetwork() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let port = try await TestHTTPServer.freePort()
        let service = try await Service.start(cache: dir.path("cache").path)
        defer { service.process.send(SIGKILL) }
        let accepted = try await service.http(
            "POST", "/api/v1/jobs", body: #"{"url": "http://127.0.0.1:\#(port)/alice.epub", "id": "later"}"#)
        let id = try #require(jobs(accepted).first?["id"] as? String)
        // The first attempt cannot connect: the job waits, it does not fail
        let events = try ProcessRunner.launch(
            at: URL(fileURLWithPath: "/usr/bin/curl"),
            ["-s", "-N", "--max-time", "60", "-H", "Authorization: Bearer \(service.token)", service.base + "/api/v1/events"])
        defer { events.send(SIGKILL) }
        let answer = try await service.http("GET", "/api/v1/jobs/\(id)")
        if answer.json["state"] as? String != "waiting-for-network" {
            #expect(await events.line(containing: "waiting-for-network") != nil)
        }
        let waiting = try await service.http("GET", "/api/v1/jobs/\(id)").json
        #expect(waiting["state"] as? String == "waiting-for-network", "\(waiting)")
        #expect((waiting["error"] as? [String: Any])?["kind"] as? String == "networkUnavailable")
        #expect(waiting["nextAttemptAt"] != nil)
        // When the server comes up, the job completes
        let server = TestHTTPServer(directory: Fixtures.books)
        try await server.start(port: port)
        defer { Task { try? await server.shutdown() } }
        let done = try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json
        #expect(done["state"] as? String == "cached", "\(done)")
    }

    @Test(
        "kill -9 of the service with jobs in flight: after restarts every job ends cached, none lost or duplicated, no cached book fetched again"
    )
    func killLoop() async throws {
        let server = TestHTTPServer()
        let names = (0..<12).map { "book\($0).epub" }
        var books: [String: Data] = [:]
        for (index, name) in names.enumerated() {
            // Every fourth book is small: it ends first, and the kill that follows finds the
            // three larger ones started with it mid-body, past the point where a partial file
            // is kept for resume.
            let size = index.isMultiple(of: 4) ? 3 << 19 : 5 << 20
            let book = Data(StoredZIP.epub(chapter: StoredZIP.noise(count: size, seed: UInt64(index + 1))))
            books[name] = book
            server.setFile(book, at: name)
        }
        server.slowBodies(chunk: 16 << 10, pause: .milliseconds(5))
        try await server.start()
        defer { Task { try? await server.shutdown() } }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache").path

        var service = try await Service.start(cache: cache)
        let batch = "[" + names.map { #"{"url": "\#(server.baseURL)/\#($0)"}"# }.joined(separator: ",") + "]"
        let accepted = try await service.http("POST", "/api/v1/jobs", body: batch)
        #expect(accepted.status == 202)
        let ids = jobs(accepted).compactMap { $0["id"] as? String }
        #expect(ids.count == names.count)
        // Kill it three times, each the moment another job has ended (the others are then
        // mid-body), and start it again; note which books were cached at each kill and how
        // often they had been fetched
        var fetchedWhenCached: [String: Int] = [:]
        for round in 0..<3 {
            let ended = try await service.http("GET", "/api/v1/jobs/\(ids[round * 4])?wait=60").json
            #expect(ended["state"] as? String == "cached")
            service.process.send(SIGKILL)
            _ = await service.process.wait()
            for path in try await cachedPaths(cache) where fetchedWhenCached[path] == nil {
                fetchedWhenCached[path] = server.requestCount(for: "/" + path.split(separator: "/").last!)
            }
            service = try await Service.start(cache: cache)
        }
        defer { service.process.send(SIGKILL) }
        for id in ids {
            let job = try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json
            #expect(job["state"] as? String == "cached", "\(job)")
        }
        #expect(jobs(try await service.http("GET", "/api/v1/jobs")).count == names.count, "no job lost or duplicated")
        // No book was fetched again once it was cached
        for (path, count) in fetchedWhenCached {
            #expect(server.requestCount(for: "/" + path.split(separator: "/").last!) == count, "\(path) fetched again after it was cached")
        }
        // Interrupted downloads resumed their partial files
        let ranged = server.requests.filter { $0.headers["range"] != nil }.count
        #expect(ranged > 0, "no download was resumed")
        #expect(fetchedWhenCached.count >= 3)
        print("service kill loop: \(fetchedWhenCached.count) books cached before the last kill, \(ranged) resumed requests")
        let list = try await ProcessRunner.run("bookcache", ["list", "--json", "--cache-dir", cache])
        let records = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]])
        #expect(records.count == names.count)
        for record in records {
            let path = record["localPath"] as? String ?? ""
            let data = try #require(FileManager.default.contents(atPath: cache + "/" + path))
            #expect(books.values.contains(data), "\(path) is whole")
        }
    }

    /// The local paths of the books in the index (read without the service).
    func cachedPaths(_ cache: String) async throws -> [String] {
        let list = try await ProcessRunner.run("bookcache", ["list", "--json", "--cache-dir", cache])
        guard list.status == 0 else { return [] }
        let records = (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]]) ?? []
        return records.compactMap { $0["localPath"] as? String }
    }

    @Test("sync --every registers a source with the service: it runs at once, and survives a restart with its next run")
    func scheduledSync() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            let manifest = "\(server.baseURL)/alice.epub\n\(server.baseURL)/pride.epub\n"
            server.setFile(Data(manifest.utf8), at: "shelf.jsonl")
            var service = try await Service.start(cache: cache)
            let events = try ProcessRunner.launch(
                at: URL(fileURLWithPath: "/usr/bin/curl"),
                ["-s", "-N", "--max-time", "60", "-H", "Authorization: Bearer \(service.token)", service.base + "/api/v1/events"])
            defer { events.send(SIGKILL) }
            #expect(await events.line(containing: "connected") != nil)
            let registered = try await ProcessRunner.run(
                "bookcache", ["sync", "\(server.baseURL)/shelf.jsonl", "--keep", "2", "--every", "6h", "--cache-dir", cache])
            #expect(registered.status == 0, "\(registered.stderr)")
            // The first run happens at once: its end is an event with the source's last result
            #expect(await events.line(containing: "lastResult") != nil)
            let sources = try await service.http("GET", "/api/v1/sources").json["sources"] as? [[String: Any]] ?? []
            let source = try #require(sources.first)
            #expect(source["lastRunSucceeded"] as? Bool == true, "\(source)")
            let books = try await service.http("GET", "/api/v1/books").json["books"] as? [[String: Any]] ?? []
            #expect(books.count == 2)
            let next = try #require(source["nextRunAt"] as? String)
            // After a restart the source is still there, with the same next run, and does not run early
            service.process.send(SIGKILL)
            _ = await service.process.wait()
            let requests = server.requestCount(for: "/shelf.jsonl")
            service = try await Service.start(cache: cache)
            defer { service.process.send(SIGKILL) }
            let again = try await service.http("GET", "/api/v1/sources").json["sources"] as? [[String: Any]] ?? []
            #expect(again.first?["nextRunAt"] as? String == next)
            #expect(server.requestCount(for: "/shelf.jsonl") == requests)
            let id = try #require(source["id"] as? String)
            #expect(try await service.http("DELETE", "/api/v1/sources/\(id)").status == 200)
            #expect((try await service.http("GET", "/api/v1/sources").json["sources"] as? [Any])?.isEmpty == true)
            // Bad registrations are refused with the reason
            let bad = try await service.http(
                "POST", "/api/v1/sources", body: #"{"source": "\#(server.baseURL)/shelf.jsonl", "keep": 2, "every": "10s"}"#)
            #expect(bad.status == 400, "\(bad.body)")
        }
    }

    static let chromiumInstalled = FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium")

    @Test(
        "the web page in a real headless Chromium: the login link opens it, a URL added through it shows progress and ends cached on the shelf — in English, German and Chinese",
        .enabled(if: chromiumInstalled, "chromium is not installed; scripts/test.sh installs Debian's chromium"),
        arguments: ["en", "de", "zh-CN"])
    func webPage(language: String) async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let service = try await Service.start(cache: dir.path("cache").path)
            defer { service.process.send(SIGKILL) }
            let artifacts = Fixtures.repositoryRoot.appendingPathComponent(".build/test-artifacts", isDirectory: true)
            try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
            let screenshot = artifacts.appendingPathComponent(language == "en" ? "service-page.png" : "service-page-\(language).png")
            try? FileManager.default.removeItem(at: screenshot)
            let script = Fixtures.repositoryRoot.appendingPathComponent("Tests/browser/page_check.py").path
            var arguments = [script, service.loginLink, "\(server.baseURL)/alice.epub", screenshot.path]
            if language != "en" { arguments.append(language) }
            let result = try await ProcessRunner.run(at: URL(fileURLWithPath: "/usr/bin/python3"), arguments)
            #expect(result.status == 0, "\(result.stdout)\n\(result.stderr)")
            #expect(result.stdout.contains("page ok"), "\(result.stdout)")
            #expect(FileManager.default.fileExists(atPath: screenshot.path), "the screenshot is kept in .build/test-artifacts")
            let shelf = try await service.http("GET", "/api/v1/books").json["books"] as? [[String: Any]] ?? []
            #expect(shelf.count == 1)
        }
    }

    @Test("the page follows Accept-Language, says so in Content-Language and Vary; the API does not change with it")
    func pageLanguage() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let service = try await Service.start(cache: dir.path("cache").path)
        defer { service.process.send(SIGKILL) }
        let cases: [(header: String, lang: String, text: String)] = [
            ("de-DE,de;q=0.9,en;q=0.8", "de", "Bücherregal"),
            ("zh-CN,zh;q=0.9", "zh-Hans", "书架"),
            ("zh-TW,fr;q=0.9", "en", "Shelf"),
            ("fr-FR, de;q=0.5", "de", "Bücherregal"),
            ("en;q=0.2, zh;q=0.8", "zh-Hans", "书架"),
        ]
        for item in cases {
            let page = try await service.http("GET", "/", headers: ["Accept-Language: \(item.header)"])
            #expect(page.status == 200)
            #expect(page.body.contains("<html lang=\"\(item.lang)\">"), "\(item.header)")
            #expect(page.body.contains("<h2>\(item.text)</h2>"), "\(item.header)")
            #expect(page.headers["content-language"] == item.lang && page.headers["vary"] == "Accept-Language", "\(page.headers)")
        }
        let none = try await service.http("GET", "/")
        #expect(none.body.contains("<html lang=\"en\">") && none.body.contains("<h2>Shelf</h2>"))
        let english = try await service.http("GET", "/api/v1/jobs")
        let german = try await service.http("GET", "/api/v1/jobs", headers: ["Accept-Language: de"])
        #expect(english.body == german.body)
    }

    @Test("queue add, list and cancel talk to the running service; with none running they exit 69")
    func queueCommands() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            let none = try await ProcessRunner.run("bookcache", ["queue", "list", "--cache-dir", cache])
            #expect(none.status == 69)
            #expect(none.stderr.contains("no bookcache serve is running"), "\(none.stderr)")

            let service = try await Service.start(cache: cache)
            defer { service.process.send(SIGKILL) }
            let manifest = dir.path("m.jsonl")
            try Data("\(server.baseURL)/alice.epub\n{\"url\": \"\(server.baseURL)/pride.epub\", \"id\": \"pride\"}\n".utf8).write(
                to: manifest)
            let added = try await ProcessRunner.run("bookcache", ["queue", "add", "--from", manifest.path, "--cache-dir", cache, "--json"])
            #expect(added.status == 0, "\(added.stderr)")
            let lines = added.stdout.split(separator: "\n").compactMap {
                try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
            }
            #expect(lines.count == 2)
            for id in lines.compactMap({ $0["id"] as? String }) {
                #expect(try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json["state"] as? String == "cached")
            }
            let listed = try await ProcessRunner.run("bookcache", ["queue", "list", "--cache-dir", cache])
            #expect(listed.stdout.contains("2 cached"), "\(listed.stdout)")
            let bad = try await ProcessRunner.run("bookcache", ["queue", "add", "ftp://nope/x.epub", "--cache-dir", cache])
            #expect(bad.status == 65, "\(bad.stderr)")
            #expect(bad.stderr.contains("ftp"))
            // In German, the count of queued jobs
            let german = try await ProcessRunner.run(
                "bookcache", ["queue", "add", "\(server.baseURL)/alice.epub", "--cache-dir", cache], environment: ["LANG": "de_DE.UTF-8"])
            #expect(german.stdout.hasSuffix("1 Auftrag eingereiht\n"), "\(german.stdout) \(german.stderr)")

            // A job waiting for an unreachable server can be cancelled
            let port = try await TestHTTPServer.freePort()
            let waiting = try await ProcessRunner.run(
                "bookcache", ["queue", "add", "http://127.0.0.1:\(port)/x.epub", "--cache-dir", cache, "--json"])
            let id = try #require((try? JSONSerialization.jsonObject(with: Data(waiting.stdout.utf8)) as? [String: Any])?["id"] as? String)
            let cancelled = try await ProcessRunner.run("bookcache", ["queue", "cancel", id, "--cache-dir", cache])
            #expect(cancelled.status == 0, "\(cancelled.stderr)")
            let state = try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json["state"] as? String
            #expect(state == "cancelled")
        }
    }
}
