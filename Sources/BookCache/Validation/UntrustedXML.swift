import Foundation

/// XML that comes from outside — OPDS feeds, an EPUB's `container.xml` and package document —
/// is decoded to text and checked before Foundation's `XMLParser` sees it, for two things that
/// parser cannot be trusted with. Every decision is made on the decoded text, never on bytes in an
/// encoding this check does not read.
///
/// **Encodings**: the encoding is detected as XML 1.0 Appendix F says — a byte order mark, else
/// the first four bytes of `<?xml` — and UTF-16 (either byte order, with or without its mark) is
/// transcoded to UTF-8 first; the parser is given the UTF-8 and a declaration that says so. UTF-8
/// must be valid (a name that is not crashes `XMLParser` on Linux: a trap in
/// `_NSXMLParserStartElementNs`, found by fuzzing Feedbooks' feeds). A document that is neither
/// is read only when it declares a single-byte encoding libxml2 converts (Latin-1, Windows-1252);
/// UCS-4, EBCDIC and anything else are refused, and so is a document that declares an encoding
/// the DTD scan would not read as the parser does (UTF-7, Shift_JIS…).
///
/// **A DTD of its own**: such XML needs none. A document whose `<!DOCTYPE …>` has an internal subset (`[ … ]`, where entities are
/// declared) is refused before it is parsed, so no entity is ever expanded: a feed or a package
/// document that expands one entity half a million times costs a scan of its first bytes, not
/// minutes of a core. External entities are never resolved either (the parsers say so). A NUL
/// in the text is refused too (no XML holds one).
enum UntrustedXML {
    /// Why a document is not read.
    struct Refusal: Error, Sendable {
        let reason: String
    }

    /// The document as `XMLParser` may be given it: UTF-8 (transcoded from UTF-16 when it was
    /// that, its declaration then saying UTF-8), or text in a declared single-byte encoding.
    /// - Throws: ``Refusal`` when its encoding is not one of those, or it declares a DTD of its own.
    static func text<C: Collection>(_ bytes: C) throws(Refusal) -> [UInt8] where C.Element == UInt8 {
        let text = try decoded(Array(bytes))
        if let problem = dtdProblem(text) { throw Refusal(reason: problem) }
        return text
    }

