/// Lays out rows in columns separated by two spaces; the last column is not padded. Widths are
/// counted in terminal columns, so Chinese headings and titles (two columns a character) line up.
struct TableFormatter {
    var header: [String]
    var rows: [[String]] = []
    /// Columns to align to the right (numbers).
    var rightAligned: Set<Int> = []

    func render() -> String {
        let widths = Self.widths(of: [header] + rows)
        return ([header] + rows).map { line($0, widths: widths) }.joined(separator: "\n")
    }

    /// The widest cell of each column.
    static func widths(of rows: [[String]]) -> [Int] {
        guard let first = rows.first else { return [] }
        return first.indices.map { column in rows.map { columns($0[column]) }.max() ?? 0 }
    }

    /// One row laid out in `widths` (a cell wider than its column pushes the rest along).
    func line(_ row: [String], widths: [Int]) -> String {
        row.indices.map { column in
            let cell = row[column]
            if column == row.count - 1 && !rightAligned.contains(column) { return cell }
            let pad = String(repeating: " ", count: max(0, widths[column] - Self.columns(cell)))
            return rightAligned.contains(column) ? pad + cell : cell + pad
        }.joined(separator: "  ")
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

/// A table written as its rows come, for listings too long to hold: the column widths are those
/// of the header and the first `sample` rows (a table of up to `sample` rows is laid out exactly
/// as ``TableFormatter/render()`` does; a later, wider cell pushes its row along), and the text
/// goes out a megabyte at a time.
struct StreamingTable {
    private var format: TableFormatter
    private let sample: Int
    private var lines: BufferedLines
    private var widths: [Int]?

    /// - Parameters:
    ///   - header: The headings.
    ///   - rightAligned: Columns to align to the right.
    ///   - sample: How many rows decide the widths.
    ///   - output: Called with each megabyte of text, and the rest at ``finish()``.
    init(header: [String], rightAligned: Set<Int>, sample: Int = 1000, output: @escaping ([UInt8]) -> Void) {
        format = TableFormatter(header: header, rightAligned: rightAligned)
        self.sample = sample
        lines = BufferedLines(output: output)
    }

    mutating func add(_ row: [String]) {
        guard let widths else {
            format.rows.append(row)
            if format.rows.count == sample { start() }
            return
        }
        lines.write(format.line(row, widths: widths))
    }

    /// Writes what is left; nothing at all when no row was added.
    mutating func finish() {
        if widths == nil, !format.rows.isEmpty { start() }
        lines.flush()
    }

    /// Fixes the widths from the rows so far and writes the header and those rows.
    private mutating func start() {
        let widths = TableFormatter.widths(of: [format.header] + format.rows)
        self.widths = widths
        lines.write(format.line(format.header, widths: widths))
        for row in format.rows { lines.write(format.line(row, widths: widths)) }
        format.rows = []
    }
}
