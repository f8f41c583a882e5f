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
            // Streamed from the index: one thread reads rows, another writes them, a thousand
            // records at a time (on two cores, 3.4 s → 2.0 s for a million books), a megabyte
            // at a time to standard output.
            let type = self.type
            let chunks = Handoff<[CachedBookMetadata]>(depth: 4)
            async let written: Void = BlockingWork.run {
                var writer = ListedBook.StreamWriter()
                while let chunk = chunks.take() {
                    for book in chunk {
                        // Only a URL with an '@' can carry credentials (copying every record costs time too).
                        writer.add(ListedBook.mayCarryCredentials(book) ? ListedBook.redacted(book) : book)
                    }
                }
                writer.finish()
            }
            let outcome = await BlockingWork.run { () -> Result<Void, BookCacheError> in
                defer { chunks.finish() }
                var chunk: [CachedBookMetadata] = []
                chunk.reserveCapacity(1024)
                do throws(BookCacheError) {
                    try manager.forEachBook(ofType: type) { book in
                        chunk.append(book)
                        if chunk.count == 1024 {
                            chunks.put(chunk)
                            chunk.removeAll(keepingCapacity: true)
                        }
                    }
                } catch {
                    return .failure(error)
                }
                chunks.put(chunk)
                return .success(())
            }
            await written
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

    /// Whether a URL of the record has an '@', the only way to carry credentials.
    static func mayCarryCredentials(_ book: CachedBookMetadata) -> Bool {
        book.fileUrl.utf8.contains(UInt8(ascii: "@")) || book.coverUrl?.utf8.contains(UInt8(ascii: "@")) == true
    }

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
    struct StreamWriter: ~Copyable {
        private var writer = JSONWriter()
        private var first = true

        init() {
            writer.append("[\n")
        }

        mutating func add(_ book: CachedBookMetadata) {
            if !first { writer.append(",\n") }
            first = false
            writer.record(book)
            if writer.count >= 1 << 20 { writer.flush() }
        }

        /// Ends the array (the same bytes `JSONEncoder` would write, with a final newline).
        mutating func finish() {
            writer.append("\n]\n")
            writer.flush()
        }
    }

    /// Appends records with their keys in sorted order (the order `JSONEncoder` uses with
    /// `.sortedKeys`) to a buffer of its own; `flush()` writes it to standard output.
    /// (Appending to an `[UInt8]` a few bytes at a time was a third of the time at a million books.)
    private struct JSONWriter: ~Copyable {
        private var storage = UnsafeMutablePointer<UInt8>.allocate(capacity: 1 << 21)
        private var capacity = 1 << 21
        private(set) var count = 0

        deinit { storage.deallocate() }

        mutating func flush() {
            FileHandle.standardOutput.write(Data(bytesNoCopy: storage, count: count, deallocator: .none))
            count = 0
        }

        private mutating func append(_ source: UnsafeRawBufferPointer) {
            if count + source.count > capacity {
                let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: max(capacity * 2, count + source.count))
                grown.update(from: storage, count: count)
                storage.deallocate()
                storage = grown
                capacity = max(capacity * 2, count + source.count)
            }
            if let base = source.baseAddress {
                (storage + count).update(from: base.assumingMemoryBound(to: UInt8.self), count: source.count)
            }
            count += source.count
        }

        private mutating func append(byte: UInt8) {
            withUnsafeBytes(of: byte) { append($0) }
        }

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
            // Keys in sorted order; every key after `bookId` follows another, so its separator
            // is part of the literal.
            append("  {\n")
            if !book.authors.isEmpty {
                append("    \"authors\" : ")
                stringArray(book.authors)
                append(",\n")
            }
            append("    \"bookId\" : ")
            string(book.bookId)
            append(",\n    \"bookType\" : ")
            string(book.bookType.rawValue)
            append(",\n    \"checksum\" : ")
            string(book.checksum)
            if let path = book.coverPath {
                append(",\n    \"coverPath\" : ")
                string(path)
            }
            if let cover = book.coverUrl {
                append(",\n    \"coverUrl\" : ")
                string(cover)
            }
            append(",\n    \"downloadedAt\" : ")
            string(MetadataCoding.formatUTC(book.downloadedAt))
            if let etag = book.etag {
                append(",\n    \"etag\" : ")
                string(etag)
            }
            append(",\n    \"fileSize\" : ")
            number(book.fileSize)
            append(",\n    \"fileUrl\" : ")
            string(book.fileUrl)
            append(",\n    \"format\" : ")
            string(book.format.rawValue)
            append(",\n    \"id\" : ")
            string(book.id)
            append(",\n    \"lastAccessedAt\" : ")
            string(MetadataCoding.formatUTC(book.lastAccessedAt))
            if let modified = book.lastModified {
                append(",\n    \"lastModified\" : ")
                string(modified)
            }
            append(",\n    \"localPath\" : ")
            string(book.localPath)
            append(book.outdated ? ",\n    \"outdated\" : true" : ",\n    \"outdated\" : false")
            append(book.pinned ? ",\n    \"pinned\" : true" : ",\n    \"pinned\" : false")
            append(",\n    \"status\" : ")
            string(ListedBook.status(book))
            if !book.syncSources.isEmpty {
                append(",\n    \"syncSources\" : ")
                stringArray(book.syncSources)
            }
            append(",\n    \"title\" : ")
            string(book.title)
            if !book.warnings.isEmpty {
                append(",\n    \"warnings\" : ")
                stringArray(book.warnings)
            }
            append("\n  }")
        }

        mutating func append(_ text: String) {
            var text = text
            text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
        }

        /// A decimal integer.
        mutating func number(_ value: Int64) {
            var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes: room for Int64.min
            withUnsafeMutableBytes(of: &digits) { buffer in
                var remaining = value.magnitude
                var start = buffer.count
                repeat {
                    start -= 1
                    buffer[start] = UInt8(48 + remaining % 10)
                    remaining /= 10
                } while remaining > 0
                if value < 0 {
                    start -= 1
                    buffer[start] = UInt8(ascii: "-")
                }
                append(UnsafeRawBufferPointer(rebasing: buffer[start...]))
            }
        }

        mutating func append(_ text: StaticString) {
            append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
        }

        /// A JSON string literal.
        mutating func string(_ text: String) {
            append(byte: 0x22)
            var text = text
            text.withUTF8 { utf8 in
                // Most strings need no escaping: copy them whole.
                guard utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C }) else {
                    append(UnsafeRawBufferPointer(utf8))
                    return
                }
                for byte in utf8 {
                    switch byte {
                    case 0x22: append("\\\"")
                    case 0x5C: append("\\\\")
                    case 0x0A: append("\\n")
                    case 0x0D: append("\\r")
                    case 0x09: append("\\t")
                    case 0..<0x20:
                        let hex = Array("0123456789abcdef".utf8)
                        append("\\u00")
                        append(byte: hex[Int(byte >> 4)])
                        append(byte: hex[Int(byte & 0xF)])
                    default: append(byte: byte)
                    }
                }
            }
            append(byte: 0x22)
        }
    }
}
