/// Header values as HTTP spells them.
enum HTTPText {
    /// `text` without the optional whitespace (spaces and tabs, RFC 9110 §5.6.3) at its ends.
    static func trimmed(_ text: Substring) -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = text.firstIndex(where: { !isSpace($0) }) else { return text[text.endIndex...] }
        let last = text.lastIndex(where: { !isSpace($0) })!
        return text[first...last]
    }
}
