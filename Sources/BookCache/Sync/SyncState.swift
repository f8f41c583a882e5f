import DownloadQueue
import Foundation

/// When each source last synced successfully (`sync.json` beside the index).
struct SyncState: Codable, Sendable {
    struct Source: Codable, Sendable {
        var lastSuccess: Date
    }

    var sources: [String: Source] = [:]
}

/// Reads and writes `sync.json` atomically under the index lock.
struct SyncStateStore: Sendable {
    let layout: CacheLayout

    var file: URL { layout.syncStateFile }

    func read() throws(BookCacheError) -> SyncState {
        guard FileManager.default.fileExists(atPath: file.path) else { return SyncState() }
        do {
            return try MetadataCoding.decoder().decode(SyncState.self, from: Data(contentsOf: file))
        } catch {
            throw .settingsUnusable(file.path, "cannot be read (\(error)); delete it to forget the sync times")
        }
    }

    func recordSuccess(of key: String, at date: Date) throws(BookCacheError) {
        do {
            // (The closure returns a value: a typed-throws closure returning Void crashes Swift 6.3's
            // LifetimeDependenceDiagnostics pass when it is reabstracted.)
            _ = try FileLock(url: layout.settingsLockFile).withLock { () throws -> Bool in
                var state = try read()
                state.sources[key] = SyncState.Source(lastSuccess: date)
                do {
                    try FileSystem.writeAtomically(try MetadataCoding.encoder(pretty: true).encode(state), to: file)
                } catch {
                    throw BookCacheError.cacheDirectoryUnusable(layout.root.path, "cannot write sync.json (\(error))")
                }
                return true
            }
        } catch let error as BookCacheError {
            throw error
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "\(error)")
        }
    }
}
