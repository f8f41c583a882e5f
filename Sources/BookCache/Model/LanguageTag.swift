import Foundation

/// A book's language as catalogues and package documents give it.
enum LanguageTag {
    /// The Dublin Core namespaces a `dc:language` element comes in: the terms OPDS uses, and the
    /// elements EPUB package documents (and some catalogues) use.
    static let dublinCoreNamespaces: Set<String> = ["http://purl.org/dc/terms/", "http://purl.org/dc/elements/1.1/"]

    /// `text` without the white space around it, when it reads as a BCP 47 tag (`en`, `pt-BR`,
    /// `zh-Hans`: ASCII letters, digits and hyphens, starting with a letter, at most 35
    /// characters); anything else is dropped.
    static func normalized(_ text: String) -> String? {
        let tag = text.trimmingCharacters(in: .whitespacesAndNewlines)
        func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
        guard (2...35).contains(tag.utf8.count), let first = tag.utf8.first, isLetter(first),
            tag.utf8.allSatisfy({ isLetter($0) || (0x30...0x39).contains($0) || $0 == UInt8(ascii: "-") })
        else { return nil }
        return tag
    }
}
