import BookCacheTestSupport
import Foundation
import Testing

/// A header value with a line break is refused at every door it can come in by — `download -H`,
/// `sync -H`, a manifest line's `headers`, `queue add --from`, the API's jobs — and the book's
/// server sees no extra request and no extra header.
@Suite("no header smuggled in at any entry point", .serialized, .timeLimit(.minutes(5)))
struct HeaderInjectionCLITests {
    static let smuggled = ["v\r\nX-Injected: yes", "v\nX-Injected: yes", "v\rX-Injected: yes", "v\u{0}x"]

    func bookcache(_ arguments: [String], _ cache: String) async throws -> ProcessResult {
        try await ProcessRunner.run("bookcache", arguments + ["--cache-dir", cache], environment: ["BOOKCACHE_RESERVE": "0"])
    }

    /// Nothing the server saw carries the smuggled header or names a path it was not asked for.
    func expectNothingSmuggled(_ server: TestHTTPServer, allowed: Set<String> = []) {
        for request in server.requests {
            #expect(request.headers["x-injected"] == nil, "a smuggled header reached the server: \(request)")
            #expect(allowed.contains(request.path), "an unexpected request reached the server: \(request.path)")
        }
    }

    @Test("download -H and sync -H: exit 64 naming --header, nothing sent")
    func commandLine() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice, "list.jsonl": Data("alice.epub\n".utf8)]) { server, dir in
            let cache = dir.path("cache").path
            // (A NUL cannot be passed in an argument: the kernel ends the string there.)
            for value in Self.smuggled where !value.contains("\u{0}") {
                let download = try await bookcache(["download", "\(server.baseURL)/alice.epub", "-H", "X-A: \(value)"], cache)
                #expect(download.status == 64, "\(value.debugDescription): \(download.stderr)")
                #expect(download.stderr.contains("--header"), "\(download.stderr)")
                let sync = try await bookcache(["sync", "\(server.baseURL)/list.jsonl", "--keep", "1", "-H", "X-A: \(value)"], cache)
                #expect(sync.status == 64, "\(value.debugDescription): \(sync.stderr)")
            }
            expectNothingSmuggled(server)
            #expect(server.requests.isEmpty)
        }
    }

    @Test("a manifest line's headers (object or list): the line is refused, naming its number; the other lines go on")
    func manifestLines() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice, "b.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            var lines = ["{\"url\": \"\(server.baseURL)/alice.epub\", \"id\": \"good\"}"]
            for (index, value) in Self.smuggled.enumerated() {
                let escaped = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
                lines.append("{\"url\": \"\(server.baseURL)/b.epub\", \"id\": \"o\(index)\", \"headers\": {\"X-A\": \(escaped)}}")
                lines.append(
                    "{\"url\": \"\(server.baseURL)/b.epub\", \"id\": \"l\(index)\", \"headers\": [\(String(decoding: try JSONEncoder().encode("X-A: " + value), as: UTF8.self))]}"
                )
            }
            let manifest = dir.path("m.jsonl")
            try Data(lines.joined(separator: "\n").utf8).write(to: manifest)
            let result = try await bookcache(["download", "--from", manifest.path, "--json"], cache)
            #expect(result.status != 0)
            let refused = result.stdout.split(separator: "\n").filter { $0.contains("headers") }
            #expect(refused.count == Self.smuggled.count * 2, "\(result.stdout)\n\(result.stderr)")
            #expect(server.requestCount(for: "/alice.epub") >= 1, "the good line was downloaded")
            #expect(server.requestCount(for: "/b.epub") == 0)
            expectNothingSmuggled(server, allowed: ["/alice.epub"])
        }
    }

    @Test("the API and queue add: 400 naming the job and its headers, nothing enqueued, nothing sent")
    func service() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            let service = try await ServiceCLITests.Service.start(cache: cache)
            defer { service.process.send(SIGKILL) }
            for value in Self.smuggled {
                let escaped = String(decoding: try JSONEncoder().encode(value), as: UTF8.self)
                for headers in ["{\"X-A\": \(escaped)}", "[\(String(decoding: try JSONEncoder().encode("X-A: " + value), as: UTF8.self))]"]
                {
                    let answer = try await service.http(
                        "POST", "/api/v1/jobs", body: "[{\"url\": \"\(server.baseURL)/alice.epub\", \"headers\": \(headers)}]")
                    #expect(answer.status == 400, "\(value.debugDescription): \(answer.body)")
                    #expect(answer.body.contains("headers"), "the field is named: \(answer.body)")
                }
                let manifest = dir.path("q.jsonl")
                try Data("{\"url\": \"\(server.baseURL)/alice.epub\", \"headers\": {\"X-A\": \(escaped)}}\n".utf8).write(to: manifest)
                let added = try await bookcache(["queue", "add", "--from", manifest.path], cache)
                #expect(added.status == 65, "\(value.debugDescription): \(added.stdout) \(added.stderr)")
            }
            let listed = try await service.http("GET", "/api/v1/jobs").json["jobs"] as? [Any]
            #expect(listed?.isEmpty == true, "nothing was enqueued")
            expectNothingSmuggled(server)
            #expect(server.requests.isEmpty)
        }
    }
}
