import ArgumentParser
import BookCache
import Foundation

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: Localized.text("Keep the first N books of a manifest or OPDS feed cached."),
        discussion: """
            SOURCE is a JSON Lines manifest (a file, - for stdin, or an http(s) URL; the same format \
            as 'download --from') or an OPDS catalog feed (OPDS 1.2 Atom or OPDS 2.0 JSON), detected \
            from the content. From a navigation feed (calibre-server's /opds, a reader app's root \
            catalogue) the newest-first section is followed, or the one --section names; pages are \
            followed through rel="next" until N books are found. An entry's book is its free EPUB \
            or PDF (acquisition or open-access; never a sample, buy, borrow, subscribe or indirect \
            link); entries without one are skipped and take no slot. A catalogue behind a login \
            takes http://USER:PASSWORD@host/…, --user, --netrc or a bearer token in --header (a login \
            is answered, Basic or Digest, only when the catalogue's own host asks; headers go only \
            with its pages and the books on its own host).

            A catalogue is read within bounds, so an endless or hostile one costs little: at most \
            100 pages and 256 MiB in all (16 MiB a page), 5 levels of sections, no DTD of its own \
            (entity declarations are refused, external entities never read); the first 20 skipped \
            entries are named and the rest counted.

            The first N books are cached (failures are skipped); books that an \
            earlier sync of the same SOURCE brought in and that are no longer among them are \
            removed — never books added by 'download', never pinned ones. Within --min-interval of \
            the last successful sync of SOURCE nothing is done, unless --force. Exit 0 when all N \
            ended in the cache.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup(title: "Network") var connection: ConnectionOptions
    @OptionGroup(title: "Login (sent only to the catalogue's own host)") var login: LoginOptions
    @OptionGroup(title: "Validation") var validation: ValidationOptions

    @Argument(help: ArgumentHelp("A manifest or OPDS feed: a file, - for stdin, or an http(s) URL.", valueName: "source"))
    var source: String

    // `--first`: the source's first N books, not "at most N in the cache" as prune's and config's
    // `keep` mean; `--keep` is still accepted.
    @Option(
        name: [.customLong("first"), .customLong("keep")],
        help: ArgumentHelp("How many of the source's first books to keep cached (--keep is the same).", valueName: "n"))
    var keep: String

    @Option(help: "The type for books whose source does not say: ebook or magazine.")
    var type: BookType = .ebook

    @Option(
        name: .customLong("min-interval"),
        help: ArgumentHelp("Do nothing if the last successful sync of SOURCE was this recent, such as 4h.", valueName: "duration"))
    var minInterval: String?

    @Option(help: ArgumentHelp("The section of a navigation feed to follow, by title (default: the newest-first one).", valueName: "title"))
    var section: String?

    @Option(help: ArgumentHelp("The formats to take, most wanted first: epub,pdf (the default), pdf,epub, epub or pdf.", valueName: "list"))
    var format: String = "epub,pdf"

    @Flag(help: "Sync even within --min-interval.")
    var force = false

    @Option(help: "How many downloads run at once (1–64; default: the cache's concurrency setting, else 4).")
    var concurrency: Int?

    @Flag(help: "Print JSON.")
    var json = false

    @Option(
        help: ArgumentHelp(
            "Register SOURCE with the running 'bookcache serve' to sync on this schedule, such as 4h (it runs first at once); then exit.",
            valueName: "duration"))
    var every: String?

    private var parsedOptions: (keep: Int, interval: TimeInterval?) {
        get throws {
            do {
                return (
                    try CacheSettings.parseCount(keep),
                    try minInterval.map { text throws(BookCacheError) in try TimeSpan(parsing: text).seconds }
                )
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    private var formats: [BookFormat] {
        get throws {
            let names = format.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            let formats = try names.map { name -> BookFormat in
                guard let format = BookFormat(rawValue: name) else { throw ValidationError("--format: '\(name)' is not epub or pdf.") }
                return format
            }
            guard !formats.isEmpty, Set(formats).count == formats.count else {
                throw ValidationError("--format: give epub, pdf, or both once each, such as pdf,epub.")
            }
            return formats
        }
    }

    /// `--every`: hands the source to the service, which keeps it and runs it on schedule.
    private func schedule(every: String) async throws {
        guard source != "-" else { throw ValidationError("--every needs a SOURCE the service can read again: a URL or a file, not -.") }
        guard login.user == nil, login.headers.isEmpty else {
            throw ValidationError(
                "--every: give a scheduled source's login in its URL (http://USER:PASSWORD@host/…); --user and --header are not kept.")
        }
        let path = source.contains("://") ? source : URL(fileURLWithPath: source).standardizedFileURL.path
        var body: [String: Any] = ["source": path, "keep": try parsedOptions.keep, "type": type.rawValue, "every": every]
        body["formats"] = try formats.map(\.rawValue)
        if let section { body["section"] = section }
        let client = try await ServiceClient.connect(cacheRoot: CacheLayout.defaultRoot(explicit: global.cacheDir))
        struct Registered: Decodable {
            var id: String
            var source: String
            var nextRunAt: Date
        }
        let registered: Registered = try await client.send(
            "POST", "/api/v1/sources", body: try JSONSerialization.data(withJSONObject: body))
        if json {
            let line = try JSONSerialization.data(
                withJSONObject: ["id": registered.id, "source": registered.source], options: [.sortedKeys])
            Terminal.write(String(decoding: line, as: UTF8.self))
        } else {
            Terminal.write("scheduled \(registered.source) every \(every) (source \(registered.id)); the service runs it now")
        }
    }

    func validate() throws {
        if every != nil {
            _ = try parsedOptions
            _ = try formats
            return
        }
        _ = try parsedOptions
        _ = try formats
        if (login.user != nil || !login.headers.isEmpty), !source.contains("://") {
            throw ValidationError("--user and --header go with an http(s) SOURCE.")
        }
        if let concurrency, !(1...64).contains(concurrency) { throw ValidationError("--concurrency must be between 1 and 64.") }
        if source.contains("://") {
            do { _ = try BookDownloadRequest.parseURL(source) } catch { throw ValidationError(error.message) }
        } else if source != "-", !FileManager.default.isReadableFile(atPath: source) {
            throw ValidationError("Cannot read the sync source '\(source)'.")
        }
    }

    func run() async throws {
        if let every {
            try await schedule(every: every)
            return
        }
        let (keepCount, interval) = try parsedOptions
        let (concurrency, retries) = try global.runDefaults(concurrency: self.concurrency, retries: nil)
        let manager = try global.makeManager(concurrency: concurrency, retries: retries, connection: connection, strict: validation.strict)
        let formats = try self.formats
        let credentials = URL(string: source).flatMap(login.credentials(for:))
        let headers = try login.parsedHeaders
        let report: SyncReport
        do {
            let syncSource = try SyncSource(parsing: source) { FileHandle.standardInput.readDataToEndOfFile() }
            report = try await manager.sync(
                syncSource, keep: keepCount, type: type, formats: formats, section: section, credentials: credentials,
                headers: headers,
                minInterval: interval, force: force)
        } catch {
            throw fail(error)
        }
        await manager.waitForBackgroundWork()
        if report.skipped {
            let when = report.lastSuccess.map { Self.ago($0) } ?? "recently"
            let line = "\(report.source) was synced \(when); nothing to do (use --force to sync now)"
            if json {
                Terminal.write(Self.encode(["source": report.source, "skipped": true]))
            } else {
                Terminal.write(line)
            }
            return
        }
        if json {
            Terminal.write(Self.encode(Self.jsonObject(report)))
        } else {
            for item in report.items {
                for book in item.evicted { Terminal.writeError(book.line) }
                switch item.status {
                case .failed: Terminal.writeError(Localized.error(item.failure.map { cliMessage($0) } ?? "failed"))
                case .cached:
                    Terminal.write(Localized.text("cached %@", item.id ?? "?"))
                    for warning in item.warnings { Terminal.writeError(Localized.warning("\(item.id ?? "?"): \(warning)")) }
                case .alreadyCached: break
                }
            }
            for id in report.removed { Terminal.write(Localized.text("removed %@", id.description)) }
            if let section = report.section { Terminal.write(Localized.text("section: %@", section)) }
            for entry in report.skippedEntries { Terminal.write("skipped \(entry.title.map { "'\($0)'" } ?? "an entry"): \(entry.reason)") }
            if report.skippedCount > report.skippedEntries.count {
                Terminal.write("skipped \(report.skippedCount - report.skippedEntries.count) more entries")
            }
            for page in report.unreadPages {
                Terminal.writeError(
                    Localized.error(
                        Localized.text(
                            "a page of the catalogue cannot be read (%1$@): %2$@; the books after it were not synced, and none was removed",
                            page.url, cliMessage(page.failure))))
            }
            Terminal.write(report.summary(in: Localized.locale))
        }
        // Failed books and unread pages: the status they share (all offline: 69; a page gone: 69),
        // else 1 — as a download batch.
        if !report.isComplete {
            let failures = report.items.compactMap { $0.failure.map(ExitStatus.of) } + report.unreadPages.map { ExitStatus.of($0.failure) }
            throw ExitCode(ExitStatus.of(failures: failures))
        }
    }

    /// The report as `sync --json` prints it.
    static func jsonObject(_ report: SyncReport) -> [String: Any] {
        [
            "source": report.source, "format": report.format ?? NSNull(), "skipped": false, "wanted": report.wanted,
            "synced": report.inCache, "alreadyCached": report.alreadyCached, "new": report.inCache - report.alreadyCached,
            "failed": report.failed, "removed": report.removed, "section": report.section ?? NSNull(),
            "skippedEntries": report.skippedEntries.map { ["title": $0.title ?? NSNull(), "reason": $0.reason] as [String: Any] },
            "skippedCount": report.skippedCount,
            "unreadPages": report.unreadPages.map {
                ["url": $0.url, "error": cliMessage($0.failure, in: Localized.machineLocale), "kind": $0.failure.kind.description]
                    as [String: Any]
            },
            "items": report.items.map {
                [
                    "id": $0.id ?? NSNull(), "status": $0.status.rawValue,
                    "error": $0.failure.map { cliMessage($0, in: Localized.machineLocale) } ?? NSNull(),
                    "kind": $0.failure?.kind.description ?? NSNull(),
                    "evicted": $0.evicted.map(\.metadata.id), "warnings": $0.warnings,
                ] as [String: Any]
            },
        ]
    }

    private static func ago(_ date: Date) -> String {
        let seconds = max(0, Int(Date().timeIntervalSince(date)))
        if seconds < 120 { return "\(seconds)s ago" }
        if seconds < 7200 { return "\(seconds / 60)m ago" }
        return "\(seconds / 3600)h ago"
    }

    private static func encode(_ object: [String: Any]) -> String {
        // Only strings, numbers, booleans, arrays and dictionaries go in, so this cannot fail.
        let data =
            (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
