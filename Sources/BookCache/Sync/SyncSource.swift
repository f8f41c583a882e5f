import DownloadQueue
import Foundation

/// Where a sync reads its list of books: a JSON Lines manifest (the same format as
/// `download --from`) or an OPDS catalog feed, from a file, from memory, or over HTTP.
public enum SyncSource: Sendable, Hashable, CustomStringConvertible {
    /// A file on disk.
    case file(URL)
    /// An `http` or `https` URL.
    case url(URL)
    /// Bytes already read (such as standard input), with the name that identifies the source.
    case data(Data, name: String)

    /// Parses what a user typed: `-` is standard input (read by the caller), a URL with a
    /// scheme is a URL, anything else is a file path.
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidURL`` for a URL that is
    ///   not `http` or `https`.
    public init(parsing text: String, standardInput: () throws -> Data) throws(BookCacheError) {
        if text == "-" {
            do {
                self = .data(try standardInput(), name: "stdin")
            } catch {
                throw .invalidArgument("cannot read standard input (\(error))")
            }
        } else if text.contains("://") {
            self = .url(try BookDownloadRequest.parseURL(text))
        } else {
            self = .file(URL(fileURLWithPath: text).standardizedFileURL)
        }
    }

    /// The key under which this source's books and last sync time are recorded.
    public var key: String {
        switch self {
        case .file(let url): return url.path
        case .url(let url): return URLRedaction.redacted(url)
        case .data(_, let name): return name
        }
    }

    /// The URL that relative links in a feed are resolved against.
    var baseURL: URL? {
        if case .url(let url) = self { return url }
        return nil
    }

    public var description: String { key }
}
