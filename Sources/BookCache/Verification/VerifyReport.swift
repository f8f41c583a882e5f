/// What `verify` found.
public struct VerifyReport: Sendable, Hashable {
    /// One thing wrong.
    public struct Problem: Sendable, Hashable {
        /// The kind of problem.
        public enum Kind: String, Sendable, Hashable, Codable {
            /// The index lists the book, but its file is gone.
            case missing
            /// The file's size or SHA-256 differs from the record: it changed on disk.
            case changed
            /// The file fails format validation.
            case corrupt
            /// A file in a type folder that the index does not know.
            case stray
        }

        /// The kind.
        public var kind: Kind
        /// The book, when the problem belongs to one.
        public var id: String?
        /// The file, relative to the cache root.
        public var path: String
        /// What exactly is wrong.
        public var detail: String
        /// What `--repair` did about it, if it ran.
        public var repair: String?
    }

    /// How many indexed books were checked.
    public var checked: Int
    /// The problems, in path order.
    public var problems: [Problem]
    /// Books that are fine but break rules no reader needs (see ``ValidationReport/warnings``),
    /// and books that could not be judged this time ("not checked: could not be judged safely…",
    /// ``ValidationFailure/Kind/unjudgeable``), by id. They are not problems: ``isClean`` ignores
    /// them, and a repair leaves them alone.
    public var warnings: [String: [String]] = [:]

    /// Whether nothing is wrong.
    public var isClean: Bool { problems.isEmpty }
}
