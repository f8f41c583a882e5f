import ArgumentParser
import BookCache
import DownloadQueue
import Foundation
import Logging
import Synchronization

/// Options every subcommand accepts, before or after its name.
struct GlobalOptions: ParsableArguments {
    @Option(name: .long, help: ArgumentHelp("The cache directory.", valueName: "dir"), completion: .directory)
    var cacheDir: String?

    @Flag(name: .shortAndLong, help: "Log what the cache does to stderr.")
    var verbose = false

    func makeManager(
        concurrency: Int = 4, retries: Int = 3, reserve: ByteSize? = nil, maxSize: Int64? = nil, keep: Int? = nil,
        evictForSpace: Bool = true, connection: ConnectionOptions? = nil, strict: Bool = false, retryConnectionFailures: Bool = true,
        service: Bool = false
    ) throws -> BookCacheManager {
        CLILogging.bootstrap(verbose: verbose)
        let root = CacheLayout.defaultRoot(explicit: cacheDir)
        var configuration = BookCacheConfiguration(
            rootDirectory: root,
            maxConcurrentDownloads: concurrency,
            maxSizeBytes: maxSize,
            keepCount: keep,
            evictForSpace: evictForSpace,
            retryPolicy: RetryPolicy(retries: retries)
        )
        configuration.retryPolicy.retriesConnectionFailures = retryConnectionFailures
        // Without --strict, the cache's `strict` setting decides.
        if strict { configuration.strictValidation = true }
        if let reserve = try reserve ?? Self.environmentReserve() {
            configuration.storageReserveBytes = reserve.bytes
        }
        // The service counts a death while a book is judged against its job (no crash loops).
        configuration.marksBooksBeingJudged = service
        configuration.validation = validation(root: root)
        return BookCacheManager(
            configuration: configuration, transport: transport(connection, root: root), logger: Logger(label: "bookcache"))
    }
}

extension GlobalOptions {
    /// `--concurrency` and `--retries` when given, else the cache's `concurrency` and `retries`
    /// settings, else 4 and 3.
    func runDefaults(concurrency: Int?, retries: Int?) throws -> (concurrency: Int, retries: Int) {
        if let concurrency, let retries { return (concurrency, retries) }
        let settings: CacheSettings
        do {
            settings = try CacheSettings.read(cacheRoot: CacheLayout.defaultRoot(explicit: cacheDir))
        } catch {
            throw fail(error)
        }
        return (concurrency ?? settings.concurrency ?? 4, retries ?? settings.retries ?? 3)
    }

    /// The libcurl transport, configured from the command line's options and the cache's
    /// settings when a command first uses the network: a command that never does reads no
    /// settings for it and starts no thread.
    func transport(_ connection: ConnectionOptions?, root: URL) -> any HTTPTransport {
        SettingsConfiguredTransport { () throws(BookCacheError) in
            CurlTransport(configuration: ConnectionOptions.configuration(connection, settings: try CacheSettings.read(cacheRoot: root)))
        }
    }

    /// Where this command judges books: in `bookcache validation-worker` processes, as the cache's
    /// `validation-*` settings say (read when the first book is judged). The command line never
    /// judges a book in its own process.
    func validation(root: URL) -> BookValidation {
        .workers { () throws(BookCacheError) in Self.validationWorkers(try CacheSettings.read(cacheRoot: root)) }
    }

    /// The validation workers `settings` ask for.
    static func validationWorkers(_ settings: CacheSettings) -> ValidationWorkers {
        var workers = ValidationWorkers(executable: "/proc/self/exe", arguments: [ValidationWorkerCommand.name])
        if let count = settings.validationWorkers { workers.count = count }
        if let memory = settings.validationMemory { workers.memoryBytes = memory }
        if let seconds = settings.validationCPU { workers.cpuSeconds = Double(seconds) }
        return workers
    }

    /// `BOOKCACHE_RESERVE`, when set: the free space to keep, for scripts and tests.
    static func environmentReserve() throws -> ByteSize? {
        guard let text = ProcessInfo.processInfo.environment["BOOKCACHE_RESERVE"], !text.isEmpty else { return nil }
        do {
            return try ByteSize(parsing: text)
        } catch {
            throw ValidationError("BOOKCACHE_RESERVE: \(error.message)")
        }
    }
}

extension BookType: ExpressibleByArgument {}

/// An ``HTTPTransport`` made on its first request, so reading the settings it needs costs
/// nothing to commands that stay offline.
final class SettingsConfiguredTransport: HTTPTransport, Sendable {
    private let make: @Sendable () throws(BookCacheError) -> CurlTransport
    private let made = Mutex<Result<CurlTransport, BookCacheError>?>(nil)

    init(_ make: @escaping @Sendable () throws(BookCacheError) -> CurlTransport) {
        self.make = make
    }

    func send(_ request: TransportRequest) async throws -> TransportResponse {
        let transport = try made.withLock { made in
            if made == nil { made = Result { () throws(BookCacheError) in try make() } }
            return made!
        }.get()
        return try await transport.send(request)
    }
}
