import Foundation

/// What a sync did.
public struct SyncReport: Sendable {
    /// How one listed book ended.
    public struct Item: Sendable {
        /// How a listed book ended.
        public enum Status: String, Sendable, Hashable, Codable {
            /// Downloaded by this sync.
            case cached
            /// In the cache already.
            case alreadyCached = "already-cached"
            /// Not in the cache: see ``Item/failure``.
            case failed
        }

        /// The book, when the entry named one.
        public var id: String?
        /// How it ended.
        public var status: Status
        /// Why it failed, with its kind: the download's error, or ``BookCacheError/Kind/invalidArgument``
        /// for an entry that named no usable book.
        public var failure: BookCacheError?
        /// The failure's message.
        public var error: String? { failure?.message }
        /// Books evicted to make room for this one.
        public var evicted: [EvictedBook] = []
        /// What validation warned about, for a book cached by this sync (see
        /// ``ValidationReport/warnings``); empty otherwise.
        public var warnings: [String] = []
    }

    /// An entry that offered no free EPUB or PDF.
    public struct SkippedEntry: Sendable, Hashable {
        /// The entry's title, when it has one.
        public var title: String?
        /// Why it was skipped, such as "no free EPUB or PDF (only acquisition/buy)".
        public var reason: String
    }

    /// A page of the source that could not be read (a `next` page answering 404, say): the
    /// listing stopped before it.
    public struct UnreadPage: Sendable {
        /// The page's URL, with any password in it hidden.
        public var url: String
        /// Why it could not be read.
        public var failure: BookCacheError
    }

    /// The source's key.
    public var source: String
    /// The format detected.
    public var format: String?
    /// The sync was skipped because the last successful one was within the minimum interval.
    public var skipped: Bool
    /// When the last successful sync was, if any.
    public var lastSuccess: Date?
    /// How many books were wanted (the first N of the source).
    public var wanted: Int
    /// The wanted books, in the source's order.
    public var items: [Item]
    /// Books removed because an earlier sync of this source brought them in and they are no
    /// longer among the first N.
    public var removed: [String]

    /// Entries skipped because they offer no free EPUB or PDF (they take no `keep` slot): the first
    /// ``maxNamedSkips`` of them; ``skippedCount`` counts them all.
    public var skippedEntries: [SkippedEntry] = []
    /// How many entries were skipped in all.
    public var skippedCount = 0
    /// The most skipped entries a report names: a catalogue of endless entries without a book costs
    /// a count, not memory for each.
    public static let maxNamedSkips = 20
    /// The section of a navigation feed that was followed, if any.
    public var section: String?
    /// Pages that could not be read. When there are any, the listing was cut short: the books
    /// found on the pages read were synced, no book was removed, and the run does not count as a
    /// success for the minimum interval.
    public var unreadPages: [UnreadPage] = []

    /// Books among the wanted that are now cached.
    public var inCache: Int { items.filter { $0.status != .failed }.count }
    /// Of those, how many were cached before.
    public var alreadyCached: Int { items.filter { $0.status == .alreadyCached }.count }
    /// Books that failed.
    public var failed: Int { items.filter { $0.status == .failed }.count }
    /// Whether every page was read and every wanted book ended in the cache.
    public var isComplete: Bool { skipped || (failed == 0 && unreadPages.isEmpty) }

    /// "7 of 7 cached (3 new, 4 already cached), 2 entries skipped (no free EPUB or PDF), 0 failed, 1 removed".
    public var summary: String { summary(in: BookCacheLanguage.english.locale) }

    /// ``summary`` in `locale`'s language (English, German or Simplified Chinese).
    public func summary(in locale: Locale) -> String {
        var text = LocalizedText.format(
            "%1$@ of %2$@ cached (%3$@ new, %4$@ already cached)", locale,
            ["\(inCache)", "\(wanted)", "\(inCache - alreadyCached)", "\(alreadyCached)"])
        if skippedCount > 0 {
            let key = skippedCount == 1 ? ", %@ entry skipped (no free EPUB or PDF)" : ", %@ entries skipped (no free EPUB or PDF)"
            text += LocalizedText.format(key, locale, ["\(skippedCount)"])
        }
        text += LocalizedText.format(", %1$@ failed, %2$@ removed", locale, ["\(failed)", "\(removed.count)"])
        if !unreadPages.isEmpty {
            let key = unreadPages.count == 1 ? ", %@ page could not be read" : ", %@ pages could not be read"
            text += LocalizedText.format(key, locale, ["\(unreadPages.count)"])
        }
        return text
    }
}
