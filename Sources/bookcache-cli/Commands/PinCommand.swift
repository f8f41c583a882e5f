import ArgumentParser
import BookCache

struct PinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin", abstract: "Pin books so they are never evicted automatically.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Book ids, such as ebook-123.", valueName: "id")) var ids: [String]

    func validate() throws {
        guard !ids.isEmpty else { throw ValidationError("Give at least one book id, such as ebook-123.") }
        for id in ids { _ = try parseID(id) }
    }

    func run() async throws {
        try await setPinned(true, ids: ids, options: global)
    }
}

struct UnpinCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpin", abstract: "Unpin books, so the budget may evict them again.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: ArgumentHelp("Book ids, such as ebook-123.", valueName: "id")) var ids: [String]

    func validate() throws {
        guard !ids.isEmpty else { throw ValidationError("Give at least one book id, such as ebook-123.") }
        for id in ids { _ = try parseID(id) }
    }

    func run() async throws {
        try await setPinned(false, ids: ids, options: global)
    }
}

private func setPinned(_ pinned: Bool, ids: [String], options: GlobalOptions) async throws {
    let manager = try options.makeManager()
    var failures = 0
    for text in ids {
        let id = try parseID(text)
        do {
            if pinned { try await manager.pin(id) } else { try await manager.unpin(id) }
            Terminal.write("\(pinned ? "pinned" : "unpinned") \(id)")
        } catch where error.kind == .notCached {
            Terminal.writeError("error: \(id) is not cached")
            failures += 1
        } catch {
            throw fail(error)
        }
    }
    if failures > 0 { throw ExitCode.failure }
}
