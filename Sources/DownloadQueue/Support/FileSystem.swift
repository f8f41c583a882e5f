import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Small POSIX helpers that keep `errno`, used for durable, atomic file updates.
package enum FileSystem {
    /// A failed system call, with its `errno`.
    package struct CallError: Error, CustomStringConvertible {
        package let operation: String
        package let path: String
        package let code: Int32
        package init(operation: String, path: String, code: Int32) {
            self.operation = operation
            self.path = path
            self.code = code
        }
        package var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
    }

    /// Writes `data` to `url` atomically: a temporary file (in `temporaryFolder`, else beside the
    /// target; it must be on the same filesystem), `fsync`, `rename`, then `fsync` of the folder.
    /// Readers see the old file or the new one, never a mix, and after a power cut the name leads
    /// to a whole file: its content is synced before the rename makes it visible. The temporary
    /// name carries the pid, so one left by a killed process can be recognised
    /// (``isStaleTemporary(_:)``).
    ///
    /// - Parameters:
    ///   - durable: Off, neither the file nor the folder is synced: for files whose loss in a power
    ///     cut costs nothing (where a running service listens). A name may then survive a cut
    ///     with its content lost: an empty file.
    ///   - syncFolder: Off, the content is synced but not the folder, for a caller that syncs the
    ///     folder once for many files (a group of books) or for which the old version is as good
    ///     after a cut (a sidecar rewritten after a pin: either whole version is right).
    package static func writeAtomically(
        _ data: Data, to url: URL, temporaryFolder: URL? = nil, durable: Bool = true, syncFolder: Bool = true
    ) throws {
        let temp = try writeTemporary(data, for: url, in: temporaryFolder, durable: durable)
        do {
            try rename(from: temp, to: url)
        } catch {
            unlink(temp.path)
            throw error
        }
        if durable && syncFolder { syncDirectory(url.deletingLastPathComponent().path) }
    }

    /// The first half of ``writeAtomically(_:to:temporaryFolder:durable:syncFolder:)``: `data` in a
    /// new temporary file for `url` (in `folder`, else beside it), synced when `durable`; the caller
    /// renames it into place, or removes it.
    /// - Returns: The temporary file.
    package static func writeTemporary(_ data: Data, for url: URL, in folder: URL? = nil, durable: Bool = true) throws -> URL {
        let tempFolder = folder?.path ?? url.deletingLastPathComponent().path
        let temp = tempFolder + "/.\(url.lastPathComponent).\(getpid()).\(UUID().uuidString.prefix(8)).tmp"
        // 0600: sidecars, settings and the like may hold a URL's login or a header's value.
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw CallError(operation: "create", path: temp, code: errno) }
        var ok = false
        defer {
            if !ok { unlink(temp) }
        }
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
        ok = true
        return URL(filePath: temp, directoryHint: .notDirectory)
    }

    /// Reads a small file the cache wrote itself (a resume record, a sidecar) without following
    /// a link, and only if it is a regular file of this user's of at most `maxBytes`: a file
    /// planted in its place, or grown past what the cache writes, reads as absent.
    /// - Returns: The bytes, or `nil` when there is no such file or it is not one to trust.
    package static func readOwnFile(atPath path: String, maxBytes: Int) -> Data? {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_uid == geteuid(), info.st_size <= maxBytes else {
            return nil
        }
        var data = Data(count: Int(info.st_size))
        let count = data.withUnsafeMutableBytes { buffer -> Int in
            var offset = 0
            while offset < buffer.count {
                let n = read(fd, buffer.baseAddress! + offset, buffer.count - offset)
                if n < 0 && errno == EINTR { continue }
                if n <= 0 { break }
                offset += n
            }
            return offset
        }
        return count == data.count ? data : nil
    }

    /// Why a folder of the cache cannot be trusted, or `nil` when it can: it must be a folder (not a
    /// link to one, unless `followLink`), owned by this user, and writable by nobody else — as ssh
    /// refuses a `~/.ssh` others can write. A folder another user made first (a shared `/tmp/books`)
    /// or can write lets them plant links and files the cache would follow; a missing one is fine.
    package static func untrustedFolderReason(_ path: String, followLink: Bool) -> String? {
        var info = stat()
        let found = followLink ? stat(path, &info) : lstat(path, &info)
        guard found == 0 else { return errno == ENOENT ? nil : "it cannot be read (\(String(cString: strerror(errno))))" }
        switch info.st_mode & S_IFMT {
        case S_IFDIR: break
        case S_IFLNK: return "it is a symbolic link, not a folder"
        default: return "it is not a folder"
        }
        if info.st_uid != geteuid() {
            return "it belongs to another user (uid \(info.st_uid)), who could plant links in it; use a folder of your own"
        }
        if info.st_mode & 0o022 != 0 {
            return
                "others can write to it (mode \(String(info.st_mode & 0o7777, radix: 8))) and could plant links in it; run chmod go-w on it"
        }
        return nil
    }

    /// Whether `name` is a temporary file of ``writeAtomically(_:to:temporaryFolder:)`` whose
    /// writer is no longer running.
    package static func isStaleTemporary(_ name: String) -> Bool {
        guard name.hasPrefix("."), name.hasSuffix(".tmp") else { return false }
        let parts = name.split(separator: ".")
        guard parts.count >= 4, let pid = Int32(parts[parts.count - 3]) else { return false }
        return !processIsAlive(pid)
    }

    /// Whether a process with this id exists.
    package static func processIsAlive(_ pid: Int32) -> Bool {
        guard pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// Renames within one filesystem, then makes the rename durable.
    package static func moveAtomically(from source: URL, to destination: URL) throws {
        try rename(from: source, to: destination)
        syncDirectory(destination.deletingLastPathComponent().path)
    }

    /// Renames within one filesystem; the rename is durable once its folder is synced
    /// (``syncDirectory(_:)``).
    package static func rename(from source: URL, to destination: URL) throws {
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
    package static func syncDirectory(_ path: String) {
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
    package static func restrictToOwner(_ url: URL) -> Bool {
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
    package static func removeFile(_ url: URL) throws {
        if unlink(url.path) != 0 && errno != ENOENT {
            throw CallError(operation: "remove", path: url.path, code: errno)
        }
    }

    /// The size of a regular file, or `nil` when there is none.
    package static func fileSize(_ url: URL) -> Int64? {
        fileSize(atPath: url.path)
    }

    /// The size of a regular file, or `nil` when there is none at `path`.
    package static func fileSize(atPath path: String) -> Int64? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Int64(info.st_size)
    }

    /// Bytes available to an unprivileged user on the filesystem holding `url`.
    package static func availableBytes(at url: URL) throws -> Int64 {
        var info = statvfs()
        guard statvfs(url.path, &info) == 0 else { throw CallError(operation: "statvfs", path: url.path, code: errno) }
        let (product, overflow) = Int64(info.f_bavail).multipliedReportingOverflow(by: Int64(info.f_frsize))
        return overflow ? .max : product
    }
}
