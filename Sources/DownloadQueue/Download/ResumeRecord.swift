import Foundation

/// What is kept beside a partial file so a later attempt, in this process or another, can ask
/// for the rest with `Range` and `If-Range`: the URL, the server's validator, and how many bytes of
/// the partial file were synced to the disk before the record was written, with their SHA-256.
///
/// A resume trusts those bytes and no more: after a power cut, bytes written after the last sync
/// may be lost or torn (read back as zeros, or a later piece kept while an earlier one was lost),
/// so the partial file is cut back to ``length`` and its hash checked before anything is appended;
/// when it disagrees, the download starts over. The record itself is written whole or not at all
/// (a temporary file, `fsync`, `rename`, `fsync` of the folder).
struct ResumeRecord: Codable, Equatable {
    /// The URL the partial came from.
    var url: String
    /// The strong `ETag`, else the `Last-Modified` date, that `If-Range` will send.
    var validator: String
    /// The full size the server announced, if it did.
    var totalLength: Int64?
    /// Bytes at the start of the partial file that were synced before this record was written.
    var length: Int64
    /// The SHA-256 of those bytes, as 64 lowercase hex digits.
    var sha256: String

    /// Where the record for a partial file lives.
    static func path(for destination: String) -> String { destination + ".resume" }

    /// The record beside a partial file, or `nil` when there is none, it does not decode (a record
    /// of an earlier version, without a length), or it is not a file of this user's (a link).
    static func load(for destination: String) -> ResumeRecord? {
        guard let data = FileSystem.readOwnFile(atPath: path(for: destination), maxBytes: 64 << 10) else { return nil }
        guard let record = try? JSONDecoder().decode(ResumeRecord.self, from: data), record.length > 0 else { return nil }
        return record
    }

    /// Writes the record durably (owner only, 0600, as everything beside a download that names its
    /// URL). Call it only once ``length`` bytes of the partial file are synced.
    func save(for destination: String) throws {
        let data = try JSONEncoder().encode(self)
        try FileSystem.writeAtomically(data, to: URL(filePath: Self.path(for: destination), directoryHint: .notDirectory))
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
