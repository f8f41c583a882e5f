import DownloadQueue
import Foundation

/// Records as `bookcache list --json` and the service's `GET /api/v1/books` give them: every
/// field of ``CachedBookMetadata`` plus `status` (`cached` or `outdated`), credentials in URLs
/// redacted; pretty-printed with sorted keys and ISO-8601 dates, the same bytes `JSONEncoder`
/// writes. Written by hand: `JSONEncoder` takes 15 µs a record, 15 s for a million books.
/// (A test compares the two for a record with every field set, so a new field cannot be left out.)
package enum BookListJSON {
    /// `cached`, or `outdated` when the server has a newer copy.
    public static func status(_ record: CachedBookMetadata) -> String { record.outdated ? "outdated" : "cached" }

    /// Whether a URL of the record has an '@', the only way to carry credentials.
    public static func mayCarryCredentials(_ book: CachedBookMetadata) -> Bool {
        book.fileUrl.utf8.contains(UInt8(ascii: "@")) || book.coverUrl?.utf8.contains(UInt8(ascii: "@")) == true
    }

    /// The record with credentials removed from its URLs.
    public static func redacted(_ book: CachedBookMetadata) -> CachedBookMetadata {
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

    /// A listed record's key: a field's kind, or its status (`kind` nil), with the bytes written
    /// before its value (`  {` and the key for the first, a comma and the key for the others).
    /// Plain values: the bytes are made once and never freed, so walking the keys retains
    /// nothing (a retain and a release of a key object, its field and its prefix, per field and
    /// record, were most of `list --json`'s CPU).
    struct Key {
        let name: String
        let kind: BookField.Kind?
        let first: UnsafeRawBufferPointer
        let later: UnsafeRawBufferPointer

        /// A key of an object whose braces are indented by `indent` spaces (its keys by two more).
        init(_ name: String, _ kind: BookField.Kind?, indent: Int) {
            self.name = name
            self.kind = kind
            let (braces, keys) = (String(repeating: " ", count: indent), String(repeating: " ", count: indent + 2))
            first = Self.lasting("\(braces){\n\(keys)\"\(name)\" : ")
            later = Self.lasting(",\n\(keys)\"\(name)\" : ")
        }

        /// The bytes of `text` in memory that lasts as long as the process.
        private static func lasting(_ text: String) -> UnsafeRawBufferPointer {
            let bytes = Array(text.utf8)
            let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: bytes.count, alignment: 1)
            memory.copyBytes(from: bytes)
            return UnsafeRawBufferPointer(memory)
        }
    }

    /// A listed record's keys in sorted order (`JSONEncoder`'s `.sortedKeys`): its fields and its
    /// status; in memory that lasts as long as the process, walked without retaining it.
    nonisolated(unsafe) static let keys = lasting(BookField.all.map { Key($0.name, $0.kind, indent: 2) } + [Key("status", nil, indent: 2)])

    /// A sidecar's keys in sorted order: the record's fields, without a status, at the top level.
    nonisolated(unsafe) static let sidecarKeys = lasting(BookField.all.map { Key($0.name, $0.kind, indent: 0) })

    /// `keys` sorted by name, in memory that lasts as long as the process.
    private static func lasting(_ keys: [Key]) -> UnsafeBufferPointer<Key> {
        let sorted = keys.sorted { $0.name < $1.name }
        let memory = UnsafeMutableBufferPointer<Key>.allocate(capacity: sorted.count)
        _ = memory.initialize(from: sorted)
        return UnsafeBufferPointer(memory)
    }

    /// A book's sidecar (``CacheLayout/prepareSidecar(_:)``): the record's fields as its
    /// `Codable` form has them, pretty-printed with sorted keys, as ``MetadataCoding/decoder()``
    /// reads them back. By hand for the reason `list --json` is: `JSONEncoder` was 3% of the CPU
    /// of a batch of small books.
    package static func sidecar(_ record: CachedBookMetadata) -> [UInt8] {
        var bytes: [UInt8] = []
        var writer = JSONWriter(capacity: 2048) { bytes.append(contentsOf: $0) }
        writer.record(record, keys: sidecarKeys, closing: "\n}\n")
        writer.flush()
        return bytes
    }

    /// Writes a JSON array of records as they arrive, handing the bytes to `sink` a megabyte at
    /// a time (and at ``finish()``).
    public struct Writer: ~Copyable {
        private var writer: JSONWriter
        private var first = true

        /// Starts the array.
        /// - Parameter sink: Receives the bytes; the buffer is valid only during the call.
        public init(sink: @escaping (UnsafeRawBufferPointer) -> Void) {
            writer = JSONWriter(sink: sink)
            writer.append("[\n")
        }

        /// Adds a record (redacted when a URL may carry credentials).
        public mutating func add(_ book: CachedBookMetadata) {
            if !first { writer.append(",\n") }
            first = false
            // Only a URL with an '@' can carry credentials (copying every record costs time too).
            writer.record(
                BookListJSON.mayCarryCredentials(book) ? BookListJSON.redacted(book) : book, keys: BookListJSON.keys, closing: "\n  }")
            if writer.count >= 1 << 20 { writer.flush() }
        }

        /// Ends the array (with a final newline) and hands over what is left.
        public mutating func finish() {
            writer.append("\n]\n")
            writer.flush()
        }
    }

    /// Appends records with their keys in sorted order (the order `JSONEncoder` uses with
    /// `.sortedKeys`) to a buffer of its own; `flush()` hands it to the sink.
    /// (Appending to an `[UInt8]` a few bytes at a time was a third of the time at a million books.)
    // Not private: the release build of a client module referred to its type metadata (through
    // the ~Copyable Writer) and failed to link while it was (tried again when BookListJSON became
    // `package`: it still fails).
    @usableFromInline struct JSONWriter: ~Copyable {
        private var storage: UnsafeMutablePointer<UInt8>
        private var capacity: Int
        private(set) var count = 0
        let sink: (UnsafeRawBufferPointer) -> Void

        init(capacity: Int = 1 << 21, sink: @escaping (UnsafeRawBufferPointer) -> Void) {
            self.storage = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
            self.capacity = capacity
            self.sink = sink
        }

        deinit { storage.deallocate() }

        mutating func flush() {
            sink(UnsafeRawBufferPointer(start: storage, count: count))
            count = 0
        }

        private mutating func append(_ source: UnsafeRawBufferPointer) {
            if count + source.count > capacity {
                capacity = max(capacity * 2, count + source.count)
                let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
                grown.update(from: storage, count: count)
                storage.deallocate()
                storage = grown
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

        /// One record, from its opening brace to `closing`, without what separates it from the
        /// next: its fields present (``BookField/isPresent(in:)``) and, in a list, its status; keys
        /// in sorted order.
        mutating func record(_ book: CachedBookMetadata, keys: UnsafeBufferPointer<BookListJSON.Key>, closing: StaticString) {
            var first = true
            for index in keys.indices {
                let key = keys[index]
                guard let kind = key.kind else {
                    self.key(key, first: &first)
                    string(BookListJSON.status(book))
                    continue
                }
                switch kind {
                case .text(let get, _):
                    self.key(key, first: &first)
                    string(get(book))
                case .optionalText(let get, _):
                    guard let text = get(book) else { continue }
                    self.key(key, first: &first)
                    string(text)
                case .integer(let get, _):
                    self.key(key, first: &first)
                    number(get(book))
                case .date(let get, _):
                    self.key(key, first: &first)
                    string(MetadataCoding.formatUTC(get(book)))
                case .flag(let get, _):
                    self.key(key, first: &first)
                    append(get(book) ? "true" : "false")
                case .list(let get, _):
                    let list = get(book)
                    guard !list.isEmpty else { continue }
                    self.key(key, first: &first)
                    stringArray(list)
                case .type(let get, _):
                    self.key(key, first: &first)
                    string(get(book).rawValue)
                case .format(let get, _):
                    self.key(key, first: &first)
                    string(get(book).rawValue)
                }
            }
            append(closing)
        }

        /// The key and what comes before it: `  {` for the first, a comma for the others.
        private mutating func key(_ key: borrowing BookListJSON.Key, first: inout Bool) {
            append(first ? key.first : key.later)
            first = false
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
