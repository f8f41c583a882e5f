import Foundation

/// XML that comes from outside — OPDS feeds, an EPUB's `container.xml` and package document —
/// is checked before Foundation's `XMLParser` sees it, for two things that parser cannot be trusted with.
///
/// **Bytes that are not UTF-8**: a name (an element's, an attribute's, a prefix) that is not valid
/// UTF-8 crashes `XMLParser` on Linux (a trap in `_NSXMLParserStartElementNs`, found by fuzzing
/// Feedbooks' feeds), so one hostile feed or book would end the service. Only UTF-8, UTF-16 with its
/// byte order mark, and documents declared in a single-byte encoding libxml2 converts are read.
///
/// **A DTD of its own**: such XML needs none. A document whose `<!DOCTYPE …>` has an internal subset (`[ … ]`, where entities are
/// declared) is refused before it is parsed, so no entity is ever expanded: a feed or a package
/// document that expands one entity half a million times costs a scan of its first bytes, not
/// minutes of a core. External entities are never resolved either (the parsers say so).
enum UntrustedXML {
    /// Why `bytes` cannot be parsed safely, or `nil`.
    static func problem<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        if let problem = encodingProblem(bytes) { return problem }
        return dtdProblem(bytes)
    }

    /// Single-byte encodings libxml2 turns every byte of into valid UTF-8 before `XMLParser` sees a
    /// name: a document declared in one of them may hold bytes that are not UTF-8.
    static let singleByteEncodings: Set<String> = ["iso-8859-1", "latin1", "iso-8859-15", "windows-1252", "cp1252"]

    /// Why `bytes` are not text `XMLParser` can take, or `nil`: UTF-16 with its byte order mark, valid
    /// UTF-8, or a document declared in one of ``singleByteEncodings``. The declaration alone is
    /// not trusted: bytes that are not UTF-8 in a document that says `UTF-16` without a byte order
    /// mark, `UTF_8` or anything else libxml2 passes through unconverted trap `XMLParser` too.
    static func encodingProblem<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        if bytes.starts(with: [0xFF, 0xFE]) || bytes.starts(with: [0xFE, 0xFF]) { return nil }
        if String(validating: bytes, as: UTF8.self) != nil { return nil }
        if let declared = declaredEncoding(bytes), singleByteEncodings.contains(declared) { return nil }
        return "it is not valid UTF-8 (nor UTF-16, nor declared Latin-1); it is not read"
    }

    /// The `encoding` of the XML declaration, lowercased; `nil` when there is none.
    private static func declaredEncoding<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        let head = Array(bytes.prefix(259))
        let start = head.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        guard head[start...].starts(with: Array("<?xml".utf8)), let end = head[start...].firstIndex(of: UInt8(ascii: ">")) else {
            return nil
        }
        let declaration = String(decoding: head[start..<end], as: UTF8.self)
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
