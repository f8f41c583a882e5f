import DownloadQueue
import Foundation

/// One book named by a manifest line, before its fields are checked.
package struct ManifestEntry: Sendable, Hashable {
    /// The line it came from, counting from 1.
    public var line: Int
    /// The book's URL (required).
    public var url: String
    /// The book id within its type; the URL's file name when absent.
    public var id: String?
    /// The book type; the command's default when absent.
    public var type: BookType?
    /// A title to show.
    public var title: String?
    /// The expected SHA-256.
    public var sha256: String?
    /// The cover's URL.
    public var coverUrl: String?
    /// The expected size in bytes, if the manifest gives it.
    public var size: Int64?
    /// Pin the book.
    public var pin: Bool
    /// Extra headers for the book's requests (`"headers"`), such as a bearer token.
    public var headers: [HTTPHeader] = []
    /// Download the book again even when it is cached (`"refresh": true`): the cached copy stays
    /// readable until the new one is validated, then is replaced.
    public var refresh = false

    /// Creates an entry.
    public init(
        line: Int, url: String, id: String? = nil, type: BookType? = nil, title: String? = nil,
        sha256: String? = nil, coverUrl: String? = nil, size: Int64? = nil, pin: Bool = false
    ) {
        self.line = line
        self.url = url
        self.id = id
        self.type = type
        self.title = title
        self.sha256 = sha256
        self.coverUrl = coverUrl
        self.size = size
        self.pin = pin
    }

    /// Checks every field and makes the download request.
    /// - Parameter defaultType: The type when the entry names none.
    /// - Throws: ``ManifestProblem`` naming the line and the field.
    public func request(defaultType: BookType) throws(ManifestProblem) -> BookDownloadRequest {
        do {
            var request: BookDownloadRequest
            if let id {
                request = try BookDownloadRequest(
                    url: url, id: BookID(type: type ?? defaultType, bookId: id), title: title, coverURL: coverUrl, expectedSHA256: sha256)
            } else {
                request = try BookDownloadRequest(
                    url: url, type: type ?? defaultType, title: title, coverURL: coverUrl, expectedSHA256: sha256)
            }
            request.pin = pin
            request.replaceExisting = refresh
            request.expectedSize = size
            request.headers = headers
            return request
        } catch {
            throw ManifestProblem(line: line, message: error.message)
        }
    }
}

/// A manifest line that cannot be used, with its line number.
package struct ManifestProblem: Error, Sendable, Hashable, CustomStringConvertible {
    /// The line, counting from 1.
    public var line: Int
    /// What is wrong with it.
    public var message: String

    /// Creates a problem.
    public init(line: Int, message: String) {
        self.line = line
        self.message = message
    }

    public var description: String { "line \(line): \(message)" }
}
