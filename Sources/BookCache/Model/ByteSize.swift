import Foundation

/// A size typed by a person: `500`, `500B`, `1.5GB` (powers of 1000), `2GiB` (powers of 1024).
package struct ByteSize: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// The size in bytes.
    public let bytes: Int64

    /// A size of `bytes` bytes.
    public init(bytes: Int64) {
        self.bytes = bytes
    }

    /// Parses `B`, `KB`/`MB`/`GB`/`TB` (powers of 1000) and `KiB`/`MiB`/`GiB`/`TiB` (powers of
    /// 1024), with fractions (`1.5GB`); a bare number is bytes. Case-insensitive; a space before
    /// the unit is allowed.
    /// - Parameter text: The size as typed.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidArgument`` for anything
    ///   else, including negative sizes and sizes over 8 EiB.
    public init(parsing text: String) throws(BookCacheError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        let numberPart = trimmed.prefix { $0.isNumber || $0 == "." }
        let unit = trimmed.dropFirst(numberPart.count).trimmingCharacters(in: .whitespaces).lowercased()
        guard !numberPart.isEmpty, numberPart.filter({ $0 == "." }).count <= 1, let value = Double(numberPart) else {
            throw .invalidArgument(
                "invalid size '\(text.debugEscaped)': use a number with B, KB, MB, GB, KiB, MiB or GiB, such as 2GiB or 1.5GB")
        }
        let multipliers: [String: Double] = [
            "": 1, "b": 1,
            "kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
            "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
            "kib": 1024, "mib": 1_048_576, "gib": 1_073_741_824, "tib": 1_099_511_627_776,
        ]
        guard let multiplier = multipliers[unit] else {
            throw .invalidArgument("invalid size unit '\(unit.debugEscaped)' in '\(text.debugEscaped)': use B, KB, MB, GB, KiB, MiB or GiB")
        }
        let total = (value * multiplier).rounded()
        guard total.isFinite, total >= 0, total < 9.2e18 else {
            throw .invalidArgument("size '\(text.debugEscaped)' is out of range")
        }
        bytes = Int64(total)
    }

    public var description: String { ByteFormat.string(bytes) }

    public static func < (lhs: ByteSize, rhs: ByteSize) -> Bool { lhs.bytes < rhs.bytes }
}

/// A span typed by a person: `90s`, `30m`, `4h`, `7d`, `2w`.
package struct TimeSpan: Sendable, Hashable, CustomStringConvertible {
    /// The span in seconds.
    public let seconds: TimeInterval

    /// Parses a whole or fractional number followed by `s`, `m`, `h`, `d` or `w`.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidArgument``.
    public init(parsing text: String) throws(BookCacheError) {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        guard let unit = trimmed.last, let value = Double(trimmed.dropLast()), value >= 0, value.isFinite else {
            throw .invalidArgument("invalid duration '\(text.debugEscaped)': use a number with s, m, h, d or w, such as 30m, 4h or 7d")
        }
        let scale: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800]
        guard let factor = scale[unit], value * factor < 1e12 else {
            throw .invalidArgument("invalid duration '\(text.debugEscaped)': use s, m, h, d or w, such as 30m, 4h or 7d")
        }
        seconds = value * factor
    }

    public var description: String {
        let whole = Int(seconds)
        if whole % 86_400 == 0 && whole > 0 { return "\(whole / 86_400)d" }
        if whole % 3600 == 0 && whole > 0 { return "\(whole / 3600)h" }
        if whole % 60 == 0 && whole > 0 { return "\(whole / 60)m" }
        return "\(whole)s"
    }
}
