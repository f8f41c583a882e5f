import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads an EPUB package document (`content.opf`) as a reader does and returns the archive
/// paths of its spine: each `itemref`'s `idref` looked up in the manifest, its `href` resolved
/// against the package document's folder and percent-decoded.
///
/// Refuses what would stop a reader: XML that is not well-formed, no `package` root, no spine,
/// an `itemref` naming no manifest item, an `href` that leaves the archive. Like
/// ``ContainerXMLParser`` it checks `parserError` and balanced elements itself (Linux's
/// `XMLParser` returns `true` for some malformed documents) and bounds the nesting depth.
struct PackageDocumentParser {
    /// The package document's path in the archive, as container.xml names it.
    let path: String
    let maxDepth: Int

    /// What the package document says about the book that the cache keeps.
    struct Metadata: Sendable, Hashable {
        /// The first `dc:language` that is a language tag.
        var language: String?
        /// The publication date: the date part of the first `dc:date` with no `opf:event` or the
        /// event `publication` (EPUB 2 also dates creation and modification), when it reads as one
        /// (``PublicationDate/normalized(_:)``).
        var published: String?
    }

    /// The spine's chapters as archive paths, and what the package document says about the book.
    func read(_ data: [UInt8]) throws(ValidationFailure) -> (spine: [String], metadata: Metadata) {
        let delegate = Delegate(path: path, maxDepth: maxDepth)
        try parseXML(data, with: delegate, named: "the package document '\(path)'")
        guard delegate.sawRoot, delegate.depth == 0 else {
            throw ValidationFailure(
                "the package document '\(path)' is not well-formed XML (unbalanced elements)", kind: .invalidPackageDocument)
        }
        guard delegate.rootName == "package" else {
            throw ValidationFailure(
                "the package document '\(path)' has the root element '\(delegate.rootName ?? "")', not 'package'",
                kind: .invalidPackageDocument)
        }
        guard delegate.sawSpine else {
            throw ValidationFailure("the package document '\(path)' has no spine", kind: .invalidPackageDocument)
        }
        guard !delegate.itemrefs.isEmpty else {
            throw ValidationFailure("the spine of '\(path)' lists no chapters", kind: .invalidPackageDocument)
        }
        var paths: [String] = []
        for idref in delegate.itemrefs {
            guard let href = delegate.manifest[idref] else {
                throw ValidationFailure(
                    "the spine of '\(path)' names the item '\(idref)', which its manifest does not list", kind: .invalidPackageDocument)
            }
            paths.append(try resolve(href))
        }
        return (paths, Metadata(language: delegate.language, published: delegate.published))
    }

    /// The archive path of a manifest `href`, relative to the package document's folder.
    private func resolve(_ href: String) throws(ValidationFailure) -> String {
        let withoutFragment = href.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? href
        guard let decoded = withoutFragment.removingPercentEncoding, !decoded.isEmpty else {
            throw ValidationFailure(
                "the manifest of '\(path)' has the href '\(href)', which is not a valid relative URL", kind: .invalidPackageDocument)
        }
        if decoded.contains("://") || decoded.hasPrefix("/") {
            throw ValidationFailure("the spine of '\(path)' names '\(href)', which is outside the book", kind: .invalidPackageDocument)
        }
        var parts = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().map(String.init)
        for part in decoded.split(separator: "/", omittingEmptySubsequences: false) {
            switch part {
            case ".", "": continue
            case "..":
                guard !parts.isEmpty else {
                    throw ValidationFailure(
                        "the spine of '\(path)' names '\(href)', which is outside the book", kind: .invalidPackageDocument)
                }
                parts.removeLast()
            default: parts.append(String(part))
            }
        }
        return parts.joined(separator: "/")
    }

    private final class Delegate: NSObject, ValidatingXMLDelegate {
        let path: String
        let maxDepth: Int
        var depth = 0
        var rootName: String?
        var sawRoot = false
        var sawSpine = false
        var manifest: [String: String] = [:]
        var itemrefs: [String] = []
        /// The first `dc:language` that is a language tag, and the text of one being read.
        var language: String?
        var languageText: String?
        /// The publication date, and the text of a `dc:date` being read that may be it.
        var published: String?
        var dateText: String?
        var failure: ValidationFailure?

        init(path: String, maxDepth: Int) {
            self.path = path
            self.maxDepth = maxDepth
        }

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
            qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
        ) {
            let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
            if depth == 0 {
                if sawRoot {
                    fail(parser, "the package document '\(path)' has more than one root element")
                    return
                }
                sawRoot = true
                rootName = local
            }
            depth += 1
            if depth > maxDepth {
                fail(parser, "the package document '\(path)' nests deeper than \(maxDepth) elements")
                return
            }
            switch local {
            case "item":
                if let id = attributeDict["id"], let href = attributeDict["href"] { manifest[id] = href }
            case "spine":
                sawSpine = true
            case "language" where LanguageTag.dublinCoreNamespaces.contains(namespaceURI ?? "") && language == nil:
                languageText = ""
            case "date" where namespaceURI == "http://purl.org/dc/elements/1.1/" && published == nil:
                let event = attributeDict["opf:event"] ?? attributeDict["event"]
                if event == nil || event == "publication" { dateText = "" }
            case "itemref":
                guard let idref = attributeDict["idref"], !idref.isEmpty else {
                    fail(parser, "an itemref in the spine of '\(path)' has no idref")
                    return
                }
                itemrefs.append(idref)
            default:
                break
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if let text = languageText, text.utf8.count < 64 { languageText = text + string }
            if let text = dateText, text.utf8.count < 64 { dateText = text + string }
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
            depth -= 1
            if let text = languageText, elementName.split(separator: ":").last == "language" {
                language = LanguageTag.normalized(text)
                languageText = nil
            }
            if let text = dateText, elementName.split(separator: ":").last == "date" {
                published = PublicationDate.normalized(text)
                dateText = nil
            }
        }

        private func fail(_ parser: XMLParser, _ reason: String) {
            if failure == nil { failure = ValidationFailure(reason, kind: .invalidPackageDocument) }
            parser.abortParsing()
            // Keep the depth non-zero so the caller never mistakes an aborted parse for a whole one.
            depth += 1
        }
    }
}
