import Foundation

/// XML that comes from outside — OPDS feeds, an EPUB's `container.xml` and package document —
/// is checked before Foundation's `XMLParser` sees it, for two things that parser cannot be trusted with.
///
/// **Bytes that are not UTF-8** in a document that says it is (or says nothing): a name (an element's,
/// an attribute's, a prefix) that is not valid UTF-8 crashes `XMLParser` on Linux (a trap in
/// `_NSXMLParserStartElementNs`, found by fuzzing Feedbooks' feeds), so one hostile feed or book
/// would end the service. Such a document is refused; one in another declared encoding, or UTF-16
/// with its byte order mark, is decoded by libxml2 first and passes.
///
/// **A DTD of its own**: such XML needs none. A document whose `<!DOCTYPE …>` has an internal subset (`[ … ]`, where entities are
/// declared) is refused before it is parsed, so no entity is ever expanded: a feed or a package
/// document that expands one entity half a million times costs a scan of its first bytes, not
/// minutes of a core. External entities are never resolved either (the parsers say so).
enum UntrustedXML {
    /// Why `bytes` cannot be parsed safely, or `nil`.
    static func problem(_ bytes: [UInt8]) -> String? {
        if let problem = encodingProblem(bytes) { return problem }
        return dtdProblem(bytes)
    }

    /// Why `bytes` are not text `XMLParser` can take: not UTF-8 though the document says it is
    /// UTF-8 (or says nothing, which means UTF-8).
    static func encodingProblem(_ bytes: [UInt8]) -> String? {
        if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) { return nil }
        if let declared = declaredEncoding(bytes), !["utf-8", "utf8"].contains(declared) { return nil }
        guard String(validating: bytes, as: UTF8.self) == nil else { return nil }
        return "it is not valid UTF-8, though it says it is; it is not read"
    }

    /// The `encoding` of the XML declaration, lowercased; `nil` when there is none.
    private static func declaredEncoding(_ bytes: [UInt8]) -> String? {
        let start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        guard bytes[start...].starts(with: Array("<?xml".utf8)) else { return nil }
        let head = bytes[start..<min(bytes.count, start + 256)]
        guard let end = head.firstIndex(of: UInt8(ascii: ">")) else { return nil }
        let declaration = String(decoding: head[..<end], as: UTF8.self)
        guard let range = declaration.range(of: "encoding") else { return nil }
        let rest = declaration[range.upperBound...].drop { $0 == " " || $0 == "=" }
        guard let quote = rest.first, quote == "\"" || quote == "'" else { return nil }
        return String(rest.dropFirst().prefix { $0 != quote }).lowercased()
    }

    /// Why the document's own DTD makes it unsafe, or `nil`: only the prolog is read (the XML
    /// declaration, comments, processing instructions and the document type, up to the root element).
    static func dtdProblem<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        var index = bytes.startIndex
        func starts(with text: String) -> Bool {
            bytes[index...].starts(with: text.utf8)
        }
        func skip(past text: String) -> Bool {
            let needle = Array(text.utf8)
            while index != bytes.endIndex {
                if bytes[index...].starts(with: needle) {
                    index = bytes.index(index, offsetBy: needle.count)
                    return true
                }
                index = bytes.index(after: index)
            }
            return false
        }
        if starts(with: "\u{FEFF}") { index = bytes.index(index, offsetBy: 3) }
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D {
                index = bytes.index(after: index)
            } else if starts(with: "<?") {
                guard skip(past: "?>") else { return nil }
            } else if starts(with: "<!--") {
                guard skip(past: "-->") else { return nil }
            } else if starts(with: "<!DOCTYPE") {
                // The document type: refused when it has an internal subset, outside quoted strings.
                var quote: UInt8?
                while index != bytes.endIndex {
                    let byte = bytes[index]
                    if let open = quote {
                        if byte == open { quote = nil }
                    } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                        quote = byte
                    } else if byte == UInt8(ascii: "[") {
                        return "it declares a DTD of its own (<!DOCTYPE … [ … ]>), which no feed or book needs; it is not read"
                    } else if byte == UInt8(ascii: ">") {
                        break
                    }
                    index = bytes.index(after: index)
                }
                if index != bytes.endIndex { index = bytes.index(after: index) }
            } else {
                return nil
            }
        }
        return nil
    }
}
