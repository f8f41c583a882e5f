import ArgumentParser
import BookCache
import Foundation

struct RefreshCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refresh",
        abstract: Localized.text("Download cached books again; the old copy stays readable until the new one is valid."),
        discussion: "With --outdated, only books a 'check' found outdated. Exit 1 if any refresh failed."
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup(title: "Network") var connection: ConnectionOptions
    @OptionGroup(title: "Validation") var validation: ValidationOptions

    @Argument(help: ArgumentHelp("Book ids (default: every book).", valueName: "id"), completion: Completions.bookIDs)
    var ids: [String] = []

    @Flag(help: "Only books found outdated by 'bookcache check'.")
    var outdated = false

    @Option(help: "How many downloads run at once (1–64; default: the cache's concurrency setting, else 4).")
    var concurrency: Int?

    func validate() throws {
        for id in ids { _ = try parseID(id) }
        if let concurrency, !(1...64).contains(concurrency) { throw ValidationError("--concurrency must be between 1 and 64.") }
    }

    func run() async throws {
        let bookIDs = try ids.map(parseID)
        let (concurrency, retries) = try global.runDefaults(concurrency: self.concurrency, retries: nil)
        let manager = try global.makeManager(concurrency: concurrency, retries: retries, connection: connection, strict: validation.strict)
        // On a terminal, the same live view as download's while the books come in.
        let total: Int
        do {
            total = bookIDs.isEmpty ? try await manager.statistics().totalCount : bookIDs.count
        } catch {
            throw fail(error)
        }
        let reporter = BatchReporter(mode: Terminal.stderrIsLiveTerminal ? .live : .lines, total: total, batch: true)
        let results: [(id: BookID, result: Result<BookDownloadResult, BookCacheError>)]
        do {
            results = try await manager.refresh(bookIDs, outdatedOnly: outdated) { id, event in reporter.handle(event, id: id) }
        } catch {
            reporter.endLive()
            throw fail(error)
        }
        reporter.endLive()
        await manager.waitForBackgroundWork()
        var failures = 0
        for (id, result) in results {
            switch result {
            case .success(let download):
                Terminal.write(Localized.text("refreshed %1$@ (%2$@)", id.description, Localized.size(download.metadata.fileSize)))
            case .failure(let error):
                Terminal.writeError(Localized.error(cliMessage(error)))
                failures += 1
            }
        }
        Terminal.write(
            Localized.text(
                "%1$lld of %2$lld refreshed, %3$lld failed", Int64(results.count - failures), Int64(results.count), Int64(failures)))
        if failures > 0 { throw ExitCode.failure }
    }
}
