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
            #expect(
                german.stdout.range(of: #"[0-9]{2}\.[0-9]{2}\.[0-9]{4}, [0-9]{2}:[0-9]{2}"#, options: .regularExpression) != nil,
                "a German date: \(german.stdout)")
            let chinese = try await bookcache(["list", "--cache-dir", cache], language: "zh_CN.UTF-8")
            #expect(chinese.stdout.contains("书名") && chinese.stdout.contains("已下载") && chinese.stdout.contains("1 本书"), "\(chinese.stdout)")
            #expect(
                chinese.stdout.range(of: #"[0-9]{4}/[0-9]{2}/[0-9]{2} [0-9]{2}:[0-9]{2}"#, options: .regularExpression) != nil,
                "a Chinese date: \(chinese.stdout)")
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

    @Test("a refused download, its summary and a sync read naturally in German and Chinese; --json lines are the same in every language")
    func refusedDownload() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let urls = ["\(server.baseURL)/alice.epub", "\(server.baseURL)/corrupt/error-page.epub"]
            var outputs: [String: ProcessResult] = [:]
            for language in ["C", "de_DE.UTF-8", "zh_CN.UTF-8"] {
                let cache = dir.path("cache-\(language)").path
                outputs[language] = try await bookcache(["download"] + urls + ["--cache-dir", cache], language: language)
                #expect(outputs[language]?.status == 65, "a refused file is bad data in every language")
            }
            let german = try #require(outputs["de_DE.UTF-8"])
            #expect(german.stderr.contains("Fehler: ebook-error-page-"), "\(german.stderr)")
            #expect(
                german.stderr.contains("ist kein gültiges Buch: eine HTML-Seite (eine Anmelde- oder Fehlerseite?), kein Buch"),
                "\(german.stderr)")
            #expect(german.stdout.contains("1 von 2 heruntergeladen, 1 fehlgeschlagen"), "\(german.stdout)")
            #expect(german.stdout.contains("(epub, 1,6 KB)"), "\(german.stdout)")
            let chinese = try #require(outputs["zh_CN.UTF-8"])
            #expect(chinese.stderr.contains("错误：ebook-error-page-"), "\(chinese.stderr)")
            #expect(chinese.stderr.contains("不是有效的书：一个 HTML 网页（登录页或错误页？），而不是书"), "\(chinese.stderr)")
            #expect(chinese.stdout.contains("已下载 1/2，失败 1"), "\(chinese.stdout)")
            let english = try #require(outputs["C"])
            #expect(
                english.stderr.contains("error: ebook-error-page-")
                    && english.stderr.contains("is not a valid book: the server sent an HTML page"))
            #expect(english.stdout.contains("1 of 2 cached, 1 failed"))

            // --json: the same lines (paths aside, which name each language's cache) in every language
            var json: Set<String> = []
            for language in ["C", "de_DE.UTF-8", "zh_CN.UTF-8"] {
                let cache = dir.path("json-\(language)").path
                let result = try await bookcache(["download"] + urls + ["--cache-dir", cache, "--json"], language: language)
                // Lines come in the order books end: compared as a set
                let lines = result.stdout.replacingOccurrences(of: cache, with: "CACHE").split(separator: "\n").sorted()
                json.insert(lines.joined(separator: "\n"))
            }
            #expect(json.count == 1, "\(json)")
            #expect(json.first?.contains("is not a valid book") == true, "JSON messages stay English")

            // A sync's summary
            server.setFile(Data("\(urls[0])\n".utf8), at: "shelf.txt")
            let sync = try await bookcache(
                ["sync", "\(server.baseURL)/shelf.txt", "--first", "1", "--cache-dir", dir.path("sync").path], language: "de_DE.UTF-8")
            #expect(
                sync.stdout.contains("1 von 1 heruntergeladen (1 neu, 0 bereits vorhanden), 0 fehlgeschlagen, 0 entfernt"),
                "\(sync.stdout) \(sync.stderr)")
        }
    }

    @Test("--help abstracts and the short commands (pin, verify, delete, prune) speak the language too")
    func otherCommands() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let cache = dir.path("cache").path
            let help = try await bookcache(["--help"], language: "de_DE.UTF-8")
            #expect(help.stdout.contains("EPUB- und PDF-Bücher in einen lokalen Cache laden"), "\(help.stdout)")
            #expect(help.stdout.contains("Heruntergeladene Bücher auflisten."), "\(help.stdout)")
            let chineseHelp = try await bookcache(["download", "--help"], language: "zh_CN.UTF-8")
            #expect(chineseHelp.stdout.contains("将书下载到缓存"), "\(chineseHelp.stdout)")
            _ = try await bookcache(["download", "\(server.baseURL)/alice.epub", "--id", "alice", "--cache-dir", cache], language: nil)
            let pin = try await bookcache(["pin", "ebook-alice", "--cache-dir", cache], language: "de_DE.UTF-8")
            #expect(pin.stdout == "angeheftet: ebook-alice\n", "\(pin.stdout)")
            let verify = try await bookcache(["verify", "--cache-dir", cache], language: "zh_CN.UTF-8")
            #expect(verify.stdout.contains("已检查 1 本书，0 个问题"), "\(verify.stdout)")
            let missing = try await bookcache(["delete", "ebook-nobody", "--cache-dir", cache], language: "de_DE.UTF-8")
            #expect(missing.stderr.contains("Fehler: ebook-nobody ist nicht heruntergeladen"), "\(missing.stderr)")
            let english = try await bookcache(["verify", "--cache-dir", cache], language: nil)
            #expect(english.stdout.contains("1 book checked, 0 problems"), "\(english.stdout)")
            let check = try await bookcache(["check", "--cache-dir", cache], language: "de_DE.UTF-8")
            #expect(check.stdout.contains("1 geprüft, 0 veraltet, 0 unbekannt"), "\(check.stdout) \(check.stderr)")
            let prune = try await bookcache(["prune", "--dry-run", "--keep", "0", "--cache-dir", cache], language: "zh_CN.UTF-8")
            #expect(prune.stdout.contains("将从 0 本书释放 0 B。"), "pinned books stay: \(prune.stdout) \(prune.stderr)")
            let clear = try await bookcache(["clear", "--yes", "--cache-dir", cache], language: "de_DE.UTF-8")
            #expect(clear.stdout == "1 Buch entfernt (1,6 KB).\n", "\(clear.stdout) \(clear.stderr)")
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
