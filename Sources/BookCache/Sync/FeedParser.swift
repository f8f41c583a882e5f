import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads a sync source's bytes: OPDS 1.2 (an Atom feed), OPDS 2.0 (JSON with `publications`,
/// `navigation` or `groups`), or a JSON Lines manifest — detected from the content, not the name.
///
/// What counts as the book of an OPDS entry: a link whose `rel` is
/// `http://opds-spec.org/acquisition` or `…/acquisition/open-access` and whose type is EPUB or
/// PDF. Samples, `buy`, `borrow` and `subscribe` links are never fetched, nor indirect
/// acquisitions (a web page or DRM licence in front of the book); an entry without a free EPUB or PDF is
/// ``SyncEntry/Outcome/skipped(title:reason:)``, not a failure. When an entry offers both formats,
/// ``formats`` decides.
struct FeedParser: Sendable {
    /// The format found.
    public enum Format: String, Sendable, Hashable {
        case opds1 = "OPDS 1.2"
        case opds2 = "OPDS 2.0"
        case manifest = "JSON Lines manifest"
    }

    /// The type given to books whose source does not say.
    public var defaultType: BookType
    /// Relative links are resolved against this (the feed's own URL).
    public var baseURL: URL?
    /// The formats to take, most wanted first; an entry offering none of them is skipped.
    public var formats: [BookFormat]

    /// Creates a parser.
    /// - Parameters:
    ///   - defaultType: The type for books whose source does not say.
    ///   - baseURL: The feed's URL, for relative links.
    ///   - formats: The formats to take, most wanted first (EPUB, then PDF, by default).
    public init(defaultType: BookType = .ebook, baseURL: URL? = nil, formats: [BookFormat] = [.epub, .pdf]) {
        self.defaultType = defaultType
        self.baseURL = baseURL
        self.formats = formats
    }

    /// The format of `data`.
    public static func detect(_ data: Data) -> Format {
        // XML in UTF-16, with its byte order mark or without (Appendix F): UntrustedXML reads it.
        let first = Array(data.prefix(2))
        if first == [0xFF, 0xFE] || first == [0xFE, 0xFF] || first == [0x3C, 0x00] || first == [0x00, 0x3C] { return .opds1 }
        let head = String(decoding: data.prefix(4096), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines.union(["\u{FEFF}"]))
        if head.hasPrefix("<") { return .opds1 }
        if head.hasPrefix("{"), let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            object["publications"] != nil || object["navigation"] != nil || object["groups"] != nil
        {
            return .opds2
        }
        return .manifest
    }

    /// One page of a source: entries, sections and the next page.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidArgument`` when a feed
    ///   cannot be read at all.
    public func page(in data: Data) throws(BookCacheError) -> FeedPage {
        let format = Self.detect(data)
        switch format {
        case .manifest:
            let parsed = ManifestParser().parse(data)
            var entries = parsed.problems.map { SyncEntry(position: $0.line, outcome: .invalid($0)) }
            for entry in parsed.entries {
                do {
                    entries.append(SyncEntry(position: entry.line, outcome: .book(try entry.request(defaultType: defaultType))))
                } catch {
                    entries.append(SyncEntry(position: entry.line, outcome: .invalid(error)))
                }
            }
            return FeedPage(format: format, entries: entries.sorted { $0.position < $1.position }, sections: [], next: nil)
        case .opds1:
            return try opds1(data)
        case .opds2:
            return try opds2(data)
        }
    }

    /// A link of an entry or a feed, resolved.
    struct Link {
        var rels: [String]
        var type: String
        var href: String
        var title: String?
        /// Types an indirect acquisition leads to.
        var indirectTypes: [String] = []
    }

    // MARK: OPDS 1.2

