import BookCacheTestSupport
import Foundation
import Testing

/// The live display of a batch, in a real terminal: tmux at 60 and 120 columns, its screen read
/// with `capture-pane`. A line wider than the terminal once wrapped, the redraw moved the cursor
/// up by lines rather than rows, and the same line was left on the screen eight times.
@Suite(
    "The live display in a real terminal (tmux)", .serialized, .timeLimit(.minutes(3)),
    .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/tmux"), "tmux is not installed; scripts/test.sh installs it"))
struct TerminalDisplayTests {
    /// A tmux command on the session's own server (`-L bookcache-SESSION`): with one server for
    /// all, a test's session could start while the previous test's last session was being
    /// killed, and the server ending under it failed the start.
    func tmux(_ arguments: [String], session: String) async throws -> ProcessResult {
        try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/tmux"), ["-L", "bookcache-\(session)", "-f", "/dev/null"] + arguments)
    }

    /// Starts a detached session. Through a shell with its output sent to /dev/null: the tmux
    /// server this may start would otherwise hold the runner's pipes open, and reading them to
    /// their end would never finish.
    func newSession(_ session: String, _ arguments: [String]) async throws -> ProcessResult {
        let quoted = arguments.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        return try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/bin/sh"),
            [
                "-c",
                "exec /usr/bin/tmux -L bookcache-\(session) -f /dev/null new-session -d -s \(session) \(quoted) </dev/null >/dev/null 2>&1",
            ])
    }

    @Test(
        "every row fits the terminal while it runs, and afterwards each book's line is there once, with no bar left behind",
        arguments: [60, 120])
    func liveDisplay(columns: Int) async throws {
        let server = TestHTTPServer()
        let names = (0..<6).map { "a-rather-long-book-name-for-a-narrow-terminal-\($0).epub" }
        for (index, name) in names.enumerated() {
            server.setFile(Data(StoredZIP.epub(chapter: StoredZIP.noise(count: 1 << 20, seed: UInt64(index + 7)))), at: name)
        }
        server.slowBodies(chunk: 16 << 10, pause: .milliseconds(4))
        try await server.start()
        defer { Task { try? await server.shutdown() } }
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let manifest = dir.path("m.txt")
        try Data(names.map { "\(server.baseURL)/\($0)" }.joined(separator: "\n").utf8).write(to: manifest)
        let binary = ProcessRunner.productsDirectory.appendingPathComponent("bookcache").path
        let session = "display-\(columns)-\(UUID().uuidString.prefix(8))"
        // The batch runs in the pane; when it ends the pane signals `done` and stays open
        // (waiting for `release`) so its screen can still be read.
        // It starts on `go`, once the pane's raw output is being recorded (kept for a failure).
        let raw = dir.path("raw-\(columns).log").path
        let script = """
            tmux -L bookcache-\(session) wait-for \(session)-go; \
            '\(binary)' download --from '\(manifest.path)' --cache-dir '\(dir.path("cache").path)' --concurrency 3; \
            '\(binary)' refresh --cache-dir '\(dir.path("cache").path)' --concurrency 3; \
            tmux -L bookcache-\(session) wait-for -S \(session)-done; tmux -L bookcache-\(session) wait-for \(session)-release
            """
        let started = try await newSession(session, ["-x", "\(columns)", "-y", "40", "sh", "-c", script])
        try #require(started.status == 0, "tmux: \(started.stderr)")
        _ = try await tmux(["pipe-pane", "-o", "-t", session, "cat > '\(raw)'"], session: session)
        _ = try await tmux(["wait-for", "-S", "\(session)-go"], session: session)
        defer {
            Task {
                _ = try? await tmux(["wait-for", "-S", "\(session)-release"], session: session)
                _ = try? await tmux(["kill-session", "-t", session], session: session)
            }
        }

        // While it runs: once all three transfers are under way, every line of the live view fits
        // one row (-J joins wrapped rows back into their line; "cached" lines above the view are
        // ordinary output and may wrap)
        await server.waitForRequests(count: 3)
        let during = try await tmux(["capture-pane", "-p", "-J", "-t", session], session: session)
        let live = during.stdout.split(separator: "\n").map(String.init).filter { $0.hasPrefix("  ebook-") || $0.hasPrefix("[") }
        for line in live {
            #expect(line.count < columns, "a live line wider than the terminal wrapped: '\(line)'\n\(during.stdout)")
        }

        // After: every book's line once, no progress bar left
        _ = try await tmux(["wait-for", "\(session)-done"], session: session)
        let after = try await tmux(["capture-pane", "-p", "-J", "-S", "-", "-t", session], session: session)
        let screen = after.stdout
        for name in names {
            let stem = String(name.dropLast(5))
            let count = screen.components(separatedBy: "\n").filter { $0.hasPrefix("cached ebook-\(stem)") }.count
            #expect(count == 1, "'cached ebook-\(stem)…' is on the screen \(count) times:\n\(screen)")
        }
        let output = (try? String(contentsOfFile: raw, encoding: .utf8)) ?? ""
        #expect(!screen.contains("done ·"), "the overall bar was left behind:\n\(screen)\nraw:\n\(output.debugDescription)")
        #expect(!screen.contains("[#") && !screen.contains("[."), "a progress bar was left behind:\n\(screen)")
        #expect(screen.contains("6 of 6 cached, 0 failed"), "\(screen)")
        // refresh shows the same live view while it downloads, and takes it away before its lines
        #expect(screen.contains("6 of 6 refreshed, 0 failed"), "\(screen)")
        // The overall bar goes by bytes: it moves before the first book is done (it once counted
        // finished books and showed nothing until then)
        #expect(output.range(of: #"\] [1-9][0-9]?% · 0/6 done"#, options: .regularExpression) != nil, "\(output.debugDescription)")
        let afterDownload = output.components(separatedBy: "6 of 6 cached, 0 failed").last ?? ""
        #expect(afterDownload.contains("done ·"), "no live view during refresh: \(afterDownload.debugDescription)")
    }

    @Test("TERM=dumb gets plain lines: no cursor movement, no bars, though stderr is a terminal")
    func dumbTerminal() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let binary = ProcessRunner.productsDirectory.appendingPathComponent("bookcache").path
            let session = "dumb-\(UUID().uuidString.prefix(8))"
            // stderr stays on the terminal (a file would be plain lines anyway) and TERM is set for
            // the command itself (tmux sets its own TERM in a pane, whatever the session's
            // environment says); the pane's raw output is recorded from `go` on.
            let raw = dir.path("raw.log").path
            let script = """
                tmux -L bookcache-\(session) wait-for \(session)-go; \
                TERM=dumb '\(binary)' download '\(server.baseURL)/alice.epub' '\(server.baseURL)/pride.epub' --cache-dir '\(dir.path("cache").path)'; \
                tmux -L bookcache-\(session) wait-for -S \(session)-done
                """
            let started = try await newSession(session, ["-x", "80", "-y", "20", "sh", "-c", script])
            try #require(started.status == 0, "tmux: \(started.stderr)")
            _ = try await tmux(["pipe-pane", "-o", "-t", session, "cat > '\(raw)'"], session: session)
            _ = try await tmux(["wait-for", "-S", "\(session)-go"], session: session)
            _ = try await tmux(["wait-for", "\(session)-done"], session: session)
            _ = try await tmux(["kill-session", "-t", session], session: session)
            let output = try String(contentsOfFile: raw, encoding: .utf8)
            #expect(output.contains("2 of 2 cached"), "\(output.debugDescription)")
            #expect(!output.contains("\u{1B}["), "escape sequences on a dumb terminal: \(output.debugDescription)")
        }
    }
}
