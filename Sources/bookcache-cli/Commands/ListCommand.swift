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
        if json {
            // Streamed from the index a row at a time, written a megabyte at a time.
            let type = self.type
            let outcome = await BlockingWork.run { () -> Result<Void, BookCacheError> in
                var writer = ListedBook.StreamWriter()
                do throws(BookCacheError) {
                    try manager.forEachBook(ofType: type) { book in writer.add(ListedBook.redacted(book)) }
                } catch {
                    return .failure(error)
                }
                writer.finish()
                return .success(())
            }
            if case .failure(let error) = outcome { throw fail(error) }
            return
        }
        var books: [CachedBookMetadata]
        do {
            books = try await manager.allBooks()
        } catch {
            throw fail(error)
        }
        if let type { books = books.filter { $0.bookType == type } }
        books = books.map(ListedBook.redacted)
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

}

/// A record as `list --json` prints it: every field, plus `status` (`cached` or `outdated`).
/// Written by hand rather than with `JSONEncoder`: with 10,000 books it is most of the command's
/// time otherwise. The output is the same: pretty, sorted keys, ISO-8601 dates.
enum ListedBook {
    static func status(_ record: CachedBookMetadata) -> String { record.outdated ? "outdated" : "cached" }

    /// The record with credentials removed from its URLs.
    static func redacted(_ book: CachedBookMetadata) -> CachedBookMetadata {
        var book = book
        book.fileUrl = redact(book.fileUrl)
        book.coverUrl = book.coverUrl.map(redact)
        return book
    }

    private static func redact(_ string: String) -> String {
        // Only a URL with an '@' can carry credentials; parsing 10,000 URLs is not free.
        guard string.utf8.contains(UInt8(ascii: "@")) else { return string }
        return URL(string: string).map(URLRedaction.redacted) ?? string
    }

    /// Writes the JSON array to standard output as records arrive, a megabyte at a time.
    struct StreamWriter {
        private var writer = JSONWriter()
        private var first = true

        init() {
            writer.bytes.reserveCapacity(1 << 20 + 4096)
            writer.append("[\n")
        }

        mutating func add(_ book: CachedBookMetadata) {
            if !first { writer.append(",\n") }
            first = false
            writer.record(book)
            if writer.bytes.count >= 1 << 20 {
                FileHandle.standardOutput.write(Data(writer.bytes))
                writer.bytes.removeAll(keepingCapacity: true)
            }
        }

        /// Ends the array (the same bytes `JSONEncoder` would write, with a final newline).
        mutating func finish() {
            writer.append("\n]\n")
            FileHandle.standardOutput.write(Data(writer.bytes))
            writer.bytes.removeAll()
        }
    }

    /// Appends records with their keys in sorted order (the order `JSONEncoder` uses with `.sortedKeys`).
    private struct JSONWriter {
        var bytes: [UInt8] = []

        mutating func stringArray(_ strings: [String]) {
            append("[")
            for (index, text) in strings.enumerated() {
                if index > 0 { append(", ") }
                string(text)
            }
            append("]")
        }

        /// One record, from `  {` to `  }`, without what separates it from the next.
        mutating func record(_ book: CachedBookMetadata) {
            append("  {\n")
            var first = true
            func field(_ key: StaticString, _ write: (inout JSONWriter) -> Void) {
                if !first { append(",\n") }
                first = false
                append("    \"")
                bytes.append(contentsOf: UnsafeRawBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
                append("\" : ")
                write(&self)
            }
            if !book.authors.isEmpty { field("authors") { $0.stringArray(book.authors) } }
            field("bookId") { $0.string(book.bookId) }
            field("bookType") { $0.string(book.bookType.rawValue) }
            field("checksum") { $0.string(book.checksum) }
            if let path = book.coverPath { field("coverPath") { $0.string(path) } }
            if let cover = book.coverUrl { field("coverUrl") { $0.string(cover) } }
            field("downloadedAt") { $0.string(MetadataCoding.formatUTC(book.downloadedAt)) }
            if let etag = book.etag { field("etag") { $0.string(etag) } }
            field("fileSize") { $0.append(String(book.fileSize)) }
            field("fileUrl") { $0.string(book.fileUrl) }
            field("format") { $0.string(book.format.rawValue) }
            field("id") { $0.string(book.id) }
            field("lastAccessedAt") { $0.string(MetadataCoding.formatUTC(book.lastAccessedAt)) }
            if let modified = book.lastModified { field("lastModified") { $0.string(modified) } }
            field("localPath") { $0.string(book.localPath) }
            field("outdated") { $0.append(book.outdated ? "true" : "false") }
            field("pinned") { $0.append(book.pinned ? "true" : "false") }
            field("status") { $0.string(ListedBook.status(book)) }
            if !book.syncSources.isEmpty {
                field("syncSources") { $0.stringArray(book.syncSources) }
            }
            field("title") { $0.string(book.title) }
            if !book.warnings.isEmpty { field("warnings") { $0.stringArray(book.warnings) } }
            append("\n  }")
        }

        mutating func append(_ text: String) {
            var text = text
            text.withUTF8 { bytes.append(contentsOf: $0) }
        }

        /// A JSON string literal.
        mutating func string(_ text: String) {
            bytes.append(0x22)
            var text = text
            text.withUTF8 { utf8 in
                for byte in utf8 {
                    switch byte {
                    case 0x22: bytes += [0x5C, 0x22]
                    case 0x5C: bytes += [0x5C, 0x5C]
                    case 0x0A: bytes += [0x5C, 0x6E]
                    case 0x0D: bytes += [0x5C, 0x72]
                    case 0x09: bytes += [0x5C, 0x74]
                    case 0..<0x20:
                        let hex = Array("0123456789abcdef".utf8)
                        bytes += [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
                    default: bytes.append(byte)
                    }
                }
            }
            bytes.append(0x22)
        }
    }
}
