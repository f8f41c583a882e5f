import ArgumentParser
import BookCache
import Foundation

struct VerifyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: Localized.text("Check cached files against their checksums and formats; find strays."),
        discussion: """
            Re-hashes every file (or the ones named) against its recorded SHA-256 and re-runs EPUB \
            and PDF validation (never strictly: a book cached with a warning is not corrupt; --json \
            lists the warnings). Reports missing files, files changed on disk, corrupt files, and \
            (when checking everything) files in the type folders that the index does not know. \
            Exits 1 if anything is wrong. --repair removes broken books (or downloads them again \
            with --redownload) and adopts strays whose sidecar describes them, removing the rest.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Argument(help: ArgumentHelp("Book ids to check (default: everything).", valueName: "id"), completion: Completions.bookIDs)
    var ids: [String] = []

    @Flag(help: "Fix what is found.")
    var repair = false

    @Flag(help: "With --repair, download broken books again instead of removing them.")
    var redownload = false

    @Flag(help: "Print JSON.")
    var json = false

    func validate() throws {
        for id in ids { _ = try parseID(id) }
        if redownload && !repair { throw ValidationError("--redownload goes with --repair.") }
    }

    func run() async throws {
        let manager = try global.makeManager()
        let bookIDs = try ids.map(parseID)
        let report: VerifyReport
        do {
            report = try await manager.verify(bookIDs, repair: repair, redownload: redownload)
        } catch {
            throw fail(error)
        }
        if json {
            let object: [String: Any] = [
                "checked": report.checked, "ok": report.isClean, "warnings": report.warnings,
                "problems": report.problems.map { problem -> [String: Any] in
                    [
                        "kind": problem.kind.rawValue, "id": problem.id ?? NSNull(), "path": problem.path, "detail": problem.detail,
                        "repair": problem.repair ?? NSNull(),
                    ]
                },
            ]
            Terminal.write(
                String(
                    decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]),
                    as: UTF8.self))
        } else {
            for problem in report.problems {
                var line = "\(problem.kind.rawValue): \(problem.id ?? problem.path)"
                if problem.id != nil && !problem.path.isEmpty { line += " (\(problem.path))" }
                line += ": \(problem.detail)"
                if let repair = problem.repair { line += " — \(repair)" }
                Terminal.write(line)
            }
            Terminal.write(
                Localized.text(report.checked == 1 ? "%lld book checked" : "%lld books checked", Int64(report.checked))
                    + Localized.text(report.problems.count == 1 ? ", %lld problem" : ", %lld problems", Int64(report.problems.count))
                    + (repair && !report.isClean ? Localized.text(" (repaired)") : ""))
        }
        if !report.isClean && !repair { throw ExitCode.failure }
    }
}
