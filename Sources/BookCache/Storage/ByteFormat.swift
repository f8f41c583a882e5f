import Foundation

/// Formats byte counts for people: `1.5 MB`, `812 KB`, `37 B` (powers of 1000, as disks are sold).
package enum ByteFormat {
    /// A short human-readable size.
    /// - Parameter bytes: A byte count.
    /// - Returns: The size with one decimal where it helps, such as `2.4 GB`.
    public static func string(_ bytes: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"]
        var value = Double(bytes)
        var unit = 0
        while abs(value) >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        // In tenths, as integers (what `%.1f` would print, without a format string per call:
        // `list` writes one per book).
        let tenths = Int((value * 10).rounded())
        let sign = tenths < 0 ? "-" : ""
        let magnitude = abs(tenths)
        let text = tenths % 10 == 0 && tenths >= 1000 ? "\(sign)\(magnitude / 10)" : "\(sign)\(magnitude / 10).\(magnitude % 10)"
        return "\(text) \(units[unit])"
    }
}
