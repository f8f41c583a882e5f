import ArgumentParser
import BookCache

/// One or more book ids, every one checked before the command does anything.
struct BookIDArguments: ParsableArguments {
    @Argument(help: ArgumentHelp("Book ids, such as ebook-123.", valueName: "id"), completion: Completions.bookIDs)
    var ids: [String]

    func validate() throws {
        guard !ids.isEmpty else { throw ValidationError("Give at least one book id, such as ebook-123.") }
        for id in ids { _ = try parseID(id) }
    }

    /// The parsed ids (already validated).
    func bookIDs() throws -> [BookID] {
        try ids.map(parseID)
    }
}
