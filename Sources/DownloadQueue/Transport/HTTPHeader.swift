import Foundation

/// An extra request header a caller sends with every request for a file, such as a bearer token
/// (`Authorization: Bearer …`) or an API key, as curl's `--header` takes it.
///
/// The transport sends it on redirects to the same host; libcurl leaves `Authorization` and
/// `Cookie` out after a redirect to another host, as curl does. Its value is never logged.
public struct HTTPHeader: Sendable, Hashable, Codable, CustomStringConvertible {
    /// The header's name, such as `Authorization`: an HTTP token.
    public let name: String
    /// Its value: no control character but the tab (so no line break that could end the header).
    public let value: String

    /// Headers the downloader sets itself to resume a file; a caller cannot replace them.
    public static let reservedNames: Set<String> = ["range", "if-range", "content-length", "transfer-encoding"]

    /// Creates a header after checking it.
    /// - Throws: ``InvalidHTTPHeader`` for a name that is not an HTTP token or is one the
    ///   downloader sets, or a value with a control character (CR, LF, NUL, DEL and the others
    ///   below U+0020 but the tab) — checked scalar by scalar, since `"\r\n"` is one `Character`.
    public init(name: String, value: String) throws(InvalidHTTPHeader) {
        let name = name.trimmingCharacters(in: .whitespaces)
        let value = value.trimmingCharacters(in: .whitespaces)
        guard Self.isToken(name) else {
            throw Self.invalid("'\(name)' is not a header name; write it as \"Name: value\"")
        }
        guard !Self.reservedNames.contains(name.lowercased()) else {
            throw Self.invalid("\(name) is set by the downloader itself (to resume files) and cannot be given")
        }
        if let bad = value.unicodeScalars.first(where: { !Self.isAllowedInValue($0) }) {
            let what = bad == "\r" || bad == "\n" ? "a line break" : "a control character"
            throw Self.invalid(
                "the value of \(name) has \(what) (U+\(String(format: "%04X", bad.value))); a header value is one line of text")
        }
        self.name = name
        self.value = value
    }

    /// Whether a scalar may stand in a header value (RFC 9110's field-value: visible
    /// characters, space, tab and non-ASCII text).
    static func isAllowedInValue(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || (scalar.value >= 0x20 && scalar.value != 0x7F)
    }

    /// Whether `name` is an HTTP token (RFC 9110's `tchar`s), as a header name must be.
    static func isToken(_ name: String) -> Bool {
        !name.isEmpty
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    true
                default: "!#$%&'*+-.^_`|~".utf8.contains(byte)
                }
            }
    }

    /// Whether a name and value could be sent as one header line — the same rules as
    /// ``init(name:value:)``: the check every header passes before libcurl sees it, whoever built it.
    static func isSendable(name: String, value: String) -> Bool {
        isToken(name) && value.unicodeScalars.allSatisfy(isAllowedInValue)
    }

    /// Parses `Name: value`, as curl's `--header` takes it.
    /// - Throws: ``InvalidHTTPHeader``.
    public init(parsing line: String) throws(InvalidHTTPHeader) {
        guard let colon = line.firstIndex(of: ":") else {
            throw Self.invalid("'\(line.prefix(40))' has no colon; write a header as \"Name: value\"")
        }
        try self.init(name: String(line[..<colon]), value: String(line[line.index(after: colon)...]))
    }

    /// The header with its value hidden, for messages and logs.
    public var description: String { "\(name): ***" }

    private static func invalid(_ message: String) -> InvalidHTTPHeader {
        InvalidHTTPHeader(message: message)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        try self.init(name: container.decode(String.self, forKey: .name), value: container.decode(String.self, forKey: .value))
    }

    private enum CodingKeys: String, CodingKey {
        case name, value
    }
}

/// A header that cannot be sent, with what to write instead.
public struct InvalidHTTPHeader: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, in plain words.
    public var message: String
    public var description: String { "invalid header: \(message)" }
}
