import BookCacheTestSupport
import Foundation
import Testing

/// What a refused download says: a login asked for and none given, a login refused, a server
/// that says "too many requests" and when to come back.
@Suite("Refusals that say what to do")
struct RefusalMessagesCLITests {
    func download(_ url: String, _ extra: [String] = [], in dir: TemporaryDirectory) async throws -> ProcessResult {
        try await ProcessRunner.run(
            "bookcache", ["download", url, "--retries", "0", "--cache-dir", dir.path("cache").path] + extra, environment: ["LANG": "C"])
    }

    @Test("401 with no login given: the server asks for one, and how to give it; with a wrong one: refused, check it")
    func login() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            server.requireBasicAuth(user: "reader", password: "s3cret", below: "/")
            let none = try await download("\(server.baseURL)/alice.epub", in: dir)
            #expect(none.status == 69)
            #expect(none.stderr.contains("the server asks for a login"), "\(none.stderr)")
            #expect(none.stderr.contains("--user USER:PASSWORD, --netrc, or the login in the URL"), "\(none.stderr)")
            let wrong = try await download("\(server.baseURL)/alice.epub", ["--user", "reader:wrong"], in: dir)
            #expect(wrong.status == 69)
            #expect(wrong.stderr.contains("the server refused the login; check the user name and password"), "\(wrong.stderr)")
        }
    }

    @Test("429 with Retry-After: too many requests, and when to try again")
    func tooManyRequests() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            server.enqueueFault(.status(429, retryAfter: "60"), for: "/alice.epub")
            let result = try await download("\(server.baseURL)/alice.epub", in: dir)
            #expect(result.status == 75)
            #expect(result.stderr.contains("the server says too many requests; try again in 60 s"), "\(result.stderr)")
        }
    }
}
