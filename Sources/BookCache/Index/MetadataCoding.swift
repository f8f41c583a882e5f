import Foundation

/// The JSON coders used for the index, sidecars and `list --json`: ISO-8601 dates with
/// fractional seconds (so LRU order survives a round trip), sorted keys.
package enum MetadataCoding {
    /// An encoder for metadata: ISO-8601 dates, sorted keys.
    public static func encoder(pretty: Bool = false) -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting =
            pretty ? [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes] : [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(formatUTC(date))
        }
        return encoder
    }

    /// A decoder for metadata; accepts ISO-8601 dates with or without fractional seconds.
    public static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let string = try container.decode(String.self)
            if let date = parseUTC(string) { return date }
            if let date = try? Self.dateStyle.parse(string) { return date }
            if let date = try? Date.ISO8601FormatStyle().parse(string) { return date }
            throw DecodingError.dataCorruptedError(in: container, debugDescription: "not an ISO-8601 date: \(string)")
        }
        return decoder
    }

    private static let dateStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// `2026-11-22T12:04:51.802Z`: UTC with milliseconds, written directly (the inverse of
    /// `parseUTC(_:)`), since the general formatter is slow for thousands of dates.
    public static func formatUTC(_ date: Date) -> String {
        let totalMilliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        var days = Int(totalMilliseconds >= 0 ? totalMilliseconds / 86_400_000 : (totalMilliseconds - 86_399_999) / 86_400_000)
        let millisOfDay = Int(totalMilliseconds - Int64(days) * 86_400_000)
        // Civil date from days (Howard Hinnant's algorithm).
        days += 719_468
        let era = (days >= 0 ? days : days - 146_096) / 146_097
        let dayOfEra = days - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        guard (0...9999).contains(year) else { return date.formatted(dateStyle) }
        var bytes = [UInt8](repeating: 0, count: 24)
        func put(_ value: Int, _ at: Int, _ width: Int) {
            var v = value
            for i in stride(from: at + width - 1, through: at, by: -1) {
                bytes[i] = UInt8(48 + v % 10)
                v /= 10
            }
        }
        put(year, 0, 4); bytes[4] = 0x2D
        put(month, 5, 2); bytes[7] = 0x2D
        put(day, 8, 2); bytes[10] = 0x54
        put(millisOfDay / 3_600_000, 11, 2); bytes[13] = 0x3A
        put(millisOfDay / 60_000 % 60, 14, 2); bytes[16] = 0x3A
        put(millisOfDay / 1000 % 60, 17, 2); bytes[19] = 0x2E
        put(millisOfDay % 1000, 20, 3); bytes[23] = 0x5A
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The fast path for the form this library writes, `2026-11-22T12:04:51.802Z` (fraction
    /// optional); `nil` for anything else, which the general parser then tries.
    static func parseUTC(_ text: String) -> Date? {
        let utf8 = text.utf8
        return utf8.withContiguousStorageIfAvailable { bytes -> Date? in
            guard bytes.count >= 20, bytes[4] == 0x2D, bytes[7] == 0x2D, bytes[10] == 0x54, bytes[13] == 0x3A, bytes[16] == 0x3A,
                bytes[bytes.count - 1] == 0x5A
            else { return nil }
            func number(_ from: Int, _ length: Int) -> Int? {
                var value = 0
                for index in from..<(from + length) {
                    let digit = Int(bytes[index]) - 48
                    guard (0...9).contains(digit) else { return nil }
                    value = value * 10 + digit
                }
                return value
            }
            guard let year = number(0, 4), let month = number(5, 2), let day = number(8, 2), let hour = number(11, 2),
                let minute = number(14, 2), let second = number(17, 2), (1...12).contains(month), (1...31).contains(day),
                hour < 24, minute < 60, second < 61
            else { return nil }
            var fraction = 0.0
            if bytes.count > 20 {
                guard bytes[19] == 0x2E, bytes.count > 21 else { return nil }
                var scale = 0.1
                for index in 20..<(bytes.count - 1) {
                    let digit = Int(bytes[index]) - 48
                    guard (0...9).contains(digit) else { return nil }
                    fraction += Double(digit) * scale
                    scale /= 10
                }
            } else if bytes.count != 20 {
                return nil
            }
            // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian, UTC.
            let y = month <= 2 ? year - 1 : year
            let era = (y >= 0 ? y : y - 399) / 400
            let yearOfEra = y - era * 400
            let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
            let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
            let days = era * 146_097 + dayOfEra - 719_468
            let seconds = Double(days * 86_400 + hour * 3600 + minute * 60 + second) + fraction
            return Date(timeIntervalSince1970: seconds)
        } ?? nil
    }
}
