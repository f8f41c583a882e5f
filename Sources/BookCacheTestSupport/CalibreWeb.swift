import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A real calibre-web (PyPI's `calibreweb`, in the venv `scripts/test.sh` makes at
/// `.build/calibre-web`) on 127.0.0.1 over a calibre library, for integration tests. Its settings
/// are written before it starts: the library, the port, books per page, anonymous browsing.
public final class CalibreWeb: Sendable {
    /// The `cps` program of the venv.
    public static var program: URL { Fixtures.repositoryRoot.appendingPathComponent(".build/calibre-web/bin/cps") }

    /// Whether calibre-web is installed in the venv (and calibredb, to make its library).
    public static var isInstalled: Bool {
        FileManager.default.isExecutableFile(atPath: program.path) && CalibreServer.isInstalled
    }

    private let process: RunningProcess
    /// The server's root, `http://127.0.0.1:PORT`.
    public let baseURL: String
    /// calibre-web's own log, where it writes each failed login.
    public let logFile: URL

    private init(process: RunningProcess, port: Int, logFile: URL) {
        self.process = process
        self.baseURL = "http://127.0.0.1:\(port)"
        self.logFile = logFile
    }

    /// How many times calibre-web has logged a failed OPDS login (`OPDS Login failed for user …`).
    /// - Throws: When its log cannot be read (a missing log is not "no failures").
    public func failedLogins() throws -> Int {
        try String(contentsOf: logFile, encoding: .utf8).components(separatedBy: "OPDS Login failed").count - 1
    }

    /// Starts calibre-web and returns once it says it has started.
    /// - Parameters:
    ///   - library: A calibre library folder (`metadata.db`).
    ///   - admin: The password of its `admin` user.
    ///   - anonymous: Whether its catalogue may be browsed without a login.
    ///   - guestDownloads: Whether its Guest user (anonymous browsing) may download books too.
    ///   - booksPerPage: Books per page of every list, the OPDS feeds' included.
    ///   - workDirectory: Where its settings, log and state go.
    public static func start(
        library: URL, admin: String, anonymous: Bool, guestDownloads: Bool = false, booksPerPage: Int, workDirectory: URL
    ) async throws -> CalibreWeb {
        let port = try await TestHTTPServer.freePort()
        let home = workDirectory.appendingPathComponent("calibre-web-\(port)", isDirectory: true)
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let settings = home.appendingPathComponent("app.db")
        let environment = ["CALIBRE_DBPATH": home.path, "HOME": home.path]
        // `-s` makes the settings database and sets the admin's password, then exits
        let made = try await ProcessRunner.run(at: program, ["-p", settings.path, "-s", "admin:\(admin)"], environment: environment)
        guard made.status == 0 else { throw ProcessRunnerError(message: "cps -s failed: \(made.stderr) \(made.stdout)") }
        let update = """
            import sqlite3, sys
            c = sqlite3.connect(sys.argv[1])
            c.execute("update settings set config_calibre_dir = ?, config_port = ?, config_books_per_page = ?, config_anonbrowse = ?",
                      (sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])))
            if sys.argv[6] == "1":
                c.execute("update user set role = role | 2 where name = 'Guest'")  # ROLE_DOWNLOAD
            c.commit()
            """
        let configured = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/usr/bin/python3"),
            [
                "-c", update, settings.path, library.path, "\(port)", "\(booksPerPage)", anonymous ? "1" : "0", guestDownloads ? "1" : "0",
            ])
        guard configured.status == 0 else { throw ProcessRunnerError(message: "configuring calibre-web failed: \(configured.stderr)") }
        let log = home.appendingPathComponent("calibre-web.log")
        let process = try ProcessRunner.launch(
            at: program, ["-p", settings.path, "-i", "127.0.0.1", "-o", log.path], environment: environment, mergingErrors: true,
            timeLimit: .seconds(600))
        let server = CalibreWeb(process: process, port: port, logFile: log)
        guard await process.line(containing: "server started") != nil else {
            await server.stop()
            throw ProcessRunnerError(message: "calibre-web did not start: \(await process.wait().stdout)")
        }
        return server
    }

    /// Starts calibre-web, runs `body` with it, and stops it however `body` ends.
    public static func with<T>(
        library: URL, admin: String, anonymous: Bool, guestDownloads: Bool = false, booksPerPage: Int, workDirectory: URL,
        _ body: (CalibreWeb) async throws -> T
    ) async throws -> T {
        let server = try await start(
            library: library, admin: admin, anonymous: anonymous, guestDownloads: guestDownloads, booksPerPage: booksPerPage,
            workDirectory: workDirectory)
        return try await running(server, stop: { await $0.stop() }, body)
    }

    /// Stops the server and waits for it to exit.
    public func stop() async {
        process.send(SIGKILL)
        _ = await process.wait()
    }
}
