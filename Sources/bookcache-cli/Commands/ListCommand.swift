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
    @ParentCommand var root: BookCacheCommand

    @Option(help: "Only books of this type: ebook or magazine.")
    var type: BookType?

    @Flag(help: "Print JSON instead of a table.")
    var json = false

    func run() async throws {
        let manager = try global.merged(with: root.global).makeManager()
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
            let data = try MetadataCoding.encoder(pretty: true).encode(books.map(ListedBook.init))
            Terminal.write(String(decoding: data, as: UTF8.self))
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
                book.id, book.bookType.rawValue, ByteFormat.string(book.fileSize), ListedBook(book).status + (book.pinned ? ", pinned" : ""),
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
struct ListedBook: Encodable {
    let record: CachedBookMetadata

    init(_ record: CachedBookMetadata) {
        self.record = record
    }

    var status: String { record.outdated ? "outdated" : "cached" }

    private enum Keys: String, CodingKey { case status }

    func encode(to encoder: any Encoder) throws {
        try record.encode(to: encoder)
        var container = encoder.container(keyedBy: Keys.self)
        try container.encode(status, forKey: .status)
    }
}
