import DownloadQueue
import Foundation

/// What happens to the books of a cache, from every download the manager runs and every
/// eviction: one event model for the whole life of a download — queued, started, progress,
/// validating, then cached (with the record) or failed (with the typed error) — plus evicted.
///
/// ``BookCacheManager/events()`` delivers them to any number of listeners; a download's own events
/// also go to the `onEvent` of the caller that started it and of every caller that joined it
/// (``BookCacheManager/download(_:onEvent:)``). A `@MainActor` view model consumes them with
/// `for await`:
///
/// ```swift
/// @MainActor @Observable final class Shelf {
///     var progress: [BookID: Double] = [:]
///     func follow(_ manager: BookCacheManager) async {
///         for await event in manager.events() {
///             switch event {
///             case .progress(let id, let p): progress[id] = p.fractionCompleted
///             case .cached(let book, _): progress[book.bookID] = nil
///             case .failed(let id, let error): show(error.message, for: id)
///             default: break
///             }
///         }
///     }
/// }
/// ```
public enum BookEvent: Sendable {
    /// The download waits for a slot in the queue.
    case queued(BookID)
    /// An attempt started (1 for the first).
    case started(BookID, attempt: Int)
    /// Bytes arrived (resumed bytes included).
    case progress(BookID, DownloadProgress)
    /// An attempt failed and another follows after `delay`; `reason` is the attempt's error, with
    /// its kind (`DownloadError.Kind.connectionFailed` when the server could not be reached).
    case retrying(BookID, attempt: Int, delay: Duration, reason: DownloadError)
    /// The whole file arrived and is being checked (archive, package document, PDF structure, checksum).
    case validating(BookID)
    /// The book is in the cache: the record as stored; `alreadyCached` when nothing was downloaded.
    case cached(CachedBookMetadata, alreadyCached: Bool)
    /// The download ended without the book: the error says why, with its kind.
    case failed(BookID, BookCacheError)
    /// The cache removed a book on its own (budget, free space, prune, a sync source).
    case evicted(EvictedBook)

    /// The book the event is about, when it names one by id.
    public var bookID: BookID? {
        switch self {
        case .queued(let id), .started(let id, _), .progress(let id, _), .retrying(let id, _, _, _), .validating(let id),
            .failed(let id, _):
            id
        case .cached(let record, _): try? record.bookID
        case .evicted(let book): try? book.metadata.bookID
        }
    }

    /// The event for a queue event of the book's download, if it has one (`finished` has none:
    /// validation follows it).
    init?(_ event: DownloadEvent, id: BookID) {
        switch event {
        case .queued: self = .queued(id)
        case .started(_, let attempt): self = .started(id, attempt: attempt)
        case .progress(_, let progress): self = .progress(id, progress)
        case .retrying(_, let attempt, let delay, let reason):
            self = .retrying(id, attempt: attempt, delay: delay, reason: reason)
        case .finished: return nil
        }
    }
}

/// Where one download's events go: the one place they are sent from. Each ``BookEvent`` of the
/// download — the queue's (queued, started, progress, retrying) as they happen, then validating,
/// cached or failed as ``DownloadContext`` performs the steps ``DownloadMachine`` gives — reaches
/// the manager's stream (``BookCacheManager/events()``), the caller that started the download, the
/// callers that joined it, and the download's latest progress (``BookCacheManager/status(of:)``).
struct DownloadFeed: Sendable {
    /// Every download's and eviction's events (``BookCacheManager/events()``).
    let everyone: Broadcast<BookEvent>
    /// Callers that joined the download.
    let joined: Broadcast<BookEvent>
    let progress: ProgressBox
    /// The caller that started the download.
    let starter: @Sendable (BookEvent) -> Void

    func send(_ event: BookEvent) {
        if case .progress(_, let value) = event { progress.value = value }
        everyone.yield(event)
        starter(event)
        joined.yield(event)
    }

    /// Sends the queue's event of the download as the book's, if it has one.
    func send(_ event: DownloadEvent, of id: BookID) {
        if let bookEvent = BookEvent(event, id: id) { send(bookEvent) }
    }
}
