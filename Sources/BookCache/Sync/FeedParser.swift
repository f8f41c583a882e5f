import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads a sync source's bytes: OPDS 1.2 (an Atom feed), OPDS 2.0 (JSON with `publications`), or
/// a JSON Lines manifest — detected from the content, not the name.
public struct FeedParser: Sendable {
    /// The format found.
    public enum Format: String, Sendable {
        case opds1 = "OPDS 1.2"
        case opds2 = "OPDS 2.0"
        case manifest = "JSON Lines manifest"
    }

    /// The type given to books whose source does not say.
    public var defaultType: BookType
    /// Relative links are resolved against this.
    public var baseURL: URL?

    /// Creates a parser.
    public init(defaultType: BookType = .ebook, baseURL: URL? = nil) {
        self.defaultType = defaultType
        self.baseURL = baseURL
    }

    /// The format of `data`.
    public static func detect(_ data: Data) -> Format {
        let head = String(decoding: data.prefix(4096), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines.union(["\u{FEFF}"]))
        if head.hasPrefix("<") { return .opds1 }
        if head.hasPrefix("{"), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any], object["publications"] != nil {
            return .opds2
        }
        return .manifest
    }

    /// The entries of a source, in its order.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidArgument`` when a feed
    ///   cannot be read at all.
    public func entries(in data: Data) throws(BookCacheError) -> (Format, [SyncEntry]) {
        let format = Self.detect(data)
        switch format {
        case .manifest:
            let parsed = ManifestParser().parse(data)
            var entries = parsed.problems.map { SyncEntry(position: $0.line, request: .failure($0)) }
            for entry in parsed.entries {
                do {
                    entries.append(SyncEntry(position: entry.line, request: .success(try entry.request(defaultType: defaultType))))
                } catch {
                    entries.append(SyncEntry(position: entry.line, request: .failure(error)))
                }
            }
            return (format, entries.sorted { $0.position < $1.position })
        case .opds1:
            return (format, try opds1(data))
        case .opds2:
            return (format, try opds2(data))
        }
    }

    // MARK: OPDS 1.2

    private func opds1(_ data: Data) throws(BookCacheError) -> [SyncEntry] {
        guard data.count <= 16 << 20 else { throw .invalidArgument("the feed is larger than 16 MiB") }
        let delegate = AtomDelegate()
        let parser = XMLParser(data: data)
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        let ok = parser.parse()
        guard ok, parser.parserError == nil, delegate.depth == 0, delegate.sawFeed else {
            throw .invalidArgument("the OPDS feed is not well-formed XML\(parser.parserError.map { " (\($0.localizedDescription))" } ?? "")")
        }
        return delegate.entries.enumerated().map { position, entry in
            makeEntry(position: position + 1, identifier: entry.identifier, title: entry.title, links: entry.links, images: entry.images)
        }
    }

    private final class AtomDelegate: NSObject, XMLParserDelegate {
        struct Entry {
            var identifier: String?
            var title: String?
            var links: [(rel: String, type: String, href: String)] = []
            var images: [String] = []
        }

        var entries: [Entry] = []
        var current: Entry?
        var text = ""
        var depth = 0
        /// The depth of the open `<entry>`, so only its own `<id>` (not an author's) counts.
        var entryDepth = 0
        var sawFeed = false

        func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String] = [:]) {
            depth += 1
            if depth > 64 { parser.abortParsing() }
            if depth == 1 { sawFeed = name == "feed" }
            switch name {
            case "entry":
                current = Entry()
                entryDepth = depth
            case "title", "id": text = ""
            case "link":
                guard current != nil, let href = attributes["href"] else { break }
                let rel = attributes["rel"] ?? ""
                if rel.hasPrefix("http://opds-spec.org/image") && !rel.hasSuffix("thumbnail") {
                    current?.images.append(href)
                } else {
                    current?.links.append((rel, attributes["type"] ?? "", href))
                }
            default: break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if text.count < 4096 { text += string }
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            if name == "id", current != nil, depth == entryDepth + 1 {
                let identifier = text.trimmingCharacters(in: .whitespacesAndNewlines)
                if !identifier.isEmpty { current?.identifier = identifier }
            }
            depth -= 1
            if name == "title", current != nil, current?.title == nil {
                current?.title = text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            if name == "entry", let entry = current {
                entries.append(entry)
                current = nil
            }
        }
    }

    // MARK: OPDS 2.0

    private func opds2(_ data: Data) throws(BookCacheError) -> [SyncEntry] {
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let publications = object["publications"] as? [Any]
        else {
            throw .invalidArgument("the OPDS 2.0 feed has no publications array")
        }
        return publications.enumerated().map { position, item in
            guard let publication = item as? [String: Any] else {
                return SyncEntry(position: position + 1, request: .failure(ManifestProblem(line: position + 1, message: "publication \(position + 1) is not an object")))
            }
            let metadata = publication["metadata"] as? [String: Any]
            let links = (publication["links"] as? [[String: Any]] ?? []).compactMap { link -> (String, String, String)? in
                guard let href = link["href"] as? String else { return nil }
                let rel = (link["rel"] as? String) ?? (link["rel"] as? [String])?.joined(separator: " ") ?? ""
                return (rel, link["type"] as? String ?? "", href)
            }
            let images = (publication["images"] as? [[String: Any]] ?? []).compactMap { $0["href"] as? String }
            let identifier = (metadata?["identifier"] as? String).flatMap { $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty ? nil : $0 }
            return makeEntry(position: position + 1, identifier: identifier, title: metadata?["title"] as? String, links: links, images: images)
        }
    }

    // MARK: Shared

    /// An entry's request. Its id comes from the entry's identifier
    /// (``BookDownloadRequest/bookId(forSourceIdentifier:)``), or — when the feed gives none — is
    /// derived from the whole link (``BookDownloadRequest/derivedBookId(for:)``), never from the
    /// link's last segment alone.
    private func makeEntry(
        position: Int, identifier: String?, title: String?, links: [(rel: String, type: String, href: String)], images: [String]
    ) -> SyncEntry {
        let acquisition = links.first { link in
            let type = link.type.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
            let isBook = type == "application/epub+zip" || type == "application/pdf"
            return isBook && (link.rel.contains("http://opds-spec.org/acquisition") || link.rel.isEmpty)
        }
        guard let acquisition else {
            return SyncEntry(position: position, request: .failure(ManifestProblem(line: position, message: "entry \(position) has no EPUB or PDF acquisition link")))
        }
        do {
            let url = try resolve(acquisition.href)
            let cover = try images.first.map { href throws(BookCacheError) in try resolve(href) }
            let request: BookDownloadRequest
            if let identifier {
                let id = try BookID(type: defaultType, bookId: BookDownloadRequest.bookId(forSourceIdentifier: identifier))
                request = try BookDownloadRequest(url: url, id: id, title: title, coverURL: cover)
            } else {
                request = try BookDownloadRequest(url: url, type: defaultType, title: title, coverURL: cover)
            }
            return SyncEntry(position: position, request: .success(request))
        } catch {
            return SyncEntry(position: position, request: .failure(ManifestProblem(line: position, message: error.message)))
        }
    }

    private func resolve(_ href: String) throws(BookCacheError) -> String {
        if href.contains("://") { return href }
        guard let baseURL, let resolved = URL(string: href, relativeTo: baseURL)?.absoluteURL else {
            throw .invalidURL(href, reason: "a relative link needs the feed's URL to resolve against")
        }
        return resolved.absoluteString
    }
}
