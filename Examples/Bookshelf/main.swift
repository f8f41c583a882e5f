// A small bookshelf on the BookCache library (and DownloadQueue, for its progress and event types) — what an app developer writes, built in CI
// so the documented API keeps compiling. It keeps at most two books, downloads the URLs it is
// given one by one, and shows what the library reports: progress, validation, evictions, and
// failures by their typed kind.
//
//     swift run bookshelf-example CACHE_DIR URL...
import BookCache
import DownloadQueue
import Foundation

@MainActor
final class Shelf {
    private(set) var lines: [String] = []
    private var lastPercent: [String: Int] = [:]

    func show(_ text: String) {
        lines.append(text)
        print(text)
    }

    /// Follows every download and eviction of the manager (the events of downloads started
    /// anywhere in the app arrive here), until `downloads` have ended.
    func follow(_ events: AsyncStream<BookEvent>, downloads: Int) async {
        var ended = 0
        for await event in events {
            switch event {
            case .progress(let id, let progress):
                // Every 25%, not every chunk.
                let percent = Int((progress.fractionCompleted ?? 0) * 4) * 25
                if percent > lastPercent[id.description, default: -1] {
                    lastPercent[id.description] = percent
                    show("\(id): \(percent)%")
                }
            case .validating(let id):
                show("\(id): validating")
            case .cached(let book, let alreadyCached):
                show(
                    "\(book.id): \(alreadyCached ? "already on the shelf" : "on the shelf") (\(book.format.rawValue), \(book.fileSize) bytes)"
                )
                ended += 1
            case .failed(let id, let error):
                show("\(id): not added — \(Self.explain(error))")
                ended += 1
            case .evicted(let gone):
                show("\(gone.metadata.id): taken off the shelf (\(gone.reason.rawValue))")
            case .queued, .started, .retrying:
                break
            }
            if ended == downloads { return }
        }
    }

    /// What an app tells its user, by the error's kind.
    static func explain(_ error: BookCacheError) -> String {
        switch error.kind {
        case .fileCorrupted: "the file is not a readable book (\(error.reason ?? "damaged"))"
        case .checksumMismatch: "the file differs from the one expected"
        case .networkUnavailable, .offline: "no connection; try again when online"
        case .insufficientStorage: "not enough space on this device"
        case .downloadFailed: "the server refused it (HTTP \(error.httpStatus.map(String.init) ?? "?"))"
        default: error.message
        }
    }
}

/// A download with its own events, written with a trailing closure as the README shows it
/// (compiled here: the closure once was ambiguous between `onProgress:` and `onEvent:`).
func fetch(_ request: BookDownloadRequest, with manager: BookCacheManager) async throws -> URL {
    let result = try await manager.download(request) { event in
        if case .retrying(_, let attempt, _, let reason) = event { print("attempt \(attempt) failed: \(reason)") }
    }
    return result.fileURL
}

/// Opening a book for the reader, as the getting-started guide shows it (compiled here, so the
/// guide's code keeps compiling).
func read(_ request: BookDownloadRequest, with manager: BookCacheManager) async {
    do {
        let file = try await manager.open(request)
        // Hand `file` to the reader view.
        _ = file
    } catch  where error.kind == .offline {
        // `open` throws only BookCacheError, so `error` is one: match on its kind.
        // "not cached and the network is unavailable": say so, offer the cached books.
    } catch {
        // Every BookCacheError's message says what to do next, in words for your users.
        print(error.message)
    }
}

let arguments = CommandLine.arguments.dropFirst()
guard let root = arguments.first, arguments.count >= 2 else {
    print("usage: bookshelf-example CACHE_DIR URL...")
    exit(64)
}
let manager = BookCacheManager(
    configuration: BookCacheConfiguration(rootDirectory: URL(fileURLWithPath: root), storageReserveBytes: 0, keepCount: 2))
let shelf = Shelf()
let urls = Array(arguments.dropFirst())
// Subscribed before the first download, so no event is missed.
let events = manager.events()
let follower = Task { await shelf.follow(events, downloads: urls.count) }
for url in urls {
    do {
        _ = try await manager.download(try BookDownloadRequest(url: url, type: .ebook))
    } catch {
        // Told through the events above, with its kind.
    }
}
await follower.value
for book in try await manager.allBooks() { print("shelf: \(book.id)") }
