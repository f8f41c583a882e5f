import Foundation

/// What a finished download left on disk and what the server said about it.
public struct DownloadedFile: Sendable, Hashable {
    /// Where the bytes were written.
    public var path: String
    /// How many bytes the file holds.
    public var byteCount: Int64
    /// The lowercase hex SHA-256 of the whole file, computed while streaming.
    public var sha256: String
    /// The server's `ETag`, if any.
    public var etag: String?
    /// The server's `Last-Modified`, if any.
    public var lastModified: String?
    /// The server's `Content-Type`, if any (informational only).
    public var contentType: String?
    /// The URL that answered, after redirects, with credentials removed.
    public var finalURL: String
    /// Where the last attempt resumed an earlier partial file (0 when it started afresh).
    public var resumedFrom: Int64
}
