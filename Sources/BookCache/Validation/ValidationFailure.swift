/// Why a file was refused, in words a user can act on.
public struct ValidationFailure: Error, Sendable, Hashable, CustomStringConvertible {
    /// The reason, such as `CRC error in OEBPS/chapter1.xhtml`.
    public let reason: String

    /// Creates a failure.
    /// - Parameter reason: What is wrong with the file.
    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { reason }
}
