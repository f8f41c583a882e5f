/// How far a download has come. Small and `Sendable`, so it can cross into any task.
public struct DownloadProgress: Sendable, Hashable {
    /// Bytes of the file on disk so far, including any resumed prefix.
    public var receivedBytes: Int64
    /// The full size of the file, when the server said it.
    public var totalBytes: Int64?

    /// Creates a progress value.
    /// - Parameters:
    ///   - receivedBytes: Bytes on disk so far.
    ///   - totalBytes: The full size, if known.
    public init(receivedBytes: Int64, totalBytes: Int64?) {
        self.receivedBytes = receivedBytes
        self.totalBytes = totalBytes
    }

    /// The fraction done, from 0 to 1, when the total is known.
    public var fractionCompleted: Double? {
        guard let totalBytes, totalBytes > 0 else { return nil }
        return min(1, Double(receivedBytes) / Double(totalBytes))
    }
}
