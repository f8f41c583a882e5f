import BookCache

extension EvictedBook {
    /// One line for the terminal: `evicted ebook-x (1.2 MB, least recently read) to make room for ebook-y`.
    var line: String {
        let size = ByteFormat.string(metadata.fileSize)
        let target = madeRoomFor.map { " for \($0)" } ?? ""
        switch reason {
        case .budget: return "evicted \(metadata.id) (\(size), least recently read) to make room\(target) within the cache's limits"
        case .freeSpace: return "evicted \(metadata.id) (\(size), least recently read) to free disk space\(target)"
        case .prune: return "evicted \(metadata.id) (\(size)) by prune"
        case .syncSource: return "evicted \(metadata.id) (\(size)): no longer in its sync source"
        }
    }
}
