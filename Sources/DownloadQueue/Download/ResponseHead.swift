/// What a caller sees of a response before any of its body is written (``OpenedDownload/head``),
/// to decide whether to take it — for example whether the file fits on the disk.
package struct ResponseHead: Sendable {
    /// The HTTP status code (200, or 206 when resuming).
    public var statusCode: Int
    /// The full size of the file when the server announced it.
    public var expectedLength: Int64?
    /// The bytes still to come (less than ``expectedLength`` when resuming), if announced.
    public var remainingLength: Int64?
    /// The `Content-Type`, if any.
    public var contentType: String?
}