    private func opds1(_ data: Data) throws(BookCacheError) -> FeedPage {
        guard data.count <= 16 << 20 else { throw .invalidArgument("the feed is larger than 16 MiB") }
        let text: [UInt8]
        do {
            text = try UntrustedXML.text(data)
        } catch {
            throw .invalidArgument("the OPDS feed cannot be read: \(error.reason)")
        }
        let delegate = AtomDelegate(base: baseURL)
        let parser = XMLParser(data: Data(text))
        parser.shouldProcessNamespaces = true
        parser.shouldResolveExternalEntities = false
        parser.delegate = delegate
        let ok = parser.parse()
        guard ok, parser.parserError == nil, delegate.depth == 0 else {
            throw .invalidArgument(
                "the OPDS feed is not well-formed XML\(parser.parserError.map { " (\($0.localizedDescription))" } ?? "")")
        }
        guard delegate.sawFeed else {
            throw .invalidArgument(
                "the document is XML but not an OPDS feed or entry (its root element is <\(delegate.rootName)>); check that the URL is the catalogue's"
            )
        }
        var entries: [SyncEntry] = []
        var sections: [FeedSection] = []
        for (index, entry) in delegate.entries.enumerated() {
            let made = makeEntry(
                position: index + 1, identifier: entry.identifier, title: entry.title, authors: entry.authors,
                language: entry.language, published: entry.published, links: entry.links,
                images: entry.links.filter(Self.isCover).map(\.href))
            if made.request == nil, let section = Self.section(title: entry.title, links: entry.links) {
                sections.append(section)
            } else {
                entries.append(made)
            }
        }
        for link in delegate.feedLinks where link.rels.contains(Self.sortNew) {
            guard let url = URL(string: link.href) else { continue }
            if let index = sections.firstIndex(where: { $0.url == url }) {
                sections[index].isNewestFirst = true
            } else {
                sections.insert(FeedSection(title: link.title ?? "Newest", url: url, isNewestFirst: true), at: 0)
            }
        }
        let next = delegate.feedLinks.first { $0.rels.contains("next") }.flatMap { URL(string: $0.href) }
        return FeedPage(format: .opds1, entries: entries, sections: sections, next: next)
    }

    private final class AtomDelegate: NSObject, XMLParserDelegate {
        struct Entry {
            var identifier: String?
            var title: String?
            var authors: [String] = []
            var language: String?
            /// `dc:issued` or `dc:date` (Atom's own `published` dates the entry, not the book).
            var published: String?
            var links: [Link] = []
        }

        var entries: [Entry] = []
        var feedLinks: [Link] = []
        var current: Entry?
        var text = ""
        var depth = 0
        var sawFeed = false
        var rootName = ""
        /// The depth of the open `<entry>`, so only its own `<id>` and `<title>` count.
        var entryDepth = 0
        /// The base URL in force at each open element (`xml:base`, else the feed's URL).
        var bases: [URL?]
        /// Whether the open `<link>` belongs to an entry (its `opds:indirectAcquisition` children
        /// add to its last link).
        var inLink = false
        var inAuthor = false

        init(base: URL?) {
            bases = [base]
        }

        func resolve(_ href: String) -> String? {
            if href.contains("://") { return href }
            guard let base = bases.last ?? nil, let url = URL(string: href, relativeTo: base)?.absoluteURL else { return nil }
            return url.absoluteString
        }

