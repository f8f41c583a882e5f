import Foundation

/// Titles and names that come from outside — a catalogue, a manifest, a command line, the API —
/// bounded in bytes after normalisation, so no stranger's metadata can make a header, a cursor, a
/// feed or the web page huge: Unicode NFC, runs of whitespace and control characters as one space,
/// at most ``maxMarks`` combining marks (or joiners) on a character (a title of `e` and 200,000 accents is one
/// `Character` of 400 KB), then cut at a character boundary to fit the byte limit.
package enum MetadataText {
    /// The most UTF-8 bytes of a title.
    package static let maxTitleBytes = 1024
    /// The most UTF-8 bytes of an author's name.
    package static let maxNameBytes = 256
    /// The most authors a book keeps.
    package static let maxNames = 32
    /// The most combining marks kept on one character (Vietnamese and Indic scripts need up to 3).
    package static let maxMarks = 4

    /// `text` normalised and cut to at most `maxBytes` UTF-8 bytes.
    package static func bounded(_ text: String, maxBytes: Int) -> String {
        // Printable ASCII with single inner spaces is its own normal form: most titles, and every
        // title read back from the index, are already bounded.
        if text.utf8.count <= maxBytes, isPlain(text.utf8) { return text }
        // The cost is bounded before it is paid: at most four times the limit is looked at.
        var scalars = String.UnicodeScalarView()
        var marks = 0
        var lastWasSpace = true
        for scalar in text.unicodeScalars.prefix(maxBytes * 4) {
            if scalar.properties.isWhitespace || scalar.properties.generalCategory == .control {
                if !lastWasSpace { scalars.append(" ") }
                lastWasSpace = true
                marks = 0
                continue
            }
            switch scalar.properties.generalCategory {
            // Marks, and format characters such as the zero-width joiner, extend the character before.
            case .nonspacingMark, .spacingMark, .enclosingMark, .format:
                marks += 1
                if marks > maxMarks { continue }
            default:
                marks = 0
            }
            lastWasSpace = false
            scalars.append(scalar)
        }
        let normalised = String(scalars).precomposedStringWithCanonicalMapping.trimmingCharacters(in: .whitespaces)
        guard normalised.utf8.count > maxBytes else { return normalised }
        var cut = ""
        var bytes = 0
        for character in normalised {
            bytes += character.utf8.count
            if bytes > maxBytes { break }
            cut.append(character)
        }
        return cut
    }

    /// Printable ASCII, no space at either end, no two spaces together.
    private static func isPlain(_ bytes: String.UTF8View) -> Bool {
        var previous = UInt8(ascii: " ")
        for byte in bytes {
            guard byte >= 0x20, byte < 0x7F, byte != UInt8(ascii: " ") || previous != byte else { return false }
            previous = byte
        }
        return previous != UInt8(ascii: " ") || bytes.isEmpty
    }

    /// A title, bounded.
    package static func title(_ text: String?) -> String? {
        text.map { bounded($0, maxBytes: maxTitleBytes) }
    }

    /// Authors' names, bounded, empty ones left out, at most ``maxNames``.
    package static func names(_ names: [String]) -> [String] {
        Array(names.lazy.map { bounded($0, maxBytes: maxNameBytes) }.filter { !$0.isEmpty }.prefix(maxNames))
    }
}
