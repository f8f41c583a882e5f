import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real calibre-server (Debian's `calibre`) on 127.0.0.1, over a library built with `calibredb`,
/// for integration tests. calibre allows one server per user at a time, so tests run them one
/// after another.
public final class CalibreServer: Sendable {
    /// How the server asks for a login.
    public enum Login: Sendable {
        case open
        case digest(user: String, password: String)
        case basic(user: String, password: String)
    }

    /// Whether `calibre-server` and `calibredb` are installed.
    public static var isInstalled: Bool {
        ["calibre-server", "calibredb"].allSatisfy { FileManager.default.isExecutableFile(atPath: "/usr/bin/\($0)") }
    }

    /// Runs `calibredb` on `library`, failing with its output when it fails.
    @discardableResult
    public static func calibredb(_ arguments: [String], library: URL) async throws -> String {
        let result = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/calibredb"), arguments + ["--library-path", library.path],
            environment: ["XDG_RUNTIME_DIR": NSTemporaryDirectory()])
        guard result.status == 0 else {
            throw ProcessRunnerError(message: "calibredb \(arguments.joined(separator: " ")) failed: \(result.stderr) \(result.stdout)")
        }
        return result.stdout
    }

    private let process: RunningProcess
    /// The server's root, `http://127.0.0.1:PORT`.
    public let baseURL: String

    private init(process: RunningProcess, port: Int) {
        self.process = process
        self.baseURL = "http://127.0.0.1:\(port)"
    }

    /// Starts a server and returns once it says it is listening.
    /// - Parameters:
    ///   - library: A calibre library folder.
    ///   - login: Open, or with one user by Digest or Basic.
    ///   - maxOPDSItems: Books per OPDS page.
    ///   - workDirectory: Where the user database goes.
    ///   - accessLog: A file for its access log (a line per request, with its status), if wanted.
    public static func start(
        library: URL, login: Login, maxOPDSItems: Int, workDirectory: URL, accessLog: URL? = nil
    ) async throws -> CalibreServer {
        // A port nothing listens on: the loopback test server's, just released.
        let port = try await TestHTTPServer.freePort()
        var arguments = ["--port", "\(port)", "--listen-on", "127.0.0.1", "--max-opds-items", "\(maxOPDSItems)"]
        if let accessLog { arguments += ["--access-log", accessLog.path] }
        switch login {
        case .open:
            break
        case .digest(let user, let password), .basic(let user, let password):
            let database = workDirectory.appendingPathComponent("users-\(port).sqlite")
            let added = try await ProcessRunner.run(
                at: URL(fileURLWithPath: "/usr/bin/calibre-server"),
                ["--userdb", database.path, "--manage-users", "--", "add", user, password],
                environment: ["XDG_RUNTIME_DIR": NSTemporaryDirectory()])
            guard added.status == 0 else { throw ProcessRunnerError(message: "calibre-server --manage-users failed: \(added.stderr)") }
            arguments += ["--enable-auth", "--userdb", database.path]
            if case .basic = login { arguments += ["--auth-mode", "basic"] } else { arguments += ["--auth-mode", "digest"] }
        }
        // Its output (both streams) is read until it says it listens, or ends.
        let process = try ProcessRunner.launch(
            at: URL(fileURLWithPath: "/usr/bin/calibre-server"), arguments + [library.path],
            environment: ["XDG_RUNTIME_DIR": NSTemporaryDirectory()], mergingErrors: true, timeLimit: .seconds(600))
        let server = CalibreServer(process: process, port: port)
        guard await process.line(containing: "listening on") != nil else {
            await server.stop()
            throw ProcessRunnerError(message: "calibre-server did not start: \(await process.wait().stdout)")
        }
        return server
    }

    /// Starts a server, runs `body` with it, and stops it however `body` ends.
    public static func with<T>(
        library: URL, login: Login, maxOPDSItems: Int, workDirectory: URL, accessLog: URL? = nil,
        _ body: (CalibreServer) async throws -> T
    ) async throws -> T {
        let server = try await start(
            library: library, login: login, maxOPDSItems: maxOPDSItems, workDirectory: workDirectory, accessLog: accessLog)
        return try await running(server, stop: { await $0.stop() }, body)
    }

    /// Stops the server and waits for it to exit.
    public func stop() async {
        // calibre-server may take its time over SIGTERM; its state does not matter to a test.
        // Once it has ended (a second stop), the signal is not sent.
        process.send(SIGKILL)
        _ = await process.wait()
    }
}
