import ArgumentParser
import BookCache
import Foundation

struct CheckCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: Localized.text("Ask the server whether cached books changed (conditional requests)."),
        discussion: """
            Sends If-None-Match with the stored ETag (else If-Modified-Since). 304 means fresh; a \
            different ETag, size or date means outdated, which 'list' then shows; an error leaves \
            the book as it was and is reported as unknown. Exit 1 if any check failed.
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup(title: "Network") var connection: ConnectionOptions

    @Argument(help: ArgumentHelp("Book ids (default: every book).", valueName: "id"), completion: Completions.bookIDs)
    var ids: [String] = []

    @Flag(help: "Print JSON.")
    var json = false

    func validate() throws {
        for id in ids { _ = try parseID(id) }
    }

    func run() async throws {
        let bookIDs = try ids.map(parseID)
        let manager = try global.makeManager(connection: connection)
        let results: [FreshnessCheck]
        do {
            results = try await manager.check(bookIDs)
        } catch {
            throw fail(error)
        }
        if json {
            let array = results.map { ["id": $0.id, "state": $0.state.rawValue, "detail": $0.detail] }
            Terminal.write(
                String(
                    decoding: try JSONSerialization.data(withJSONObject: array, options: [.sortedKeys, .withoutEscapingSlashes]),
                    as: UTF8.self))
        } else {
            for result in results { Terminal.write("\(Localized.text(result.state.rawValue)): \(result.id) (\(result.detail))") }
            let outdated = results.filter { $0.state == .outdated }.count
            let unknown = results.filter { $0.state == .unknown }.count
            Terminal.write(
                Localized.text("%1$lld checked, %2$lld outdated, %3$lld unknown", Int64(results.count), Int64(outdated), Int64(unknown)))
        }
        if results.contains(where: { $0.state == .unknown }) { throw ExitCode.failure }
    }
}
