import BookCacheTestSupport
import Foundation
import Testing

/// The port in `service.json` is not trusted: a service killed with -9 leaves the file, and another
/// local user may take the port. The CLI asks for proof that the listener holds the token first.
@Suite("The token never goes to a port squatter", .timeLimit(.minutes(2)))
struct PortSquatterCLITests {
    @Test("a process listening where a dead service did gets no token from queue, serve --login-link or sync --every")
    func portSquatter() async throws {
        // Given a cache whose service died, and another process on its port (answering anything)
        let squatter = TestHTTPServer()
        try await squatter.start()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let cache = dir.path("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        try Data(#"{"url": "\#(squatter.baseURL)", "pid": 999999}"#.utf8).write(to: cache.appendingPathComponent("service.json"))
        let token = String(repeating: "ab", count: 32)
        let tokenFile = cache.appendingPathComponent("service.token")
        try Data(token.utf8).write(to: tokenFile)
        #expect(chmod(tokenFile.path, 0o600) == 0)

        // When the commands that talk to the service run
        let commands = [
            ["queue", "list"], ["queue", "add", "http://127.0.0.1:1/a.epub"], ["serve", "--login-link"],
            ["sync", "http://127.0.0.1:1/feed.xml", "--first", "5", "--every", "1h"],
        ]
        for command in commands {
            let result = try await ProcessRunner.run("bookcache", command + ["--cache-dir", cache.path])
            // Then each refuses, saying why, with the status of an unavailable service
            #expect(result.status == 69, "\(command): \(result.status) \(result.stderr)")
            #expect(result.stderr.contains("cannot prove it holds the token"), "\(command): \(result.stderr)")
        }
        // And the squatter saw no token, in any header
        #expect(!squatter.requests.isEmpty, "the commands did knock")
        for request in squatter.requests {
            #expect(request.headers["authorization"] == nil, "\(request.path)")
            #expect(!request.headers.values.contains { $0.contains(token) }, "\(request.path)")
        }
        try await squatter.shutdown()
    }
}
