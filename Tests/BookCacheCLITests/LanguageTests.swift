import BookCacheTestSupport
import Foundation
import Testing

/// The command line in the reader's language (LANG, LC_MESSAGES, LC_ALL); machine output unchanged.
@Suite("bookcache in German and Chinese")
struct LanguageTests {
    func bookcache(_ arguments: [String], language: String?) async throws -> ProcessResult {
        var environment = ["BOOKCACHE_DIR": "", "XDG_CACHE_HOME": "/nonexistent-xdg", "LC_ALL": "", "LC_MESSAGES": ""]
        environment["LANG"] = language ?? "C"
        return try await ProcessRunner.run("bookcache", arguments, environment: environment)
    }

    @Test("list and stats read naturally in German and Chinese; their --json is the same in every language")
    func list() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            _ = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache], language: nil)
            let german = try await bookcache(["list", "--cache-dir", cache], language: "de_DE.UTF-8")
            #expect(german.stdout.contains("TITEL") && german.stdout.contains("heruntergeladen"), "\(german.stdout)")
            #expect(german.stdout.contains("1 Buch, 1,6 KB"), "decimal comma: \(german.stdout)")
            let chinese = try await bookcache(["list", "--cache-dir", cache], language: "zh_CN.UTF-8")
            #expect(chinese.stdout.contains("书名") && chinese.stdout.contains("已下载") && chinese.stdout.contains("1 本书"), "\(chinese.stdout)")
            let english = try await bookcache(["list", "--cache-dir", cache], language: nil)
            #expect(english.stdout.contains("TITLE") && english.stdout.contains("1 book, 1.6 KB"), "\(english.stdout)")
            // Machine output never changes with the language
            var json: Set<String> = []
            for language in [nil, "de_DE.UTF-8", "zh_CN.UTF-8"] {
                json.insert(try await bookcache(["list", "--json", "--cache-dir", cache], language: language).stdout)
            }
            #expect(json.count == 1)
            // stats too; its --json is the same in every language
            let stats = try await bookcache(["stats", "--cache-dir", cache], language: "de_DE.UTF-8")
            #expect(stats.stdout.contains("gesamt") && stats.stdout.contains("freier Speicher"), "\(stats.stdout)")
            let statsChinese = try await bookcache(["stats", "--cache-dir", cache], language: "zh_CN.UTF-8")
            #expect(statsChinese.stdout.contains("合计") && statsChinese.stdout.contains("可用空间"), "\(statsChinese.stdout)")
            let statsJSON = try await bookcache(["stats", "--json", "--cache-dir", cache], language: "zh_CN.UTF-8")
            #expect(statsJSON.stdout.contains("\"totalCount\"") && !statsJSON.stdout.contains("合计"))
            let empty = try await bookcache(["list", "--cache-dir", dir.path("empty").path], language: "de_DE.UTF-8")
            #expect(empty.stdout.hasPrefix("Keine Bücher heruntergeladen"), "\(empty.stdout)")
        }
    }

    @Test("the language comes from LC_ALL, else LC_MESSAGES, else LANG")
    func precedence() async throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        var environment = ["BOOKCACHE_DIR": "", "LANG": "zh_CN.UTF-8", "LC_MESSAGES": "de_DE.UTF-8", "LC_ALL": ""]
        let messages = try await ProcessRunner.run("bookcache", ["list", "--cache-dir", dir.path("c").path], environment: environment)
        #expect(messages.stdout.hasPrefix("Keine"), "\(messages.stdout)")
        environment["LC_ALL"] = "C"
        let all = try await ProcessRunner.run("bookcache", ["list", "--cache-dir", dir.path("c").path], environment: environment)
        #expect(all.stdout.hasPrefix("No books"), "\(all.stdout)")
    }
}
