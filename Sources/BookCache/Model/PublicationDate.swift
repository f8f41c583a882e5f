import Foundation

/// A book's publication date as catalogues and package documents give it.
package enum PublicationDate {
    /// The date part of `text` in W3C date form — `1818`, `1818-01` or `1818-01-01` — when it
    /// starts with one (a date and time keeps its date: `2005-03-14T00:00:00+00:00` gives
    /// `2005-03-14`); anything else is dropped. Years before 1000 are dropped too: calibre writes
    /// `0101-01-01` for a date it does not know.
    package static func normalized(_ text: String) -> String? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        let date = trimmed.split(separator: "T", maxSplits: 1).first.map(String.init) ?? ""
        let parts = date.split(separator: "-", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count), parts.count == 3 || date == trimmed,
            parts.enumerated().allSatisfy({ $1.utf8.count == ($0 == 0 ? 4 : 2) && $1.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
            let year = Int(parts[0]), year >= 1000
        else { return nil }
        if parts.count > 1, let month = Int(parts[1]), !(1...12).contains(month) { return nil }
        if parts.count > 2, let day = Int(parts[2]), !(1...31).contains(day) { return nil }
        return date
    }

    /// Whether `date` is a whole day in normalised form, `1818-01-01`: the form OPDS 2.0's
    /// `published` takes (a JSON Schema `date`), where a year alone is not valid. Checked in
    /// full, since a record read back from the index or a sidecar is input too.
    package static func isFullDate(_ date: String) -> Bool {
        date.utf8.count == 10 && normalized(date) == date
    }
}
