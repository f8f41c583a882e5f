import ArgumentParser
import BookCache
import Foundation

struct PathCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "path",
        abstract: Localized.text("Print the absolute path of a cached book, and record the access."),
        discussion: "Exits with status 1 when the book is not cached."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("The book id, such as ebook-123.", valueName: "id"), completion: Completions.bookIDs)
    var id: String

    func validate() throws {
        _ = try parseID(id)
    }

    func run() async throws {
        let bookID = try parseID(id)
        let manager = try global.makeManager()
        do {
            guard let url = try await manager.cachedFile(for: bookID) else {
                Terminal.writeError(Localized.error(Localized.text("%@ is not cached", bookID.description)))
                throw ExitCode.failure
            }
            Terminal.write(url.path)
        } catch let error as BookCacheError {
            throw fail(error)
        }
    }
}
