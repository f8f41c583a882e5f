import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore

extension APIServer {
    /// `/api/v1/books` (the shelf, one book, its file and cover, pin, refresh, delete, clear)
    /// and `/api/v1/stats`.
    func bookRoutes() -> RouteCollection<ServiceRequestContext> {
        let routes = RouteCollection(context: ServiceRequestContext.self)
        let service = self.service
        let manager = service.manager
        let served = servedBooks
        routes.get("books") { request, _ -> Response in
            // With any of limit, after, sort, q, author, type or status: one page of the shelf,
            // `{"books": [...], "next": CURSOR}`, read from the index. Without: every book.
            let buffer = try await Self.bookList(try Self.shelfQuery(request), in: manager)
            return Response(
                status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: buffer))
        }
        routes.delete("books") { _, _ -> Response in
            // Clear all: every book of the cache (the page asks first).
            let removed = try await manager.clear()
            for id in removed { service.bookRemoved(id.description) }
            struct Cleared: Encodable { var removed: Int }
            return APIResponse.json(Cleared(removed: removed.count))
        }
        routes.get("stats") { _, _ -> Response in
            APIResponse.json(try await manager.statistics())
        }
        routes.get("books/:id") { _, context -> Response in
            APIResponse.json(APIBook(book: try await Self.book(context, in: manager)))
        }
        routes.delete("books/:id") { _, context -> Response in
            let id = try Self.bookID(context)
            guard try await manager.delete(id) else { throw APIError.notFound(kind: "notCached", "\(id) is not cached") }
            service.bookRemoved(id.description)
            struct Deleted: Encodable { var deleted: String }
            return APIResponse.json(Deleted(deleted: id.description))
        }
        routes.post("books/:id/refresh") { _, context -> Response in
            // Fetched again as a job (the page's Refresh): the cached copy stays readable until
            // the new one is validated.
            let jobs = try await service.refresh(try await Self.book(context, in: manager))
            struct Accepted: Encodable { var jobs: [APIJob] }
            return APIResponse.json(Accepted(jobs: jobs.map(APIJob.init)), status: .accepted)
        }
        for (method, pinned) in [(HTTPRequest.Method.put, true), (.delete, false)] {
            routes.on("books/:id/pin", method: method) { _, context -> Response in
                let id = try Self.bookID(context)
                if pinned { try await manager.pin(id) } else { try await manager.unpin(id) }
                return APIResponse.json(APIBook(book: try await Self.book(context, in: manager)))
            }
        }
        for method in [HTTPRequest.Method.get, .head] {
            routes.on("books/:id/file", method: method) { request, context -> Response in
                try await Self.fileResponse(request, context, served: served, manager: manager)
            }
            routes.on("books/:id/cover", method: method) { _, context -> Response in
                try await Self.coverResponse(try await Self.book(context, in: manager), manager: manager, headOnly: method == .head)
            }
        }

        return routes
    }
}

