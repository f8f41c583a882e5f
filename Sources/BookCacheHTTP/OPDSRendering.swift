import BookCache
import Foundation

extension OPDSCatalogue.Feed {
    /// The feed as OPDS 1.2: an Atom document. Text from catalogues (titles, authors) is escaped,
    /// and characters XML 1.0 cannot hold (control characters, U+FFFE, U+FFFF) are dropped, so a
    /// hostile title cannot break a reader's parser or add markup.
    func atom(updated: Date) -> String {
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <feed xmlns="http://www.w3.org/2005/Atom" xmlns:dc="http://purl.org/dc/terms/" \
            xmlns:opds="http://opds-spec.org/2010/catalog" xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/">

            """
        let stamp = Self.stamp(updated)
        xml += "  <id>\(Self.escape(id))</id>\n  <title>\(Self.escape(title))</title>\n  <updated>\(stamp)</updated>\n"
        xml += "  <author><name>BookCache</name></author>\n"
        for link in links { xml += "  " + Self.atomLink(link) + "\n" }
        for entry in navigation {
            xml += "  <entry>\n    <title>\(Self.escape(entry.title))</title>\n    <id>\(Self.escape(entry.id))</id>\n"
            xml += "    <updated>\(stamp)</updated>\n"
            if let summary = entry.summary { xml += "    <content type=\"text\">\(Self.escape(summary))</content>\n" }
            xml += "    " + Self.atomLink(.init(rel: entry.rel, href: entry.href, type: entry.type)) + "\n  </entry>\n"
        }
        for book in books {
            xml += "  <entry>\n    <title>\(Self.escape(book.title))</title>\n    <id>urn:bookcache:book:\(Self.escape(book.id))</id>\n"
            xml += "    <updated>\(Self.stamp(book.downloadedAt))</updated>\n"
            for author in book.authors { xml += "    <author><name>\(Self.escape(author))</name></author>\n" }
            xml += "    <dc:identifier>urn:bookcache:book:\(Self.escape(book.id))</dc:identifier>\n"
            if let language = book.language { xml += "    <dc:language>\(Self.escape(language))</dc:language>\n" }
            // The publication's date (OPDS 1.2 §5) when the book or its catalogue gave one;
            // `updated` says when the entry changed. (A record read back is input: its date is checked.)
            if let published = book.published, PublicationDate.normalized(published) == published {
                xml += "    <dc:issued>\(published)</dc:issued>\n"
            }
            for link in Self.bookLinks(book) { xml += "    " + Self.atomLink(link) + "\n" }
            xml += "  </entry>\n"
        }
        xml += "</feed>\n"
        return xml
    }

    /// The feed as OPDS 2.0 JSON. A feed with nothing in it (an empty search, no pinned books)
    /// holds one navigation link back to the start: OPDS 2.0 wants a feed to have publications,
    /// navigation or groups, none of them empty.
    func json(emptyText: String) -> Data {
        var document: [String: Any] = ["metadata": ["title": title, "identifier": id] as [String: Any]]
        document["links"] = links.map(Self.jsonLink)
        var navigation = self.navigation
        if navigation.isEmpty && books.isEmpty, let start = links.first(where: { $0.rel == "start" }) {
            navigation = [.init(id: id, title: emptyText, summary: nil, href: start.href, rel: "start", type: start.type)]
        }
        if !navigation.isEmpty {
            document["navigation"] = navigation.map { entry -> [String: Any] in
                var link: [String: Any] = ["href": entry.href, "title": entry.title, "type": entry.type, "rel": entry.rel]
                if let count = entry.count { link["properties"] = ["numberOfItems": count] }
                return link
            }
        }
        if !books.isEmpty {
            var metadata = document["metadata"] as? [String: Any] ?? [:]
            metadata["itemsPerPage"] = OPDSCatalogue.pageSize
            document["metadata"] = metadata
            document["publications"] = books.map { book -> [String: Any] in
                var metadata: [String: Any] = [
                    "@type": "http://schema.org/Book", "title": book.title, "identifier": "urn:bookcache:book:\(book.id)",
                    "modified": Self.stamp(book.downloadedAt),
                ]
                if !book.authors.isEmpty { metadata["author"] = book.authors.map { ["name": $0] } }
                if let language = book.language { metadata["language"] = language }
                // A JSON Schema `date`: a year or a month alone is not one.
                if let published = book.published, PublicationDate.isFullDate(published) { metadata["published"] = published }
                let links = Self.bookLinks(book)
                var publication: [String: Any] = [
                    "metadata": metadata,
                    "links": links.filter { !$0.rel.hasPrefix("http://opds-spec.org/image") }.map(Self.jsonLink),
                ]
                let images = links.filter { $0.rel.hasPrefix("http://opds-spec.org/image") }
                if !images.isEmpty { publication["images"] = images.map { ["href": $0.href, "type": $0.type] } }
                return publication
            }
        }
        do {
            return try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes])
        } catch {
            preconditionFailure("an OPDS feed of strings and numbers always serializes: \(error)")
        }
    }

    // MARK: - Parts

    static func bookLinks(_ book: CachedBookMetadata) -> [OPDSCatalogue.Link] {
        var links = [
            OPDSCatalogue.Link(
                rel: "http://opds-spec.org/acquisition", href: OPDSCatalogue.fileHref(book), type: OPDSCatalogue.mediaType(book.format),
                title: book.format == .pdf ? "PDF" : "EPUB", length: book.fileSize)
        ]
        if let cover = book.coverPath, let type = OPDSCatalogue.imageType(cover) {
            links.append(.init(rel: "http://opds-spec.org/image", href: OPDSCatalogue.coverHref(book), type: type))
            links.append(.init(rel: "http://opds-spec.org/image/thumbnail", href: OPDSCatalogue.coverHref(book), type: type))
        }
        return links
    }

    private static func atomLink(_ link: OPDSCatalogue.Link) -> String {
        var text = "<link rel=\"\(escape(link.rel))\" href=\"\(escape(link.href))\" type=\"\(escape(link.type))\""
        if let title = link.title { text += " title=\"\(escape(title))\"" }
        if let length = link.length { text += " length=\"\(length)\"" }
        return text + "/>"
    }

    private static func jsonLink(_ link: OPDSCatalogue.Link) -> [String: Any] {
        var object: [String: Any] = ["rel": link.rel, "href": link.href, "type": link.type]
        if let title = link.title { object["title"] = title }
        if link.templated { object["templated"] = true }
        if let length = link.length, length > 0 { object["size"] = length }
        return object
    }

    static func stamp(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    /// `text` for XML character data and attribute values: `& < > " '` escaped, characters XML
    /// 1.0 does not allow dropped.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&apos;"
            case "\t", "\n", "\r": escaped.unicodeScalars.append(scalar)
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF: continue
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }
}

extension OPDSCatalogue {
    /// The OpenSearch description OPDS 1.2 readers fetch to learn how to search.
    static func openSearchDescription(strings: [String: String]) -> String {
        """
        <?xml version="1.0" encoding="UTF-8"?>
        <OpenSearchDescription xmlns="http://a9.com/-/spec/opensearch/1.1/">
          <ShortName>BookCache</ShortName>
          <Description>\(Feed.escape(strings["Search the cached books by title and author"] ?? "Search the cached books by title and author"))</Description>
          <InputEncoding>UTF-8</InputEncoding>
          <OutputEncoding>UTF-8</OutputEncoding>
          <Url type="application/atom+xml;profile=opds-catalog;kind=acquisition" template="/opds/search?q={searchTerms}"/>
        </OpenSearchDescription>

        """
    }
}
