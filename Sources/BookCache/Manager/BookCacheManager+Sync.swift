import DownloadQueue
import Foundation
import Logging

extension BookCacheManager {
    /// Keeps the first `keep` books of a source cached, and removes the books an earlier sync of
    /// the same source brought in that are no longer among them — never books added by
    /// ``download(_:onEvent:)``, never pinned ones, and never one another source still lists.
    /// An entry whose URL is cached already under another id is that book (one URL, one book).
    ///
    /// A catalogue is read as a reader app would: from a navigation feed (calibre-server's root,
    /// an OPDS 2 `navigation`), the newest-first section is followed (`rel` `sort/new`, else a
    /// section whose title says so, such as calibre-web's "Recently added Books") unless `section` names another;
    /// pages are followed through `rel="next"` until `keep` books are found (at most
    /// ``maxSyncPages`` pages, never the same page twice); a later page that cannot be read ends
    /// the listing there (``SyncReport/unreadPages``): what was found is synced, nothing is
    /// removed, and the run is not a success. Entries without a free EPUB or PDF
    /// are skipped: not failures, and they take no `keep` slot. Entries naming the same book
    /// count once.
    ///
    /// Downloads run at low priority, so a concurrent ``open(_:onEvent:)`` is served first.
    /// Within `minInterval` of the last successful sync of this source nothing is done (the
    /// report says `skipped`), unless `force`. A sync is successful when every wanted book ended
    /// in the cache; failures are skipped and the others go on.
    ///
    /// - Parameters:
    ///   - source: A JSON Lines manifest or an OPDS 1.2/2.0 feed (detected from the content).
    ///   - keep: How many of the source's first books to keep cached.
    ///   - type: The type for books whose source does not say.
    ///   - formats: The formats to take, most wanted first.
    ///   - section: The title of the section to follow in a navigation feed.
    ///   - credentials: A login for the catalogue's host (Basic or Digest, answered to its `401`);
    ///     by default the `user:password@` of the source's URL. Books on another host get none.
    ///   - headers: Extra headers for the catalogue's host, such as `Authorization: Bearer …`;
    ///     sent with its pages and its own books, never to another host.
    ///   - minInterval: Seconds that must pass between successful syncs of this source.
    ///   - force: Sync even within `minInterval`.
    ///   - onEvent: Each download's events (``BookEvent``), with the book it was asked for.
    /// - Returns: What was synced, already cached, skipped, failed and removed.
    /// - Throws: ``BookCacheError`` when the source cannot be read or parsed at all, or is a
    ///   navigation feed whose section cannot be chosen (the message lists the sections).
    public func sync(
        _ source: SyncSource,
        keep: Int,
        type: BookType = .ebook,
        formats: [BookFormat] = [.epub, .pdf],
        section: String? = nil,
        credentials: HTTPCredentials? = nil,
        headers: [HTTPHeader] = [],
        minInterval: TimeInterval? = nil,
        force: Bool = false,
        onEvent: @escaping @Sendable (BookID, BookEvent) -> Void = { _, _ in }
    ) async throws(BookCacheError) -> SyncReport {
        let state = SyncStateStore(layout: layout)
        let last = try state.read().sources[source.key]?.lastSuccess
        if !force, let minInterval, let last, now().timeIntervalSince(last) < minInterval {
            return SyncReport(source: source.key, format: nil, skipped: true, lastSuccess: last, wanted: 0, items: [], removed: [])
        }
        let access = OriginAccess(
            credentials: credentials ?? source.baseURL.flatMap(HTTPCredentials.init(userInfoOf:)), headers: headers,
            origin: source.baseURL)
        let listing = try await collect(
            source, keep: max(0, keep), parser: FeedParser(defaultType: type, formats: formats), section: section, access: access)
        try prepareDirectories()

        let wanted = listing.entries
        let protected = try booksTheSourceMayNotReplace(wanted, source: source.key)
        let sameFile = Self.sameFileAsEarlier(wanted)
        var items = [SyncReport.Item?](repeating: nil, count: wanted.count)
        await withTaskGroup(of: (Int, SyncReport.Item).self) { group in
            for (position, entry) in wanted.enumerated() where sameFile[position] == nil {
                group.addTask {
                    var request: BookDownloadRequest
                    switch entry {
                    case .success(let listed): request = listed
                    case .failure(let problem):
                        return (position, SyncReport.Item(id: nil, status: .failed, failure: .invalidArgument(problem.description)))
                    }
                    request.priority = .low
                    request.syncSource = source.key
                    if protected.contains(request.id) { request.replaceExisting = false }
                    access.apply(to: &request)
                    let id = request.id
                    do throws(BookCacheError) {
                        let result = try await self.download(request, onEvent: { onEvent(id, $0) })
                        // The book's own id: a URL already cached under another id is that book
                        return (
                            position,
                            SyncReport.Item(
                                id: result.metadata.id, status: result.wasAlreadyCached ? .alreadyCached : .cached, evicted: result.evicted,
                                warnings: result.wasAlreadyCached ? [] : result.metadata.warnings)
                        )
                    } catch {
                        return (position, SyncReport.Item(id: id.description, status: .failed, failure: error, evicted: error.evicted))
                    }
                }
            }
            for await (position, item) in group { items[position] = item }
        }
        // An entry with the file of an earlier one is that book, as a URL cached by an earlier run is.
        for (position, first) in sameFile {
            items[position] = items[first].map { item in
                guard item.status != .failed else { return item }
                return SyncReport.Item(id: item.id, status: .alreadyCached)
            }
        }
        let finished = items.compactMap { $0 }
        let keepIDs = Set(finished.compactMap(\.id))
        // A listing cut short says nothing about the books after it: none is removed.
        let removed = listing.unreadPages.isEmpty ? try removeSyncedBooks(of: source.key, except: keepIDs) : []
        var report = SyncReport(
            source: source.key, format: listing.format.rawValue, skipped: false, lastSuccess: last, wanted: wanted.count, items: finished,
            removed: removed)
        report.skippedEntries = listing.skipped
        report.skippedCount = listing.skippedCount
        report.section = listing.section
        report.unreadPages = listing.unreadPages
        if report.isComplete {
            try state.recordSuccess(of: source.key, at: now())
            report.lastSuccess = now()
        }
        return report
    }

