import ArgumentParser
import BookCache

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: Localized.text("Pin books so they are never evicted automatically."))

    @OptionGroup var global: GlobalOptions
    @OptionGroup var books: BookIDArguments

    func run() async throws {
        try await setPinned(true, ids: books.bookIDs(), options: global)
    }
}

struct UnpinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin", abstract: Localized.text("Unpin books, so the budget may evict them again."))

    @OptionGroup var global: GlobalOptions
    @OptionGroup var books: BookIDArguments

    func run() async throws {
        try await setPinned(false, ids: books.bookIDs(), options: global)
    }
}

private func setPinned(_ pinned: Bool, ids: [BookID], options: GlobalOptions) async throws {
    let manager = try options.makeManager()
    var failures = 0
    for id in ids {
        do {
            if pinned { try await manager.pin(id) } else { try await manager.unpin(id) }
            Terminal.write(Localized.text(pinned ? "pinned %@" : "unpinned %@", id.description))
        } catch  where error.kind == .notCached {
            Terminal.writeError(Localized.error(Localized.text("%@ is not cached", id.description)))
            failures += 1
        } catch {
            throw fail(error)
        }
    }
    if failures > 0 { throw ExitCode.failure }
}
