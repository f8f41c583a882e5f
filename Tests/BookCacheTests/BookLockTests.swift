import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

@Suite("Per-book locks")
struct BookLockTests {
    @Test("a book's lock excludes a second holder until it is released; other books are free meanwhile")
    func exclusion() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = CacheLayout(root: directory.url)
        let alice = try BookID(type: .ebook, bookId: "alice")
        let pride = try BookID(type: .ebook, bookId: "pride")

        // Given nobody holds anything
        #expect(!BookLock.isHeld(alice, in: layout))

        // When one holder takes alice
        let first = try await BookLock.acquire(alice, in: layout)

        // Then alice is held (seen even from this process) and cannot be taken again;
        // pride is free and can be taken at once
        #expect(BookLock.isHeld(alice, in: layout))
        #expect(try BookLock.tryAcquire(alice, in: layout) == nil)
        #expect(!BookLock.isHeld(pride, in: layout))
        let other = try #require(try BookLock.tryAcquire(pride, in: layout))
        other.release()

        // And a second acquire of alice waits until the first is released
        let waiter = Task { try await BookLock.acquire(alice, in: layout) }
        #expect(BookLock.isHeld(alice, in: layout))
        first.release()
        let second = try await waiter.value
        #expect(BookLock.isHeld(alice, in: layout))
        second.release()
        // And once released it can be taken again. (Not checked with isHeld at once: a process
        // another test spawns holds a copy of every descriptor until it execs, and the lock with it.)
        let third = try await BookLock.acquire(alice, in: layout)
        third.release()
    }

    @Test("a waiter that is cancelled stops waiting")
    func cancelledWaiter() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = CacheLayout(root: directory.url)
        let alice = try BookID(type: .ebook, bookId: "alice")
        let held = try await BookLock.acquire(alice, in: layout)
        defer { held.release() }

        let waiter = Task { try await BookLock.acquire(alice, in: layout) }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { _ = try await waiter.value }
    }

    @Test("lock offsets differ per book and stay positive")
    func offsets() throws {
        var seen: Set<Int64> = []
        for number in 0..<10_000 {
            let offset = BookLock.offset(of: try BookID(type: number % 2 == 0 ? .ebook : .magazine, bookId: "book\(number)"))
            #expect(offset >= 0 && offset < Int64.max - 1)
            seen.insert(offset)
        }
        #expect(seen.count == 10_000)
    }
}
