import CBookCacheShims
import DownloadQueue
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A per-book exclusive lock, so two processes (or two managers) asked for the same book fetch it
/// once: the second waits, then finds the book cached. A process that dies drops its locks with
/// it; the next one takes over and resumes its partial.
///
/// On Linux every book's lock is one byte of a single file, `books.lock`, at an offset hashed
/// from the book's id, taken as an open file description lock (`F_OFD_SETLK`): no file is
/// created or removed per book, which made inode allocation a large share of a batch's time.
/// Elsewhere each book has a lock file in `partial/`, `flock`ed and removed on release; a waiter
/// that wins the lock on a file that was removed meanwhile notices (its inode no longer matches
/// the path) and tries again, so removal is safe.
final class BookLock: Sendable {
    private let fd: Int32
    /// The per-book lock file to remove on release, where there is one.
    private let lockFile: String?
    /// Whether it was released: by the publisher once the book is recorded, then again (doing
    /// nothing) by its download as it returns.
    private let released = Atomic<Bool>(false)

    private init(fd: Int32, lockFile: String?) {
        self.fd = fd
        self.lockFile = lockFile
    }

    /// Takes the lock, waiting while another holder has it.
    /// - Throws: `CancellationError` when the task is cancelled while waiting, or
    ///   ``FileSystem/CallError`` when the lock file cannot be opened or locked.
    static func acquire(_ id: BookID, in layout: CacheLayout) async throws -> BookLock {
        var pause: UInt64 = 5
        while true {
            try Task.checkCancellation()
            if let lock = try tryAcquire(id, in: layout) { return lock }
            // Held elsewhere, possibly by another process: poll, backing off to 200 ms.
            try await Task.sleep(nanoseconds: pause * 1_000_000)
            pause = min(pause * 2, 200)
        }
    }

    /// Whether someone (another process, or another download in this one) holds the book's lock.
    static func isHeld(_ id: BookID, in layout: CacheLayout) -> Bool {
        !held(among: [id], in: layout).isEmpty
    }

    /// Which of `ids` someone holds: the lock file opened once for all of them (a plan that
    /// evicts half of 100,000 books checked each by opening it, and spent a quarter of its time so).
    static func held(among ids: [BookID], in layout: CacheLayout) -> Set<BookID> {
        #if os(Linux)
            guard !ids.isEmpty else { return [] }
            let fd = open(layout.bookLocksFile.path, O_RDWR | O_CLOEXEC)
            // No lock file yet: nobody has ever locked a book in this cache.
            guard fd >= 0 else { return [] }
            defer { close(fd) }
            return Set(ids.filter { bookcache_test_lock_byte(fd, offset(of: $0)) == 1 })
        #else
            return Set(
                ids.filter { id in
                    let url = layout.bookLockFile(for: id)
                    guard FileManager.default.fileExists(atPath: url.path) else { return false }
                    guard let lock = tryFile(url) else { return true }
                    lock.release()
                    return false
                })
        #endif
    }

    /// Releases the lock (and removes its per-book file, where there is one); once — a second call
    /// does nothing, so the descriptor, which may be another file's by then, is closed once.
    func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        if let lockFile { unlink(lockFile) }
        close(fd)
    }

    /// Removes a per-book lock file (left by an older version, or on platforms that use them)
    /// when nobody holds it.
    static func removeIfUnheld(lockFile url: URL) {
        tryFile(url)?.release()
    }

    // MARK: - Locking

    /// One try without waiting: the lock, or `nil` when someone else holds it.
    static func tryAcquire(_ id: BookID, in layout: CacheLayout) throws -> BookLock? {
        #if os(Linux)
            let path = layout.bookLocksFile.path
            let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw FileSystem.CallError(operation: "open lock", path: path, code: errno) }
            switch bookcache_try_lock_byte(fd, offset(of: id)) {
            case 0:
                return BookLock(fd: fd, lockFile: nil)
            case 1:
                close(fd)
                return nil
            default:
                let code = errno
                close(fd)
                throw FileSystem.CallError(operation: "lock", path: path, code: code)
            }
        #else
            let url = layout.bookLockFile(for: id)
            let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw FileSystem.CallError(operation: "open lock", path: url.path, code: errno) }
            guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
                let code = errno
                close(fd)
                guard code == EWOULDBLOCK || code == EINTR else {
                    throw FileSystem.CallError(operation: "lock", path: url.path, code: code)
                }
                return nil
            }
            guard sameFile(fd, url) else {
                // The file we locked was removed by its previous holder: the next try takes the new one.
                close(fd)
                return nil
            }
            return BookLock(fd: fd, lockFile: url.path)
        #endif
    }

    /// The lock byte of a book: a 62-bit FNV-1a hash of its id (a positive offset with room for
    /// the one-byte range after it).
    static func offset(of id: BookID) -> Int64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in id.description.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x100_0000_01b3
        }
        return Int64(bitPattern: hash & 0x3FFF_FFFF_FFFF_FFFF)
    }

    /// A per-book lock file taken only if nobody holds it (and it is still the file at its path).
    private static func tryFile(_ url: URL) -> BookLock? {
        let fd = open(url.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0, sameFile(fd, url) else {
            close(fd)
            return nil
        }
        return BookLock(fd: fd, lockFile: url.path)
    }

    private static func sameFile(_ fd: Int32, _ url: URL) -> Bool {
        var held = stat()
        var current = stat()
        return fstat(fd, &held) == 0 && stat(url.path, &current) == 0 && held.st_ino == current.st_ino && held.st_dev == current.st_dev
    }
}
