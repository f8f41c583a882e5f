import ArgumentParser
import BookCache
import DownloadQueue
import Foundation
import Synchronization
import UnixSignals

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct DownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: Localized.text("Download books into the cache: one URL, several, or a manifest."),
        discussion: """
            Each file is streamed to a working folder while it is hashed, validated (EPUB with \
            libzip, PDF structure, --sha256), and only then moved into the cache. Books already \
            cached are not downloaded again. Failed attempts are retried with exponential backoff \
            (honouring Retry-After) and resume where they stopped.

            A manifest (--from FILE, or - for stdin) is JSON Lines, one book per line:
              {"url": "https://…/a.epub", "id": "a", "type": "ebook", "title": "A", "sha256": "…", "coverUrl": "…"}
            Only "url" is required; a line holding only a URL is accepted; blank lines and lines \
            starting with # are ignored. A malformed line is reported with its line number and \
            does not stop the others. Duplicate ids are fetched once.

            Without --id, a book's id is the URL's file name, a dash and 12 hex digits of the URL's \
            SHA-256 (alice-3f2a9c01b7de), so two URLs ending in the same name are two books. With \
            --id (or a manifest's "id"), the id is the book whatever its URL: a new signed URL for \
            a cached id downloads nothing.

            Books are evicted for the cache's limits (max-size, keep) only when a new book is \
            cached, and for free space only when the disk cannot hold the body plus the reserve; \
            each eviction is said on stderr. A download that fails evicts nothing for the limits.

            Exit status is 0 only when every book ends up cached. On SIGINT or SIGTERM no new \
            download starts, partial files are kept for the next run (a book whose body has all \
            arrived is still validated and cached), books cut off are reported as interrupted, \
            and the exit status is 130 or 143.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup(title: "Network") var connection: ConnectionOptions
    @OptionGroup(title: "Login") var login: LoginOptions
    @OptionGroup(title: "Validation") var validation: ValidationOptions

    @Argument(help: ArgumentHelp("http or https URLs of EPUB or PDF files.", valueName: "url"))
    var urls: [String] = []

    @Option(
        name: .customLong("from"), help: ArgumentHelp("Read a JSON Lines manifest from a file, or - for stdin.", valueName: "file"),
        completion: .file())
    var manifest: String?

    @Option(
        help: ArgumentHelp(
            "The book id, for a single URL (default: the URL's file name without extension, a dash and 12 hex digits of the URL's SHA-256, so two URLs are two books; give an id to keep one book across changing URLs).",
            valueName: "book-id"))
    var id: String?

    @Option(help: "The book type, ebook or magazine (the default for manifest lines without one).")
    var type: BookType = .ebook

    @Option(help: "A title to show in listings, for a single URL.")
    var title: String?

    @Option(name: .customLong("sha256"), help: ArgumentHelp("The expected SHA-256 (64 hex digits), for a single URL.", valueName: "hex"))
    var sha256: String?

    @Option(name: .customLong("cover-url"), help: ArgumentHelp("Where the book's cover image is, for a single URL.", valueName: "url"))
    var coverURL: String?

    @Option(help: "How many downloads run at once (1–64; default: the cache's concurrency setting, else 4).")
    var concurrency: Int?

    @Option(
        help:
            "Attempts in a row that bring no new bytes before a download gives up, after the first (0–20; default: the cache's retries setting, else 3); an attempt that adds bytes does not count."
    )
    var retries: Int?

    @Flag(help: "Pin the books, so they are never evicted automatically.")
    var pin = false

    @Option(
        name: .customLong("max-size"),
        help: ArgumentHelp("A size budget for this run, such as 2GiB (default: the cache's max-size setting).", valueName: "size"))
    var maxSize: String?

    @Option(help: ArgumentHelp("Keep at most this many books (default: the cache's keep setting).", valueName: "n"))
    var keep: String?

    @Flag(name: .customLong("no-evict"), help: "Fail instead of evicting books to make free space on the disk.")
    var noEvict = false

    @Option(
        help: ArgumentHelp(
            "Free space to leave on the cache's filesystem when a book's size is known, such as 500MB or 1GiB (default 100MB, or $BOOKCACHE_RESERVE).",
            valueName: "size"))
    var reserve: String?

    @Flag(help: "Print one JSON object per finished book on stdout, then a summary object.")
    var json = false

    @Flag(name: .shortAndLong, help: "Print nothing but errors; the exit status tells the rest.")
    var quiet = false

    private var reserveSize: ByteSize? {
        get throws {
            do {
                return try reserve.map { text throws(BookCacheError) in try ByteSize(parsing: text) }
            } catch {
                throw ValidationError("--reserve: \(error.message)")
            }
        }
    }

    private var budget: (maxSize: Int64?, keep: Int?) {
        get throws {
            do {
                return (
                    try maxSize.map { text throws(BookCacheError) in try ByteSize(parsing: text).bytes },
                    try keep.map { text throws(BookCacheError) in try CacheSettings.parseCount(text) }
                )
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    func validate() throws {
        guard !urls.isEmpty || manifest != nil else {
            throw ValidationError("Give a URL, several URLs, or --from FILE (- for stdin).")
        }
        if let concurrency, !(1...64).contains(concurrency) {
            throw ValidationError("--concurrency must be between 1 and 64, not \(concurrency).")
        }
        if let retries, !(0...20).contains(retries) { throw ValidationError("--retries must be between 0 and 20, not \(retries).") }
        let singleOnly = [id, title, sha256, coverURL].contains { $0 != nil }
        if singleOnly && (urls.count != 1 || manifest != nil) {
            throw ValidationError(
                "--id, --title, --sha256 and --cover-url apply to a single URL; give per-book values in a manifest instead.")
        }
        if let manifest, manifest != "-", !FileManager.default.isReadableFile(atPath: manifest) {
            throw ValidationError("Cannot read the manifest '\(manifest)'.")
        }
        _ = try commandLineRequests()
        _ = try reserveSize
        _ = try budget
        _ = try GlobalOptions.environmentReserve()
    }

    /// The requests named on the command line, checked before any I/O.
    private func commandLineRequests() throws -> [BookDownloadRequest] {
        do {
            return try urls.map { url throws(BookCacheError) in
                if let id {
                    return try BookDownloadRequest(
                        url: url, id: BookID(type: type, bookId: id), title: title, coverURL: coverURL, expectedSHA256: sha256)
                }
                return try BookDownloadRequest(url: url, type: type, title: title, coverURL: coverURL, expectedSHA256: sha256)
            }
        } catch {
            throw ValidationError(error.message)
        }
    }

    func run() async throws {
        var warnings: [String] = []
        let items = BatchSource(
            arguments: try commandLineRequests().enumerated().map { BatchItem.request($1, source: "argument \($0 + 1)") },
            defaultType: type, warnings: &warnings)
        if let manifest { try survey(manifest, into: items, warnings: &warnings) }

        let batch = items.count > 1 || manifest != nil
        // Live only on a terminal that can move its cursor; plain lines on TERM=dumb and pipes.
        let mode: BatchReporter.Mode = json ? .json : quiet ? .quiet : (Terminal.stderrIsLiveTerminal ? .live : .lines)
        let reporter = BatchReporter(mode: mode, total: items.count, batch: batch)
        for warning in warnings { reporter.warning(warning) }

        let limits = try budget
        let (concurrency, retries) = try global.runDefaults(concurrency: self.concurrency, retries: self.retries)
        let manager = try global.makeManager(
            concurrency: concurrency, retries: retries, reserve: try reserveSize, maxSize: limits.maxSize, keep: limits.keep,
            evictForSpace: !noEvict, connection: connection, strict: validation.strict)
        let (headers, login, pin, type) = (try login.parsedHeaders, self.login, self.pin, self.type)
        // Each book's request as it starts: a manifest line made one, with the command line's options.
        let prepare: @Sendable (BatchItem) -> Result<BookDownloadRequest, ManifestProblem> = { item in
            var request: BookDownloadRequest
            switch item {
            case .invalid(let problem): return .failure(problem)
            case .request(let given, _): request = given
            case .line(let entry):
                do throws(ManifestProblem) {
                    request = try entry.request(defaultType: type)
                } catch {
                    return .failure(error)
                }
            }
            if pin { request.pin = true }
            // --header and --user go to every book's own host; a manifest line's headers add to them.
            request.headers = headers + request.headers
            if request.credentials == nil { request.credentials = login.credentials(for: request.url) }
            return .success(request)
        }
        let window = manager.pipelineDepth
        let work = Task {
            // Books start in the order they were given. The manager keeps `concurrency` transfers
            // going; it is given as many books as keep them busy while earlier books are validated
            // and published (its pipeline depth), and the next one when one finishes.
            await withTaskGroup(of: Void.self) { group in
                var running = 0
                while let item = await items.next() {
                    if Task.isCancelled { break }
                    if running == window {
                        await group.next()
                        running -= 1
                    }
                    group.addTask {
                        reporter.finished(await Self.perform(prepare(item), manager: manager, reporter: reporter))
                    }
                    running += 1
                }
            }
        }
        // SIGINT or SIGTERM stops starting books and cancels the running transfers (their partial files
        // are kept for resume); the exit status is then the conventional 128 + the signal.
        let signals = await UnixSignalsSequence(trapping: .sigint, .sigterm)
        let watcher = Task { () -> Int32? in
            for await signal in signals {
                work.cancel()
                return signal.rawValue
            }
            return nil
        }
        await work.value
        watcher.cancel()
        let signal = await watcher.value
        if signal == nil { await manager.waitForBackgroundWork() }
        let allCached = reporter.summarize(interrupted: signal != nil)
        if let signal { throw ExitCode(128 + signal) }
        // The status of the failures when they share one (all offline: 69), else 1.
        if !allCached { throw ExitCode(ExitStatus.of(failures: reporter.failureStatuses)) }
    }

    private static func perform(
        _ item: Result<BookDownloadRequest, ManifestProblem>, manager: BookCacheManager, reporter: BatchReporter
    ) async -> BatchOutcome {
        switch item {
        case .failure(let problem):
            return BatchOutcome(id: nil, status: .failed, path: nil, failure: .invalidLine(problem.description), attempts: 0, bytes: 0)
        case .success(let request):
            let attempts = AttemptCounter()
            do {
                let result = try await manager.download(request) { event in
                    if case .started(_, let attempt) = event { attempts.record(attempt) }
                    reporter.handle(event, id: request.id)
                }
                return BatchOutcome(
                    id: request.id.description, status: result.wasAlreadyCached ? .alreadyCached : .cached,
                    path: result.fileURL.path, failure: nil, attempts: attempts.value, bytes: result.metadata.fileSize,
                    format: result.metadata.format.rawValue, evicted: result.evicted,
                    warnings: result.wasAlreadyCached ? [] : result.metadata.warnings)
            } catch {
                let attemptsMade = (error.underlying as? DownloadError)?.attempts ?? attempts.value
                return BatchOutcome(
                    id: request.id.description, status: error.kind == .cancelled ? .interrupted : .failed, path: nil,
                    failure: .error(error),
                    attempts: attemptsMade, bytes: 0, evicted: error.evicted)
            }
        }
    }

    /// Reads the manifest at `path` (`-`: standard input) once through into `items`: its count,
    /// its duplicates and its warnings. It is first copied to a temporary file that has no name:
    /// the batch reads it a second time, and the copy is what the first reading saw (standard
    /// input or a pipe cannot be read twice; a file may change while the batch runs).
    private func survey(_ path: String, into items: BatchSource, warnings: inout [String]) throws {
        let named = path == "-" ? "standard input" : path
        let source = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else {
            Terminal.writeError("error: cannot open the manifest \(named): \(String(cString: strerror(errno)))")
            throw ExitCode.failure
        }
        defer { if source != STDIN_FILENO { close(source) } }
        let fd: Int32
        do {
            fd = try Self.spooled(source)
        } catch {
            Terminal.writeError("error: cannot read the manifest \(named): \(error)")
            throw ExitCode.failure
        }
        do {
            try items.survey(fd, warnings: &warnings)
        } catch {
            Terminal.writeError("error: \(error) (\(named))")
            throw ExitCode.failure
        }
    }

    /// What can be read from `fd`, copied into a temporary file removed at once (its descriptor
    /// keeps it until it is closed), and that file's descriptor at its start.
    private static func spooled(_ fd: Int32) throws -> Int32 {
        var template = Array((FileManager.default.temporaryDirectory.path + "/bookcache-manifest.XXXXXX").utf8CString)
        let copy = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard copy >= 0 else { throw FileSystem.CallError(operation: "create", path: "a temporary copy", code: errno) }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var done = false
        defer { if !done { close(copy) } }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
        defer { buffer.deallocate() }
        while true {
            let count = read(fd, buffer.baseAddress, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw FileSystem.CallError(operation: "read", path: "the manifest", code: errno)
            }
            if count == 0 { break }
            var offset = 0
            while offset < count {
                let written = write(copy, buffer.baseAddress! + offset, count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw FileSystem.CallError(operation: "write", path: "a temporary copy", code: errno)
                }
                offset += written
            }
        }
        guard lseek(copy, 0, SEEK_SET) == 0 else {
            throw FileSystem.CallError(operation: "seek", path: "a temporary copy", code: errno)
        }
        done = true
        return copy
    }
}

/// Counts attempts from a download's events.
private final class AttemptCounter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func record(_ attempt: Int) { count.withLock { $0 = max($0, attempt) } }
}
