import Foundation

/// Parses the `Retry-After` header: delay seconds or an HTTP date.
package enum RetryAfter {
    /// The delay the header asks for, never negative.
    /// - Parameters:
    ///   - value: The header's value, such as `120` or `Wed, 21 Oct 2015 07:28:00 GMT`.
    ///   - now: The current time, for HTTP dates.
    /// - Returns: The delay, or `nil` when the value is neither form.
    package static func parse(_ value: String, now: Date = Date()) -> Duration? {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Int64(trimmed) {
            return seconds >= 0 ? .seconds(seconds) : nil
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: trimmed) else { return nil }
        let seconds = max(0, date.timeIntervalSince(now))
        return .milliseconds(Int64(seconds * 1000))
    }
}
