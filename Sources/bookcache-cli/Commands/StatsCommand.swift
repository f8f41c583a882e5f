import ArgumentParser
import BookCache
import Foundation

struct StatsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stats",
        abstract: "Show how many books and bytes the cache holds, and the free space."
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
        var table = TableFormatter(header: ["TYPE", "BOOKS", "SIZE"], rightAligned: [1, 2])
        for type in BookType.allCases {
            let totals = stats.byType[type]
            table.rows.append([type.rawValue, "\(totals?.count ?? 0)", ByteFormat.string(totals?.bytes ?? 0)])
        }
        table.rows.append(["total", "\(stats.totalCount)", ByteFormat.string(stats.totalBytes)])
        Terminal.write(table.render())
        if let maxSize = stats.maxSize {
            let percent = maxSize > 0 ? Int((Double(stats.totalBytes) / Double(maxSize) * 100).rounded()) : 100
            Terminal.write("budget: \(ByteFormat.string(stats.totalBytes)) of \(ByteFormat.string(maxSize)) used (\(percent)%)")
        } else {
            Terminal.write("budget: none (set one with 'bookcache config set max-size 2GiB')")
        }
        if let keep = stats.keep { Terminal.write("count limit: \(stats.totalCount) of \(keep) books") }
        Terminal.write("pinned: \(stats.pinnedCount) book\(stats.pinnedCount == 1 ? "" : "s"), \(ByteFormat.string(stats.pinnedBytes))")
        Terminal.write("free space: \(ByteFormat.string(stats.availableBytes)) (reserve \(ByteFormat.string(stats.reserve)))")
        Terminal.write("cache: \(stats.rootPath)")
    }
}
