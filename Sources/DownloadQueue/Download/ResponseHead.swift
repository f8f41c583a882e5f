/// What a caller sees of a response before any of its body is written.
///
/// A ``FileDownloader`` passes it to a check that may refuse the download, for example
/// because the file would not fit on the disk.
public struct ResponseHead: Sendable {
    /// The HTTP status code (200).
    public var statusCode: Int
    /// The full size of the file when the server announced it.
    public var expectedLength: Int64?
    /// The bytes still to come (less than ``expectedLength`` when resuming), if announced.
    public var remainingLength: Int64?
    /// The `Content-Type`, if any.
    public var contentType: String?
}