extension APIServer {
    /// The shelf query of `GET /books?limit=&after=&sort=&q=&author=&type=&status=`; `nil` when
    /// none of them is given (the whole listing).
    /// - Throws: ``APIError/badRequest(_:)`` for a value that is not one of those documented.
    static func shelfQuery(_ request: Request) throws -> ShelfQuery? {
        let names = ["limit", "after", "sort", "q", "author", "type", "status"]
        guard try names.contains(where: { try parameter($0, of: request) != nil }) else { return nil }
        var query = ShelfQuery(limit: 50)
        if let text = try parameter("limit", of: request) {
            guard let limit = Int(text), (1...ShelfQuery.maxLimit).contains(limit) else {
                throw APIError.badRequest("limit must be a number from 1 to \(ShelfQuery.maxLimit)")
            }
            query.limit = limit
        }
        if let sort = try parameter("sort", of: request) {
            guard let order = ShelfQuery.Order(rawValue: sort) else {
                throw APIError.badRequest("sort must be one of \(ShelfQuery.Order.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            query.order = order
        }
        if let type = try parameter("type", of: request) {
            guard let bookType = BookType(rawValue: type) else { throw APIError.badRequest("type must be ebook or magazine") }
            query.type = bookType
        }
        switch try parameter("status", of: request) {
        case nil, "all": break
        case "pinned": query.pinnedOnly = true
        case "outdated": query.outdatedOnly = true
        default: throw APIError.badRequest("status must be all, pinned or outdated")
        }
        query.search = try parameter("q", of: request)
        query.author = try parameter("author", of: request).flatMap { $0.isEmpty ? nil : $0 }
        query.after = try parameter("after", of: request).flatMap { $0.isEmpty ? nil : $0 }
        return query
    }

    /// The file of the book the route's `:id` names, as ``BookFile`` serves it, saved (or handed
    /// to the phone's reader) as `Title.epub`. A `GET` is a read and records the access (as
    /// `bookcache path` does; ``ServedBooks`` says how often); a `HEAD` is not.
    static func fileResponse(_ request: Request, _ context: ServiceRequestContext, served: ServedBooks, manager: BookCacheManager)
        async throws -> Response
    {
        let headOnly = request.method == .head
        let (book, file) = try await served.open(try bookID(context), in: manager, reading: !headOnly)
        return BookFile.response(
            file: file, book: book, range: request.headers[.range], ifRange: request.headers[.ifRange], headOnly: headOnly,
            channel: context.channel)
    }

    /// A book's cached cover, with its media type; 404 when it has none.
    static func coverResponse(_ book: CachedBookMetadata, manager: BookCacheManager, headOnly: Bool) async throws -> Response {
        guard let path = book.coverPath, let type = OPDSCatalogue.imageType(path) else {
            throw APIError.notFound(kind: "noCover", "\(book.id) has no cached cover")
        }
        let url = manager.layout.url(forRelativePath: path)
        let image: ByteBuffer
        do {
            // A cover is small (20 MiB at most when fetched): read whole, and a larger file is no cover
            // of ours. The error names the file, not its folder.
            image = try await BlockingWork.run { () throws -> ByteBuffer in
                let file = try OpenFile(url.path)
                defer { file.close() }
                guard file.size <= 32 << 20 else { throw FileSystem.CallError(operation: "read", path: url.lastPathComponent, code: EFBIG) }
                return try file.read(at: 0, count: Int(file.size))
            }
        } catch {
            throw APIError.notFound(kind: "noCover", "\(book.id)'s cover cannot be read (\(error)); run bookcache verify")
        }
        return Response(
            status: .ok,
            headers: [
                .contentType: type, .contentLength: "\(image.readableBytes)", .cacheControl: "private, max-age=86400",
                .contentSecurityPolicy: "sandbox; default-src 'none'",
            ],
            body: headOnly ? ResponseBody() : ResponseBody(byteBuffer: image))
    }

    /// The book id the route's `:id` names.
    /// - Throws: ``BookCacheError`` (`invalidIdentifier`, answered 400) when it is not one.
    static func bookID(_ context: ServiceRequestContext) throws(BookCacheError) -> BookID {
        try BookID(parsing: context.parameters.get("id") ?? "")
    }

    /// The cached book the route's `:id` names; 404 when it is not cached. `reading` records the
    /// access (as `bookcache path` does), in the same call to the index.
    static func book(_ context: ServiceRequestContext, in manager: BookCacheManager, reading: Bool = false) async throws
        -> CachedBookMetadata
    {
        let id = try bookID(context)
        let found = reading ? try await manager.read(id) : try await manager.metadata(for: id)
        guard let book = found else { throw APIError.notFound(kind: "notCached", "\(id) is not cached") }
        return book
    }

    /// `{"books": [...], "next": CURSOR}` for a page of the shelf, or `{"books": [...]}` with
    /// every book: the array as `list --json` writes it, read row by row and written by hand on
    /// a blocking-work thread (JSONEncoder took 2.3 s and 536 MiB for 100,000).
    static func bookList(_ query: ShelfQuery?, in manager: BookCacheManager) async throws -> ByteBuffer {
        try await BlockingWork.run { () throws(BookCacheError) -> ByteBuffer in
            var buffer = ByteBuffer(string: #"{"books": "#)
            var writer = BookListJSON.Writer { bytes in buffer.writeBytes(bytes) }
            guard let query else {
                try manager.blockingForEachBook { writer.add($0) }
                writer.finish()
                buffer.writeString("}")
                return buffer
            }
            let page = try manager.blockingShelf(query)
            for book in page.books { writer.add(book) }
            writer.finish()
            // A cursor is base64url: nothing in it needs escaping in a JSON string
            buffer.writeString(page.next.map { #", "next": "\#($0)"}"# } ?? #", "next": null}"#)
            return buffer
        }
    }
}
