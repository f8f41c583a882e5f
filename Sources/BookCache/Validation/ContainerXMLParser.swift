import Foundation

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// Reads `META-INF/container.xml` and returns its rootfile paths.
///
/// On Linux `XMLParser.parse()` returns `true` for some malformed documents (`<a><b></a>`, an
/// unclosed `<a>`), so this also checks `parserError` and that every element is closed.
/// Nesting deeper than the limit is refused, so a hostile document stays cheap.
struct ContainerXMLParser {
    let maxDepth: Int

    func rootfiles(in data: [UInt8]) throws(ValidationFailure) -> [String] {
        let delegate = Delegate(maxDepth: maxDepth)
        try parseXML(data, with: delegate, named: "META-INF/container.xml")
        guard delegate.sawRoot, delegate.stack.isEmpty else {
            throw ValidationFailure("META-INF/container.xml is not well-formed XML (unbalanced elements)", kind: .missingPackageDocument)
        }
        guard delegate.rootName == "container" else {
            throw ValidationFailure(
                "META-INF/container.xml's root element is '\(delegate.rootName ?? "")', not 'container'", kind: .missingPackageDocument)
        }
        return delegate.rootfiles
    }

    private final class Delegate: NSObject, ValidatingXMLDelegate {
        let maxDepth: Int
        var stack: [String] = []
        var rootfiles: [String] = []
        var rootName: String?
        var sawRoot = false
        var failure: ValidationFailure?

        init(maxDepth: Int) {
            self.maxDepth = maxDepth
        }

        func parser(
            _ parser: XMLParser, didStartElement elementName: String, namespaceURI: String?,
            qualifiedName qName: String?, attributes attributeDict: [String: String] = [:]
        ) {
            let local = elementName.split(separator: ":").last.map(String.init) ?? elementName
            if stack.isEmpty {
                if sawRoot {
                    fail(parser, "META-INF/container.xml has more than one root element")
                    return
                }
                sawRoot = true
                rootName = local
            }
            stack.append(elementName)
            if stack.count > maxDepth {
                fail(parser, "META-INF/container.xml nests deeper than \(maxDepth) elements")
                return
            }
            if local == "rootfile" {
                guard let path = attributeDict["full-path"], !path.isEmpty else {
                    fail(parser, "a rootfile in META-INF/container.xml has no full-path")
                    return
                }
                rootfiles.append(path)
            }
        }

        func parser(_ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName qName: String?) {
            guard stack.last == elementName else {
                fail(parser, "META-INF/container.xml is not well-formed XML (</\(elementName)> closes <\(stack.last ?? "")>)")
                return
            }
            stack.removeLast()
        }

        private func fail(_ parser: XMLParser, _ reason: String) {
            if failure == nil { failure = ValidationFailure(reason, kind: .missingPackageDocument) }
            parser.abortParsing()
            // Keep the stack non-empty so the caller never mistakes an aborted parse for a whole one.
            stack.append("!")
        }
    }
}

/// A parser delegate that may stop the parse with a reason of its own.
protocol ValidatingXMLDelegate: XMLParserDelegate {
    var failure: ValidationFailure? { get }
}

/// Parses `data` as ``UntrustedXML`` decodes it (UTF-8, or a declared single-byte encoding; no DTD of its own), without resolving external
/// entities, with namespaces, and throws the
/// delegate's failure or the parser's error (both checked: on Linux `parse()` returns `true` for
/// some malformed documents).
func parseXML(_ data: [UInt8], with delegate: some ValidatingXMLDelegate, named name: String) throws(ValidationFailure) {
    let text: [UInt8]
    do {
        text = try UntrustedXML.text(data)
    } catch {
        throw ValidationFailure("\(name) cannot be read: \(error.reason)", kind: .invalidPackageDocument)
    }
    let parser = XMLParser(data: Data(text))
    parser.shouldProcessNamespaces = true
    parser.shouldResolveExternalEntities = false
    parser.delegate = delegate
    let ok = parser.parse()
    if let failure = delegate.failure { throw failure }
    if !ok || parser.parserError != nil {
        let detail = parser.parserError.map { " (\($0.localizedDescription))" } ?? ""
        throw ValidationFailure("\(name) is not well-formed XML\(detail)", kind: .invalidPackageDocument)
    }
}
