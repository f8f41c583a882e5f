import Foundation

/// A small tmpfs mounted for a test, to make a real full disk or a read-only cache.
/// Needs root (and the right to mount); ``isAvailable`` says whether this machine allows it.
public final class SmallFilesystem: Sendable {
    /// Where it is mounted.
    public let url: URL

    /// Whether tmpfs can be mounted here (root with mount rights). Tests that need it are
    /// skipped otherwise.
    public static let isAvailable: Bool = {
        guard getuid() == 0, let fs = try? SmallFilesystem(bytes: 64 * 1024) else { return false }
        fs.unmount()
        return true
    }()

    /// Mounts a tmpfs of `bytes` bytes at a fresh folder, holding at most `inodes` files and
    /// folders when given (a new file past them fails with `ENOSPC`, as a full disk's does).
    public init(bytes: Int, inodes: Int? = nil) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("bookcache-tmpfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        // mode=0700: a tmpfs root is 1777 by default, and the cache refuses a folder others can write.
        let options = "size=\(bytes),mode=0700" + (inodes.map { ",nr_inodes=\($0)" } ?? "")
        try Self.run("/bin/mount", ["-t", "tmpfs", "-o", options, "tmpfs", url.path])
    }

    /// How many more files or folders it can hold.
    public var freeInodes: Int {
        var info = statvfs()
        guard statvfs(url.path, &info) == 0 else { return 0 }
        return Int(info.f_favail)
    }

    /// Makes the filesystem read-only.
    public func remountReadOnly() throws {
        try Self.run("/bin/mount", ["-o", "remount,ro", url.path])
    }

    /// Unmounts it and removes the folder.
    public func unmount() {
        try? Self.run("/bin/umount", ["-l", url.path])
        try? FileManager.default.removeItem(at: url)
    }

    private static func run(_ tool: String, _ arguments: [String]) throws {
        // Synchronous (the suite's `enabled(if:)` asks at once); mount and umount return quickly.
        let result = try ProcessRunner.launch(at: URL(fileURLWithPath: tool), arguments, timeLimit: .seconds(60)).waitBlocking()
        guard result.status == 0 else {
            throw ProcessRunnerError(
                message: "\(tool) \(arguments.joined(separator: " ")) failed with status \(result.status): \(result.stderr)")
        }
    }
}
