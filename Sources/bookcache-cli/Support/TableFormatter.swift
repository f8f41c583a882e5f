/// Lays out rows in columns separated by two spaces; the last column is not padded. Widths are
/// counted in terminal columns, so Chinese headings and titles (two columns a character) line up.
struct TableFormatter {
    var header: [String]
    var rows: [[String]] = []
    /// Columns to align to the right (numbers).
    var rightAligned: Set<Int> = []

    func render() -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { Self.columns($0[column]) }.max() ?? 0 }
        return all.map { row in
            row.indices.map { column in
                let cell = row[column]
                if column == row.count - 1 && !rightAligned.contains(column) { return cell }
                let pad = String(repeating: " ", count: widths[column] - Self.columns(cell))
                return rightAligned.contains(column) ? pad + cell : cell + pad
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// The terminal columns `text` takes: two for East Asian wide and fullwidth characters.
    static func columns(_ text: String) -> Int {
        text.unicodeScalars.reduce(0) { width, scalar in
            switch scalar.value {
            case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
                0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x20000...0x3FFFD:
                width + 2
            case 0x0300...0x036F, 0x200B...0x200F:
                width
            default:
                width + 1
            }
        }
    }
}
