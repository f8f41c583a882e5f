import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An advisory `flock` on a file, shared by every process and every manager: exclusive for
/// writers, shared for readers.
///
/// `flock` locks belong to an open file description, so two managers in one process exclude
/// each other just as two processes do. The kernel drops the lock when its holder dies, so a
/// killed process never leaves the cache locked.
struct FileLock {
    let url: URL

    /// Runs `body` while holding the lock, blocking until it is free.
    /// - Parameters:
    ///   - shared: Take a shared (reader) lock instead of an exclusive one.
    ///   - body: The work to do under the lock.
    /// A shared lock on a cache that cannot be written (a read-only mount, say) is taken on the
    /// existing lock file opened read-only, or skipped when there is none: nobody can be writing.
    func withLock<T>(shared: Bool = false, _ body: () throws -> T) throws -> T {
        var fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        if fd < 0 && shared && (errno == EROFS || errno == EACCES || errno == EPERM) {
            fd = open(url.path, O_RDONLY | O_CLOEXEC)
            if fd < 0 && errno == ENOENT { return try body() }
        }
        guard fd >= 0 else { throw FileSystem.CallError(operation: "open lock", path: url.path, code: errno) }
        defer { close(fd) }
        while flock(fd, shared ? LOCK_SH : LOCK_EX) != 0 {
            if errno != EINTR { throw FileSystem.CallError(operation: "lock", path: url.path, code: errno) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}
