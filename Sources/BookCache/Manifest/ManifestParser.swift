import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a batch manifest: JSON Lines, one book per line.
///
/// ```
/// # comments and blank lines are ignored
/// {"url": "https://example.com/a.epub", "id": "a", "type": "ebook", "title": "A", "sha256": "…", "coverUrl": "…"}
/// https://example.com/b.pdf
/// ```
///
/// Only `url` is required. A line holding only a URL is accepted. A malformed line becomes a
/// ``ManifestProblem`` with its line number and does not stop the others; unknown keys are
/// ignored with a warning. Lines longer than ``maxLineBytes`` are refused without being held
/// in memory.
package struct ManifestParser: Sendable {
    /// The longest line accepted, in bytes.
    public var maxLineBytes: Int

    /// The keys a line may have.
    public static let knownKeys: Set<String> = ["url", "id", "type", "title", "sha256", "coverUrl", "size", "pin", "headers", "refresh"]

    /// Creates a parser.
    /// - Parameter maxLineBytes: 64 KiB by default.
    public init(maxLineBytes: Int = 64 * 1024) {
        self.maxLineBytes = maxLineBytes
    }

    /// Everything read from a manifest, in line order.
    public struct Result: Sendable {
        /// The usable entries.
        public var entries: [ManifestEntry] = []
        /// The lines that could not be used.
        public var problems: [ManifestProblem] = []
        /// Lines that were used but had something to say (unknown keys).
        public var warnings: [ManifestProblem] = []

        mutating func add(_ line: Line) {
            switch line {
            case .entry(let entry, let warning):
                entries.append(entry)
                if let warning { warnings.append(warning) }
            case .problem(let problem):
                problems.append(problem)
            }
        }
    }

    /// What one line of a manifest is: a usable entry (with a warning when it has unknown keys) or
    /// a problem. Blank lines and comments are nothing.
    public enum Line: Sendable {
        case entry(ManifestEntry, warning: ManifestProblem?)
        case problem(ManifestProblem)
    }

    /// Parses a whole manifest held in memory.
    public func parse(_ data: Data) -> Result {
        var result = Result()
        var number = 0
        var start = data.startIndex
        while start < data.endIndex {
            number += 1
            let end = data[start...].firstIndex(of: 0x0A) ?? data.endIndex
            if end - start > maxLineBytes {
                result.add(.problem(overlong(number)))
            } else if let line = parseLine(Array(data[start..<end]), number: number) {
                result.add(line)
            }
            start = end == data.endIndex ? end : end + 1
        }
        return result
    }

    /// Parses a manifest from a file descriptor (a file or standard input), a line at a time,
    /// never holding more than one line of at most ``maxLineBytes``.
    /// - Parameter fd: An open, readable descriptor.
    /// - Throws: ``ManifestReadError`` when reading fails.
    public func parse(fileDescriptor fd: Int32) throws(ManifestReadError) -> Result {
        var result = Result()
        let reader = ManifestReader(fileDescriptor: fd, parser: self)
        while let line = try reader.next() { result.add(line) }
        return result
    }

    func overlong(_ number: Int) -> ManifestProblem {
        ManifestProblem(line: number, message: "the line is longer than \(maxLineBytes) bytes")
    }

    /// Parses one line (without its newline); `nil` for a blank line or a comment.
    func parseLine(_ bytes: [UInt8], number: Int) -> Line? {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return .problem(ManifestProblem(line: number, message: "the line is not valid UTF-8"))
        }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.isEmpty || trimmed.hasPrefix("#") { return nil }
        if !trimmed.hasPrefix("{") {
            let looksLikeURL =
                trimmed.first?.isLetter == true && trimmed.contains("://")
                && !trimmed.contains(where: { $0 == " " || $0 == "\t" })
            guard looksLikeURL else {
                return .problem(ManifestProblem(line: number, message: "expected a JSON object or a URL, got '\(trimmed.debugEscaped)'"))
            }
            return .entry(ManifestEntry(line: number, url: trimmed), warning: nil)
        }
        let object: [String: Any]
        do {
            guard let parsed = try JSONSerialization.jsonObject(with: Data(trimmed.utf8)) as? [String: Any] else {
                return .problem(ManifestProblem(line: number, message: "expected a JSON object"))
            }
            object = parsed
        } catch {
            return .problem(ManifestProblem(line: number, message: "invalid JSON (\(Self.describe(error)))"))
        }
        do {
            let entry = try entry(from: object, line: number)
            let unknown = Set(object.keys).subtracting(Self.knownKeys).sorted()
            guard !unknown.isEmpty else { return .entry(entry, warning: nil) }
            return .entry(
                entry,
                warning: ManifestProblem(
                    line: number,
                    message:
                        "ignoring unknown key\(unknown.count == 1 ? "" : "s") \(unknown.map { "'\($0.debugEscaped)'" }.joined(separator: ", "))"
                ))
        } catch {
            return .problem(error)
        }
    }

    private func entry(from object: [String: Any], line: Int) throws(ManifestProblem) -> ManifestEntry {
        func string(_ key: String, required: Bool = false) throws(ManifestProblem) -> String? {
            guard let value = object[key], !(value is NSNull) else {
                if required { throw ManifestProblem(line: line, message: "'\(key)' is missing") }
                return nil
            }
            guard let text = value as? String else {
                throw ManifestProblem(line: line, message: "'\(key)' must be a string")
            }
            return text
        }
        guard let url = try string("url", required: true) else {
            throw ManifestProblem(line: line, message: "'url' is missing")
        }
        var type: BookType?
        if let typeName = try string("type") {
            guard let parsed = BookType(rawValue: typeName) else {
                throw ManifestProblem(line: line, message: "'type' must be \"ebook\" or \"magazine\", not '\(typeName.debugEscaped)'")
            }
            type = parsed
        }
        var size: Int64?
        if let value = object["size"], !(value is NSNull) {
            // JSON true/false arrive as NSNumber too; their type encoding is "c" (char).
            guard let number = value as? NSNumber, String(cString: number.objCType) != "c",
                let exact = Int64(exactly: number.doubleValue), exact >= 0
            else {
                throw ManifestProblem(line: line, message: "'size' must be a whole number of bytes, 0 or more")
            }
            size = exact
        }
        var pin = false
        if let value = object["pin"], !(value is NSNull) {
            guard let number = value as? NSNumber, String(cString: number.objCType) == "c" else {
                throw ManifestProblem(line: line, message: "'pin' must be true or false")
            }
            pin = number.boolValue
        }
        var refresh = false
        if let value = object["refresh"], !(value is NSNull) {
            guard let number = value as? NSNumber, String(cString: number.objCType) == "c" else {
                throw ManifestProblem(line: line, message: "'refresh' must be true or false")
            }
            refresh = number.boolValue
        }
        var entry = ManifestEntry(
            line: line, url: url, id: try string("id"), type: type, title: try string("title"),
            sha256: try string("sha256"), coverUrl: try string("coverUrl"), size: size, pin: pin)
        entry.headers = try headers(object["headers"], line: line)
        entry.refresh = refresh
        return entry
    }

    /// `"headers"`: an object of names and values, or a list of `"Name: value"` strings, as curl's
    /// `--header` takes them.
    private func headers(_ value: Any?, line: Int) throws(ManifestProblem) -> [HTTPHeader] {
        func checked(_ make: () throws(InvalidHTTPHeader) -> HTTPHeader) throws(ManifestProblem) -> HTTPHeader {
            do {
                return try make()
            } catch {
                throw ManifestProblem(line: line, message: "'headers': \(error.message)")
            }
        }
        guard let value, !(value is NSNull) else { return [] }
        if let object = value as? [String: Any] {
            return try object.keys.sorted().map { name throws(ManifestProblem) in
                guard let text = object[name] as? String else {
                    throw ManifestProblem(line: line, message: "'headers': the value of \(name.debugEscaped) must be a string")
                }
                return try checked { () throws(InvalidHTTPHeader) in try HTTPHeader(name: name, value: text) }
            }
        }
        if let list = value as? [Any] {
            return try list.map { item throws(ManifestProblem) in
                guard let text = item as? String else {
                    throw ManifestProblem(line: line, message: "'headers' must list strings such as \"Authorization: Bearer …\"")
                }
                return try checked { () throws(InvalidHTTPHeader) in try HTTPHeader(parsing: text) }
            }
        }
        throw ManifestProblem(line: line, message: "'headers' must be an object {\"Name\": \"value\"} or a list of \"Name: value\" strings")
    }

    private static func describe(_ error: any Error) -> String {
        let text = (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? "\(error)"
        return text.count > 120 ? String(text.prefix(120)) + "…" : text
    }
}

