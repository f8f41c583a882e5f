import Foundation
import Logging
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The index of BookCache before the SQLite index (`metadata.json` + `metadata.journal`), kept to
/// import a cache made by that version on first open. Reads and updates it safely across
/// threads, managers and processes.
///
/// The index is `metadata.json` (a snapshot, replaced only by atomic rename) plus
/// `metadata.journal` (the changes since, appended one JSON line each and `fsync`ed).
/// - Updates take an exclusive `flock` on `metadata.lock`, read what other processes appended,
///   apply the change, and append only the records it touched. When the journal holds as many
///   entries as the snapshot has books (and at least ``compactionThreshold``), it is folded into
///   a new snapshot.
/// - Reads take a shared lock, so they never see a snapshot and a journal from different moments.
/// - Each store remembers what it last read (by the snapshot's identity and the journal offset),
///   so a read or update in a busy process only parses what changed.
/// - A torn last journal line (a writer killed mid-write) is ignored and cut off by the next
///   update. A damaged snapshot or journal is moved aside (`*.corrupt-TIME`) and the index is
///   rebuilt from the sidecars beside each book. An index from a newer schema is refused and
///   left untouched.
final class LegacyJSONIndex: Sendable {
    let layout: CacheLayout
    let logger: Logger
    /// The fewest journal entries that trigger folding the journal into a new snapshot.
    let compactionThreshold: Int
    private let cache = Mutex<State?>(nil)

    init(layout: CacheLayout, logger: Logger, compactionThreshold: Int = 512) {
        self.layout = layout
        self.logger = logger
        self.compactionThreshold = compactionThreshold
    }

    private var lock: FileLock { FileLock(url: layout.indexLockFile) }

    /// Whether the cache has an index on disk yet.
    var exists: Bool {
        FileManager.default.fileExists(atPath: layout.indexFile.path) || FileManager.default.fileExists(atPath: layout.journalFile.path)
    }

    /// The current index; empty when there is none yet.
    func read() throws(BookCacheError) -> MetadataIndex {
        // A cache that was never created has nothing in it; reading must not create it.
        guard FileManager.default.fileExists(atPath: layout.root.path) else { return MetadataIndex() }
        let outcome = try locked(shared: true) { () throws(BookCacheError) in try load() }
        switch outcome {
        case .loaded(let state):
            return state.index
        case .missingWithSidecars, .damaged:
            // Recovery writes, so it happens under the exclusive lock (another process may
            // have done it meanwhile; update then finds a good index).
            return try update { _ in }
        }
    }

    /// Applies `change` to the freshest index under the exclusive lock and records what changed.
    /// - Returns: The index after the change.
    @discardableResult
    func update(_ change: (inout MetadataIndex) throws(BookCacheError) -> Void) throws(BookCacheError) -> MetadataIndex {
        try locked(shared: false) { () throws(BookCacheError) -> MetadataIndex in
            var state: State
            switch try load() {
            case .loaded(let loaded): state = loaded
            case .missingWithSidecars(let journal): state = try recover(problem: nil, base: journal)
            case .damaged(let problem, let base): state = try recover(problem: problem, base: base)
            }
            var index = state.index
            index.markClean()
            try change(&index)
            let changed = index.changedKeys.sorted()
            index.markClean()
            if state.identity == nil {
                // First write of a new cache: a snapshot, so metadata.json is there from the start.
                state = try writeSnapshot(index)
            } else if !changed.isEmpty {
                let entries = changed.map { key in index[key: key].map(IndexJournal.Entry.set) ?? .remove(key) }
                let appended = try appendJournal(entries, at: state.journalOffset)
                state.index = index
                state.journalEntries += entries.count
                state.journalOffset += appended
                if state.journalEntries >= max(compactionThreshold, index.count) {
                    state = try writeSnapshot(index)
                }
            }
            cache.withLock { $0 = state }
            return index
        }
    }

    // MARK: - Loading

