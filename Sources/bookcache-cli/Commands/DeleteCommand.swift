import ArgumentParser
import BookCache

struct DeleteCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: Localized.text("Delete cached books."),
        discussion: "Every id is checked before anything is deleted. Exits with status 1 if any book was not cached."
    )

    @OptionGroup var global: GlobalOptions

    @OptionGroup var books: BookIDArguments

    func run() async throws {
        let bookIDs = try books.bookIDs()
        let manager = try global.makeManager()
        var missing = 0
        for id in bookIDs {
            do {
                if try await manager.delete(id) {
                    Terminal.write(Localized.text("deleted %@", id.description))
                } else {
                    Terminal.writeError(Localized.error(Localized.text("%@ is not cached", id.description)))
                    missing += 1
                }
            } catch {
                throw fail(error)
            }
        }
        if missing > 0 { throw ExitCode.failure }
    }
}
