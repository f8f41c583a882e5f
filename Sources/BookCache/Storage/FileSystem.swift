import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Small POSIX helpers that keep `errno`, used for durable, atomic file updates.
package enum FileSystem {
    /// A failed system call, with its `errno`.
    struct CallError: Error, CustomStringConvertible {
        let operation: String
        let path: String
        let code: Int32
        var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
    }

    /// Writes `data` to `url` atomically: a temporary file (in `temporaryFolder`, else beside the
    /// target; it must be on the same filesystem), `fsync`, `rename`, then `fsync` of the folder.
    /// Readers see the old file or the new one, never a mix. The temporary name carries the pid,
    /// so one left by a killed process can be recognised (``isStaleTemporary(_:)``).
    ///
    /// With `durable` off, neither the file nor the folder is `fsync`ed: for files whose loss in a
    /// power cut costs nothing (a sidecar whose folder is synced by the book's own rename right
    /// after; a rebuild skips a torn sidecar).
    package static func writeAtomically(_ data: Data, to url: URL, temporaryFolder: URL? = nil, durable: Bool = true) throws {
        let folder = url.deletingLastPathComponent().path
        let tempFolder = temporaryFolder?.path ?? folder
        let temp = tempFolder + "/.\(url.lastPathComponent).\(getpid()).\(UUID().uuidString.prefix(8)).tmp"
        // 0600: sidecars, settings and the like may hold a URL's login or a header's value.
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CallError(operation: "create", path: temp, code: errno) }
        var ok = false
        defer {
            if !ok { unlink(temp) }
        }
        do {
            defer { close(fd) }
            try data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw CallError(operation: "write", path: temp, code: errno)
                    }
                    offset += n
                }
            }
            if durable {
                guard fsync(fd) == 0 else { throw CallError(operation: "fsync", path: temp, code: errno) }
            }
        }
        try rename(from: URL(filePath: temp, directoryHint: .notDirectory), to: url)
        ok = true
        if durable { syncDirectory(folder) }
    }

    /// Whether `name` is a temporary file of ``writeAtomically(_:to:temporaryFolder:)`` whose
    /// writer is no longer running.
    static func isStaleTemporary(_ name: String) -> Bool {
        guard name.hasPrefix("."), name.hasSuffix(".tmp") else { return false }
        let parts = name.split(separator: ".")
        guard parts.count >= 4, let pid = Int32(parts[parts.count - 3]) else { return false }
        return !processIsAlive(pid)
    }

    /// Whether a process with this id exists.
    static func processIsAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// Renames within one filesystem, then makes the rename durable.
    static func moveAtomically(from source: URL, to destination: URL) throws {
        try rename(from: source, to: destination)
        syncDirectory(destination.deletingLastPathComponent().path)
    }

    /// Renames within one filesystem; the rename is durable once its folder is synced
    /// (``syncDirectory(_:)``).
    static func rename(from source: URL, to destination: URL) throws {
        #if canImport(Glibc)
            let renamed = Glibc.rename(source.path, destination.path)
        #else
            let renamed = Darwin.rename(source.path, destination.path)
        #endif
        guard renamed == 0 else {
            throw CallError(operation: "rename", path: destination.path, code: errno)
        }
    }

    /// `fsync` of a directory so a rename in it survives power loss. Best effort: some
    /// filesystems refuse it, and the rename itself has already happened.
    static func syncDirectory(_ path: String) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        _ = fsync(fd)
        close(fd)
    }

    /// Creates a directory and its missing parents, each 0700: what the cache keeps (logins in
    /// URLs, header values, job lines) is for its owner alone. Existing folders keep their mode.
    package static func createDirectory(_ url: URL) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) {
            if isDirectory.boolValue { return }
            throw CallError(operation: "create directory", path: url.path, code: ENOTDIR)
        }
        let parent = url.deletingLastPathComponent()
        if parent.path != url.path { try createDirectory(parent) }
        guard mkdir(url.path, 0o700) == 0 || errno == EEXIST else {
            throw CallError(operation: "create directory", path: url.path, code: errno)
        }
    }

    /// Makes `url` readable and writable by its owner alone (0600), creating it empty when it
    /// does not exist; `true` when an existing file was readable by others before. Best effort:
    /// a file that cannot be changed (a read-only filesystem) is left as it is.
    @discardableResult
    static func restrictToOwner(_ url: URL) -> Bool {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            let fd = open(url.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            if fd >= 0 { close(fd) }
            return false
        }
        guard info.st_mode & 0o077 != 0 else { return false }
        return chmod(url.path, 0o600) == 0
    }

    /// Removes a file; a file that is already gone is not an error.
    static func removeFile(_ url: URL) throws {
        if unlink(url.path) != 0 && errno != ENOENT {
            throw CallError(operation: "remove", path: url.path, code: errno)
        }
    }

    /// The size of a regular file, or `nil` when there is none.
    static func fileSize(_ url: URL) -> Int64? {
        fileSize(atPath: url.path)
    }

    /// The size of a regular file, or `nil` when there is none at `path`.
    static func fileSize(atPath path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Bytes available to an unprivileged user on the filesystem holding `url`.
    static func availableBytes(at url: URL) throws -> Int64 {
        var info = statvfs()
        guard statvfs(url.path, &info) == 0 else { throw CallError(operation: "statvfs", path: url.path, code: errno) }
        let (product, overflow) = Int64(info.f_bavail).multipliedReportingOverflow(by: Int64(info.f_frsize))
        return overflow ? .max : product
    }
}