    private struct FileIdentity: Equatable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modifiedSeconds: Int
        var modifiedNanoseconds: Int
    }

    private struct State {
        /// The snapshot these contents came from; `nil` when there is no snapshot yet.
        var identity: FileIdentity?
        var index: MetadataIndex
        /// Bytes of the journal already applied.
        var journalOffset: Int
        var journalEntries: Int
    }

    private enum LoadOutcome {
        case loaded(State)
        /// No snapshot, but books on disk: rebuild from sidecars (then apply this journal).
        case missingWithSidecars(MetadataIndex?)
        /// Something could not be read; `base` is what could be.
        case damaged(String, base: MetadataIndex?)
    }

    /// Reads the snapshot (or reuses the cached one) and applies the journal's new lines.
    /// Called under the lock.
    private func load() throws(BookCacheError) -> LoadOutcome {
        let identity = try Self.identity(of: layout.indexFile)
        var state: State
        if let identity, let cached = cache.withLock({ $0 }), cached.identity == identity {
            state = cached
        } else if let identity {
            switch try decodeSnapshot() {
            case .success(let index): state = State(identity: identity, index: index, journalOffset: 0, journalEntries: 0)
            case .failure(let problem): return .damaged(problem.description, base: nil)
            }
        } else {
            state = State(identity: nil, index: MetadataIndex(), journalOffset: 0, journalEntries: 0)
        }

        let journal: Data
        do {
            journal = try Self.readJournal(layout.journalFile, from: state.journalOffset)
        } catch {
            throw .indexUnusable(layout.journalFile.path, "cannot be read (\(error)); check its permissions")
        }
        do {
            let parsed = try IndexJournal.parse(journal)
            for entry in parsed.entries { state.index.apply(entry) }
            state.index.markClean()
            state.journalOffset += parsed.consumed
            state.journalEntries += parsed.entries.count
        } catch {
            return .damaged("\(error)", base: state.identity == nil ? nil : state.index)
        }
        if state.identity == nil, SidecarScanner(layout: layout, logger: logger).hasSidecars() {
            return .missingWithSidecars(state.index.books.isEmpty ? nil : state.index)
        }
        if state.identity != nil { cache.withLock { $0 = state } }
        return .loaded(state)
    }

    private func decodeSnapshot() throws(BookCacheError) -> Result<MetadataIndex, SnapshotProblem> {
        let data: Data
        do {
            data = try Data(contentsOf: layout.indexFile)
        } catch {
            throw .indexUnusable(layout.indexFile.path, "cannot be read (\(error)); check its permissions")
        }
        do {
            let index = try MetadataIndex(snapshot: data)
            guard index.schemaVersion <= MetadataIndex.currentSchemaVersion else {
                throw BookCacheError.indexUnusable(
                    layout.indexFile.path,
                    "was written by a newer BookCache (schema \(index.schemaVersion); this one reads \(MetadataIndex.currentSchemaVersion)); upgrade bookcache — the index was left untouched")
            }
            return .success(index)
        } catch let error as BookCacheError {
            throw error
        } catch {
            return .failure(SnapshotProblem(description: "metadata.json is unreadable (\(error))"))
        }
    }

    private struct SnapshotProblem: Error, CustomStringConvertible {
        var description: String
    }

    // MARK: - Writing

    /// Appends `entries` at `offset` (the end of the last whole line) and returns the bytes written.
    private func appendJournal(_ entries: [IndexJournal.Entry], at offset: Int) throws(BookCacheError) -> Int {
        do {
            let data = try IndexJournal.encode(entries)
            let fd = open(layout.journalFile.path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw FileSystem.CallError(operation: "open", path: layout.journalFile.path, code: errno) }
            defer { close(fd) }
            // Cut off a torn line left by a writer that died mid-write, then write after it.
            guard ftruncate(fd, off_t(offset)) == 0 else { throw FileSystem.CallError(operation: "truncate", path: layout.journalFile.path, code: errno) }
            try data.withUnsafeBytes { bytes in
                var written = 0
                while written < bytes.count {
                    let n = pwrite(fd, bytes.baseAddress! + written, bytes.count - written, off_t(offset + written))
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw FileSystem.CallError(operation: "write", path: layout.journalFile.path, code: errno)
                    }
                    written += n
                }
            }
            guard fsync(fd) == 0 else { throw FileSystem.CallError(operation: "fsync", path: layout.journalFile.path, code: errno) }
            return data.count
        } catch let error as BookCacheError {
            throw error
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot write the index journal (\(error))")
        }
    }

    /// Writes `index` as the new snapshot and empties the journal.
    private func writeSnapshot(_ index: MetadataIndex) throws(BookCacheError) -> State {
        do {
            let data = try index.encoded()
            try FileSystem.writeAtomically(data, to: layout.indexFile)
            // Only now may the journal go: replaying it onto the new snapshot would change nothing.
            if truncate(layout.journalFile.path, 0) != 0 && errno != ENOENT {
                throw FileSystem.CallError(operation: "truncate", path: layout.journalFile.path, code: errno)
            }
            return State(identity: try Self.identity(of: layout.indexFile), index: index, journalOffset: 0, journalEntries: 0)
        } catch let error as BookCacheError {
            throw error
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot write the index (\(error))")
        }
    }

    // MARK: - Recovery

    /// Rebuilds the index after damage or loss: what could be read, plus every book whose
    /// sidecar and file are on disk. Damaged files are moved aside first. Called under the lock.
    private func recover(problem: String?, base: MetadataIndex?) throws(BookCacheError) -> State {
        let stamp = Int(Date().timeIntervalSince1970)
        var movedAside: [String] = []
        if problem != nil {
            for file in [layout.indexFile, layout.journalFile] where FileManager.default.fileExists(atPath: file.path) {
                let aside = file.deletingLastPathComponent().appendingPathComponent("\(file.lastPathComponent).corrupt-\(stamp)")
                do {
                    try FileSystem.moveAtomically(from: file, to: aside)
                    movedAside.append(aside.path)
                } catch {
                    throw .cacheDirectoryUnusable(layout.root.path, "cannot move the damaged index aside (\(error))")
                }
            }
        }
        var index = base ?? MetadataIndex()
        let scanner = SidecarScanner(layout: layout, logger: logger)
        // Keep only records whose file is on disk with the recorded size.
        for (key, record) in index.books where !scanner.fileMatches(record) {
            index[key: key] = nil
        }
        var adopted = 0
        for (key, record) in scanner.rebuildIndex().books where index[key: key] == nil {
            index[key: key] = record
            adopted += 1
        }
        index.markClean()
        logger.warning(
            problem == nil
                ? "the index was missing and has been rebuilt from the books on disk"
                : "the index was damaged and has been rebuilt from the books on disk",
            metadata: [
                "problem": "\(problem ?? "metadata.json is missing")", "books": "\(index.books.count)",
                "fromSidecars": "\(adopted)", "damagedCopies": "\(movedAside.joined(separator: ", "))",
            ])
        return try writeSnapshot(index)
    }

    // MARK: - Files

    private static func identity(of url: URL) throws(BookCacheError) -> FileIdentity? {
        var info = stat()
        guard stat(url.path, &info) == 0 else {
            if errno == ENOENT { return nil }
            throw .indexUnusable(url.path, "cannot be read (\(String(cString: strerror(errno)))); check its permissions")
        }
        return FileIdentity(
            device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
            modifiedSeconds: Int(info.st_mtim.tv_sec), modifiedNanoseconds: Int(info.st_mtim.tv_nsec))
    }

    /// The journal's bytes from `offset` to its end; empty when there is no journal.
    private static func readJournal(_ url: URL, from offset: Int) throws -> Data {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            if errno == ENOENT { return Data() }
            throw FileSystem.CallError(operation: "open", path: url.path, code: errno)
        }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw FileSystem.CallError(operation: "stat", path: url.path, code: errno) }
        let size = Int(info.st_size)
        guard size > offset else { return Data() }
        var data = Data(count: size - offset)
        let count = data.count
        try data.withUnsafeMutableBytes { bytes in
            var done = 0
            while done < count {
                let n = pread(fd, bytes.baseAddress! + done, count - done, off_t(offset + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FileSystem.CallError(operation: "read", path: url.path, code: errno)
                }
                if n == 0 { break }
                done += n
            }
            if done < count { bytes.initializeMemory(as: UInt8.self, repeating: 0x0A) }
        }
        return data
    }

    private func locked<T>(shared: Bool, _ body: () throws(BookCacheError) -> T) throws(BookCacheError) -> T {
        do {
            return try lock.withLock(shared: shared) { try body() }
        } catch let error as BookCacheError {
            throw error
        } catch let error as FileSystem.CallError where error.code == EROFS {
            throw .cacheDirectoryUnusable(layout.root.path, "it is on a read-only filesystem, so nothing can be changed (nothing was)")
        } catch let error as FileSystem.CallError where error.code == EACCES || error.code == EPERM {
            throw .cacheDirectoryUnusable(layout.root.path, "this user may not write to it (\(error)); nothing was changed")
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot lock the index (\(error))")
        }
    }
}
