/// Bounds that keep validation finite in time and memory, whatever the file claims.
public struct ValidationLimits: Sendable, Hashable {
    /// The most uncompressed bytes all entries of an EPUB may declare together, and all streams of
    /// a PDF may decode to together.
    public var maxTotalUncompressedBytes: Int64
    /// The largest compression ratio allowed for an EPUB entry bigger than ``ratioCheckThreshold``.
    public var maxCompressionRatio: Int64
    /// Entries smaller than this many uncompressed bytes are not ratio-checked.
    public var ratioCheckThreshold: Int64
    /// The most entries an EPUB may have.
    public var maxEntries: Int
    /// The largest `META-INF/container.xml` accepted.
    public var maxContainerXMLBytes: Int
    /// The deepest element nesting accepted in `container.xml` and the package document.
    public var maxContainerXMLDepth: Int
    /// The largest package document (`content.opf`) accepted; a large book's runs to a few
    /// hundred KiB.
    public var maxPackageDocumentBytes: Int
    /// The most a PDF stream of more than ``ratioCheckThreshold`` decoded bytes may decode to, in
    /// times its stored bytes. One deflate layer cannot pass 1,032; stacked filters can (two
    /// layers: a million). ``maxTotalUncompressedBytes`` bounds a PDF's streams together.
    public var maxPDFDecodingRatio: Int64 = 1_100

    /// Creates limits.
    /// - Parameters:
    ///   - maxTotalUncompressedBytes: 8 GiB by default.
    ///   - maxCompressionRatio: 200 by default (deflate bombs run near 1000).
    ///   - ratioCheckThreshold: 1 MiB by default.
    ///   - maxEntries: 100,000 by default.
    ///   - maxContainerXMLBytes: 256 KiB by default.
    ///   - maxContainerXMLDepth: 32 by default.
    ///   - maxPackageDocumentBytes: 16 MiB by default.
    public init(
        maxTotalUncompressedBytes: Int64 = 8 << 30,
        maxCompressionRatio: Int64 = 200,
        ratioCheckThreshold: Int64 = 1 << 20,
        maxEntries: Int = 100_000,
        maxContainerXMLBytes: Int = 256 << 10,
        maxContainerXMLDepth: Int = 32,
        maxPackageDocumentBytes: Int = 16 << 20
    ) {
        self.maxTotalUncompressedBytes = maxTotalUncompressedBytes
        self.maxCompressionRatio = maxCompressionRatio
        self.ratioCheckThreshold = ratioCheckThreshold
        self.maxEntries = maxEntries
        self.maxContainerXMLBytes = maxContainerXMLBytes
        self.maxContainerXMLDepth = maxContainerXMLDepth
        self.maxPackageDocumentBytes = maxPackageDocumentBytes
    }
}
