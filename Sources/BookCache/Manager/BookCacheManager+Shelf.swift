import DownloadQueue
import Foundation

extension BookCacheManager {
    /// A page of the cached books: filtered, sorted and paged by the index, so a shelf or a
    /// catalogue shows a screenful of a million books as quickly as of a hundred.
    ///
    /// The index is read on a blocking-work thread (not behind the manager's other work); the
    /// calling task waits without holding a thread.
    /// - Parameter query: The filters, the order, the page size and where the page starts.
    /// - Returns: The books and the cursor of the next page.
    /// - Throws: ``BookCacheError`` (`invalidArgument`) when `query.after` is not a cursor a page
    ///   of this order gave; when the index cannot be read.
    public nonisolated func shelf(_ query: ShelfQuery) async throws(BookCacheError) -> ShelfPage {
        try await BlockingWork.run { () throws(BookCacheError) in try self.blockingShelf(query) }
    }

    /// ``shelf(_:)`` on the calling thread, which it blocks: for callers already on blocking work
    /// (checked in debug builds).
    package nonisolated func blockingShelf(_ query: ShelfQuery) throws(BookCacheError) -> ShelfPage {
        var cursor: ShelfCursor?
        if let after = query.after {
            guard let parsed = ShelfCursor(after, for: query.order) else {
                throw .invalidArgument(
                    "the page cursor \(after.prefix(40)) is not one a \(query.order.rawValue) page gave; start from the first page")
            }
            cursor = parsed
        }
        var books = try store.shelf(query, after: cursor)
        var next: String?
        if books.count > query.limit {
            books.removeLast(books.count - query.limit)
            next = books.last.map { ShelfCursor(after: $0, in: query.order).encoded }
        }
        return ShelfPage(books: books, next: next)
    }

    /// The authors of the cached books (of one type, or all), with how many books each has, by
    /// name ignoring ASCII case: `limit` of them from `offset`. Read as ``shelf(_:)`` is.
    /// - Parameters:
    ///   - type: Only authors of books of this type; all when `nil`.
    ///   - offset: How many to skip.
    ///   - limit: The most to return (1–500).
    /// - Throws: ``BookCacheError`` when the index cannot be read.
    public nonisolated func authors(ofType type: BookType? = nil, offset: Int = 0, limit: Int = 100) async throws(BookCacheError)
        -> [(name: String, books: Int)]
    {
        try await BlockingWork.run { () throws(BookCacheError) in try self.blockingAuthors(ofType: type, offset: offset, limit: limit) }
    }

    /// ``authors(ofType:offset:limit:)`` on the calling thread, which it blocks.
    package nonisolated func blockingAuthors(ofType type: BookType? = nil, offset: Int = 0, limit: Int = 100) throws(BookCacheError)
        -> [(name: String, books: Int)]
    {
        try store.authors(ofType: type, offset: max(0, offset), limit: min(max(limit, 1), ShelfQuery.maxLimit))
    }
}
