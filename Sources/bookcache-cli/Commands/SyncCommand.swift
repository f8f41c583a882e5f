import ArgumentParser
import BookCache
import Foundation

struct SyncCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Keep the first N books of a manifest or OPDS feed cached.",
        discussion: """
            SOURCE is a JSON Lines manifest (a file, - for stdin, or an http(s) URL; the same format \
            as 'download --from') or an OPDS catalog feed (OPDS 1.2 Atom or OPDS 2.0 JSON), detected \
            from the content. From a navigation feed (calibre-server's /opds, a reader app's root \
            catalogue) the newest-first section is followed, or the one --section names; pages are \
            followed through rel="next" until N books are found. An entry's book is its free EPUB \
            or PDF (acquisition or open-access; never a sample, buy, borrow, subscribe or indirect \
            link); entries without one are skipped and take no slot. A catalogue behind a login \
            takes http://USER:PASSWORD@host/…, --user or --netrc (Basic or Digest, answered only \
            to the catalogue's own host).

            The first N books are cached (failures are skipped); books that an \
            earlier sync of the same SOURCE brought in and that are no longer among them are \
            removed — never books added by 'download', never pinned ones. Within --min-interval of \
            the last successful sync of SOURCE nothing is done, unless --force. Exit 0 when all N \
            ended in the cache.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("A manifest or OPDS feed: a file, - for stdin, or an http(s) URL.", valueName: "source"))
    var source: String

    @Option(help: ArgumentHelp("How many of the source's first books to keep cached.", valueName: "n"))
    var keep: String

    @Option(help: "The type for books whose source does not say: ebook or magazine.")
    var type: BookType = .ebook

    @Option(name: .customLong("min-interval"), help: ArgumentHelp("Do nothing if the last successful sync of SOURCE was this recent, such as 4h.", valueName: "duration"))
    var minInterval: String?

    @Option(help: ArgumentHelp("The section of a navigation feed to follow, by title (default: the newest-first one).", valueName: "title"))
    var section: String?

    @Option(help: ArgumentHelp("The formats to take, most wanted first: epub,pdf (the default), pdf,epub, epub or pdf.", valueName: "list"))
    var format: String = "epub,pdf"

    @Option(help: ArgumentHelp("A login for the catalogue's host, as curl takes it (sent only to that host, when it asks).", valueName: "user:password"))
    var user: String?

    @Flag(help: "Take the catalogue's login from ~/.netrc (or $NETRC), as curl --netrc does.")
    var netrc = false

    @Option(name: .customLong("netrc-file"), help: ArgumentHelp("Take the catalogue's login from this netrc file.", valueName: "file"))
    var netrcFile: String?

    @Flag(help: "Sync even within --min-interval.")
    var force = false

    @Option(help: "How many downloads run at once (1–64).")
    var concurrency: Int = 4

    @Flag(help: "Print JSON.")
    var json = false

    private var parsedOptions: (keep: Int, interval: TimeInterval?) {
        get throws {
            do {
                return (try CacheSettings.parseCount(keep), try minInterval.map { text throws(BookCacheError) in try TimeSpan(parsing: text).seconds })
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
            guard !formats.isEmpty, Set(formats).count == formats.count else { throw ValidationError("--format: give epub, pdf, or both once each, such as pdf,epub.") }
            return formats
        }
    }

    /// The netrc file to read, when asked for.
    private var netrcPath: String? {
        if let netrcFile { return netrcFile }
        guard netrc else { return nil }
        return ProcessInfo.processInfo.environment["NETRC"] ?? (NSHomeDirectory() + "/.netrc")
    }

    /// The login for the source's host: `--user`, else the netrc file when asked for (a URL with
    /// `user:password@` carries its own).
    private func credentials(for source: String) throws -> HTTPCredentials? {
        guard source.contains("://"), let url = URL(string: source) else { return nil }
        if let user {
            let parts = user.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
            return HTTPCredentials(user: String(parts[0]), password: parts.count > 1 ? String(parts[1]) : "", for: url)
        }
        guard HTTPCredentials(userInfoOf: url) == nil, let file = netrcPath else { return nil }
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw ValidationError("Cannot read the netrc file \(file): \(error.localizedDescription).")
        }
        return HTTPCredentials(netrc: text, for: url)
    }

    func validate() throws {
        _ = try parsedOptions
        if (netrc || netrcFile != nil) && user != nil { throw ValidationError("--user and --netrc are alternatives; give one.") }
        _ = try formats
        if user != nil, !source.contains("://") { throw ValidationError("--user goes with an http(s) SOURCE.") }
        guard (1...64).contains(concurrency) else { throw ValidationError("--concurrency must be between 1 and 64.") }
        if source.contains("://") {
            do { _ = try BookDownloadRequest.parseURL(source) } catch { throw ValidationError(error.message) }
        } else if source != "-", !FileManager.default.isReadableFile(atPath: source) {
            throw ValidationError("Cannot read the sync source '\(source)'.")
        }
    }

    func run() async throws {
        let (keepCount, interval) = try parsedOptions
        let manager = try global.makeManager(concurrency: concurrency)
        let formats = try self.formats
        let credentials = try credentials(for: source)
        let report: SyncReport
        do {
            let syncSource = try SyncSource(parsing: source) { FileHandle.standardInput.readDataToEndOfFile() }
            report = try await manager.sync(
                syncSource, keep: keepCount, type: type, formats: formats, section: section, credentials: credentials,
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
            let object: [String: Any] = [
                "source": report.source, "format": report.format ?? NSNull(), "skipped": false, "wanted": report.wanted,
                "synced": report.inCache, "alreadyCached": report.alreadyCached, "new": report.inCache - report.alreadyCached,
                "failed": report.failed, "removed": report.removed, "section": report.section ?? NSNull(),
                "skippedEntries": report.skippedEntries.map { ["title": $0.title ?? NSNull(), "reason": $0.reason] as [String: Any] },
                "items": report.items.map {
                    [
                        "id": $0.id ?? NSNull(), "status": $0.status, "error": $0.error ?? NSNull(),
                        "evicted": $0.evicted.map(\.metadata.id),
                    ] as [String: Any]
                },
            ]
            Terminal.write(Self.encode(object))
        } else {
            for item in report.items {
                for book in item.evicted { Terminal.writeError(book.line) }
                switch item.status {
                case "failed": Terminal.writeError("error: \(item.error ?? "failed")")
                case "cached": Terminal.write("cached \(item.id ?? "?")")
                default: break
                }
            }
            for id in report.removed { Terminal.write("removed \(id)") }
            if let section = report.section { Terminal.write("section: \(section)") }
            for entry in report.skippedEntries { Terminal.write("skipped \(entry.title.map { "'\($0)'" } ?? "an entry"): \(entry.reason)") }
            Terminal.write(report.summary)
        }
        if !report.isComplete { throw ExitCode.failure }
    }

    private static func ago(_ date: Date) -> String {
        let seconds = max(0, Int(Date().timeIntervalSince(date)))
        if seconds < 120 { return "\(seconds)s ago" }
        if seconds < 7200 { return "\(seconds / 60)m ago" }
        return "\(seconds / 3600)h ago"
    }

    private static func encode(_ object: [String: Any]) -> String {
        // Only strings, numbers, booleans, arrays and dictionaries go in, so this cannot fail.
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