    /// Entries whose file (the same URL but for its login, fragment and the case of its scheme and
    /// host, for the same type) an earlier entry of the listing has: their positions, and the
    /// earlier entry's. One URL is one book within a run as across runs: a catalogue that lists one
    /// file under seven ids caches one book, not seven copies.
    static func sameFileAsEarlier(_ wanted: [Result<BookDownloadRequest, ManifestProblem>]) -> [Int: Int] {
        var first: [String: Int] = [:]
        var same: [Int: Int] = [:]
        for (position, entry) in wanted.enumerated() {
            guard case .success(let request) = entry else { continue }
            let file = "\(request.id.type.rawValue) \(BookDownloadRequest.identityKey(for: request.url))"
            if let earlier = first[file] { same[position] = earlier } else { first[file] = position }
        }
        return same
    }

    /// The books a source's `refresh` may not replace: a source changes only the books it brought,
    /// never one the user downloaded or pinned (a line `{"id": "alice", "refresh": true, "url": …}` in a
    /// source would otherwise replace the user's own book with the source's bytes).
    private func booksTheSourceMayNotReplace(
        _ wanted: [Result<BookDownloadRequest, ManifestProblem>], source: String
    ) throws(BookCacheError) -> Set<BookID> {
        var protected: Set<BookID> = []
        for case .success(let request) in wanted where request.replaceExisting {
            guard let record = try store.record(request.id) else { continue }
            if record.pinned || !record.syncSources.contains(source) { protected.insert(request.id) }
        }
        return protected
    }

    /// The most pages of one catalogue a sync reads.
    public static let maxSyncPages = 100
    /// The most bytes of one catalogue's pages a sync reads, all pages together.
    public static let maxSyncBytes = 256 << 20
    /// The most navigation levels a sync descends.
    static let maxSyncLevels = 5

    /// What a sync found in its source: the entries to sync (books up to `keep`, and broken
    /// entries among them), the entries skipped, and the section followed.
    struct SyncListing {
        var format: FeedParser.Format
        var entries: [Result<BookDownloadRequest, ManifestProblem>] = []
        /// The first skipped entries (``SyncReport/maxNamedSkips``), and how many there were.
        var skipped: [SyncReport.SkippedEntry] = []
        var skippedCount = 0
        var section: String?
        /// Pages that could not be read; the listing stopped at the first.
        var unreadPages: [SyncReport.UnreadPage] = []
        /// The books listed, each once (a catalogue may list a book on two pages).
        var books: Set<BookID> = []

        /// Takes a feed's entry: a book not listed yet, a skipped entry (counted, the first few
        /// named) or an invalid one.
        mutating func take(_ entry: SyncEntry) {
            switch entry.outcome {
            case .book(let request):
                guard books.insert(request.id).inserted else { return }
                entries.append(.success(request))
            case .skipped(let title, let reason):
                skippedCount += 1
                if skipped.count < SyncReport.maxNamedSkips { skipped.append(SyncReport.SkippedEntry(title: title, reason: reason)) }
            case .invalid(let problem):
                entries.append(.failure(problem))
            }
        }
    }

