import Foundation

/// What is kept beside a partial file so a later attempt, in this process or another, can ask
/// for the rest with `Range` and `If-Range`: the URL and the server's validator.
struct ResumeRecord: Codable, Equatable {
    /// The URL the partial came from.
    var url: String
    /// The strong `ETag`, else the `Last-Modified` date, that `If-Range` will send.
    var validator: String
    /// The full size the server announced, if it did.
    var totalLength: Int64?

    /// Where the record for a partial file lives.
    static func path(for destination: String) -> String { destination + ".resume" }

    static func load(for destination: String) -> ResumeRecord? {
        guard let data = FileManager.default.contents(atPath: path(for: destination)) else { return nil }
        return try? JSONDecoder().decode(ResumeRecord.self, from: data)
    }

    func save(for destination: String) throws {
        let data = try JSONEncoder().encode(self)
        // Owner only (0600), as everything beside a download that names its URL.
        try data.write(to: URL(filePath: Self.path(for: destination), directoryHint: .notDirectory), options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: Self.path(for: destination))
    }

    static func remove(for destination: String) {
        unlink(path(for: destination))
    }

    /// The validator `If-Range` can use: a strong ETag, else `Last-Modified`. Weak ETags
    /// (`W/"…"`) cannot be used with `If-Range`.
    static func validator(etag: String?, lastModified: String?) -> String? {
        if let etag, !etag.hasPrefix("W/"), !etag.isEmpty { return etag }
        if let lastModified, !lastModified.isEmpty { return lastModified }
        return nil
    }
}

/// A parsed `Content-Range: bytes START-END/TOTAL` (TOTAL may be `*`).
struct ContentRange: Equatable {
    var start: Int64
    var end: Int64
    var total: Int64?

    init?(_ header: String) {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.hasPrefix("bytes ") else { return nil }
        let spec = trimmed.dropFirst("bytes ".count)
        let parts = spec.split(separator: "/", maxSplits: 1)
        guard parts.count == 2 else { return nil }
        let bounds = parts[0].split(separator: "-", maxSplits: 1)
        guard bounds.count == 2, let start = Int64(bounds[0]), let end = Int64(bounds[1]), start >= 0, end >= start else {
            return nil
        }
        self.start = start
        self.end = end
        if parts[1] == "*" {
            total = nil
        } else {
            guard let total = Int64(parts[1]), total > end else { return nil }
            self.total = total
        }
    }
}
