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

    /// Mounts a tmpfs of `bytes` bytes at a fresh folder.
    public init(bytes: Int) throws {
        url = FileManager.default.temporaryDirectory.appendingPathComponent("bookcache-tmpfs-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        try Self.run("/bin/mount", ["-t", "tmpfs", "-o", "size=\(bytes)", "tmpfs", url.path])
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
