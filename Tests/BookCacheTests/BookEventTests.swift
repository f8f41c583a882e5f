import BookCacheTestSupport
import DownloadQueue
import Foundation
import Synchronization
import Testing

@testable import BookCache

/// ``BookCacheManager/events()``: one stream for the whole life of every download, and evictions.
@Suite("Book events")
struct BookEventTests {
    /// Reads events until one satisfies `last`, and returns them all.
    func collect(_ events: AsyncStream<BookEvent>, until last: (BookEvent) -> Bool) async -> [BookEvent] {
        var seen: [BookEvent] = []
        for await event in events {
            seen.append(event)
            if last(event) { break }
        }
        return seen
    }

    func name(_ event: BookEvent) -> String {
        switch event {
        case .queued: "queued"
        case .started: "started"
        case .progress: "progress"
        case .retrying: "retrying"
        case .validating: "validating"
        case .cached(_, let already): already ? "already-cached" : "cached"
        case .failed: "failed"
        case .evicted: "evicted"
        }
    }

    @Test("a download goes queued, started, progress, validating, cached; a refused one ends failed with its kind, after validating")
    func lifeOfADownload() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let manager = makeManager(dir)
            let events = manager.events()
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            let names = await collect(events) { if case .cached = $0 { true } else { false } }.map(name)
            #expect(names.first == "queued")
            #expect(names.contains("started") && names.contains("progress"))
            #expect(Array(names.suffix(2)) == ["validating", "cached"], "\(names)")

            // An HTML page where a book should be: validated, then failed with its kind
            let refused = manager.events()
            let ownEvents = EventLog()
            await #expect(throws: BookCacheError.self) {
                try await manager.download(try request(server, "corrupt/error-page.epub", id: "ebook-page")) { ownEvents.append($0) }
            }
            let after = await collect(refused) { if case .failed = $0 { true } else { false } }
            #expect(after.map(name).suffix(2) == ["validating", "failed"])
            #expect(ownEvents.kinds.suffix(2) == ["validating", "failed"], "the caller's own onEvent hears the same")
            if case .failed(let id, let error) = after.last {
                #expect(id.description == "ebook-page")
                #expect(error.kind == .fileCorrupted)
                #expect(error.refusal == .htmlPage, "a login page is told apart from a damaged book")
            }

            // Asked again, a cached book says so
            let again = manager.events()
            let asked = EventLog()
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice")) { asked.append($0) }
            let cachedAgain = await collect(again) { _ in true }
            #expect(cachedAgain.map(name) == ["already-cached"])
            #expect(asked.kinds == ["already-cached"])
        }
    }

    @Test("a book evicted for the budget is an event, with its reason")
    func evictionEvent() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let configuration = BookCacheConfiguration(
                rootDirectory: dir.path("cache"), storageReserveBytes: 0, keepCount: 1, retryPolicy: .none)
            let manager = BookCacheManager(configuration: configuration)
            _ = try await manager.download(try request(server, "alice.epub", id: "ebook-alice"))
            let events = manager.events()
            _ = try await manager.download(try request(server, "pride.epub", id: "ebook-pride"))
            let seen = await collect(events) { if case .cached = $0 { true } else { false } }
            let evicted = seen.compactMap { event -> EvictedBook? in if case .evicted(let book) = event { book } else { nil } }
            #expect(evicted.map(\.metadata.id) == ["ebook-alice"])
            #expect(evicted.first?.reason == .budget)
        }
    }
}

@Suite("Error kinds")
struct ErrorKindTests {
    struct Strange: Error {}

    @Test("an error the cache cannot classify is unexpected, with its cause kept; only cancellation is cancelled")
    func unexpected() throws {
        let id = try BookID(parsing: "ebook-x")
        let strange = DownloadContext.translate(Strange(), id: id, root: "/tmp")
        #expect(strange.kind == .unexpected)
        #expect(strange.underlying is Strange)
        #expect(DownloadContext.translate(CancellationError(), id: id, root: "/tmp").kind == .cancelled)
    }
}

@Suite("A caller that joins a download")
struct JoinedDownloadTests {
    @Test("sees the download's whole life through its own onEvent, as the caller that started it does: progress, validating, cached")
    func joinerSeesEvents() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let manager = makeManager(dir)
            server.holdRequests(to: "/alice.epub")
            let started = EventLog()
            let first = Task {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice")) { started.append($0) }
            }
            // The first call's request is at the server (held): the download is in flight.
            await server.waitForRequests(count: 1)
            let joined = EventLog()
            let second = Task {
                try await manager.download(try request(server, "alice.epub", id: "ebook-alice")) { joined.append($0) }
            }
            // Once the second call has joined, let the body go.
            let id = try BookID(parsing: "ebook-alice")
            while await manager.joinedCallers(id) == 0 { await Task.yield() }
            server.releaseHeld()
            let a = try await first.value
            let b = try await second.value
            #expect(a.metadata.checksum == b.metadata.checksum)
            #expect(server.requestCount(for: "/alice.epub") == 1, "one download for both")
            // Each caller hears how it ends, from the one place the download's events come from
            // (before, both heard the queue's "finished" and never "validating" or "cached").
            #expect(Array(started.kinds.prefix(2)) == ["queued", "started"], "\(started.kinds)")
            for kinds in [started.kinds, joined.kinds] {
                #expect(kinds.contains("progress") && Array(kinds.suffix(2)) == ["validating", "cached"], "\(kinds)")
            }
        }
    }
}