    /// Reads the source, descends navigation feeds, and follows `next` pages until `keep`
    /// distinct books are found.
    private nonisolated func collect(
        _ source: SyncSource, keep: Int, parser initial: FeedParser, section: String?, access: OriginAccess
    ) async throws(BookCacheError) -> SyncListing {
        var parser = initial
        var (data, pageURL) = try await read(source, access: access)
        parser.baseURL = pageURL
        var page = try await Self.parse(data, with: parser)
        var bytesRead = data.count
        var visited: Set<String> = pageURL.map { [$0.absoluteString] } ?? []
        var listing = SyncListing(format: page.format)
        var level = 0
        var nameUsed = false
        while page.isNavigation {
            guard level < Self.maxSyncLevels else {
                throw .invalidArgument(
                    "\(source.key): the catalogue's sections lead more than \(Self.maxSyncLevels) levels deep without a book; give the URL of the section to sync"
                )
            }
            let chosen = try Self.choose(
                from: page.sections, named: nameUsed ? nil : section, source: pageURL.map(URLRedaction.redacted) ?? source.key)
            nameUsed = nameUsed || section != nil
            listing.section = chosen.title
            (data, pageURL) = try await fetch(chosen.url, access: access)
            parser.baseURL = pageURL
            page = try await Self.parse(data, with: parser)
            bytesRead += data.count
            visited.insert(chosen.url.absoluteString)
            level += 1
        }
        if let section, !nameUsed {
            throw .invalidArgument("\(source.key) lists books, not sections, so the section '\(section)' cannot be chosen; leave it out")
        }
        listing.format = page.format
        var pages = 1
        pageLoop: while true {
            for entry in page.entries {
                if listing.books.count >= keep { break pageLoop }
                listing.take(entry)
            }
            guard listing.books.count < keep, let next = page.next else { break }
            guard visited.insert(next.absoluteString).inserted else {
                logger.warning(
                    "the catalogue's next page is one already read; stopping", metadata: ["url": "\(URLRedaction.redacted(next))"])
                break
            }
            guard pages < Self.maxSyncPages, bytesRead < Self.maxSyncBytes else {
                logger.warning(
                    "read the most pages or bytes a sync reads; stopping", metadata: ["pages": "\(pages)", "bytes": "\(bytesRead)"])
                break
            }
            // A later page that cannot be read ends the listing, not the sync: the books found so
            // far are synced, and the report says which page was not read.
            do throws(BookCacheError) {
                (data, pageURL) = try await fetch(next, access: access)
                parser.baseURL = pageURL
                page = try await Self.parse(data, with: parser)
                bytesRead += data.count
            } catch {
                // A sync being cancelled is not a page that cannot be read.
                if Task.isCancelled { throw error }
                logger.warning(
                    "a page of the catalogue cannot be read; the listing stops before it",
                    metadata: ["url": "\(URLRedaction.redacted(next))", "error": "\(error.message)"])
                listing.unreadPages.append(SyncReport.UnreadPage(url: URLRedaction.redacted(next), failure: error))
                break
            }
            pages += 1
        }
        return listing
    }

    /// Parses a page on a blocking-work thread: a large feed is seconds of a core, which on the
    /// cooperative pool would stall every task of the process (the service's API among them).
    private nonisolated static func parse(_ data: Data, with parser: FeedParser) async throws(BookCacheError) -> FeedPage {
        try await BlockingWork.run { () throws(BookCacheError) in try parser.page(in: data) }
    }

    /// The section to follow: the one named (by title, ignoring case; an exact match first),
    /// else the newest-first one. Throws a message listing the sections when none fits.
    static func choose(from sections: [FeedSection], named name: String?, source: String) throws(BookCacheError) -> FeedSection {
        if let name {
            let wanted = name.trimmingCharacters(in: .whitespaces)
            if let exact = sections.first(where: { $0.title.compare(wanted, options: .caseInsensitive) == .orderedSame }) { return exact }
            if let partial = sections.first(where: { $0.title.localizedCaseInsensitiveContains(wanted) }) { return partial }
            throw .chooseSection("\(source) has no section '\(name)'; choose one of its sections:\n\(list(sections))")
        }
        if let newest = sections.first(where: \.isNewestFirst) { return newest }
        if let named = sections.first(where: { isNewestTitle($0.title) }) { return named }
        throw .chooseSection(
            "\(source) is a navigation feed with no newest-first section; choose one of its sections:\n\(list(sections))")
    }

    /// Whole words that name a newest-first section, in the languages catalogues are served in:
    /// calibre-server's "Newest" ("Neue", "Le plus récent", "Más reciente"), calibre-web's
    /// "Recently added Books" ("Kürzlich hinzugefügte Bücher", "Libros añadidos recientemente",
    /// "Libri aggiunti di recente", "Livres récents ajoutés"), and the usual "New", "Latest",
    /// "Zuletzt hinzugefügt". Whole words, so a tag called "News" is not one.
    static let newestTitleWords: Set<Substring> = [
        "new", "newest", "latest", "recent", "recently",
        "neu", "neue", "neueste", "neuesten", "kürzlich", "zuletzt",
        "récent", "récents", "récemment", "reciente", "recientes", "recientemente", "recente", "recenti",
    ]

