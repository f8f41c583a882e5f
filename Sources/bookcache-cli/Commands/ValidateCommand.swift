import ArgumentParser
import BookCache
import Foundation

struct ValidateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: Localized.text("Check local files as the cache checks a download, without caching them."),
        discussion: """
            Prints one line per file: 'ok', 'ok, with warnings' and the warnings (rules no reader \
            needs, such as EPUB mimetype packaging), or 'refused' and why. With --strict, a \
            warning refuses the file. Exits 1 if any file is refused. Reads no cache but its \
            validation-* settings: each file is judged in a worker process, within the bounds they \
            give, so a file that crashes a parser or exhausts memory or time is refused ('could \
            not be judged safely') and the next file is judged.
            """
    )

    @Argument(help: ArgumentHelp("EPUB or PDF files.", valueName: "file"), completion: .file(extensions: ["epub", "pdf"]))
    var files: [String]

    @Flag(help: "Refuse files with warnings too.")
    var strict = false

    @Flag(
        help:
            "Print one JSON object per file: path, format, verdict (ok, warned, refused), warnings, an EPUB's language and publication date, reason."
    )
    var json = false

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        let validation = global.validation(root: CacheLayout.defaultRoot(explicit: global.cacheDir))
        var refused = 0
        for file in files {
            let path = URL(fileURLWithPath: file).path
            var object: [String: Any] = ["path": file]
            do {
                let report = try await validation.judge(path: path, limits: ValidationLimits(), strict: strict)
                object["format"] = report.format.rawValue
                object["verdict"] = report.warnings.isEmpty ? "ok" : "warned"
                object["warnings"] = report.warnings
                if let language = report.language { object["language"] = language }
                if let published = report.published { object["published"] = published }
                if !json {
                    Terminal.write("\(file): ok\(report.warnings.isEmpty ? "" : ", with warnings") (\(report.format.rawValue))")
                    for warning in report.warnings { Terminal.write("  warning: \(warning)") }
                }
            } catch let error as ValidationFailure {
                refused += 1
                object["verdict"] = "refused"
                object["reason"] = error.reason
                object["kind"] = error.kind.rawValue
                object["warnings"] = [String]()
                if !json { Terminal.write("\(file): refused: \(error.reason)") }
            } catch let error as BookCacheError {
                // The validation settings cannot be read: nothing can be judged.
                throw fail(error)
            }
            if json {
                let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
                Terminal.write(String(decoding: data, as: UTF8.self))
            }
        }
        if refused > 0 { throw ExitCode.failure }
    }
}
