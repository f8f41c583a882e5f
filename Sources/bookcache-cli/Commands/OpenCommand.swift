import ArgumentParser
import BookCache
import DownloadQueue
import Foundation

struct OpenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "open",
        abstract: Localized.text("Print the path of a book to read: from the cache, or downloaded first."),
        discussion: """
            'open ID' prints a cached book's path (exit 1 if not cached) without any network request. \
            'open URL' does the same when the book is cached, and otherwise downloads it at high \
            priority first; with no network it fails with "not cached and the network is unavailable".
            """
    )

    @OptionGroup var global: GlobalOptions
    @OptionGroup(title: "Network") var connection: ConnectionOptions
    @OptionGroup(title: "Login") var login: LoginOptions
    @OptionGroup(title: "Validation") var validation: ValidationOptions

    @Argument(help: ArgumentHelp("A book id (ebook-123) or an http(s) URL.", valueName: "id-or-url"), completion: Completions.bookIDs)
    var target: String

    @Option(help: ArgumentHelp("The book id for a URL (default: the URL's file name and a short hash of the URL).", valueName: "book-id"))
    var id: String?

    @Option(help: "The book type for a URL: ebook or magazine.")
    var type: BookType = .ebook

    private enum Target {
        case cached(BookID)
        case url(BookDownloadRequest)
    }

    private var parsed: Target {
        get throws {
            if target.contains("://") {
                do {
                    if let id {
                        return .url(try BookDownloadRequest(url: target, id: BookID(type: type, bookId: id), priority: .high))
                    }
                    return .url(try BookDownloadRequest(url: target, type: type, priority: .high))
                } catch {
                    throw ValidationError(error.message)
                }
            }
            if id != nil { throw ValidationError("--id goes with a URL.") }
            return .cached(try parseID(target))
        }
    }

    func validate() throws {
        _ = try parsed
    }

    func run() async throws {
        let manager = try global.makeManager(connection: connection, strict: validation.strict)
        do {
            switch try parsed {
            case .cached(let bookID):
                Terminal.write(try await manager.open(bookID).path)
            case .url(var request):
                request.headers = try login.parsedHeaders
                request.credentials = request.credentials ?? login.credentials(for: request.url)
                let bar = ProgressBar(label: request.id.description)
                let url = try await manager.open(request) { event in
                    if case .progress(_, let progress) = event { bar.update(progress) }
                }
                bar.finish()
                await manager.waitForBackgroundWork()
                Terminal.write(url.path)
            }
        } catch let error as BookCacheError {
            throw fail(error)
        }
    }
}
