import ArgumentParser
import BookCache
import DownloadQueue
import Foundation

struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List cached books.",
        discussion: "--json prints an array of records (ISO-8601 dates); credentials in URLs are redacted."
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: "Only books of this type: ebook or magazine.")
    var type: BookType?

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func run() async throws {
        let manager = try global.makeManager()
        var books: [CachedBookMetadata]
        do {
            books = try await manager.allBooks()
        } catch {
            throw fail(error)
        }
        if let type { books = books.filter { $0.bookType == type } }
        books = books.map { book in
            var book = book
            book.fileUrl = redact(book.fileUrl)
            book.coverUrl = book.coverUrl.map(redact)
            return book
        }
        if json {
            Terminal.write(ListedBook.jsonArray(books))
            return
        }
        if books.isEmpty {
            Terminal.write("No books cached in \(manager.layout.root.path).")
            return
        }
        let dateFormatter = DateFormatter()
        dateFormatter.locale = Locale(identifier: "en_US_POSIX")
        dateFormatter.dateFormat = "yyyy-MM-dd HH:mm"
        var table = TableFormatter(header: ["ID", "TYPE", "SIZE", "STATUS", "LAST ACCESS", "TITLE"], rightAligned: [2])
        for book in books {
            table.rows.append([
                book.id, book.bookType.rawValue, ByteFormat.string(book.fileSize), ListedBook.status(book) + (book.pinned ? ", pinned" : ""),
                dateFormatter.string(from: book.lastAccessedAt),
                book.title,
            ])
        }
        Terminal.write(table.render())
        let total = books.reduce(Int64(0)) { $0 + $1.fileSize }
        Terminal.write("\(books.count) book\(books.count == 1 ? "" : "s"), \(ByteFormat.string(total))")
    }

    private func redact(_ string: String) -> String {
        URL(string: string).map(URLRedaction.redacted) ?? string
    }
}

/// A record as `list --json` prints it: every field, plus `status` (`cached` or `outdated`).
/// Written by hand rather than with `JSONEncoder`: with 10,000 books it is most of the command's
/// time otherwise. The output is the same: pretty, sorted keys, ISO-8601 dates.
enum ListedBook {
    static func status(_ record: CachedBookMetadata) -> String { record.outdated ? "outdated" : "cached" }

    static func jsonArray(_ books: [CachedBookMetadata]) -> String {
        if books.isEmpty { return "[\n\n]" }
        var out = "[\n"
        out.reserveCapacity(books.count * 600)
        for (position, book) in books.enumerated() {
            var fields: [(String, String)] = [
                ("bookId", quote(book.bookId)), ("bookType", quote(book.bookType.rawValue)), ("checksum", quote(book.checksum)),
                ("downloadedAt", quote(date(book.downloadedAt))), ("fileSize", String(book.fileSize)), ("fileUrl", quote(book.fileUrl)),
                ("format", quote(book.format.rawValue)), ("id", quote(book.id)), ("lastAccessedAt", quote(date(book.lastAccessedAt))),
                ("localPath", quote(book.localPath)), ("outdated", String(book.outdated)), ("pinned", String(book.pinned)),
                ("status", quote(status(book))), ("title", quote(book.title)),
            ]
            if let cover = book.coverUrl { fields.append(("coverUrl", quote(cover))) }
            if let path = book.coverPath { fields.append(("coverPath", quote(path))) }
            if let etag = book.etag { fields.append(("etag", quote(etag))) }
            if let modified = book.lastModified { fields.append(("lastModified", quote(modified))) }
            if !book.syncSources.isEmpty { fields.append(("syncSources", "[" + book.syncSources.map(quote).joined(separator: ", ") + "]")) }
            fields.sort { $0.0 < $1.0 }
            out += "  {\n"
            for (index, field) in fields.enumerated() {
                out += "    \"\(field.0)\" : \(field.1)"
                out += index == fields.count - 1 ? "\n" : ",\n"
            }
            out += position == books.count - 1 ? "  }\n" : "  },\n"
        }
        return out + "]"
    }

    private static func date(_ date: Date) -> String { MetadataCoding.formatUTC(date) }

    /// A JSON string literal.
    static func quote(_ text: String) -> String {
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) { return "\"" + text + "\"" }
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}
