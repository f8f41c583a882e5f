import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The files of a cache that may hold a secret — a login in a book's URL, a header's value, a
/// job's manifest line — are its owner's alone (0600): the index (`index.sqlite` and its `-wal`
/// and `-shm`, which SQLite creates with the database's mode), the sidecars, the settings, the
/// resume records. New ones are made so; a cache made by an earlier version, whose index others
/// could read, is tightened once, when its index is opened.
enum SecretFiles {
    /// Makes the index 0600 (creating it empty when it is missing, so SQLite keeps that mode);
    /// when it was readable by others, tightens every other file that may hold a secret too.
    static func restrict(in layout: CacheLayout) {
        guard FileSystem.restrictToOwner(layout.databaseFile) else { return }
        for suffix in ["-wal", "-shm"] {
            let file = URL(filePath: layout.databaseFile.path + suffix, directoryHint: .notDirectory)
            if FileManager.default.fileExists(atPath: file.path) { FileSystem.restrictToOwner(file) }
        }
        let folders = [layout.root, layout.partialFolder] + BookType.allCases.map(layout.folder(for:))
        for folder in folders {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { continue }
            for name in names where isSecretBearing(name) {
                FileSystem.restrictToOwner(folder.appending(path: name, directoryHint: .notDirectory))
            }
        }
    }

    /// Whether a file of the cache may hold a secret (books themselves do not).
    static func isSecretBearing(_ name: String) -> Bool {
        name.hasSuffix(CacheLayout.sidecarSuffix) || name.hasSuffix(".resume") || name.hasSuffix(".json") || name.hasPrefix("index.sqlite")
    }
}
