import ArgumentParser
import BookCache
import BookCacheHTTP
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
        abstract: Localized.text("Run the download manager service: a persistent queue, scheduled syncs, an HTTP API and a web page."),
        discussion: """
            Jobs posted to the API (or added with 'bookcache queue add') are kept in the cache's \
            database and end cached, failed or cancelled through restarts and kills; downloads that \
            cannot reach their server wait for the network. The API needs 'Authorization: Bearer TOKEN' \
            (the token is in CACHE/service.token, printed by --print-token); the web page is opened \
            with the one-time login link printed at start. SIGTERM or SIGINT stops the service; \
            unfinished jobs stay queued and their partial files are resumed at the next start.
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

    @Flag(help: "Print the API token (making it when there is none) and exit.")
    var printToken = false

    @Flag(help: "Print a new one-time login link for the web page of the running service and exit.")
    var loginLink = false

    func run() async throws {
        let root = CacheLayout.defaultRoot(explicit: global.cacheDir)
        if printToken || loginLink {
            let access = try Self.access(root)
            if printToken {
                Terminal.write(access.token)
                return
            }
            let client = try ServiceClient.connect(cacheRoot: root)
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
        let manager = try global.makeManager(concurrency: concurrency, retries: retries, retryConnectionFailures: false)
        let access = try Self.access(root)
        if !loopback {
            Terminal.writeError(
                "warning: serving on \(listen): anyone who can reach this address and has the token can fill and empty the cache; prefer a loopback address behind an SSH tunnel or a TLS proxy"
            )
        }
        let logger = Logger(label: "bookcache.serve")
        // Twice as many jobs in flight as transfers: the manager's queue always has the next
        // one waiting, so a transfer starts the moment another ends.
        let service = DownloadService(manager: manager, configuration: .init(concurrency: concurrency * 2), logger: logger)
        let server = APIServer(
            service: service, access: access,
            options: .init(
                host: host, port: port, maxConnections: connections, idleTimeout: .seconds(idleTimeout), bodyTimeout: .seconds(idleTimeout),
                maxEventStreams: maxEventStreams),
            logger: logger)
        let pid = getpid()
        let shownHost = host.contains(":") ? "[\(host)]" : host
        do {
            try await server.run { port in
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
            }
        } catch {
            ServiceInfo.remove(in: root, pid: pid)
            Terminal.writeError("error: the service stopped: \(error)")
            throw ExitCode(69)
        }
        ServiceInfo.remove(in: root, pid: pid)
        Terminal.write("bookcache serve: stopped; unfinished jobs stay queued")
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
        do {
            return try ServiceAccess(tokenFile: ServiceInfo.tokenFile(in: root))
        } catch {
            Terminal.writeError("error: \(error.message)")
            throw ExitCode(73)
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
