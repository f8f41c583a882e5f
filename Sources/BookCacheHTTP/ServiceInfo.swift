import BookCache
import DownloadQueue
import Foundation

/// `CACHE/service.json`: where a running `bookcache serve` listens, so `bookcache queue …` can
/// find it. Written when the server listens, removed when it stops (a killed service leaves it;
/// clients then find nothing listening and say so).
public struct ServiceInfo: Codable, Sendable, Hashable {
    /// The base URL, such as `http://127.0.0.1:8787`.
    public var url: String
    /// The service's process id.
    public var pid: Int32

    /// Creates a description.
    public init(url: String, pid: Int32) {
        self.url = url
        self.pid = pid
    }

    /// The file beside the cache's index.
    public static func file(in cacheRoot: URL) -> URL {
        CacheLayout(root: cacheRoot).serviceInfoFile
    }

    /// The token file beside the cache's index.
    public static func tokenFile(in cacheRoot: URL) -> URL {
        CacheLayout(root: cacheRoot).serviceTokenFile
    }

    /// Reads the file; `nil` when there is none or it is not one of ours.
    public static func read(in cacheRoot: URL) -> ServiceInfo? {
        guard let data = FileManager.default.contents(atPath: file(in: cacheRoot).path) else { return nil }
        return try? JSONDecoder().decode(ServiceInfo.self, from: data)
    }

    /// Writes the file atomically, owner only (0600) from the start, as the cache's other files.
    public func write(in cacheRoot: URL) throws {
        try FileSystem.writeAtomically(try JSONEncoder().encode(self), to: Self.file(in: cacheRoot), durable: false)
    }

    /// Removes the file if it still describes this process.
    public static func remove(in cacheRoot: URL, pid: Int32) {
        guard read(in: cacheRoot)?.pid == pid else { return }
        try? FileManager.default.removeItem(at: file(in: cacheRoot))
    }
}
