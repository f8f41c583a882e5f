import ArgumentParser
import BookCache
import CBookCacheShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

@main
struct BookCacheCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bookcache",
        abstract: Localized.text("Download EPUB and PDF books into a local cache and keep them readable offline."),
        discussion: """
            The cache lives in --cache-dir, else $BOOKCACHE_DIR, else $XDG_CACHE_HOME/BookCache, \
            else ~/.cache/BookCache. Book ids are written TYPE-ID, such as ebook-123 or magazine-2024-05.
            """,
        version: "0.1.0",
        subcommands: [
            DownloadCommand.self,
            ListCommand.self,
            PathCommand.self,
            DeleteCommand.self,
            ClearCommand.self,
            StatsCommand.self,
            VerifyCommand.self,
            PruneCommand.self,
            PinCommand.self,
            UnpinCommand.self,
            ConfigCommand.self,
            OpenCommand.self,
            CheckCommand.self,
            RefreshCommand.self,
            SyncCommand.self,
            ValidateCommand.self,
            ServeCommand.self,
            QueueCommand.self,
        ]
    )

    @OptionGroup var global: GlobalOptions

    static func main() async {
        // With TZ unset, glibc stats /etc/localtime on every local-time conversion, and libzip
        // converts each entry's DOS time while validating: thousands of calls in a batch. Naming
        // the same file explicitly lets glibc load it once; the time zone is the same.
        if getenv("TZ") == nil { setenv("TZ", ":/etc/localtime", 1) }
        // glibc gives each thread that allocates an arena of its own; downloads hop between the
        // blocking-work threads, so a batch left several half-empty arenas behind. Two arenas:
        // 2000 books of 64 KiB peaked at 47 MiB instead of 52, at the same speed. A
        // MALLOC_ARENA_MAX in the environment still wins; elsewhere this does nothing.
        if getenv("MALLOC_ARENA_MAX") == nil { _ = bookcache_limit_malloc_arenas(2) }
        // A validation worker (started by this program, never by a person): not a subcommand, so
        // no help lists it and nothing else is set up before it runs.
        if CommandLine.arguments.dropFirst().first == ValidationWorkerCommand.name { ValidationWorker.run() }
        let command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            // Only a command line that does not parse is looked at for typos, so a good one
            // costs nothing: the check reads each command's help, which takes time to build.
            if let problem = OptionCheck.problem(in: Array(CommandLine.arguments.dropFirst())) {
                Terminal.writeError("Error: \(problem)")
                Glibc.exit(ExitStatus.usage)
            }
            exit(withError: error)
        }
        do {
            var command = command
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
