import DownloadQueue

extension DownloadPriority {
    /// The priority's word in manifests, the service's API and the command line: `low`, `normal`
    /// or `high`. The one home of the words; each reader and writer of them uses this.
    package var word: String {
        switch self {
        case .low: "low"
        case .normal: "normal"
        case .high: "high"
        }
    }

    /// The priority a word names, or `nil` for any other word.
    package init?(word: String) {
        guard let priority = Self.allCases.first(where: { $0.word == word }) else { return nil }
        self = priority
    }

    /// The words, for messages: `low, normal or high`.
    package static let wordList = "low, normal or high"
}