/// Reading a manifest failed.
package struct ManifestReadError: Error, Sendable, CustomStringConvertible {
    /// Why.
    public var message: String
    public var description: String { "cannot read the manifest: \(message)" }

    /// Creates the error.
    package init(message: String) {
        self.message = message
    }
}

/// Reads a manifest from a descriptor one line at a time, as it is asked for: the bytes in a
/// buffer of 64 KiB and the current line, at most ``ManifestParser/maxLineBytes`` of it (a longer
/// line is refused without being held). Not thread-safe: one reader, one caller at a time.
package final class ManifestReader: @unchecked Sendable {
    // Unchecked: used by one caller at a time (the batch that pulls its next lines), each call
    // awaited before the next.
    private let fd: Int32
    private let parser: ManifestParser
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 1)
    private var position = 0
    private var filled = 0
    private var line: [UInt8] = []
    private var overlong = false
    private var number = 1
    private var ended = false

    /// A reader of `fd` from where it stands; the caller keeps the descriptor open and closes it.
    package init(fileDescriptor fd: Int32, parser: ManifestParser) {
        self.fd = fd
        self.parser = parser
    }

    deinit { buffer.deallocate() }

    /// The next line that is an entry or a problem; `nil` at the end.
    /// - Throws: ``ManifestReadError`` when reading fails.
    package func next() throws(ManifestReadError) -> ManifestParser.Line? {
        while !ended {
            if position == filled {
                let count = read(fd, buffer.baseAddress, buffer.count)
                if count < 0 {
                    if errno == EINTR { continue }
                    throw ManifestReadError(message: String(cString: strerror(errno)))
                }
                (position, filled) = (0, count)
                if count == 0 {
                    ended = true
                    // A last line without its newline.
                    return line.isEmpty && !overlong ? nil : finish()
                }
            }
            while position < filled {
                let byte = buffer[position]
                position += 1
                if byte == 0x0A {
                    let parsed = finish()
                    number += 1
                    if let parsed { return parsed }
                } else if line.count >= parser.maxLineBytes {
                    overlong = true
                } else {
                    line.append(byte)
                }
            }
        }
        return nil
    }

    /// The line read so far, parsed; the line is then emptied.
    private func finish() -> ManifestParser.Line? {
        defer {
            line.removeAll(keepingCapacity: true)
            overlong = false
        }
        return overlong ? .problem(parser.overlong(number)) : parser.parseLine(line, number: number)
    }
}
