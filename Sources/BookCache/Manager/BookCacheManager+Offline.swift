import DownloadQueue
import Foundation

/// The outcome of revalidating one book with the server.
public struct FreshnessCheck: Sendable, Hashable {
    /// What the server said.
    public enum State: String, Sendable, Hashable, Codable {
        /// 304, or the same validator: the cached copy is current.
        case fresh
        /// The server has a different copy.
        case outdated
        /// The check failed; nothing was changed.
        case unknown
    }

    /// The book.
    public var id: String
    /// The verdict.
    public var state: State
    /// Why, in a few words (the error for `unknown`).
    public var detail: String
}

extension BookCacheManager {
    // MARK: - Open

    /// The file of a cached book, recording the access; no network request is made.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/notCached``.
    public func open(_ id: BookID) throws(BookCacheError) -> URL {
        guard let url = try cachedFile(for: id) else { throw .notCached(id) }
        return url
    }

    /// Opens a book for reading: from the cache at once when it is there (no network request),
    /// otherwise downloaded at high priority first.
    /// - Parameters:
    ///   - request: The book; its priority is raised to high.
    ///   - onEvent: The download's events (``BookEvent``), when it has to be downloaded.
    /// - Returns: The local file.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/offline`` when the book is not
    ///   cached and the server cannot be reached; otherwise as ``download(_:onEvent:)``.
    public func open(
        _ request: BookDownloadRequest, onEvent: @escaping @Sendable (BookEvent) -> Void = { _ in }
    ) async throws(BookCacheError) -> URL {
        if let url = try cachedFile(for: request.id) { return url }
        var urgent = request
        urgent.priority = .high
        urgent.failFastWhenOffline = true
        do {
            let result = try await download(urgent, onEvent: onEvent)
            return try cachedFile(for: request.id) ?? result.fileURL
        } catch  where error.kind == .networkUnavailable {
            throw .offline(request.id, cause: error.underlying ?? error)
        }
    }

    // MARK: - Outdated

    /// Asks the server whether each book changed, with a conditional request (`If-None-Match`
    /// with the stored ETag, else `If-Modified-Since`). A 304 means fresh; a 200 with another
    /// validator or size means outdated (the book is marked, and ``status(of:)`` says
    /// `.outdated`); an error leaves the book as it was.
    /// - Parameter ids: The books; every book when empty.
    /// - Returns: One verdict per book, in id order.
    public func check(_ ids: [BookID] = []) async throws(BookCacheError) -> [FreshnessCheck] {
        let books =
            try ids.isEmpty
            ? allBooks()
            : ids.map { id throws(BookCacheError) in
                guard let record = try metadata(for: id) else { throw .notCached(id) }
                return record
            }
        var results: [FreshnessCheck] = []
        await withTaskGroup(of: FreshnessCheck.self) { group in
            for book in books {
                group.addTask { await self.revalidate(book) }
            }
            for await result in group { results.append(result) }
        }
        results.sort { $0.id < $1.id }
        for result in results where result.state != .unknown {
            if let id = try? BookID(parsing: result.id) {
                try updateRecord(id) { $0.outdated = result.state == .outdated }
            }
        }
        return results
    }

    private nonisolated func revalidate(_ book: CachedBookMetadata) async -> FreshnessCheck {
        guard let url = URL(string: book.fileUrl) else {
            return FreshnessCheck(id: book.id, state: .unknown, detail: "the recorded URL is invalid")
        }
        var headers: [(name: String, value: String)] = []
        if let etag = book.etag {
            headers.append(("If-None-Match", etag))
        } else if let lastModified = book.lastModified {
            headers.append(("If-Modified-Since", lastModified))
        }
        do {
            let response = try await transport.send(TransportRequest(url: url, headers: headers))
            // Only the head is wanted: a body (a 200 from a server that ignores the validator)
            // is cancelled, not left to hold its connection until the idle timeout.
            defer { response.body.cancel() }
            switch response.statusCode {
            case 304:
                return FreshnessCheck(id: book.id, state: .fresh, detail: "not modified")
            case 200:
                let etag = response.header("ETag")
                let lastModified = response.header("Last-Modified")
                if let etag, let old = book.etag {
                    return etag == old
                        ? FreshnessCheck(id: book.id, state: .fresh, detail: "same ETag")
                        : FreshnessCheck(id: book.id, state: .outdated, detail: "ETag changed from \(old) to \(etag)")
                }
                if let length = response.contentLength, length != book.fileSize {
                    return FreshnessCheck(id: book.id, state: .outdated, detail: "size changed from \(book.fileSize) to \(length) bytes")
                }
                if let lastModified, let old = book.lastModified, lastModified != old {
                    return FreshnessCheck(id: book.id, state: .outdated, detail: "Last-Modified changed from \(old) to \(lastModified)")
                }
                return FreshnessCheck(id: book.id, state: .fresh, detail: "same size and date")
            default:
                return FreshnessCheck(id: book.id, state: .unknown, detail: "HTTP \(response.statusCode)")
            }
        } catch {
            return FreshnessCheck(id: book.id, state: .unknown, detail: "\(error)")
        }
    }

    // MARK: - Refresh

    /// Downloads books again. The cached copy stays readable until the new one is validated,
    /// then is replaced atomically; pins, sync sources and the access time are kept.
    /// - Parameters:
    ///   - ids: The books; every book when empty.
    ///   - outdatedOnly: Only books a ``check(_:)`` found outdated.
    ///   - onEvent: Each download's events (``BookEvent``), with the book it was asked for.
    /// - Returns: One result per book, in id order.
    public func refresh(
        _ ids: [BookID] = [], outdatedOnly: Bool = false,
        onEvent: @escaping @Sendable (BookID, BookEvent) -> Void = { _, _ in }
    ) async throws(BookCacheError) -> [(id: BookID, result: Result<BookDownloadResult, BookCacheError>)] {
        var books =
            try ids.isEmpty
            ? allBooks()
            : ids.map { id throws(BookCacheError) in
                guard let record = try metadata(for: id) else { throw .notCached(id) }
                return record
            }
        if outdatedOnly { books = books.filter(\.outdated) }
        var requests: [BookDownloadRequest] = []
        for book in books {
            do {
                var request = try BookDownloadRequest(url: book.fileUrl, id: try book.bookID, title: book.title, coverURL: book.coverUrl)
                request.replaceExisting = true
                requests.append(request)
            } catch {
                throw error
            }
        }
        var results: [(id: BookID, result: Result<BookDownloadResult, BookCacheError>)] = []
        await withTaskGroup(of: (BookID, Result<BookDownloadResult, BookCacheError>).self) { group in
            for request in requests {
                group.addTask {
                    do throws(BookCacheError) {
                        let result = try await self.download(request, onEvent: { onEvent(request.id, $0) })
                        return (request.id, .success(result))
                    } catch {
                        return (request.id, .failure(error))
                    }
                }
            }
            for await (id, result) in group { results.append((id, result)) }
        }
        return results.sorted { $0.id < $1.id }
    }
}
