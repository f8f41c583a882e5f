import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An advisory, exclusive `flock` on a file, shared by every process and every manager.
///
/// `flock` locks belong to an open file description, so two managers in one process exclude
/// each other just as two processes do. The kernel drops the lock when its holder dies, so a
/// killed process never leaves the cache locked.
struct FileLock {
    let url: URL

    /// Runs `body` while holding the lock, blocking until it is free.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        let fd = open(url.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw FileSystem.CallError(operation: "open lock", path: url.path, code: errno) }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            if errno != EINTR { throw FileSystem.CallError(operation: "lock", path: url.path, code: errno) }
        }
        defer { flock(fd, LOCK_UN) }
        return try body()
    }
}
