import DownloadQueue
import Foundation

/// Paths to the repository's fixtures and helpers for fresh temporary directories.
public enum Fixtures {
    /// The repository root, found from this source file's location.
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // BookCacheTestSupport
        .deletingLastPathComponent()  // Sources
        .deletingLastPathComponent()

    /// `Fixtures/books`.
    public static let books = repositoryRoot.appendingPathComponent("Fixtures/books", isDirectory: true)

    /// The bytes of a fixture, such as `alice.epub` or `corrupt/crc-flip.epub`.
    /// - Parameter name: The path below `Fixtures/books`.
    public static func data(_ name: String) throws -> Data {
        try Data(contentsOf: books.appendingPathComponent(name))
    }

    /// The valid books, by file name.
    public static let validBooks = ["alice.epub", "pride.epub", "fixture-monthly-2024-05.pdf", "trailing-junk.pdf"]
}

/// A fresh directory under the system's temporary folder, removed by ``remove()``.
public struct TemporaryDirectory: Sendable {
    /// The directory.
    public let url: URL

    /// Creates a new, empty, uniquely named directory.
    public init(_ label: String = "bookcache-test") throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("\(label)-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory (not created).
    public func path(_ component: String) -> URL {
        url.appendingPathComponent(component)
    }

    /// Removes the directory and everything in it.
    public func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Runs `body` with a started server and a fresh directory, and cleans both up afterwards.
/// - Parameters:
///   - directory: A folder to serve too, such as ``Fixtures/books``.
///   - files: Files to serve, by name (`alice.epub` is served at `/alice.epub`).
///   - body: The test.
public func withServerAndDirectory<T>(
    directory: URL? = nil,
    files: [String: Data] = [:],
    _ body: (TestHTTPServer, TemporaryDirectory) async throws -> T
) async throws -> T {
    let server = TestHTTPServer(directory: directory)
    for (name, data) in files { server.setFile(data, at: name) }
    try await server.start()
    let directory = try TemporaryDirectory()
    do {
        let result = try await body(server, directory)
        try await server.shutdown()
        directory.remove()
        return result
    } catch {
        try? await server.shutdown()
        directory.remove()
        throw error
    }
}

/// Runs `body` on the test's own thread although it blocks — SQL on the index from a test that
/// plays another process holding its lock — which the library's check for blocking calls in
/// tasks otherwise stops (debug builds). Only the calls in `body` are let through.
public func asAnotherProcess<T>(_ body: () throws -> T) rethrows -> T {
    try BlockingWork.$testMayBlock.withValue(true, operation: body)
}
