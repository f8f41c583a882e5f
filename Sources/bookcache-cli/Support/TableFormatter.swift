/// Lays out rows in columns separated by two spaces; the last column is not padded.
struct TableFormatter {
    var header: [String]
    var rows: [[String]] = []
    /// Columns to align to the right (numbers).
    var rightAligned: Set<Int> = []

    func render() -> String {
        let all = [header] + rows
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.indices.map { column in
                let cell = row[column]
                if column == row.count - 1 && !rightAligned.contains(column) { return cell }
                let pad = String(repeating: " ", count: widths[column] - cell.count)
                return rightAligned.contains(column) ? pad + cell : cell + pad
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
