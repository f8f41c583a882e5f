import ArgumentParser
import BookCache
import Foundation

struct PruneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "prune",
        abstract: Localized.text("Evict least-recently-used books until the cache is within its limits."),
        discussion: """
            Without options the limits are the cache's settings (bookcache config). Books are \
            removed oldest last access first; pinned books and books being downloaded are never \
            removed. Prints what it removed and how much it freed.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(name: .customLong("max-size"), help: ArgumentHelp("Get under this size, such as 2GiB.", valueName: "size"))
    var maxSize: String?

    @Option(help: ArgumentHelp("Keep at most this many books.", valueName: "n"))
    var keep: String?

    @Option(
        name: .customLong("older-than"),
        help: ArgumentHelp("Also remove books not used for this long, such as 30m, 4h or 7d.", valueName: "duration"))
    var olderThan: String?

    @Flag(name: .customLong("dry-run"), help: "Only say what would be removed.")
    var dryRun = false

    @Flag(help: "Print JSON.")
    var json = false

    private var limits: (Int64?, Int?, TimeInterval?) {
        get throws {
            do {
                return (
                    try maxSize.map { text throws(BookCacheError) in try ByteSize(parsing: text).bytes },
                    try keep.map { text throws(BookCacheError) in try CacheSettings.parseCount(text) },
                    try olderThan.map { text throws(BookCacheError) in try TimeSpan(parsing: text).seconds }
                )
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    func validate() throws {
        _ = try limits
    }

    func run() async throws {
        let (maxSize, keep, olderThan) = try limits
        let manager = try global.makeManager()
        let result: PruneResult
        do {
            result = try await manager.prune(maxSize: maxSize, keep: keep, olderThan: olderThan, dryRun: dryRun)
        } catch {
            throw fail(error)
        }
        if json {
            let object: [String: Any] = [
                "dryRun": dryRun, "freedBytes": result.freedBytes, "satisfied": result.satisfied,
                "removed": result.removed.map {
                    ["id": $0.id, "bytes": $0.fileSize, "lastAccessedAt": $0.lastAccessedAt.formatted(.iso8601)] as [String: Any]
                },
            ]
            Terminal.write(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
        } else {
            // One line per book, written a megabyte at a time.
            let line = Localized.template(dryRun ? "would remove %1$@ (%2$@)" : "removed %1$@ (%2$@)")
            var lines = BufferedLines()
            for book in result.removed { lines.write(line(book.id.description, Localized.size(book.fileSize))) }
            lines.flush()
            let one = result.removed.count == 1
            let key =
                dryRun
                ? (one ? "Would free %1$@ from %2$lld book." : "Would free %1$@ from %2$lld books.")
                : (one ? "Freed %1$@ from %2$lld book." : "Freed %1$@ from %2$lld books.")
            Terminal.write(Localized.text(key, Localized.size(result.freedBytes), Int64(result.removed.count)))
            if !result.satisfied {
                Terminal.writeError(Localized.warning(Localized.text("pinned or busy books keep the cache over its limits")))
            }
        }
    }
}
