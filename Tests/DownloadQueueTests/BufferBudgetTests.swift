import BookCacheTestSupport
import Foundation
import Testing

@testable import DownloadQueue

/// The bound transfers share on the bytes they keep unread (``BufferBudget``).
@Suite("Transfers share a bound on the bytes nobody reads yet", .timeLimit(.minutes(1)))
struct SharedBufferBoundTests {
    @Test("beside others keeping bytes, a transfer pauses at the shared bound; alone, at its own; keeping none, it goes on")
    func rule() {
        var beside = CurlTransferState(pauseAbove: 100, sharedLimit: 10)
        let first = beside.bodyArrived(count: 4, allKeep: 50)
        #expect(first == (false, .buffer), "keeping nothing, it goes on whatever the others keep")
        beside.buffer([0, 0, 0, 0])
        let second = beside.bodyArrived(count: 4, allKeep: 54)
        #expect(second == (false, .pause), "4 kept and 50 by the others: past the shared 10")
        #expect(beside.read() == .give([0, 0, 0, 0]))
        #expect(beside.read() == .wait(unpause: true), "its reader unpauses it, as for its own bound")

        var under = CurlTransferState(pauseAbove: 100, sharedLimit: 10)
        _ = under.bodyArrived(count: 3, allKeep: 0)
        under.buffer([0, 0, 0])
        let together = under.bodyArrived(count: 3, allKeep: 9)
        #expect(together == (false, .buffer), "9 kept together, under the shared 10")

        var alone = CurlTransferState(pauseAbove: 100, sharedLimit: 10)
        _ = alone.bodyArrived(count: 60, allKeep: 0)
        alone.buffer([UInt8](repeating: 0, count: 60))
        let past = alone.bodyArrived(count: 40, allKeep: 60)
        #expect(past == (false, .buffer), "alone, the shared bound does not apply")
        alone.buffer([UInt8](repeating: 0, count: 40))
        let own = alone.bodyArrived(count: 1, allKeep: 100)
        #expect(own == (false, .pause), "its own bound does")

        var reading = CurlTransferState(pauseAbove: 100, sharedLimit: 10)
        _ = reading.bodyArrived(count: 5, allKeep: 0)
        reading.buffer([0, 0, 0, 0, 0])
        #expect(reading.read() == .give([0, 0, 0, 0, 0]))
        #expect(reading.read() == .wait(unpause: false))
        let handed = reading.bodyArrived(count: 5, allKeep: 50)
        #expect(handed == (false, .toReader), "a waiting reader is handed the bytes: nothing is kept")
    }

    @Test("3 MiB bodies arriving while one is read keep no more than one transfer's bound; none counted after")
    func bounded() async throws {
        let body = payload(3 << 20)
        let small = payload(1000)
        try await withServerAndDirectory(files: ["a": body, "b": body, "c": body, "d": body, "e": small]) { server, _ in
            // A transport of its own, whose count no other test's transfers touch.
            let transport = CurlTransport()
            defer { transport.shutdown() }
            func url(_ name: String) throws -> URL { try #require(URL(string: "\(server.baseURL)/\(name)")) }
            var responses: [TransportResponse] = []
            for name in ["a", "b", "c"] {
                responses.append(try await transport.send(TransportRequest(url: try url(name))))
            }
            // One after the other: while one is read, the others' bytes arrive with nobody reading.
            for response in responses {
                var received = Data()
                for try await buffer in response.body { received.append(contentsOf: buffer) }
                #expect(received == body)
            }
            responses.removeAll()
            let budget = try #require(transport.budget)
            // Alone, one transfer may keep its own bound before the others start; each other keeps
            // at most one of libcurl's callbacks (16 KiB) past it. Each alone kept its whole body before.
            #expect(budget.peak <= CurlTransfer.pauseAbove + 3 * (16 << 10))
            #expect(budget.peak > 0, "the bodies were kept for a while: the bound was tried")
            #expect(budget.keptBytes == 0)

            do {
                let unread = try await transport.send(TransportRequest(url: try url("d")))
                unread.body.cancel()
            }
            // The driver takes commands in order: once the next transfer is read, the cancelled one
            // is gone, and its bytes with it.
            let next = try await transport.send(TransportRequest(url: try url("e")))
            var received = Data()
            for try await buffer in next.body { received.append(contentsOf: buffer) }
            #expect(received == small)
            #expect(budget.keptBytes == 0, "a body nobody read to its end leaves nothing counted")
        }
    }

    @Test(
        "over HTTP/2 from nginx, streams of one connection paused for the shared bound: each body still arrives whole",
        .enabled(if: NginxServer.isInstalled, "nginx or openssl is not installed; scripts/test.sh installs them"))
    func multiplexed() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let books = dir.path("books")
        try FileManager.default.createDirectory(at: books, withIntermediateDirectories: true)
        let bodies = (0..<6).map { payload(3 << 20, seed: UInt8($0)) }
        for (index, body) in bodies.enumerated() { try body.write(to: books.appendingPathComponent("h\(index)")) }
        try await NginxServer.with(serving: books, work: dir.path("nginx")) { nginx in
            let transport = CurlTransport(configuration: CurlTransport.Configuration(caFile: nginx.certificateFile.path))
            defer { transport.shutdown() }
            var responses: [TransportResponse] = []
            // Sent one after the other, each once the one before has its head: the later ones
            // share the first one's connection, as streams.
            for index in bodies.indices {
                responses.append(try await transport.send(TransportRequest(url: try #require(URL(string: "\(nginx.baseURL)/h\(index)")))))
            }
            // Read one at a time: the others' streams fill the shared bound and pause (the first body
            // kept whole, each other stream paused after its first 16 KiB: a peak of 3.08 MiB here); a
            // pause that held the whole connection would stop the stream being read too (the time limit).
            for (response, body) in zip(responses, bodies) {
                var received = Data()
                for try await buffer in response.body { received.append(contentsOf: buffer) }
                #expect(received == body)
            }
            responses.removeAll()
            let budget = try #require(transport.budget)
            #expect(budget.peak <= CurlTransfer.pauseAbove + bodies.count * (16 << 10))
            #expect(budget.keptBytes == 0)
            let log = try nginx.accessLog()
            #expect(log.count == bodies.count && log.allSatisfy { $0.contains("HTTP/2.0") }, "\(log)")
        }
    }
}
