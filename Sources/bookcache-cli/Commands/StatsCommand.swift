import ArgumentParser
import BookCache
import Foundation

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show how many books and bytes the cache holds, and the free space."
    )

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: BookCacheCommand

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func run() async throws {
        let manager = try global.merged(with: root.global).makeManager()
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
        var table = TableFormatter(header: ["TYPE", "BOOKS", "SIZE"], rightAligned: [1, 2])
        for type in BookType.allCases {
            let totals = stats.byType[type]
            table.rows.append([type.rawValue, "\(totals?.count ?? 0)", ByteFormat.string(totals?.bytes ?? 0)])
        }
        table.rows.append(["total", "\(stats.totalCount)", ByteFormat.string(stats.totalBytes)])
        Terminal.write(table.render())
        Terminal.write("free space: \(ByteFormat.string(stats.availableBytes))")
        Terminal.write("cache: \(stats.rootPath)")
    }
}