        func parser(
            _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            if depth > 64 { parser.abortParsing() }
            if depth == 1 {
                // A feed, or a standalone entry document (an OPDS "complete entry").
                rootName = name
                sawFeed = name == "feed" || name == "entry"
            }
            var base = bases.last ?? nil
            if let xmlBase = attributes["xml:base"] ?? attributes["base"] {
                base = xmlBase.contains("://") ? URL(string: xmlBase) : URL(string: xmlBase, relativeTo: base)?.absoluteURL
            }
            bases.append(base)
            switch name {
            case "entry":
                current = Entry()
                entryDepth = depth
            case "title", "id", "name", "language", "issued", "date": text = ""
            case "author": inAuthor = true
            case "link":
                guard let href = attributes["href"] else { break }
                // An unresolvable relative link is kept as it is, and reported when it is the book.
                let link = Link(
                    rels: (attributes["rel"] ?? "").split(separator: " ").map(String.init), type: attributes["type"] ?? "",
                    href: resolve(href) ?? href, title: attributes["title"])
                if current != nil {
                    current?.links.append(link)
                    inLink = true
                } else if depth == 2 {
                    feedLinks.append(link)
                }
            case "indirectAcquisition":
                if inLink, let type = attributes["type"], let last = current?.links.indices.last {
                    current?.links[last].indirectTypes.append(type)
                }
            default: break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            // Bytes, not characters: one character can be 400 KB of combining marks.
            if text.utf8.count < 16384 { text += string.utf8.count <= 16384 ? string : String(string.unicodeScalars.prefix(16384)) }
        }

        func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
            let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if current != nil, depth == entryDepth + 1 {
                if name == "id", !value.isEmpty { current?.identifier = value }
                if name == "title", current?.title == nil { current?.title = value }
                if name == "language", LanguageTag.dublinCoreNamespaces.contains(namespaceURI ?? ""), current?.language == nil {
                    current?.language = value
                }
                if name == "issued" || name == "date", LanguageTag.dublinCoreNamespaces.contains(namespaceURI ?? ""),
                    current?.published == nil
                {
                    current?.published = PublicationDate.normalized(value)
                }
            }
            if name == "name", inAuthor, current != nil, !value.isEmpty { current?.authors.append(value) }
            if name == "author" { inAuthor = false }
            if name == "link" { inLink = false }
            if name == "entry", let entry = current {
                entries.append(entry)
                current = nil
            }
            depth -= 1
            bases.removeLast()
        }
    }

    // MARK: OPDS 2.0

