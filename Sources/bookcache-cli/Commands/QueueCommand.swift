import ArgumentParser
import BookCache
import DownloadQueue
import Foundation

struct QueueCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: Localized.text("Add, list and cancel jobs of the running 'bookcache serve'."),
        discussion: "Talks to the service of the cache (its address is in CACHE/service.json); with none running, says so and exits 69.",
        subcommands: [QueueAddCommand.self, QueueListCommand.self, QueueCancelCommand.self]
    )
}

/// A job as the API returns it.
struct QueuedJob: Codable {
    var id: String
    var bookId: String
    var url: String
    var title: String?
    var priority: String
    var state: String
    var bytes: Int64
    var total: Int64?
    var error: Failure?
    var attempts: Int
    var createdAt: Date
    var updatedAt: Date
    var nextAttemptAt: Date?

    struct Failure: Codable {
        var kind: String
        var message: String
    }

    var line: String {
        let size = total.map { "\(ByteFormat.string(bytes)) of \(ByteFormat.string($0))" } ?? (bytes > 0 ? ByteFormat.string(bytes) : "")
        return [id, state, bookId, size, error.map { "(\($0.kind): \($0.message))" } ?? ""].filter { !$0.isEmpty }.joined(separator: "  ")
    }
}

struct QueueAddCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add",
        abstract: Localized.text(
            "Queue books: URLs, or a JSON Lines manifest (--from FILE, or - for stdin); returns once the service has them."),
        discussion:
            "Manifest lines are those of 'bookcache download --from', plus \"priority\": low, normal or high. One bad line refuses the whole batch (exit 65)."
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Book URLs.")
    var urls: [String] = []

    @Option(help: ArgumentHelp("A JSON Lines manifest, or - for standard input.", valueName: "file"), completion: .file())
    var from: String?

    @Option(help: "The type of books whose line does not say: ebook or magazine.")
    var type: BookType?

    @Option(help: "low, normal or high.")
    var priority: String?

    @Flag(help: "Print the accepted jobs as JSON.")
    var json = false

    func validate() throws {
        if urls.isEmpty == (from == nil) { throw ValidationError("give URLs or --from FILE, not both") }
        if let priority, DownloadPriority(word: priority) == nil {
            throw ValidationError("--priority must be \(DownloadPriority.wordList)")
        }
    }

    func run() async throws {
        let root = CacheLayout.defaultRoot(explicit: global.cacheDir)
        var objects: [[String: Any]] = urls.map { ["url": $0] }
        if let from {
            let data: Data
            if from == "-" {
                data = FileHandle.standardInput.readDataToEndOfFile()
            } else {
                guard let read = FileManager.default.contents(atPath: from) else { throw ValidationError("cannot read \(from)") }
                data = read
            }
            for (number, line) in String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                .enumerated()
            {
                let text = line.trimmingCharacters(in: .whitespaces)
                if text.isEmpty || text.hasPrefix("#") { continue }
                if text.hasPrefix("{") {
                    guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
                        throw ValidationError("line \(number + 1) of \(from) is not a JSON object")
                    }
                    objects.append(object)
                } else {
                    objects.append(["url": text])
                }
            }
        }
        for index in objects.indices {
            if let type, objects[index]["type"] == nil { objects[index]["type"] = type.rawValue }
            if let priority, objects[index]["priority"] == nil { objects[index]["priority"] = priority }
        }
        let client = try await ServiceClient.connect(cacheRoot: root)
        struct Accepted: Decodable { var jobs: [QueuedJob] }
        let accepted: Accepted = try await client.send("POST", "/api/v1/jobs", body: try JSONSerialization.data(withJSONObject: objects))
        if json {
            let encoder = MetadataCoding.encoder()
            for job in accepted.jobs { Terminal.write(String(decoding: try encoder.encode(job), as: UTF8.self)) }
        } else {
            for job in accepted.jobs { Terminal.write(job.line) }
            Terminal.write(Localized.text(accepted.jobs.count == 1 ? "%lld job queued" : "%lld jobs queued", Int64(accepted.jobs.count)))
        }
    }
}

struct QueueListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: Localized.text("List the service's jobs, oldest first."))

    @OptionGroup var global: GlobalOptions

    @Flag(help: "Print JSON (one job per line).")
    var json = false

    func run() async throws {
        let client = try await ServiceClient.connect(cacheRoot: CacheLayout.defaultRoot(explicit: global.cacheDir))
        struct Listing: Decodable {
            var jobs: [QueuedJob]
            var counts: [String: Int]
        }
        let listing: Listing = try await client.send("GET", "/api/v1/jobs")
        if json {
            let encoder = MetadataCoding.encoder()
            for job in listing.jobs { Terminal.write(String(decoding: try encoder.encode(job), as: UTF8.self)) }
            return
        }
        for job in listing.jobs { Terminal.write(job.line) }
        Terminal.write(
            listing.counts.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ").nonEmpty ?? "no jobs")
    }
}

struct QueueCancelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: Localized.text("Cancel jobs that have not ended (their partial files are kept)."))

    @OptionGroup var global: GlobalOptions

    @Argument(help: "Job ids, as 'queue list' shows them.")
    var ids: [String]

    func run() async throws {
        let client = try await ServiceClient.connect(cacheRoot: CacheLayout.defaultRoot(explicit: global.cacheDir))
        for id in ids {
            guard id.allSatisfy(\.isHexDigit) else { throw ValidationError("'\(id)' is not a job id") }
            let job: QueuedJob = try await client.send("DELETE", "/api/v1/jobs/\(id)")
            Terminal.write(job.line)
        }
    }
}

extension String {
    fileprivate var nonEmpty: String? { isEmpty ? nil : self }
}
