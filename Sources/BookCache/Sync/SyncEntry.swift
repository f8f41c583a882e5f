/// One book a sync source lists, in the source's order.
public struct SyncEntry: Sendable, Hashable {
    /// Where the entry stands in the source (a line number, or a position in a feed), from 1.
    public var position: Int
    /// The book, or why the entry cannot be used.
    public var request: Result<BookDownloadRequest, ManifestProblem>
}
