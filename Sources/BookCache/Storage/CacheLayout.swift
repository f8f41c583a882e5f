import DownloadQueue
import Foundation

/// Where everything lives under a cache root: every path of the cache is made here.
///
/// ```
/// ROOT/index.sqlite            the index (SQLite, WAL: index.sqlite-wal and -shm beside it); also the
///                              service's jobs and sources
/// ROOT/books.lock              per-book locks on Linux: one byte each, locked with open file description locks
/// ROOT/metadata.lock           advisory lock for settings and sync-state updates
/// ROOT/config.json             settings (max-size, keep, reserve, …)
/// ROOT/sync.json               the last successful sync of each source
/// ROOT/service.token           the API token of bookcache serve (0600)
/// ROOT/service.json            where a running bookcache serve listens (url, pid)
/// ROOT/ebooks/123.epub         a cached book
/// ROOT/ebooks/123.meta.json    its sidecar: the same record as the index, to rebuild it from
/// ROOT/ebooks/123.cover.jpg    its cover
/// ROOT/magazines/…             the same for magazines
/// ROOT/partial/ID.part         a download in progress (same filesystem, so the final rename is atomic)
/// ROOT/partial/ID.part.resume  its URL, validator, and the length and SHA-256 of the bytes synced before it
///                              was written: what a resume with Range/If-Range may keep
/// ROOT/partial/ID.cover.part   a cover in progress
/// ROOT/partial/ID.lock         held while fetching, on platforms without open file description locks
/// ROOT/metadata.json(.imported), metadata.journal   the previous version's index, imported once
/// ```
///
/// Folders the cache creates are 0700; files that may hold a secret (the index, sidecars, settings, resume
/// records, the service's files) are 0600.
public struct CacheLayout: Sendable, Hashable {
    /// The cache root.
    public let root: URL
    /// The folder for downloads in progress.
    public let partialFolder: URL
    /// The folders of the types of book, made once (each book's paths start with one).
    private let typeFolders: [BookType: URL]
    /// The root's path, which every path of a book starts with.
    private let rootPath: String

    /// Creates a layout for a root directory.
    /// - Parameter root: The cache root; made absolute and standardized.
    public init(root: URL) {
        let root = root.standardizedFileURL
        self.root = root
        partialFolder = root.appending(path: "partial", directoryHint: .isDirectory)
        typeFolders = Dictionary(
            uniqueKeysWithValues: BookType.allCases.map { ($0, root.appending(path: $0.folderName, directoryHint: .isDirectory)) })
        rootPath = root.path
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.root == rhs.root }
    public func hash(into hasher: inout Hasher) { hasher.combine(root) }

    /// The index: an SQLite database (with its `-wal` and `-shm` files beside it).
    public var databaseFile: URL { root.appending(path: "index.sqlite", directoryHint: .notDirectory) }
    /// The settings (`config.json`).
    var settingsFile: URL { root.appending(path: "config.json", directoryHint: .notDirectory) }
    /// The last successful sync of each source (`sync.json`).
    var syncStateFile: URL { root.appending(path: "sync.json", directoryHint: .notDirectory) }
    /// The lock file guarding settings and sync-state updates (named for the previous version's
    /// index, which it guarded first; an import takes it too).
    var settingsLockFile: URL { root.appending(path: "metadata.lock", directoryHint: .notDirectory) }
    /// The previous version's index snapshot, imported once.
    var legacyIndexFile: URL { root.appending(path: "metadata.json", directoryHint: .notDirectory) }
    /// The previous version's index journal, imported with the snapshot.
    var legacyJournalFile: URL { root.appending(path: "metadata.journal", directoryHint: .notDirectory) }
    /// Where a running `bookcache serve` says it listens.
    package var serviceInfoFile: URL { root.appending(path: "service.json", directoryHint: .notDirectory) }
    /// The API token of `bookcache serve`.
    package var serviceTokenFile: URL { root.appending(path: "service.token", directoryHint: .notDirectory) }
    /// The OPDS catalogue's reader login (a salted hash of its password).
    package var readerPasswordFile: URL { root.appending(path: "opds-password.json", directoryHint: .notDirectory) }

    /// A cover's partial file while it downloads.
    func partialCoverFile(for id: BookID) -> URL {
        partialFolder.appending(path: "\(id).cover.part", directoryHint: .notDirectory)
    }

