import Foundation

/// One entry a sync source lists, in the source's order.
struct SyncEntry: Sendable, Hashable {
    /// What an entry gives a sync.
    public enum Outcome: Sendable, Hashable {
        /// A free EPUB or PDF to cache.
        case book(BookDownloadRequest)
        /// An entry with no free EPUB or PDF (only a sample, a shop link, another format): not a
        /// failure, and it takes no `keep` slot.
        case skipped(title: String?, reason: String)
        /// An entry that cannot be used (a malformed manifest line, a link that cannot be resolved).
        case invalid(ManifestProblem)
    }

    /// Where the entry stands in the source (a line number, or a position in a feed), from 1.
    public var position: Int
    /// The book, or why there is none.
    public var outcome: Outcome

    /// Creates an entry.
    public init(position: Int, outcome: Outcome) {
        self.position = position
        self.outcome = outcome
    }

    /// The request, for an entry that is a book.
    public var request: BookDownloadRequest? {
        if case .book(let request) = outcome { return request }
        return nil
    }
}

/// A section of a navigation feed: a link to another feed (calibre's "By Newest", an OPDS 2
/// `navigation` link).
struct FeedSection: Sendable, Hashable {
    /// The title the catalogue shows.
    public var title: String
    /// The feed it leads to.
    public var url: URL
    /// Whether the catalogue marks it as newest first (`rel="http://opds-spec.org/sort/new"`).
    public var isNewestFirst: Bool

    /// Creates a section.
    public init(title: String, url: URL, isNewestFirst: Bool = false) {
        self.title = title
        self.url = url
        self.isNewestFirst = isNewestFirst
    }
}

/// One page of a sync source: its entries, its sections (for a navigation feed), and the next page.
struct FeedPage: Sendable, Hashable {
    /// The format detected.
    public var format: FeedParser.Format
    /// The entries, in order.
    public var entries: [SyncEntry]
    /// Links to other feeds, for a navigation feed.
    public var sections: [FeedSection]
    /// The next page (`rel="next"`), if any.
    public var next: URL?

    /// A navigation feed: it leads to other feeds and lists no book of its own.
    public var isNavigation: Bool {
        !sections.isEmpty && !entries.contains { $0.request != nil }
    }
}
