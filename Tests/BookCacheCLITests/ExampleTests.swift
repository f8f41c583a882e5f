import BookCacheTestSupport
import Foundation
import Testing

/// The bookshelf example (Examples/Bookshelf), run as an app would run it: what it prints comes
/// from the library's events alone.
@Suite("The bookshelf example")
struct ExampleTests {
    @Test("it shows progress, validation, an eviction and typed errors, and lists its shelf")
    func bookshelf() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let unreachable = try await TestHTTPServer.unreachableBaseURL()
            let result = try await ProcessRunner.run(
                "bookshelf-example",
                [
                    dir.path("shelf").path, "\(server.baseURL)/alice.epub", "\(server.baseURL)/corrupt/error-page.epub",
                    "\(server.baseURL)/pride.epub", "\(server.baseURL)/fixture-monthly-2024-05.pdf", "\(unreachable)/gone.epub",
                ])
            #expect(result.status == 0, "\(result.stderr)")
            let out = result.stdout
            #expect(out.contains("ebook-alice-") && out.contains(": 100%"), "\(out)")
            #expect(out.contains(": validating"), "\(out)")
            #expect(out.contains("not added — the file is not a readable book (the server sent an HTML page"), "\(out)")
            #expect(out.contains("taken off the shelf (budget)"), "keeping two books, the first goes: \(out)")
            #expect(out.contains("not added — no connection"), "\(out)")
            let shelf = out.split(separator: "\n").filter { $0.hasPrefix("shelf: ") }
            #expect(shelf.count == 2, "\(out)")
        }
    }
}