    /// A cover's path relative to the root, such as `ebooks/123.cover.jpg`.
    func relativeCoverPath(for id: BookID, extension ext: String) -> String {
        "\(id.type.folderName)/\(id.bookId).cover.\(ext)"
    }

    /// The folder for a type of book.
    public func folder(for type: BookType) -> URL {
        typeFolders[type] ?? root.appending(path: type.folderName, directoryHint: .isDirectory)
    }

    /// The book's path relative to the root, such as `ebooks/123.epub`.
    public func relativePath(for id: BookID, format: BookFormat) -> String {
        Self.bookPath(for: id, format: format)
    }

    private static func bookPath(for id: BookID, format: BookFormat) -> String {
        "\(id.type.folderName)/\(id.bookId).\(format.fileExtension)"
    }

    /// The sidecar's path relative to the root, such as `ebooks/123.meta.json`.
    public func relativeSidecarPath(for id: BookID) -> String {
        "\(id.type.folderName)/\(id.bookId)\(Self.sidecarSuffix)"
    }

    /// Writes `record` to its book's sidecar, atomically and whole: its content is synced before
    /// the rename, so after a power cut the sidecar is the old record or the new one, never an
    /// empty file, and an index rebuilt from sidecars keeps every book reported cached. The
    /// temporary file goes in `partial/`, so a crash never leaves one in a type folder. The folder
    /// is not synced here: a new book's folder is synced once for its group before the index
    /// records it; a rewritten sidecar is right in either version.
    func writeSidecar(_ record: CachedBookMetadata) throws {
        let prepared = try prepareSidecar(record)
        do {
            try placeSidecar(prepared, for: try record.bookID)
        } catch {
            unlink(prepared.path)
            throw error
        }
    }

    /// A record read back from the disk — the index, a sidecar, the previous version's index —
    /// with its paths confined to the cache: the book's file is where the layout puts a book of
    /// its id and format, whatever path the record names (`../notes.txt` from a hand-edited or
    /// damaged index never leads out of the cache), and a cover path that is not the layout's
    /// is dropped. Every path a record gives is made here.
    /// - Returns: The record, its paths the layout's.
    static func confined(_ record: CachedBookMetadata, id: BookID) -> CachedBookMetadata {
        var confined = record
        confined.localPath = bookPath(for: id, format: record.format)
        if let cover = record.coverPath {
            let prefix = "\(id.type.folderName)/\(id.bookId).cover."
            let ext = cover.utf8.dropFirst(prefix.utf8.count)
            let isLayouts =
                cover.hasPrefix(prefix) && (1...5).contains(ext.count)
                && ext.allSatisfy { (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0) }
            if !isLayouts { confined.coverPath = nil }
        }
        return confined
    }

    /// Why the cache's folders cannot be trusted, or `nil` when they can: the root (a link to a
    /// folder is followed) and, where they exist, `partial/` and the type folders (never links)
    /// must be folders of this user's that nobody else can write — another user who could write
    /// there could plant a link where a download or a sidecar goes. A root that does not exist yet is
    /// fine.
    package func untrustedFolderProblem() -> String? {
        if let reason = FileSystem.untrustedFolderReason(root.path, followLink: true) { return reason }
        for folder in [partialFolder] + BookType.allCases.map(folder(for:)) {
            if let reason = FileSystem.untrustedFolderReason(folder.path, followLink: false) {
                return "its folder \(folder.lastPathComponent)/ cannot be trusted: \(reason)"
            }
        }
        return nil
    }

    /// A book's sidecar written ahead, while its download still holds its place: its content synced
    /// in a temporary file in `partial/`, for ``placeSidecar(_:for:)`` to rename when the book is
    /// published. The sync then runs beside the other downloads' instead of in the publisher's
    /// group, where each book's would wait for the one before (2,000 small books: 18% slower).
    /// - Returns: The temporary file.
    func prepareSidecar(_ record: CachedBookMetadata) throws -> URL {
        let id = try record.bookID
        let data = Data(BookListJSON.sidecar(record))
        return try FileSystem.writeTemporary(data, for: url(forRelativePath: relativeSidecarPath(for: id)), in: partialFolder)
    }

    /// Renames a sidecar written by ``prepareSidecar(_:)`` into place; its folder's sync makes the
    /// name durable.
    func placeSidecar(_ prepared: URL, for id: BookID) throws {
        try FileSystem.rename(from: prepared, to: url(forRelativePath: relativeSidecarPath(for: id)))
    }

