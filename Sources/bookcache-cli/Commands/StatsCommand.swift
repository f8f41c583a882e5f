import ArgumentParser
import BookCache
import Foundation

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: Localized.text("Show how many books and bytes the cache holds, and the free space.")
    )

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func run() async throws {
        let manager = try global.makeManager()
        let stats: CacheStatistics
        do {
            stats = try await manager.statistics()
        } catch {
            throw fail(error)
        }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            Terminal.write(String(decoding: try encoder.encode(stats), as: UTF8.self))
            return
        }
        // In the reader's language (see Localized); --json above never is.
        var table = TableFormatter(header: ["TYPE", "BOOKS", "SIZE"].map { Localized.text($0) }, rightAligned: [1, 2])
        for type in BookType.allCases {
            let totals = stats.byType[type]
            table.rows.append([Localized.text(type.rawValue), "\(totals?.count ?? 0)", Localized.size(totals?.bytes ?? 0)])
        }
        table.rows.append([Localized.text("total"), "\(stats.totalCount)", Localized.size(stats.totalBytes)])
        Terminal.write(table.render())
        if let maxSize = stats.maxSize {
            let percent = maxSize > 0 ? Int((Double(stats.totalBytes) / Double(maxSize) * 100).rounded()) : 100
            Terminal.write(
                Localized.text(
                    "budget: %1$@ of %2$@ used (%3$lld%%)", Localized.size(stats.totalBytes), Localized.size(maxSize), Int64(percent)))
        } else {
            Terminal.write(Localized.text("budget: none (set one with 'bookcache config set max-size 2GiB')"))
        }
        if let keep = stats.keep {
            Terminal.write(Localized.text("count limit: %1$lld of %2$lld books", Int64(stats.totalCount), Int64(keep)))
        }
        Terminal.write(Localized.text("pinned: %@", Localized.books(stats.pinnedCount, size: Localized.size(stats.pinnedBytes))))
        Terminal.write(
            Localized.text("free space: %1$@ (reserve %2$@)", Localized.size(stats.availableBytes), Localized.size(stats.reserve)))
        Terminal.write(Localized.text("cache: %@", stats.rootPath))
    }
}
