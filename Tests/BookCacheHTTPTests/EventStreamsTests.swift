import BookCache
import Foundation
import Logging
import NIOCore
import Synchronization
import Testing

@testable import BookCacheHTTP

/// The event fan-out's bounds, on its own mailboxes: a client that does not read is dropped
/// and never holds more than its bound, one that reads gets everything, and the number of
/// streams is capped.
@Suite("EventStreams: bounded per client")
struct EventStreamsTests {
    func bytes(_ count: Int) -> ByteBuffer { ByteBuffer(repeating: UInt8(ascii: "x"), count: count) }

    @Test("a mailbox takes events up to its bounds, then closes: the client is dropped, and what it held is let go")
    func mailboxBounds() async throws {
        let limits = EventStreams.Limits(maxStreams: 4, maxPendingBytes: 1000, maxPendingEvents: 5, heartbeat: .seconds(60))
        let byBytes = EventStreams.Mailbox(limits: limits)
        #expect(byBytes.offer(bytes(600)))
        #expect(byBytes.offer(bytes(400)))
        #expect(!byBytes.offer(bytes(1)), "over 1000 bytes")
        #expect(!byBytes.offer(bytes(1)), "and closed for good")
        #expect(await byBytes.next() == nil, "a dropped client's stream ends")

        let byCount = EventStreams.Mailbox(limits: limits)
        for _ in 0..<5 { #expect(byCount.offer(bytes(1))) }
        #expect(!byCount.offer(bytes(1)), "over 5 events")
    }

    @Test("a reading client gets every event in order; a waiting one is woken; a cancelled one ends")
    func reading() async throws {
        let mailbox = EventStreams.Mailbox(limits: .init(maxPendingBytes: 100, maxPendingEvents: 3))
        for index in 0..<3 { #expect(mailbox.offer(ByteBuffer(string: "\(index)"))) }
        let first = try #require(await mailbox.next())
        #expect(first.map { String(buffer: $0) } == ["0", "1", "2"])
        // Reading emptied it: three more fit again
        for index in 3..<6 { #expect(mailbox.offer(ByteBuffer(string: "\(index)"))) }
        #expect(try #require(await mailbox.next()).map { String(buffer: $0) } == ["3", "4", "5"])
        // A reader waiting is handed the next event
        async let waited = mailbox.next()
        #expect(mailbox.offer(ByteBuffer(string: "6")))
        #expect(try #require(await waited).map { String(buffer: $0) } == ["6"])
        // Cancelling the reader closes the mailbox
        let task = Task { await mailbox.next() }
        task.cancel()
        #expect(await task.value == nil)
        #expect(!mailbox.offer(ByteBuffer(string: "7")))
    }

    @Test("no more streams than the cap; a closed one makes room")
    func cap() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("streams-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let manager = BookCacheManager(configuration: .init(rootDirectory: folder))
        let service = DownloadService(manager: manager, logger: Logger(label: "test"))
        let streams = EventStreams(service: service, limits: .init(maxStreams: 2), logger: Logger(label: "test"))
        let one = try #require(streams.open())
        #expect(streams.open() != nil)
        #expect(streams.open() == nil, "a third is refused")
        streams.close(one)
        #expect(streams.open() != nil, "a closed stream makes room")
        #expect(streams.count == 2)
    }

    @Test("the fan-out: a client that never reads is dropped (its connection closed through onDrop) while one that reads gets every event")
    func fanOut() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("streams-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let manager = BookCacheManager(configuration: .init(rootDirectory: folder))
        let service = DownloadService(manager: manager, logger: Logger(label: "test"))
        let streams = EventStreams(
            service: service, limits: .init(maxStreams: 4, maxPendingBytes: 4096, maxPendingEvents: 1000, heartbeat: .seconds(3600)),
            logger: Logger(label: "test"))
        let drops = Mutex(0)
        let countDrop: @Sendable () -> Void = { drops.withLock { $0 += 1 } }
        let recordDrop: @Sendable () -> Void = { Issue.record("the reading client was dropped") }
        let silent = try #require(streams.open(onDrop: countDrop))
        let reader = try #require(streams.open(onDrop: recordDrop))
        var received = 0
        for index in 0..<200 {
            streams.deliver(ByteBuffer(string: "event: book\ndata: {\"id\": \"ebook-\(index)\"}\n\n"))
            received += try #require(await reader.next()).count
        }
        #expect(received == 200, "the reader got every event")
        #expect(drops.withLock { $0 } == 1, "the silent client was dropped once")
        #expect(await silent.next() == nil, "and its stream has ended")
        #expect(streams.count == 1, "only the reader is left")
    }
}
