import ArgumentParser
import BookCache
import Foundation

struct ClearCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "clear",
        abstract: Localized.text("Delete every cached book, or every book of one type."),
        discussion: "Asks for confirmation on a terminal; scripts pass --yes. Without a terminal and without --yes it refuses."
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Only books of this type: ebook or magazine.")
    var type: BookType?

    @Flag(name: .shortAndLong, help: "Do not ask for confirmation.")
    var yes = false

    func run() async throws {
        let manager = try global.makeManager()
        do {
            let books = try await manager.allBooks().filter { type == nil || $0.bookType == type }
            if books.isEmpty {
                Terminal.write(Localized.text("Nothing to clear."))
                return
            }
            let bytes = books.reduce(Int64(0)) { $0 + $1.fileSize }
            if !yes {
                guard Terminal.stdinIsTerminal else {
                    Terminal.writeError(
                        Localized.error(
                            Localized.text("refusing to delete %lld books without --yes (no terminal to ask)", Int64(books.count))))
                    throw ExitCode.failure
                }
                FileHandle.standardError.write(
                    Data(
                        "Delete \(books.count) cached \(type.map { "\($0.rawValue)s" } ?? "books") (\(ByteFormat.string(bytes)))? [y/N] "
                            .utf8))
                let answer = readLine()?.trimmingCharacters(in: .whitespaces).lowercased()
                guard answer == "y" || answer == "yes" else {
                    Terminal.writeError(Localized.text("Nothing deleted."))
                    throw ExitCode.failure
                }
            }
            let removed = try await manager.clear(type: type)
            Terminal.write(
                Localized.text(
                    removed.count == 1 ? "Removed %1$lld book (%2$@)." : "Removed %1$lld books (%2$@).", Int64(removed.count),
                    Localized.size(bytes)))
        } catch let error as BookCacheError {
            throw fail(error)
        }
    }
}
