import DownloadQueue
import Foundation
import Logging
import Synchronization

/// Publishes validated books in groups: the books that become ready while one group is being
/// published go together in the next, made durable together and recorded in one index
/// transaction — one `fsync` of each type folder and one of the index's log for the group, not
/// three per book.
///
/// A book that is ready while nothing is being published goes at once, alone: nobody waits for
/// a group to fill. The guarantee is the one a single book has: when ``publish(_:)`` returns
/// success the book's file, its rename and its record are on the disk; before that, a crash
/// leaves the book whole-and-cached or not in the index at all. One book's failure (its sidecar
/// cannot be written, say) is its own: it is undone to its savepoint and the others of its group
/// are published; a failure of the transaction itself fails the group.
final class GroupPublisher: Sendable {
    /// A validated book, ready to be moved into place and recorded.
    struct Entry: Sendable {
        var record: CachedBookMetadata
        var partial: URL
        /// The record's sidecar, written and synced ahead (``CacheLayout/prepareSidecar(_:)``).
        var sidecar: URL?
        var pin: Bool
        var syncSource: String?
        var limits: Evictor.Limits
        /// The download that made it: its book stops being in use for it once published, and is its
        /// download's no more once the lock is released.
        var download: UsageTracker.Download? = nil
        /// The book's lock, held by its download and released here once the book is recorded.
        var lock: BookLock? = nil
    }

    /// A book as stored, and the books the budget evicted for it.
    typealias Outcome = Result<(stored: CachedBookMetadata, evicted: [EvictedBook]), BookCacheError>

    private struct Waiting {
        let entry: Entry
        let continuation: CheckedContinuation<Outcome, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        /// Whether a group is being published (by a drain on the blocking-work pool).
        var publishing = false
    }

    private let layout: CacheLayout
    private let store: IndexStore
    private let evictor: Evictor
    private let logger: Logger
    private let state = Mutex(State())

    init(layout: CacheLayout, store: IndexStore, evictor: Evictor, logger: Logger) {
        self.layout = layout
        self.store = store
        self.evictor = evictor
        self.logger = logger
    }

    /// Whether a group is being published now.
    var isPublishing: Bool { state.withLock { $0.publishing } }

    /// How many books wait for the next group.
    var waitingCount: Int { state.withLock { $0.waiting.count } }

    /// Publishes `entry` with whatever else is ready, and returns when its record is durable.
    func publish(_ entry: Entry) async -> Outcome {
        await withCheckedContinuation { continuation in
            let lead = state.withLock { state -> Bool in
                state.waiting.append(Waiting(entry: entry, continuation: continuation))
                defer { state.publishing = true }
                return !state.publishing
            }
            if lead { BlockingPool.shared.submit { [self] _ in drain() } }
        }
    }

    /// Publishes groups until nothing waits.
    private func drain() {
        while true {
            let group = state.withLock { state -> [Waiting] in
                defer { state.waiting.removeAll() }
                if state.waiting.isEmpty { state.publishing = false }
                return state.waiting
            }
            if group.isEmpty { return }
            let outcomes = publish(group.map(\.entry))
            for (waiting, outcome) in zip(group, outcomes) {
                if case .success = outcome {
                    // Recorded and durable: the book is its download's no more. Another process may use
                    // (or evict, or lock again) it before that download returns, and this one asks its lock.
                    waiting.entry.lock?.release()
                    waiting.entry.download?.end()
                }
                waiting.continuation.resume(returning: outcome)
            }
        }
    }

    /// Moves each book into place and records it, in one index transaction; every folder a book
    /// was renamed into is synced once, before the commit makes the records durable.
    private func publish(_ entries: [Entry]) -> [Outcome] {
        // The group's books do not evict each other for the budget.
        let group = entries.compactMap { try? $0.record.bookID }
        var outcomes: [Outcome] = []
        outcomes.reserveCapacity(entries.count)
        do throws(BookCacheError) {
            try store.update { index throws(BookCacheError) in
                // This runs again after the index is rebuilt: only the attempt that commits counts.
                outcomes.removeAll()
                for entry in entries { entry.download?.unpublished() }
                var folders = Set<String>()
                for entry in entries {
                    do throws(BookCacheError) {
                        let stored = try index.savepoint { () throws(BookCacheError) in
                            try place(entry, in: index, folders: &folders, group: group)
                        }
                        outcomes.append(.success(stored))
                        // Published once this update commits: no longer its download's to protect.
                        entry.download?.published()
                    } catch {
                        outcomes.append(.failure(error))
                    }
                }
                for folder in folders.sorted() { FileSystem.syncDirectory(folder) }
            }
        } catch {
            for entry in entries { entry.download?.unpublished() }
            // The transaction did not commit: no book of the group is recorded.
            return entries.indices.map { position in
                if position < outcomes.count, case .failure(let own) = outcomes[position] { return .failure(own) }
                return .failure(error)
            }
        }
        if entries.count > 1 { logger.debug("published a group", metadata: ["books": "\(entries.count)"]) }
        return outcomes
    }

    /// One book: its sidecar, its file renamed into place, its record, and what the budget evicts
    /// for it. A replaced book keeps its pin, its sync sources and its place in LRU order.
    private func place(
        _ entry: Entry, in index: IndexTransaction, folders: inout Set<String>, group: [BookID]
    ) throws(BookCacheError) -> (stored: CachedBookMetadata, evicted: [EvictedBook]) {
        var record = entry.record
        let id = try record.bookID
        let destination = layout.url(forRelativePath: record.localPath)
        let previous = index[id]
        if let previous {
            // A refresh keeps what the user decided about the book, its place in LRU order, and
            // what the catalogue said before when it says nothing now (``BookField/onRefresh``).
            for field in BookField.all { field.refresh(&record, from: previous) }
        }
        record.pinned = record.pinned || entry.pin
        // Only a book that sync brought in belongs to a sync source; one the user downloaded stays theirs.
        if let syncSource = entry.syncSource, previous == nil || previous?.syncSources.isEmpty == false,
            !record.syncSources.contains(syncSource)
        {
            record.syncSources.append(syncSource)
        }
        do {
            // Whole on the disk before its name is (the content was synced); the name is made durable
            // by the folder's sync after the group's renames. The sidecar written ahead serves when
            // nothing changed the record since (a new book: always).
            if let prepared = entry.sidecar, record == entry.record {
                try layout.placeSidecar(prepared, for: id)
            } else {
                if let prepared = entry.sidecar { try FileSystem.removeFile(prepared) }
                try layout.writeSidecar(record)
            }
            try FileSystem.rename(from: entry.partial, to: destination)
            folders.insert(destination.deletingLastPathComponent().path)
            // A book that changed format leaves its old file behind; remove it.
            for format in BookFormat.allCases where format != record.format {
                try FileSystem.removeFile(layout.url(forRelativePath: layout.relativePath(for: id, format: format)))
            }
        } catch let error as FileSystem.CallError where error.code == ENOSPC || error.code == EDQUOT {
            throw .diskFull(id, path: layout.root.path, needed: record.fileSize)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot store \(id) (\(error))")
        }
        index[id] = record
        let evicted = try evictor.evictForBudget(in: index, keeping: id, group: group, limits: entry.limits)
        return (record, evicted)
    }
}
