/// XML that comes from outside — OPDS feeds, an EPUB's `container.xml` and package document —
/// needs no DTD. A document whose `<!DOCTYPE …>` has an internal subset (`[ … ]`, where entities are
/// declared) is refused before it is parsed, so no entity is ever expanded: a feed or a package
/// document that expands one entity half a million times costs a scan of its first bytes, not
/// minutes of a core. External entities are never resolved either (the parsers say so).
enum UntrustedXML {
    /// Why `bytes` cannot be parsed safely, or `nil`: only the prolog is read (the XML declaration,
    /// comments, processing instructions and the document type, up to the root element).
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