    /// Why `bytes` cannot be parsed safely, or `nil` (``text(_:)``'s refusal).
    static func problem<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
        do {
            _ = try text(bytes)
            return nil
        } catch {
            return error.reason
        }
    }

    /// Single-byte encodings libxml2 turns every byte of into valid UTF-8 before `XMLParser` sees a
    /// name: a document declared in one of them may hold bytes that are not UTF-8.
    static let singleByteEncodings: Set<String> = ["iso-8859-1", "latin1", "iso-8859-15", "windows-1252", "cp1252"]

    /// Encodings a document that is not UTF-16 may declare: the scan for a DTD reads its bytes as
    /// the parser will (libxml2 reads UTF-8 labelled UTF-16, without a byte order mark, as UTF-8).
    static let asciiCompatibleEncodings = singleByteEncodings.union(["utf-8", "utf8", "us-ascii", "ascii", "utf-16", "utf16"])

    /// The encodings XML 1.0 Appendix F tells from a document's first bytes.
    private enum Detected {
        case utf8
        case utf16(bigEndian: Bool, byteOrderMark: Bool)
        case unsupported(String)
    }

    private static func detect(_ bytes: [UInt8]) -> Detected {
        let head = Array(bytes.prefix(4)) + [UInt8](repeating: 0xAA, count: max(0, 4 - bytes.count))
        switch (head[0], head[1], head[2], head[3]) {
        case (0x00, 0x00, 0xFE, 0xFF), (0xFF, 0xFE, 0x00, 0x00), (0x00, 0x00, 0x00, 0x3C), (0x3C, 0x00, 0x00, 0x00),
            (0x00, 0x00, 0xFF, 0xFE), (0xFE, 0xFF, 0x00, 0x00), (0x00, 0x00, 0x3C, 0x00), (0x00, 0x3C, 0x00, 0x00):
            return .unsupported("it is in UCS-4 (UTF-32)")
        case (0xFE, 0xFF, _, _): return .utf16(bigEndian: true, byteOrderMark: true)
        case (0xFF, 0xFE, _, _): return .utf16(bigEndian: false, byteOrderMark: true)
        case (0x00, 0x3C, 0x00, 0x3F): return .utf16(bigEndian: true, byteOrderMark: false)
        case (0x3C, 0x00, 0x3F, 0x00): return .utf16(bigEndian: false, byteOrderMark: false)
        case (0x4C, 0x6F, 0xA7, 0x94): return .unsupported("it is in EBCDIC")
        default: return .utf8
        }
    }

    /// The document's text in UTF-8 or a declared single-byte encoding.
    private static func decoded(_ bytes: [UInt8]) throws(Refusal) -> [UInt8] {
        let text: [UInt8]
        switch detect(bytes) {
        case .unsupported(let why):
            throw Refusal(reason: "\(why), which no feed or book needs; it is not read")
        case .utf16(let bigEndian, let byteOrderMark):
            let body = bytes.dropFirst(byteOrderMark ? 2 : 0)
            guard body.count % 2 == 0 else { throw Refusal(reason: "it is not valid UTF-16 (an odd number of bytes); it is not read") }
            var units: [UInt16] = []
            units.reserveCapacity(body.count / 2)
            var index = body.startIndex
            while index < body.endIndex {
                let first = UInt16(body[index])
                let second = UInt16(body[index + 1])
                units.append(bigEndian ? first << 8 | second : second << 8 | first)
                index += 2
            }
            guard let string = String(validating: units, as: UTF16.self) else {
                throw Refusal(reason: "it is not valid UTF-16; it is not read")
            }
            text = declaringUTF8(Array(string.utf8))
        case .utf8:
            if let problem = encodingProblem(bytes) { throw Refusal(reason: problem) }
            // A declared encoding the parser would decode differently from these bytes (UTF-7,
            // Shift_JIS…) could hide a DTD from the scan below, which reads them as they are.
            if let declared = declaredEncoding(bytes), !asciiCompatibleEncodings.contains(declared) {
                throw Refusal(reason: "it declares the encoding '\(declared)', which is not read (only UTF-8, UTF-16 and Latin-1 are)")
            }
            text = bytes
        }
        if text.contains(0) { throw Refusal(reason: "it holds a NUL character, which XML cannot; it is not read") }
        return text
    }

    /// `text` (transcoded to UTF-8) with its XML declaration's encoding, if it names one, made `UTF-8`.
    private static func declaringUTF8(_ text: [UInt8]) -> [UInt8] {
        guard text.starts(with: Array("<?xml".utf8)), let end = text.firstRange(of: Array("?>".utf8))?.lowerBound else { return text }
        let declaration = String(decoding: text[..<end], as: UTF8.self)
        guard let name = declaration.range(of: "encoding") else { return text }
        let rest = declaration[name.upperBound...]
        guard let quote = rest.firstIndex(where: { $0 == "\"" || $0 == "'" }),
            let close = rest[rest.index(after: quote)...].firstIndex(of: rest[quote])
        else { return text }
        let rewritten = declaration[..<name.lowerBound] + "encoding=\"UTF-8\"" + declaration[rest.index(after: close)...]
        return Array(rewritten.utf8) + text[end...]
    }

    /// Why `bytes` (not UTF-16 nor UCS-4) are not text `XMLParser` can take, or `nil`: valid
    /// UTF-8, or a document declared in one of ``singleByteEncodings``. The declaration alone is
    /// not trusted: bytes that are not UTF-8 in a document that says `UTF-16` without a byte order
    /// mark, `UTF_8` or anything else libxml2 passes through unconverted trap `XMLParser` too.
    static func encodingProblem<C: Collection>(_ bytes: C) -> String? where C.Element == UInt8 {
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
