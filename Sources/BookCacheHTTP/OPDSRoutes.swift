import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore
import Synchronization

extension APIServer {
    /// `/opds…`: the catalogue for e-readers, behind its own door (``OPDSAccessMiddleware``).
    func addOPDSRoutes(to router: Router<ServiceRequestContext>, readers: ReaderLogins) {
        let manager = service.manager
        let catalogue = OPDSCatalogue(manager: manager)
        let opds = router.group("opds")
            .add(
                middleware: OPDSAccessMiddleware(
                    access: access, readers: readers, client: { $0.channel.remoteAddress?.ipAddress ?? "unknown" }, logger: logger)
            )
            .add(middleware: APIErrorMiddleware())

        // Every route answers HEAD as it answers GET (KOReader sends a HEAD before each feed),
        // behind the same door: the same 401 with its challenge, the same head without the body.
        func route(
            _ group: RouterGroup<ServiceRequestContext>, _ path: RouterPath = "",
            _ handler: @escaping @Sendable (Request, ServiceRequestContext) async throws -> Response
        ) {
            group.on(path, method: .get, use: handler)
            group.on(path, method: .head) { request, context in Self.headOnly(try await handler(request, context)) }
        }

        for flavour in [OPDSCatalogue.Flavour.atom, .json] {
            let group = flavour == .atom ? opds : opds.group("v2")
            route(group) { request, _ -> Response in
                let strings = Self.strings(request)
                return Self.feed(try await catalogue.root(flavour, strings: strings), flavour, request)
            }
            let selections: [(String, OPDSCatalogue.Selection)] = [
                ("new", .newest), ("ebooks", .type(.ebook)), ("magazines", .type(.magazine)), ("pinned", .pinned),
            ]
            for (path, selection) in selections {
                route(group, RouterPath(path)) { request, _ -> Response in
                    let after = try Self.parameter("after", of: request)
                    let feed = try await catalogue.books(selection, after: after, flavour, strings: Self.strings(request))
                    return Self.feed(feed, flavour, request)
                }
            }
            route(group, "author") { request, _ -> Response in
                guard let name = try Self.parameter("name", of: request), !name.isEmpty else {
                    throw APIError.badRequest("name the author: \(flavour.root)/author?name=NAME")
                }
                let feed = try await catalogue.books(
                    .author(name), after: try Self.parameter("after", of: request), flavour, strings: Self.strings(request))
                return Self.feed(feed, flavour, request)
            }
            route(group, "search") { request, _ -> Response in
                let key = flavour == .atom ? "q" : "query"
                guard let terms = try Self.parameter(key, of: request) ?? Self.parameter("q", of: request),
                    !terms.trimmingCharacters(in: .whitespaces).isEmpty
                else {
                    throw APIError.badRequest("say what to search for: \(flavour.root)/search?\(key)=WORDS")
                }
                let feed = try await catalogue.books(
                    .search(terms), after: try Self.parameter("after", of: request), flavour, strings: Self.strings(request))
                return Self.feed(feed, flavour, request)
            }
            route(group, "authors") { request, _ -> Response in
                let offsetText = try Self.parameter("offset", of: request)
                guard let offset = offsetText.map({ Int($0) }) ?? 0, (0...10_000_000).contains(offset) else {
                    throw APIError.badRequest("offset must be a number of authors to skip")
                }
                return Self.feed(try await catalogue.authors(offset: offset, flavour, strings: Self.strings(request)), flavour, request)
            }
        }
        route(opds, "search.xml") { request, _ -> Response in
            Response(
                status: .ok,
                headers: [
                    .contentType: "application/opensearchdescription+xml; charset=utf-8", .cacheControl: "no-store",
                    .vary: "Accept-Language",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: OPDSCatalogue.openSearchDescription(strings: Self.strings(request)))))
        }
        for method in [HTTPRequest.Method.get, .head] {
            opds.on("books/:id/file", method: method) { request, context -> Response in
                try await Self.fileResponse(request, context, served: servedBooks, manager: manager)
            }
            opds.on("books/:id/cover", method: method) { _, context -> Response in
                try await Self.coverResponse(try await Self.book(context, in: manager), manager: manager, headOnly: method == .head)
            }
        }
    }

    /// The feed in its flavour's media type, in the request's language.
    static func feed(_ feed: OPDSCatalogue.Feed, _ flavour: OPDSCatalogue.Flavour, _ request: Request) -> Response {
        let type = feed.isNavigation ? flavour.navigationType : flavour.acquisitionType
        let body: ByteBuffer =
            switch flavour {
            case .atom: ByteBuffer(string: feed.atom(updated: Date()))
            // The key is the English text (English has no table of its own): never an empty title.
            case .json:
                ByteBuffer(
                    bytes: feed.json(
                        emptyText: strings(request)["Nothing here yet: back to the catalogue"] ?? "Nothing here yet: back to the catalogue")
                )
            }
        return Response(
            status: .ok,
            headers: [
                .contentType: type + (flavour == .atom ? "; charset=utf-8" : ""), .cacheControl: "no-store",
                .contentLanguage: BookCacheLanguage(acceptLanguage: request.headers[.acceptLanguage]).rawValue,
                .vary: "Accept-Language",
            ],
            body: ResponseBody(byteBuffer: body))
    }

    /// The head of a `GET` answer, for `HEAD`: its status and headers, with the length of the body it leaves out.
    static func headOnly(_ response: Response) -> Response {
        var head = Response(status: response.status, headers: response.headers)
        if let length = response.body.contentLength { head.headers[.contentLength] = String(length) }
        return head
    }

    static func strings(_ request: Request) -> [String: String] {
        BookCacheLanguage(acceptLanguage: request.headers[.acceptLanguage]).strings(in: .module)
    }

    /// A query parameter, decoded as forms and browsers encode it (`+` is a space, `%XX` a
    /// byte), at most `maxBytes` (1,000; a page cursor, which carries a title, up to
    /// ``ShelfQuery/maxCursorBytes``) and without control characters (`400` otherwise); `nil`
    /// when absent. The first of a repeated parameter counts.
    static func parameter(_ name: String, of request: Request) throws -> String? {
        let maxBytes = name == "after" ? ShelfQuery.maxCursorBytes : 1000
        guard let query = request.uri.query else { return nil }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard decode(parts[0]) == name else { continue }
            guard let value = parts.count > 1 ? decode(parts[1]) : "" else {
                throw APIError.badRequest("\(name) is not percent-encoded UTF-8")
            }
            guard value.utf8.count <= maxBytes else { throw APIError.badRequest("\(name) is longer than \(maxBytes) bytes") }
            guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw APIError.badRequest("\(name) holds a control character")
            }
            return value
        }
        return nil
    }

    private static func decode(_ text: Substring) -> String? {
        text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding
    }

    /// `Content-Disposition` naming the file after the book's title (`Title.epub`): the UTF-8 name
    /// (`filename*`, RFC 6266) and an ASCII one for readers that take only `filename` (KOReader's
    /// "use server file names"), transliterated — "Über Größe & Maß" is `Uber Grosse & Mass`, 红楼梦
    /// is `hong lou meng` — or, where nothing transliterates, the book's id; both without path
    /// separators, quotes or control characters.
    static func attachment(_ book: CachedBookMetadata) -> String {
        let ext = book.format == .pdf ? "pdf" : "epub"
        // A record made before titles were bounded may hold a huge one: the header is bounded here.
        var name = fileName(MetadataText.bounded(book.title, maxBytes: 180), ascii: false)
        if name.isEmpty || name.hasPrefix(".") { name = book.bookId }
        // Transliterated first, then made safe: Latin-ASCII writes ½ and ⁄ as slashes.
        var ascii = fileName(latin(name), ascii: true)
        // The ASCII name's letters and digits are A-Z a-z 0-9
        let isAlphanumeric: (UInt8) -> Bool = {
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0)
                || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains($0)
        }
        if !ascii.utf8.contains(where: isAlphanumeric) || ascii.hasPrefix(".") {
            ascii = book.bookId
        }
        return "attachment; filename=\"\(ascii).\(ext)\"; filename*=UTF-8''\(OPDSCatalogue.percentEncoded(name)).\(ext)"
    }

    /// `name` in Latin letters (Any-Latin; Latin-ASCII), for the ASCII `filename`. ICU builds its
    /// transliterator anew for each call (0.3 ms, a third of a file request's CPU), so the names
    /// made are kept: at most ``maxLatinNames`` titles, forgotten all at once when full. An ASCII
    /// name has nothing to transliterate.
    static func latin(_ name: String) -> String {
        if name.utf8.allSatisfy({ $0 < 0x80 }) { return name }
        if let known = latinNames.withLock({ $0[name] }) { return known }
        let made = name.applyingTransform(StringTransform("Any-Latin; Latin-ASCII"), reverse: false) ?? name
        latinNames.withLock { names in
            if names.count >= maxLatinNames { names.removeAll() }
            names[name] = made
        }
        return made
    }

    /// The most transliterated titles kept (each at most 180 bytes and its transliteration).
    static let maxLatinNames = 4096
    /// Transliterated titles, by title.
    static let latinNames = Mutex<[String: String]>([:])

    /// `text` as a file name: control characters, path separators and quotes (and, for the ASCII
    /// name, anything not ASCII, `%` and `;`, which a quoted `filename` cannot carry) become `_`.
    private static func fileName(_ text: String, ascii: Bool) -> String {
        var name = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            let unsafe =
                scalar.value < 0x20 || scalar.value == 0x7F || scalar == "/" || scalar == "\\" || scalar == "\""
                || (ascii && (!scalar.isASCII || scalar == "%" || scalar == ";"))
            name.append(unsafe ? "_" : scalar)
        }
        // Without spaces at either end
        guard let first = name.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = name.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(Substring(name[first...last]))
    }
}
