import Foundation

/// `metadata.journal`: the changes made since `metadata.json` was last written, one JSON object
/// per line, appended under the index lock and folded into a new `metadata.json` from time to
/// time. Replaying a line that the snapshot already holds changes nothing, so a crash between
/// writing the snapshot and emptying the journal is harmless.
enum IndexJournal {
    /// One change.
    enum Entry: Equatable {
        /// A record was added or replaced.
        case set(CachedBookMetadata)
        /// A record was removed (by its key, `{type}-{bookId}`).
        case remove(String)
    }

    private struct Line: Codable {
        var set: CachedBookMetadata?
        var remove: String?
    }

    /// The lines for `entries`, each ending in a newline.
    static func encode(_ entries: [Entry]) throws -> Data {
        let encoder = MetadataCoding.encoder()
        var data = Data()
        for entry in entries {
            let line: Line
            switch entry {
            case .set(let record): line = Line(set: record, remove: nil)
            case .remove(let key): line = Line(set: nil, remove: key)
            }
            data.append(try encoder.encode(line))
            data.append(0x0A)
        }
        return data
    }

    /// The result of reading journal bytes.
    struct Parsed {
        /// The complete, valid entries, in order.
        var entries: [Entry] = []
        /// How many bytes the complete lines took; a torn last line (no newline yet) is left out.
        var consumed = 0
    }

    /// A complete line that is not a valid entry: the journal is damaged.
    struct Damage: Error, CustomStringConvertible {
        var offset: Int
        var description: String { "the journal is damaged at byte \(offset)" }
    }

    /// Parses the complete lines of `data`.
    static func parse(_ data: Data) throws(Damage) -> Parsed {
        var parsed = Parsed()
        let decoder = MetadataCoding.decoder()
        var start = data.startIndex
        while let newline = data[start...].firstIndex(of: 0x0A) {
            let line = data[start..<newline]
            if !line.isEmpty {
                guard let decoded = try? decoder.decode(Line.self, from: line) else {
                    throw Damage(offset: start - data.startIndex)
                }
                if let record = decoded.set {
                    parsed.entries.append(.set(record))
                } else if let key = decoded.remove {
                    parsed.entries.append(.remove(key))
                } else {
                    throw Damage(offset: start - data.startIndex)
                }
            }
            start = newline + 1
        }
        parsed.consumed = start - data.startIndex
        return parsed
    }
}