    private func opds2(_ data: Data) throws(BookCacheError) -> FeedPage {
        guard data.count <= 16 << 20 else { throw .invalidArgument("the feed is larger than 16 MiB") }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw .invalidArgument("the OPDS 2.0 feed is not valid JSON (\(error.localizedDescription))")
        }
        guard let object = parsed as? [String: Any] else {
            throw .invalidArgument("the OPDS 2.0 feed is not a JSON object")
        }
        let publications = object["publications"] as? [Any] ?? []
        var entries = publications.enumerated().map { position, item in opds2Entry(item, position: position + 1) }
        var sections = opds2Sections(object["navigation"])
        // Groups: their navigation links are sections; a group of publications with a link of its
        // own is a section too; its publications count when the feed has none of its own.
        for case let group as [String: Any] in object["groups"] as? [Any] ?? [] {
            sections += opds2Sections(group["navigation"])
            let title = Self.text(of: (group["metadata"] as? [String: Any])?["title"], language: nil) ?? "Group"
            let own = opds2Links(group["links"]).first { $0.rels.contains("self") || $0.rels.isEmpty }
            if let own, let url = URL(string: own.href) {
                sections.append(FeedSection(title: title, url: url, isNewestFirst: own.rels.contains(Self.sortNew)))
            }
            if publications.isEmpty {
                for item in group["publications"] as? [Any] ?? [] {
                    entries.append(opds2Entry(item, position: entries.count + 1))
                }
            }
        }
        let next = opds2Links(object["links"]).first { $0.rels.contains("next") }.flatMap { URL(string: $0.href) }
        return FeedPage(format: .opds2, entries: entries, sections: sections, next: next)
    }

    private func opds2Entry(_ item: Any, position: Int) -> SyncEntry {
        guard let publication = item as? [String: Any] else {
            return SyncEntry(
                position: position, outcome: .invalid(ManifestProblem(line: position, message: "publication \(position) is not an object")))
        }
        let metadata = publication["metadata"] as? [String: Any] ?? [:]
        let language = (metadata["language"] as? String) ?? (metadata["language"] as? [String])?.first
        let identifier = (metadata["identifier"] as? String).flatMap {
            $0.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty ? nil : $0
        }
        var authors: [String] = []
        for contributor in (metadata["author"] as? [Any]) ?? (metadata["author"].map { [$0] } ?? []) {
            // A contributor is a name, a language map of names, or an object with a `name`.
            let name = (contributor as? [String: Any]).map { $0["name"] as Any } ?? contributor
            if let name = Self.text(of: name, language: language) {
                authors.append(name)
            }
        }
        let images = opds2Links(publication["images"]).sorted { lhs, rhs in
            // Covers before thumbnails: the widest first when sizes are given.
            (lhs.rels.contains { $0.hasSuffix("thumbnail") } ? 1 : 0) < (rhs.rels.contains { $0.hasSuffix("thumbnail") } ? 1 : 0)
        }
        return makeEntry(
            position: position, identifier: identifier, title: Self.text(of: metadata["title"], language: language), authors: authors,
            language: language, published: metadata["published"] as? String, links: opds2Links(publication["links"]),
            images: images.map(\.href))
    }

    private func opds2Links(_ value: Any?) -> [Link] {
        (value as? [Any] ?? []).compactMap { item -> Link? in
            guard let link = item as? [String: Any], let href = link["href"] as? String else { return nil }
            let rels = (link["rel"] as? String).map { $0.split(separator: " ").map(String.init) } ?? (link["rel"] as? [String]) ?? []
            let properties = link["properties"] as? [String: Any]
            let indirect = (properties?["indirectAcquisition"] as? [[String: Any]] ?? []).compactMap { $0["type"] as? String }
            return Link(
                rels: rels, type: link["type"] as? String ?? "", href: resolved(href) ?? href,
                title: Self.text(of: link["title"], language: nil),
                indirectTypes: indirect)
        }
    }

    private func opds2Sections(_ value: Any?) -> [FeedSection] {
        opds2Links(value).compactMap { link in
            guard let url = URL(string: link.href), url.scheme != nil else { return nil }
            return FeedSection(title: link.title ?? link.href, url: url, isNewestFirst: link.rels.contains(Self.sortNew))
        }
    }

    /// A title that may be a string or a language map (`{"en": "…", "fr": "…"}`): the entry's
    /// language, else English, else the first language in alphabetical order.
    static func text(of value: Any?, language: String?) -> String? {
        if let string = value as? String { return string }
        guard let map = value as? [String: Any] else { return nil }
        for key in [language, "en"].compactMap({ $0 }) {
            if let text = map[key] as? String { return text }
        }
        return map.keys.sorted().lazy.compactMap { map[$0] as? String }.first
    }

    // MARK: Shared

    static let sortNew = "http://opds-spec.org/sort/new"
    private static let acquisitionRels: Set<String> = ["http://opds-spec.org/acquisition", "http://opds-spec.org/acquisition/open-access"]

    /// A cover (not a thumbnail): OPDS 1.2 `image`, and the older `cover` that calibre also sends.
    static func isCover(_ link: Link) -> Bool {
        link.rels.contains { $0 == "http://opds-spec.org/image" || $0 == "http://opds-spec.org/cover" || $0 == "x-stanza-cover-image" }
    }

    /// The media type without parameters, lowercased.
    static func mediaType(_ type: String) -> String {
        type.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    }

    static func format(ofType type: String) -> BookFormat? {
        switch mediaType(type) {
        case "application/epub+zip": return .epub
        case "application/pdf": return .pdf
        default: return nil
        }
    }

    /// The section an entry stands for, when it links to another catalogue feed.
    static func section(title: String?, links: [Link]) -> FeedSection? {
        let feed = links.first { link in
            let type = mediaType(link.type)
            return (type == "application/atom+xml" || type == "application/opds+json") && !link.rels.contains("alternate")
        }
        guard let feed, let url = URL(string: feed.href), url.scheme != nil else { return nil }
        return FeedSection(title: title ?? url.absoluteString, url: url, isNewestFirst: feed.rels.contains(sortNew))
    }

    /// An entry's request. Its id comes from the entry's identifier
    /// (``BookDownloadRequest/bookId(forSourceIdentifier:)``), or — when the feed gives none — is
    /// derived from the whole link (``BookDownloadRequest/derivedBookId(for:)``), never from the
    /// link's last segment alone.
    private func makeEntry(
        position: Int, identifier: String?, title: String?, authors: [String], language: String?, published: String?, links: [Link],
        images: [String]
    ) -> SyncEntry {
        // Only a link that downloads the EPUB or PDF itself is the book. An indirect acquisition
        // (`opds:indirectAcquisition`, OPDS 2 `indirectAcquisition`) leads through something
        // else first — a web page, a DRM licence — so fetching it would not give the book.
        let free = links.compactMap { link -> (Link, BookFormat)? in
            guard link.rels.contains(where: Self.acquisitionRels.contains), let format = Self.format(ofType: link.type) else { return nil }
            return (link, format)
        }
        let indirect = links.first { link in
            link.rels.contains(where: Self.acquisitionRels.contains) && link.indirectTypes.contains { Self.format(ofType: $0) != nil }
        }
        guard let (acquisition, _) = formats.lazy.compactMap({ wanted in free.first { $0.1 == wanted } }).first else {
            let offered = Set(links.filter { $0.rels.contains { $0.hasPrefix("http://opds-spec.org/acquisition") } }.map(\.rels).joined())
            let reason: String
            if !free.isEmpty {
                reason =
                    "only \(Set(free.map(\.1.rawValue)).sorted().joined(separator: ", ")), not \(formats.map(\.rawValue).joined(separator: " or "))"
            } else if let indirect {
                reason =
                    "the EPUB or PDF is behind \(Self.mediaType(indirect.type).isEmpty ? "another resource" : Self.mediaType(indirect.type)) (an indirect acquisition), not a download"
            } else if case let types = Set(
                links.filter { $0.rels.contains(where: Self.acquisitionRels.contains) }.map { Self.mediaType($0.type) }),
                !types.isEmpty
            {
                reason =
                    "no EPUB or PDF (only \(types.map { $0.isEmpty ? "a file of unknown type" : $0 }.sorted().joined(separator: ", ")))"
            } else if !offered.isEmpty {
                reason =
                    "no free EPUB or PDF (only \(offered.map { $0.replacingOccurrences(of: "http://opds-spec.org/acquisition", with: "acquisition") }.sorted().joined(separator: ", ")))"
            } else {
                reason = "no free EPUB or PDF"
            }
            return SyncEntry(position: position, outcome: .skipped(title: title, reason: reason))
        }
        do throws(BookCacheError) {
            let url = acquisition.href
            guard url.contains("://") else {
                throw BookCacheError.invalidURL(url, reason: "a relative link needs the feed's URL to resolve against")
            }
            let cover = images.lazy.compactMap(resolved).first
            var request: BookDownloadRequest
            if let identifier {
                let id = try BookID(type: defaultType, bookId: BookDownloadRequest.bookId(forSourceIdentifier: identifier))
                request = try BookDownloadRequest(url: url, id: id, title: title, coverURL: cover)
            } else {
                request = try BookDownloadRequest(url: url, type: defaultType, title: title, coverURL: cover)
            }
            request.authors = authors
            request.language = language
            request.published = published
            return SyncEntry(position: position, outcome: .book(request))
        } catch {
            return SyncEntry(position: position, outcome: .invalid(ManifestProblem(line: position, message: error.message)))
        }
    }

    /// `href` made absolute against the feed's URL; `nil` when it is relative and there is none.
    private func resolved(_ href: String) -> String? {
        if href.contains("://") { return href }
        guard let baseURL else { return nil }
        return URL(string: href, relativeTo: baseURL)?.absoluteURL.absoluteString
    }
}
