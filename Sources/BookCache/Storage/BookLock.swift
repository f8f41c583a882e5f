import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A per-book `flock`, so two processes (or two managers) asked for the same book fetch it
/// once: the second waits, then finds the book cached.
///
/// The lock file is removed on release. A waiter that wins the lock on a file that was removed
/// meanwhile notices (its inode no longer matches the path) and tries again, so removal is safe.
/// A process that dies drops its lock with it; the next one takes over and resumes its partial.
final class BookLock: Sendable {
    private let fd: Int32
    private let path: String

    private init(fd: Int32, path: String) {
        self.fd = fd
        self.path = path
    }

    /// Takes the lock, waiting while another holder has it.
    /// - Parameter url: The lock file.
    /// - Throws: `CancellationError` when the task is cancelled while waiting, or
    ///   ``FileSystem/CallError`` when the lock file cannot be opened.
    static func acquire(at url: URL) async throws -> BookLock {
        var pause: UInt64 = 5
        while true {
            try Task.checkCancellation()
            let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw FileSystem.CallError(operation: "open lock", path: url.path, code: errno) }
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                var held = stat()
                var current = stat()
                if fstat(fd, &held) == 0, stat(url.path, &current) == 0, held.st_ino == current.st_ino, held.st_dev == current.st_dev {
                    return BookLock(fd: fd, path: url.path)
                }
                // The file we locked was removed by its previous holder: try the new one.
                close(fd)
                continue
            }
            let code = errno
            close(fd)
            guard code == EWOULDBLOCK || code == EINTR else {
                throw FileSystem.CallError(operation: "lock", path: url.path, code: code)
            }
            // Held elsewhere, possibly by another process: poll, backing off to 200 ms.
            try await Task.sleep(nanoseconds: pause * 1_000_000)
            pause = min(pause * 2, 200)
        }
    }

    /// Takes the lock only if nobody holds it; `nil` otherwise.
    static func tryAcquire(at url: URL) -> BookLock? {
        let fd = open(url.path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        var held = stat()
        var current = stat()
        guard fstat(fd, &held) == 0, stat(url.path, &current) == 0, held.st_ino == current.st_ino else {
            close(fd)
            return nil
        }
        return BookLock(fd: fd, path: url.path)
    }

    /// Removes the lock file and releases the lock.
    func release() {
        unlink(path)
        close(fd)
    }
}
