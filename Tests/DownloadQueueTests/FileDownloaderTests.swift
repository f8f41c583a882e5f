import BookCacheTestSupport
import Foundation
import Logging
import Synchronization
import Testing

@testable import DownloadQueue

@Suite("FileDownloader over real HTTP")
struct FileDownloaderTests {
    func downloader() -> FileDownloader {
        FileDownloader(transport: CurlTransport.shared, logger: Logger(label: "test"))
    }
    let payload = Data((0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 7) })

    var payloadSHA256: String {
        SHA256Hasher.hex(of: payload)
    }

    @Test("streams the body to disk with its SHA-256, ETag and Last-Modified")
    func plainDownload() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            let destination = dir.path("book.part").path
            let file = try await downloader().download(from: URL(string: "\(server.baseURL)/book.bin")!, to: destination)
            #expect(file.byteCount == Int64(payload.count))
            #expect(file.sha256 == payloadSHA256)
            #expect(file.etag != nil)
            #expect(file.lastModified == "Mon, 01 Jan 2024 00:00:00 GMT")
            #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == payload)
        }
    }

    /// Keeps what it is given: the offset and bytes of every batch.
    final class Recorder: BodyObserver {
        let seen = Mutex<[(offset: Int64, bytes: [UInt8])]>([])
        func observe(_ buffers: [[UInt8]], at offset: Int64) {
            seen.withLock { $0.append((offset, buffers.flatMap { $0 })) }
        }
    }

    @Test("an observer is given every byte written, at its offset, in a first attempt and in the one that resumes it")
    func observer() async throws {
        let body = Data((0..<3_000_000).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ $0 >> 11) })
        try await withServerAndDirectory(files: ["big.bin": body]) { server, dir in
            let url = URL(string: "\(server.baseURL)/big.bin")!
            let destination = dir.path("big.part").path
            let first = Recorder()
            server.enqueueFault(.dropAfter(bytes: 2_500_000), for: "/big.bin")
            let opened = try await downloader().open(from: url, to: destination, resume: true)
            await #expect(throws: DownloadError.self) { try await downloader().receive(opened, observer: first) }
            let second = Recorder()
            let reopened = try await downloader().open(from: url, to: destination, resume: true)
            let file = try await downloader().receive(reopened, observer: second)
            #expect(file.sha256 == SHA256Hasher.hex(of: body))
            #expect(file.resumedFrom > 0)
            let bytes = [UInt8](body)
            for (attempt, start) in [(first, Int64(0)), (second, file.resumedFrom)] {
                let seen = attempt.seen.withLock { $0 }
                #expect(seen.first?.offset == start)
                var next = start
                for (offset, piece) in seen {
                    #expect(offset == next)
                    #expect(piece[...] == bytes[Int(offset)..<Int(offset) + piece.count])
                    next = offset + Int64(piece.count)
                }
                if attempt === second { #expect(next == Int64(body.count)) }
            }
        }
    }

    @Test("a body past 8 MiB is hashed alongside the writing: the record saved when it fails and the final SHA-256 are the file's")
    func hashedAlongside() async throws {
        var body = Data(capacity: 12_000_000)
        for block in 0..<12_000 { body.append(contentsOf: [UInt8](repeating: UInt8(truncatingIfNeeded: block &* 31), count: 1000)) }
        try await withServerAndDirectory(files: ["big.bin": body]) { server, dir in
            let url = URL(string: "\(server.baseURL)/big.bin")!
            let destination = dir.path("big.part").path
            server.enqueueFault(.dropAfter(bytes: 10_500_000), for: "/big.bin")
            let failure = await #expect(throws: DownloadError.self) {
                try await downloader().download(from: url, to: destination, resume: true)
            }
            // The record names every byte that arrived, hashed partly alongside.
            #expect((failure?.keptBytes ?? 0) > FileDownloader.alongsideFrom)
            let file = try await downloader().download(from: url, to: destination, resume: true)
            #expect(file.resumedFrom == failure?.keptBytes)
            #expect(file.sha256 == SHA256Hasher.hex(of: body))
            #expect(try Data(contentsOf: URL(fileURLWithPath: destination)) == body)
        }
    }

    @Test("the digest waits for the batches still hashing alongside")
    func digestWaitsForHashing() async {
        // 24 batches of 1 MiB given at once: those past 8 MiB queue for the thread alongside.
        let batches = (0..<24).map { index in [[UInt8](repeating: UInt8(index), count: 1 << 20)] }
        let (soFar, final) = await BlockingWork.run { () -> (String, String) in
            let hasher = HashBox()
            for batch in batches[..<20] { hasher.add(batch) }
            let soFar = hasher.digestSoFar()
            for batch in batches[20...] { hasher.add(batch) }
            return (soFar, hasher.finalize())
        }
        let expected = SHA256Hasher()
        for (index, batch) in batches.enumerated() {
            batch[0].withUnsafeBytes { expected.update($0) }
            if index == 19 { #expect(soFar == expected.digestSoFar()) }
        }
        #expect(final == expected.finalize())
    }

    @Test("a chunked body is read whole")
    func chunked() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            let file = try await downloader().download(
                from: URL(string: "\(server.baseURL)/chunked/book.bin")!, to: dir.path("c.part").path)
            #expect(file.sha256 == payloadSHA256)
        }
    }

    @Test("redirects are followed and the final URL reported")
    func redirects() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            let file = try await downloader().download(
                from: URL(string: "\(server.baseURL)/redirect/3/book.bin")!, to: dir.path("r.part").path)
            #expect(file.sha256 == payloadSHA256)
            #expect(file.finalURL.hasSuffix("/book.bin"))
            #expect(server.requests.count == 4)
        }
    }

    @Test("a redirect loop fails as too many redirects")
    func redirectLoop() async throws {
        try await withServerAndDirectory { server, dir in
            let error = await #expect(throws: DownloadError.self) {
                try await downloader().download(from: URL(string: "\(server.baseURL)/redirect-loop")!, to: dir.path("l.part").path)
            }
            #expect(error?.kind == .tooManyRedirects)
        }
    }

    @Test("an error status fails with the code and leaves no file", arguments: [404, 403, 500, 503])
    func errorStatus(code: Int) async throws {
        try await withServerAndDirectory { server, dir in
            let destination = dir.path("s.part")
            let error = await #expect(throws: DownloadError.self) {
                try await downloader().download(from: URL(string: "\(server.baseURL)/status/\(code)")!, to: destination.path)
            }
            #expect(error?.kind == .httpStatus)
            #expect(error?.statusCode == code)
            #expect(error?.isRetryable == (code >= 500))
            #expect(!FileManager.default.fileExists(atPath: destination.path))
        }
    }

    @Test("Retry-After is parsed from the response")
    func retryAfter() async throws {
        try await withServerAndDirectory { server, dir in
            let error = await #expect(throws: DownloadError.self) {
                try await downloader().download(from: URL(string: "\(server.baseURL)/status/503?retry-after=7")!, to: dir.path("x").path)
            }
            #expect(error?.retryAfter == .seconds(7))
        }
    }

    @Test("a connection dropped mid-body is a retryable cut-short error and leaves no file")
    func droppedConnection() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            let destination = dir.path("d.part")
            let error = await #expect(throws: DownloadError.self) {
                try await downloader().download(from: URL(string: "\(server.baseURL)/drop/80000/book.bin")!, to: destination.path)
            }
            #expect(error?.kind == .bodyCutShort)
            #expect(error?.isRetryable == true)
            #expect(!FileManager.default.fileExists(atPath: destination.path))
        }
    }

    @Test("a connection reset mid-body is a retryable cut-short download, said in plain words (the issue's message)")
    func connectionReset() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            server.enqueueFault(.resetAfter(bytes: 80_000), for: "/book.bin")
            let error = try await #require(throws: DownloadError.self) {
                try await downloader().download(from: URL(string: "\(server.baseURL)/book.bin")!, to: dir.path("reset.part").path)
            }
            #expect(error.kind == .bodyCutShort)
            #expect(error.isRetryable)
            #expect(error.description == "the download of \(server.baseURL)/book.bin was cut short: the connection was reset")
        }
    }

    @Test("a refused connection is a connection failure")
    func connectionRefused() async throws {
        let base = try await TestHTTPServer.unreachableBaseURL()
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let error = await #expect(throws: DownloadError.self) {
            try await downloader().download(from: URL(string: base + "/x")!, to: dir.path("x").path)
        }
        #expect(error?.kind == .connectionFailed)
    }

    @Test("open returns the head before any byte is written, and a cancelled open leaves nothing")
    func openThenCancel() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            let destination = dir.path("h.part")
            let opened = try await downloader().open(from: URL(string: "\(server.baseURL)/book.bin")!, to: destination.path)
            #expect(opened.head.statusCode == 200)
            #expect(opened.head.expectedLength == Int64(payload.count))
            #expect(opened.head.remainingLength == Int64(payload.count))
            opened.cancel()
            #expect(!FileManager.default.fileExists(atPath: destination.path))
            // The transfer was stopped, not left paused: the same file downloads again at once.
            let file = try await downloader().download(from: URL(string: "\(server.baseURL)/book.bin")!, to: destination.path)
            #expect(file.byteCount == Int64(payload.count))
        }
    }

    @Test("a body larger than the limit is refused")
    func maxBytes() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload]) { server, dir in
            let error = await #expect(throws: DownloadError.self) {
                try await downloader().download(
                    from: URL(string: "\(server.baseURL)/chunked/book.bin")!, to: dir.path("m").path, maxBytes: 1000)
            }
            #expect(error?.kind == .bodyTooLong)
        }
    }

    @Test("credentials never appear in errors")
    func redaction() async throws {
        try await withServerAndDirectory { server, dir in
            let url = URL(string: "http://alice:s3cret@127.0.0.1:\(server.port)/status/404")!
            let error = await #expect(throws: DownloadError.self) {
                try await downloader().download(from: url, to: dir.path("x").path)
            }
            #expect(error.map { !"\($0)".contains("s3cret") } == true)
        }
    }

    @Test("a login is answered when the server asks, and not carried to another host by a redirect")
    func login() async throws {
        try await withServerAndDirectory(files: ["private/book.bin": payload, "book.bin": payload]) { server, dir in
            server.requireBasicAuth(user: "reader", password: "s3cret", below: "/private/")
            let url = URL(string: "\(server.baseURL)/private/book.bin")!
            let credentials = HTTPCredentials(user: "reader", password: "s3cret", for: url)
            let file = try await downloader().download(from: url, to: dir.path("a.part").path, credentials: credentials)
            #expect(file.sha256 == payloadSHA256)
            let asked = server.requests.filter { $0.path == "/private/book.bin" }
            #expect(asked.first?.headers["authorization"] == nil, "not before the server asks")
            #expect(asked.last?.headers["authorization"] == "Basic cmVhZGVyOnMzY3JldA==")

            server.setFile(payload, at: "private/moved.bin")
            server.enqueueFault(.redirect(to: "http://localhost:\(server.port)/book.bin"), for: "/private/moved.bin")
            let moved = URL(string: "\(server.baseURL)/private/moved.bin")!
            _ = try await downloader().download(from: moved, to: dir.path("b.part").path, credentials: credentials)
            let elsewhere = server.requests.filter { $0.path == "/book.bin" }
            #expect(elsewhere.count == 1)
            #expect(elsewhere.first?.headers["authorization"] == nil)

            let refused = await #expect(throws: DownloadError.self) {
                try await downloader().download(
                    from: url, to: dir.path("c.part").path, credentials: HTTPCredentials(user: "reader", password: "wrong", for: url))
            }
            #expect(refused?.statusCode == 401)
        }
    }

    @Test("the caller's own headers go only to the first URL's origin: not on after a redirect to another host, as the README says")
    func headersStayWithTheirOrigin() async throws {
        try await withServerAndDirectory(files: ["book.bin": payload, "moved.bin": payload]) { server, dir in
            let key = try HTTPHeader(name: "X-Api-Key", value: "k3y")
            // A redirect to another host (localhost is not 127.0.0.1): the key stays behind
            server.enqueueFault(.redirect(to: "http://localhost:\(server.port)/book.bin"), for: "/moved.bin")
            let moved = URL(string: "\(server.baseURL)/moved.bin")!
            let file = try await downloader().download(from: moved, to: dir.path("a.part").path, headers: [key])
            #expect(file.sha256 == payloadSHA256)
            #expect(server.requests.filter { $0.path == "/moved.bin" }.last?.headers["x-api-key"] == "k3y")
            let elsewhere = server.requests.filter { $0.path == "/book.bin" }
            #expect(elsewhere.count == 1)
            #expect(elsewhere.last?.headers["x-api-key"] == nil)
            // A redirect within the origin keeps it
            server.enqueueFault(.redirect(to: "/book.bin"), for: "/moved.bin")
            _ = try await downloader().download(from: moved, to: dir.path("b.part").path, headers: [key])
            #expect(server.requests.filter { $0.path == "/book.bin" }.last?.headers["x-api-key"] == "k3y")
            // And too many hops still end as too many redirects
            let loop = await #expect(throws: DownloadError.self) {
                try await downloader().download(
                    from: URL(string: "\(server.baseURL)/redirect-loop")!, to: dir.path("c.part").path, headers: [key])
            }
            #expect(loop?.kind == .tooManyRedirects)
        }
    }

    @Test("Retry-After accepts seconds and HTTP dates")
    func retryAfterParsing() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        #expect(RetryAfter.parse("120", now: now) == .seconds(120))
        #expect(RetryAfter.parse("-1", now: now) == nil)
        #expect(RetryAfter.parse("soon", now: now) == nil)
        let date = Date(timeIntervalSince1970: 1_700_000_030)
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        #expect(RetryAfter.parse(formatter.string(from: date), now: now) == .seconds(30))
    }
}

@Suite("SHA-256 from OpenSSL")
struct SHA256HasherTests {
    @Test("FIPS 180-2's vectors, whole and fed in uneven pieces")
    func vectors() {
        #expect(SHA256Hasher.hex(of: Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Hasher.hex(of: Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let million = Data(repeating: UInt8(ascii: "a"), count: 1_000_000)
        let hasher = SHA256Hasher()
        var offset = 0
        var step = 1
        while offset < million.count {
            let end = min(offset + step, million.count)
            hasher.update(million[offset..<end])
            offset = end
            step = step * 3 + 1
        }
        #expect(hasher.finalize() == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }
}
