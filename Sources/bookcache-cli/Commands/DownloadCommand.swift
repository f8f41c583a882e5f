import ArgumentParser
import BookCache
import Foundation

struct DownloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "download",
        abstract: "Download a book into the cache.",
        discussion: """
            The file is streamed to a working folder while it is hashed, validated (EPUB with \
            libzip, PDF structure, --sha256), and only then moved into the cache. A book already \
            cached is not downloaded again. Exit status is 0 only when the book ends up cached.
            """
    )

    @OptionGroup var global: GlobalOptions
    @ParentCommand var root: BookCacheCommand

    @Argument(help: ArgumentHelp("The http or https URL of the EPUB or PDF.", valueName: "url"))
    var url: String

    @Option(help: ArgumentHelp("The book id (default: the URL's file name without extension).", valueName: "book-id"))
    var id: String?

    @Option(help: "The book type: ebook or magazine.")
    var type: BookType = .ebook

    @Option(help: "A title to show in listings.")
    var title: String?

    @Option(name: .customLong("sha256"), help: ArgumentHelp("The expected SHA-256 of the file (64 hex digits).", valueName: "hex"))
    var sha256: String?

    @Option(name: .customLong("cover-url"), help: ArgumentHelp("Where the book's cover image is.", valueName: "url"))
    var coverURL: String?

    private var request: BookDownloadRequest {
        get throws {
            do {
                let parsedURL = try BookDownloadRequest.parseURL(url)
                let bookId = id ?? BookDownloadRequest.defaultBookId(for: parsedURL)
                let bookID = try BookID(type: type, bookId: bookId)
                return try BookDownloadRequest(
                    url: url, id: bookID, title: title, coverURL: coverURL, expectedSHA256: sha256)
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    func validate() throws {
        _ = try request
    }

    func run() async throws {
        let request = try self.request
        let manager = global.merged(with: root.global).makeManager()
        let bar = ProgressBar(label: request.id.description)
        do {
            let result = try await manager.download(request) { bar.update($0) }
            bar.finish()
            let size = ByteFormat.string(result.metadata.fileSize)
            if result.wasAlreadyCached {
                Terminal.write("\(request.id) is already cached (\(size)): \(result.fileURL.path)")
            } else {
                Terminal.write("cached \(request.id) (\(result.metadata.format.rawValue), \(size)): \(result.fileURL.path)")
            }
        } catch {
            bar.finish()
            throw fail(error)
        }
    }
}