    /// The suffix that marks a sidecar file.
    public static let sidecarSuffix = ".meta.json"

    /// The absolute URL of a path relative to the root.
    public func url(forRelativePath path: String) -> URL {
        root.appending(path: path, directoryHint: .notDirectory)
    }

    /// The absolute path of a path relative to the root (no URL made: a book's steps ask often).
    package func path(forRelativePath path: String) -> String {
        rootPath.hasSuffix("/") ? rootPath + path : rootPath + "/" + path
    }

    /// Whether `record`'s book is cached whole: its file is in place with the record's size. The
    /// one rule for "already cached?", before a download is queued and again once its lock is held.
    func holdsWhole(_ record: CachedBookMetadata) -> Bool {
        FileSystem.fileSize(atPath: path(forRelativePath: record.localPath)) == record.fileSize
    }

    /// The partial file of a download of `id`; stable, so a later process can resume it.
    /// Its resume record is beside it (`.part.resume`).
    public func partialFile(for id: BookID) -> URL {
        partialFolder.appending(path: "\(id).part", directoryHint: .notDirectory)
    }

    /// The mark a download of `id` leaves while its book is judged (`.part.judging`): found by a
    /// later process, it says this one died judging the book (see ``DownloadService``'s crash
    /// loops).
    package func judgingMark(for id: BookID) -> URL {
        partialFolder.appending(path: "\(id).part.judging", directoryHint: .notDirectory)
    }

    /// The file whose bytes are the per-book locks on Linux (see ``BookLock``).
    var bookLocksFile: URL {
        root.appending(path: "books.lock", directoryHint: .notDirectory)
    }

    /// The per-book lock file, on platforms without open file description locks (see ``BookLock``).
    func bookLockFile(for id: BookID) -> URL {
        partialFolder.appending(path: "\(id).lock", directoryHint: .notDirectory)
    }

    /// Resolves the cache root: an explicit directory, else `$BOOKCACHE_DIR`, else
    /// `$XDG_CACHE_HOME/BookCache`, else `~/.cache/BookCache` (`Library/Caches/BookCache` on
    /// Apple platforms).
    /// - Parameters:
    ///   - explicit: A directory the user named, such as `--cache-dir`.
    ///   - environment: The environment to read.
    /// - Returns: The root directory.
    public static func defaultRoot(
        explicit: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> URL {
        if let explicit, !explicit.isEmpty { return URL(fileURLWithPath: explicit, isDirectory: true) }
        if let dir = environment["BOOKCACHE_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir, isDirectory: true) }
        #if canImport(Darwin)
            let caches =
                FileManager.default.urls(for: .cachesDirectory, in: .userDomainMask).first
                ?? URL(filePath: NSHomeDirectory(), directoryHint: .isDirectory).appending(
                    path: "Library/Caches", directoryHint: .isDirectory)
            return caches.appending(path: "BookCache", directoryHint: .isDirectory)
        #else
            if let xdg = environment["XDG_CACHE_HOME"], xdg.hasPrefix("/") {
                return URL(fileURLWithPath: xdg, isDirectory: true).appending(path: "BookCache", directoryHint: .isDirectory)
            }
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            return URL(fileURLWithPath: home, isDirectory: true).appending(path: ".cache/BookCache", directoryHint: .isDirectory)
        #endif
    }

    /// Removes everything a book has in its type folder: its file in any format (and the one
    /// recorded, if elsewhere), its sidecar and its cover. Called under the index lock.
    /// - Returns: Whether anything was there.
    func removeBookFiles(of id: BookID, record: CachedBookMetadata?) throws(BookCacheError) -> Bool {
        var paths = BookFormat.allCases.map { relativePath(for: id, format: $0) }
        if let localPath = record?.localPath, !paths.contains(localPath) { paths.append(localPath) }
        if let cover = record?.coverPath { paths.append(cover) }
        paths.append(relativeSidecarPath(for: id))
        var removed = false
        for path in paths {
            let file = url(forRelativePath: path)
            guard FileManager.default.fileExists(atPath: file.path) else { continue }
            do {
                try FileSystem.removeFile(file)
                removed = true
            } catch {
                throw .cacheDirectoryUnusable(root.path, "cannot remove \(path) (\(error))")
            }
        }
        return removed
    }
}
