import BookCacheTestSupport
import DownloadQueue
import Foundation
import Logging
import Synchronization
import Testing

@testable import BookCache

/// Servers that lie: every answer ends in a clear error or a correct book, never a broken one.
@Suite("Hostile servers")
struct HostileServerTests {
    let alice: Data

    init() throws {
        alice = try Fixtures.data("alice.epub")
    }

    @Test("a redirect to another scheme is refused")
    func redirectToOtherScheme() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.redirect(to: "ftp://127.0.0.1/alice.epub"), for: "/alice.epub")
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-a"))
            }
            #expect(error?.kind == .downloadFailed)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("a redirect to a file: URL is refused")
    func redirectToFile() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.redirect(to: "file:///etc/passwd"), for: "/alice.epub")
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-a"))
            }
            #expect(error?.kind == .downloadFailed)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("more than 10 redirects are refused; 10 are followed")
    func redirectHops() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let manager = makeManager(dir)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "redirect/11/alice.epub", id: "ebook-far"))
            }
            #expect(error?.message.contains("redirect") == true)
            let ok = try await manager.download(try request(server, "redirect/10/alice.epub", id: "ebook-near"))
            #expect(ok.metadata.fileSize == Int64(alice.count))
        }
    }

    @Test("a Content-Length of 10^15 is refused before anything is written")
    func hugeContentLength() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.contentLength("1000000000000000"), for: "/alice.epub")
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-a"))
            }
            #expect(error?.kind == .downloadFailed || error?.kind == .insufficientStorage)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("a Content-Length shorter than the body: only that many bytes are taken, and the truncated book is refused")
    func shortContentLength() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.contentLength("700"), for: "/alice.epub")
            let error = await #expect(throws: BookCacheError.self) {
                try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-a"))
            }
            #expect(error?.kind == .fileCorrupted)
            #expect(filesInCache(dir).isEmpty)
        }
    }

    @Test("junk after the announced body is not taken into the book")
    func trailingJunk() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.trailingJunk(extra: 5000), for: "/alice.epub")
            let result = try await makeManager(dir).download(try request(server, "alice.epub", id: "ebook-a"))
            #expect(try Data(contentsOf: result.fileURL) == alice)
        }
    }

    @Test("a server that stops sending fails with the idle-read timeout (whole seconds in libcurl), not a hang")
    func stalledBodyOverCurl() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            server.enqueueFault(.stall, for: "/alice.epub")
            let transport = CurlTransport(configuration: .init(idleReadTimeout: .seconds(1)))
            defer { transport.shutdown() }
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: .none),
                transport: transport)
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "alice.epub", id: "ebook-a"))
            }
            #expect(error?.message.contains("timed out") == true, "\(error?.message ?? "")")
        }
    }

    @Test("credentials in a URL never reach the log")
    func credentialsRedacted() async throws {
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let log = LogCapture()
            var logger = Logger(label: "test", factory: { _ in log.handler })
            logger.logLevel = .trace
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: .none),
                logger: logger)
            let url = "http://reader:hunter2@127.0.0.1:\(server.port)"
            _ = try await manager.download(try BookDownloadRequest(url: url + "/alice.epub", id: BookID(parsing: "ebook-a")))
            await #expect(throws: BookCacheError.self) {
                try await manager.download(try BookDownloadRequest(url: url + "/missing.epub", id: BookID(parsing: "ebook-m")))
            }
            #expect(!log.text.isEmpty)
            #expect(!log.text.contains("hunter2"))
        }
    }
}

/// Collects log lines in memory.
final class LogCapture: Sendable {
    private let lines = Mutex<[String]>([])
    var text: String { lines.withLock { $0.joined(separator: "\n") } }

    var handler: any LogHandler { Handler(capture: self) }

    fileprivate func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    private struct Handler: LogHandler {
        let capture: LogCapture
        var logLevel: Logger.Level = .trace
        var metadata: Logger.Metadata = [:]
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            capture.append("\(event.level) \(event.message) \(event.metadata ?? [:]) \(metadata)")
        }
    }
}