    /// Fragments that name one in scripts written without spaces: "最新" (calibre-server's
    /// Chinese "Newest"), "最近" (calibre-web's "最近添加的书籍", Japanese "最近追加された本"),
    /// "新着" (Japanese "new arrivals").
    static let newestTitleFragments = ["最新", "最近", "新着"]

    /// Whether a section's title says it lists the newest books first.
    static func isNewestTitle(_ title: String) -> Bool {
        let lowered = title.lowercased()
        if lowered.split(whereSeparator: { !$0.isLetter }).contains(where: newestTitleWords.contains) { return true }
        return newestTitleFragments.contains { lowered.contains($0) }
    }

    private static func list(_ sections: [FeedSection]) -> String {
        sections.map { "  \($0.title)  \(URLRedaction.redacted($0.url))" }.joined(separator: "\n")
    }

    /// Drops `key` from books that are not in `keep`; removes those that no source and no user
    /// keeps. Pinned books lose the source but stay.
    private func removeSyncedBooks(of key: String, except keep: Set<String>) throws(BookCacheError) -> [String] {
        var gone: [CachedBookMetadata] = []
        try store.update { index throws(BookCacheError) in
            for record in index.records(fromSource: key) where !keep.contains(record.id) {
                var updated = record
                updated.syncSources.removeAll { $0 == key }
                if updated.syncSources.isEmpty && !updated.pinned && !usageTracker.inUse.contains(record.id) {
                    gone.append(record)
                } else {
                    index[key: record.id] = updated
                    updateSidecar(updated)
                }
            }
            try evictionRunner.remove(gone, from: index, reason: .syncSource)
        }
        return gone.map(\.id).sorted()
    }

    /// The bytes of a source and the URL to resolve its links against: a file, given bytes, or
    /// an HTTP download (at most 16 MiB).
    private nonisolated func read(_ source: SyncSource, access: OriginAccess) async throws(BookCacheError) -> (Data, URL?) {
        switch source {
        case .data(let data, _):
            return (data, nil)
        case .file(let url):
            do {
                return (try Data(contentsOf: url), nil)
            } catch {
                throw .invalidArgument("cannot read the sync source \(url.path) (\(error))")
            }
        case .url(let url):
            let (data, finalURL) = try await fetch(url, access: access)
            return (data, finalURL)
        }
    }

    /// One catalogue page over HTTP (at most 16 MiB), with the URL that answered.
    private nonisolated func fetch(_ url: URL, access: OriginAccess) async throws(BookCacheError) -> (Data, URL) {
        let shown = URLRedaction.redacted(url)
        let request = access.request(for: url)
        let credentials = request.credentials
        do {
            let response = try await transport.send(request)
            if response.statusCode != 200 { response.body.cancel() }
            if response.statusCode == 401 || response.statusCode == 403 {
                let hint =
                    credentials == nil
                    ? "the catalogue asks for a login; put it in the URL (http://USER:PASSWORD@host/…) or give credentials"
                    : "the login was refused; check the user name and password"
                var error = BookCacheError.syncSourceFailed(
                    "cannot fetch the sync source \(shown): HTTP \(response.statusCode); \(hint)", status: response.statusCode, cause: nil)
                error.remedy = .giveLogin
                throw error
            }
            if response.statusCode == 429 {
                // calibre-web answers 429 to every login for a minute after three failed ones.
                let wait = response.header("Retry-After").flatMap { RetryAfter.parse($0) }
                let when = wait.map { "try again in \(max(1, $0.components.seconds)) s" } ?? "try again later"
                throw BookCacheError.syncSourceFailed(
                    "cannot fetch the sync source \(shown): HTTP 429; the catalogue says too many requests; \(when)", status: 429,
                    cause: nil)
            }
            guard response.statusCode == 200 else {
                throw DownloadError(kind: .httpStatus, url: url, statusCode: response.statusCode)
            }
            return (try await response.body.collect(maxBytes: 16 << 20, url: url), response.finalURL)
        } catch let error as BookCacheError {
            throw error
        } catch let error as DownloadError {
            if error.kind == .connectionFailed {
                throw .syncSourceFailed("cannot reach the sync source: \(error)", status: nil, connection: true, cause: error)
            }
            throw .syncSourceFailed("cannot fetch the sync source: \(error)", status: error.statusCode, cause: error)
        } catch {
            throw .syncSourceFailed("cannot fetch the sync source \(shown): \(error)", status: nil, cause: error)
        }
    }
}
