import DownloadQueue
import Foundation

/// Reads and writes `config.json` beside the index, atomically and under the index lock.
struct SettingsStore: Sendable {
    let layout: CacheLayout

    var file: URL { layout.settingsFile }

    func read() throws(BookCacheError) -> CacheSettings {
        guard FileManager.default.fileExists(atPath: file.path) else { return CacheSettings() }
        do {
            return try JSONDecoder().decode(CacheSettings.self, from: Data(contentsOf: file))
        } catch {
            throw .settingsUnusable(file.path, "cannot be read (\(error)); fix or delete it")
        }
    }

    func update(_ change: (inout CacheSettings) throws(BookCacheError) -> Void) throws(BookCacheError) -> CacheSettings {
        do {
            return try FileLock(url: layout.settingsLockFile).withLock { () throws(BookCacheError) -> CacheSettings in
                var settings = try read()
                try change(&settings)
                do {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                    try FileSystem.writeAtomically(try encoder.encode(settings), to: file)
                } catch {
                    throw .cacheDirectoryUnusable(layout.root.path, "cannot write \(file.lastPathComponent) (\(error))")
                }
                return settings
            }
        } catch let error as BookCacheError {
            throw error
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "\(error)")
        }
    }
}
