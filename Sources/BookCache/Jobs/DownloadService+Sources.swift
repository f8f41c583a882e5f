import DownloadQueue
import Foundation
import Logging
import Synchronization

/// Scheduled sources: registered, listed, removed, and run when due.
extension DownloadService {
    // MARK: - Sources

    /// Registers a source to sync on a schedule; its first run is due now.
    /// - Parameters:
    ///   - source: A manifest or OPDS feed URL, or a file path (not standard input).
    ///   - keep: How many of its first books to keep cached (at least 1).
    ///   - type: The type for books whose source does not say.
    ///   - formats: The formats to take, most wanted first.
    ///   - section: The section of a navigation feed to follow.
    ///   - every: Seconds between runs; 4 hours by default, at least ``Configuration/minimumSourceInterval``.
    /// - Returns: The registered source.
    public func addSource(
        _ source: String, keep: Int, type: BookType = .ebook, formats: [BookFormat] = [.epub, .pdf], section: String? = nil,
        every: TimeInterval = 4 * 3600
    ) throws(BookCacheError) -> ScheduledSource {
        guard source != "-" else { throw .invalidArgument("a scheduled source cannot be standard input; give a URL or a file") }
        _ = try SyncSource(parsing: source, standardInput: { Data() })
        guard keep >= 1 else { throw .invalidArgument("keep must be at least 1") }
        guard every >= configuration.minimumSourceInterval else {
            throw .invalidArgument("a source runs at most every \(Int(configuration.minimumSourceInterval)) seconds")
        }
        guard !formats.isEmpty else { throw .invalidArgument("name at least one format") }
        let scheduled = ScheduledSource(
            id: Self.newID(), source: source, keep: keep, type: type, formats: formats, section: section, every: every, nextRunAt: now(),
            lastRunAt: nil, lastResult: nil, lastRunSucceeded: nil)
        try store().put(scheduled)
        broadcast.yield(.source(id: scheduled.id, scheduled.redacted))
        wakeup.signal()
        return scheduled
    }

    /// Every scheduled source, soonest first, credentials redacted.
    public func sources() throws(BookCacheError) -> [ScheduledSource] {
        try store().sources().map(\.redacted)
    }

    /// Stops syncing a source (books it brought stay). - Returns: Whether there was one.
    public func removeSource(_ id: String) throws(BookCacheError) -> Bool {
        let removed = try store().removeSource(id)
        if removed {
            syncing[id]?.cancel()
            broadcast.yield(.source(id: id, nil))
        }
        return removed
    }

    /// Starts the sources whose time has come. - Returns: When the next one is due.
    func startDueSources() throws(BookCacheError) -> Date? {
        var next: Date?
        let time = now()
        for source in try store().sources() where syncing[source.id] == nil {
            guard source.nextRunAt <= time else {
                next = min(next ?? source.nextRunAt, source.nextRunAt)
                continue
            }
            syncing[source.id] = Task { await self.runSource(source) }
        }
        return next
    }

    private func runSource(_ scheduled: ScheduledSource) async {
        var scheduled = scheduled
        logger.info("syncing a scheduled source", metadata: ["source": "\(scheduled.redacted.source)"])
        do {
            let source = try SyncSource(parsing: scheduled.source, standardInput: { Data() })
            let report = try await manager.sync(
                source, keep: scheduled.keep, type: scheduled.type, formats: scheduled.formats, section: scheduled.section, force: true)
            scheduled.lastResult = report.summary
            scheduled.lastRunSucceeded = report.isComplete
        } catch {
            scheduled.lastResult = error.message
            scheduled.lastRunSucceeded = false
        }
        syncing[scheduled.id] = nil
        scheduled.lastRunAt = now()
        scheduled.nextRunAt = now().addingTimeInterval(scheduled.every)
        do {
            // Removed while it ran: stays removed.
            if try store().sources().contains(where: { $0.id == scheduled.id }) {
                try store().put(scheduled)
                broadcast.yield(.source(id: scheduled.id, scheduled.redacted))
            }
        } catch {
            logger.error("cannot record a sync's outcome", metadata: ["source": "\(scheduled.id)", "error": "\(error)"])
        }
        wakeup.signal()
    }
}
