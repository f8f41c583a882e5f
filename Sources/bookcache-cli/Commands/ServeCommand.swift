import ArgumentParser
import BookCache
import BookCacheHTTP
import DownloadQueue
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: Localized.text(
            "Run the download manager service: a persistent queue, scheduled syncs, an HTTP API, a web page and an OPDS catalogue."),
        discussion: """
            Jobs posted to the API (or added with 'bookcache queue add') are kept in the cache's \
            database and end cached, failed or cancelled through restarts and kills; downloads that \
            cannot reach their server wait for the network. The API needs 'Authorization: Bearer TOKEN' \
            (the token is in CACHE/service.token, printed by --print-token); the web page is opened \
            with the one-time login link printed at start. E-readers browse and download the cached books \
            from the OPDS catalogue at /opds (OPDS 1.2) and /opds/v2 (OPDS 2.0) with the reader login set by \
            --opds-password; other devices reach the service by a --host-name. SIGTERM or SIGINT stops the \
            service; unfinished jobs stay queued and their partial files are resumed at the next start.
            """
    )

    @OptionGroup var global: GlobalOptions

    @Option(help: ArgumentHelp("The address to listen on: HOST:PORT (port 0 picks a free one).", valueName: "host:port"))
    var listen = "127.0.0.1:8787"

    @Flag(help: "Allow a --listen address other than loopback (anyone who can reach it and has the token can use the cache).")
    var allowRemote = false

    @Option(help: "Downloads at once (1–64; default: the cache's concurrency setting, else 4).")
    var concurrency: Int?

    @Option(help: "Connections open at once (default: the open-file limit less 256, at most 16384); more wait until one closes.")
    var maxConnections: Int?

    @Option(
        help:
            "Seconds a connection may take to send a request's head or its body, or stay idle between requests, before it is closed (1–3600)."
    )
    var idleTimeout = 30

    @Option(help: "Event streams (/api/v1/events) open at once (1–100000); another is answered 503.")
    var maxEventStreams = 512

    @Option(
        name: .customLong("host-name"),
        help: ArgumentHelp(
            "Another name or address the service answers to (repeatable): this machine's name or LAN address, for e-readers and browsers on other devices.",
            valueName: "name"))
    var hostNames: [String] = []

    @Flag(
        help:
            "Set the OPDS catalogue's reader login (for e-readers, at /opds): the password is read from standard input (asked for twice, unshown, on a terminal) and kept hashed; then exit."
    )
    var opdsPassword = false

    @Option(help: ArgumentHelp("The user name of the reader login --opds-password sets.", valueName: "name"))
    var opdsUser = "reader"

    @Flag(help: "Remove the OPDS reader login and exit (the catalogue then takes only the token and the page's session).")
    var noOpdsPassword = false

    @Flag(help: "Print the API token (making it when there is none) and exit.")
    var printToken = false

    @Flag(help: "Print a new one-time login link for the web page of the running service and exit.")
    var loginLink = false

    func run() async throws {
        let root = CacheLayout.defaultRoot(explicit: global.cacheDir)
        if opdsPassword || noOpdsPassword {
            try Self.setReaderLogin(root, user: noOpdsPassword ? nil : opdsUser)
            return
        }
        if printToken || loginLink {
            let access = try Self.access(root)
            if printToken {
                Terminal.write(access.token)
                return
            }
            let client = try await ServiceClient.connect(cacheRoot: root)
            struct Link: Decodable { var url: String }
            let link: Link = try await client.send("POST", "/api/v1/login-links")
            Terminal.write(link.url)
            return
        }

        let (host, port) = try Self.parseListen(listen)
        let loopback = ["127.0.0.1", "localhost", "::1"].contains(host) || host.hasPrefix("127.")
        if !loopback && !allowRemote {
            throw ValidationError("--listen \(listen) is not a loopback address; add --allow-remote to serve other machines")
        }
        if let concurrency, !(1...64).contains(concurrency) { throw ValidationError("--concurrency must be between 1 and 64") }
        if !(1...3600).contains(idleTimeout) { throw ValidationError("--idle-timeout must be between 1 and 3600 seconds") }
        if !(1...100_000).contains(maxEventStreams) { throw ValidationError("--max-event-streams must be between 1 and 100000") }
        for name in hostNames where !Self.isHostName(name) {
            throw ValidationError(
                "--host-name \(name) is not a host name or an IP address (letters, digits, '-', '.', or an IPv6 address in [ ])")
        }
        // As nginx and Go do: the soft open-file limit (1024 under systemd) up to the hard one,
        // and connections capped below it, so idle clients cannot use up the descriptors that
        // downloads, the index and the listening socket need.
        let openFiles = Self.raiseOpenFileLimit()
        let connections = maxConnections ?? max(16, min(openFiles - 256, 16_384))
        if let maxConnections, !(1...max(1, openFiles - 64)).contains(maxConnections) {
            throw ValidationError(
                "--max-connections must be between 1 and \(max(1, openFiles - 64)) (the open-file limit, \(openFiles), less 64)")
        }
        let (concurrency, retries) = try global.runDefaults(concurrency: self.concurrency, retries: nil)
        // Connection failures are the service's to wait out (waiting-for-network, for as long as
        // it takes), not the queue's to retry three times.
        let manager = try global.makeManager(concurrency: concurrency, retries: retries, retryConnectionFailures: false, service: true)
        let access = try Self.access(root)
        if !loopback {
            Terminal.writeError(
                "warning: serving on \(listen): anyone who can reach this address and has the token can fill and empty the cache; prefer a loopback address behind an SSH tunnel or a TLS proxy"
            )
        }
        let logger = Logger(label: "bookcache.serve")
        // As many jobs in flight as keep every transfer busy while earlier books are validated
        // and published (the manager's pipeline depth).
        let service = DownloadService(manager: manager, configuration: .init(concurrency: manager.pipelineDepth), logger: logger)
        let server = APIServer(
            service: service, access: access,
            options: .init(
                host: host, port: port, maxConnections: connections, idleTimeout: .seconds(idleTimeout), bodyTimeout: .seconds(idleTimeout),
                maxEventStreams: maxEventStreams, hostNames: hostNames.map { $0.lowercased() }),
            logger: logger)
        let pid = getpid()
        let shownHost = host.contains(":") ? "[\(host)]" : host
        do {
            try await server.run { port in
                Self.announce(host: shownHost, port: port, root: root, access: access, hostNames: hostNames, pid: pid)
            }
        } catch {
            ServiceInfo.remove(in: root, pid: pid)
            Terminal.writeError("error: the service stopped: \(error)")
            throw ExitCode(69)
        }
        ServiceInfo.remove(in: root, pid: pid)
        Terminal.write("bookcache serve: stopped; unfinished jobs stay queued")
    }

    /// Says where the service listens, once it does: its address (kept in `service.json` for
    /// `bookcache queue`), a login link for the page, the token's file and the catalogue's address.
    static func announce(host shownHost: String, port: Int, root: URL, access: ServiceAccess, hostNames: [String], pid: Int32) {
        let url = "http://\(shownHost):\(port)"
        do {
            try ServiceInfo(url: url, pid: pid).write(in: root)
        } catch {
            Terminal.writeError(
                "warning: cannot write \(ServiceInfo.file(in: root).path) (\(error)); 'bookcache queue' will not find this service")
        }
        Terminal.write("bookcache serve: \(root.path) at \(url)")
        Terminal.write("web page (one-time login link): \(url)/login?code=\(access.newLoginCode())")
        Terminal.write("API token: \(ServiceInfo.tokenFile(in: root).path)")
        let catalogueHost = hostNames.first.map { $0.contains(":") && !$0.hasPrefix("[") ? "[\($0)]" : $0 } ?? shownHost
        Terminal.write("OPDS catalogue for e-readers: http://\(catalogueHost):\(port)/opds (OPDS 2: /opds/v2)")
        do throws(ServiceSetupError) {
            if let login = try ReaderPassword.read(in: root) {
                Terminal.write("  reader login: \(login.user) (bookcache serve --opds-password changes it)")
            } else {
                Terminal.write("  no reader login yet: set one with bookcache serve --opds-password")
            }
        } catch {
            Terminal.writeError("warning: \(error.message)")
        }
    }

    /// The cache folder and its token (made on first use); exit 73 (cannot create) when either fails.
    static func access(_ root: URL) throws -> ServiceAccess {
        do {
            // 0700 from the first missing parent down, as the library makes the folders it creates.
            try FileSystem.createDirectory(root)
        } catch {
            Terminal.writeError("error: cannot create the cache directory \(root.path) (\(error)); choose another with --cache-dir")
            throw ExitCode(73)
        }
        if let problem = CacheLayout(root: root).untrustedFolderProblem() {
            Terminal.writeError("error: the cache directory \(root.path) cannot be used: \(problem); choose another with --cache-dir")
            throw ExitCode(73)
        }
        do {
            return try ServiceAccess(tokenFile: ServiceInfo.tokenFile(in: root))
        } catch {
            Terminal.writeError("error: \(error.message)")
            throw ExitCode(73)
        }
    }

    /// Sets (or, with no `user`, removes) the OPDS reader login of the cache at `root`.
    static func setReaderLogin(_ root: URL, user: String?) throws {
        do {
            guard let user else {
                let removed = try ReaderPassword.remove(in: root)
                Terminal.write(removed ? "removed the OPDS reader login" : "there was no OPDS reader login")
                return
            }
            let password: String
            if Terminal.stdinIsTerminal {
                let first = try readUnshown("OPDS reader password for \(user): ")
                let again = try readUnshown("again: ")
                guard first == again else { throw ServiceSetupError("the two passwords differ; nothing was changed") }
                password = first
            } else {
                guard let line = readLine(strippingNewline: true) else {
                    throw ServiceSetupError("give the password on standard input (one line)")
                }
                password = line
            }
            let login = try ReaderPassword(user: user, password: password)
            _ = try access(root)  // the cache folder, 0700
            try login.write(in: root)
            Terminal.write("set the OPDS reader login: user \(user); e-readers log in with it at http://HOST:PORT/opds")
        } catch let error as ServiceSetupError {
            Terminal.writeError("error: \(error.message)")
            throw ExitCode(64)
        }
    }

    /// A line read from the terminal with echo off.
    private static func readUnshown(_ prompt: String) throws -> String {
        FileHandle.standardError.write(Data(prompt.utf8))
        var saved = termios()
        let canHide = tcgetattr(STDIN_FILENO, &saved) == 0
        if canHide {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        }
        defer {
            if canHide { tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
            FileHandle.standardError.write(Data("\n".utf8))
        }
        guard let line = readLine(strippingNewline: true) else { throw ServiceSetupError("no password was typed") }
        return line
    }

    /// A DNS name, an IPv4 address, or an IPv6 address (bare or in brackets).
    static func isHostName(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 253 else { return false }
        let bare = name.hasPrefix("[") && name.hasSuffix("]") ? String(name.dropFirst().dropLast()) : name
        if bare.contains(":") {
            return bare.utf8.allSatisfy { byte in
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte | 0x20)
                    || byte == UInt8(ascii: ":") || byte == UInt8(ascii: ".")
            }
        }
        return name.split(separator: ".", omittingEmptySubsequences: false).allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.utf8.allSatisfy { byte in
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte | 0x20)
                        || byte == UInt8(ascii: "-")
                }
        }
    }

    /// Raises the soft limit of open files to the hard limit and returns the limit now in force.
    static func raiseOpenFileLimit() -> Int {
        var limit = rlimit()
        #if canImport(Glibc)
            let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
            let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0 else { return 1024 }
        if limit.rlim_cur < limit.rlim_max {
            var raised = limit
            raised.rlim_cur = limit.rlim_max
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return limit.rlim_cur == rlim_t.max ? 1 << 20 : Int(clamping: limit.rlim_cur)
    }

    /// `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (loopback).
    static func parseListen(_ text: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ValidationError("--listen needs HOST:PORT, such as 127.0.0.1:8787")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "127.0.0.1" : host, port)
    }
}
