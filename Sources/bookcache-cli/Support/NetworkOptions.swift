import ArgumentParser
import BookCache
import DownloadQueue
import Foundation

/// How downloads reach the network, with curl's option names: proxy, rate limit, timeouts, trust
/// and a netrc file. Each falls back to the cache's setting of the same name (`config set`).
struct ConnectionOptions: ParsableArguments {
    @Option(
        name: [.customShort("x"), .long],
        help: ArgumentHelp(
            "Use this proxy, as curl takes it: http://HOST:PORT, socks5h://HOST:PORT, or \"\" for none (default: the proxy setting, else $http_proxy / $https_proxy / $all_proxy).",
            valueName: "url"), transform: { text in try checked { () throws(BookCacheError) in try CacheSettings.parseProxy(text) } })
    var proxy: String?

    @Option(
        name: .customLong("noproxy"),
        help: ArgumentHelp(
            "Hosts to reach without the proxy, comma-separated, * for all (default: the noproxy setting, else $no_proxy).",
            valueName: "hosts"))
    var noProxy: String?

    @Option(
        name: .customLong("limit-rate"),
        help: ArgumentHelp(
            "The most each download receives per second, such as 500KB or 2MiB (default: the limit-rate setting, else none).",
            valueName: "size"), transform: { text in try checked { () throws(BookCacheError) in try CacheSettings.parseRate(text) } })
    var limitRate: Int64?

    @Option(
        name: .customLong("connect-timeout"),
        help: ArgumentHelp(
            "Seconds a connection may take to open (default 10).", valueName: "seconds"))
    var connectTimeout: Double?

    @Option(
        name: .customLong("cacert"),
        help: ArgumentHelp(
            "Trust the certificate authorities in this PEM file instead of the system's (default: the cacert setting).",
            valueName: "file"))
    var caFile: String?

    @Flag(name: .customLong("netrc"), help: "Answer a server's login request from ~/.netrc (or $NETRC), as curl --netrc does.")
    var netrc = false

    @Option(
        name: .customLong("netrc-file"),
        help: ArgumentHelp(
            "Answer logins from this netrc file (default: the netrc setting).", valueName: "file"))
    var netrcFile: String?

    func validate() throws {
        if netrc && netrcFile != nil { throw ValidationError("--netrc and --netrc-file are alternatives; give one.") }
        if let connectTimeout, !(connectTimeout > 0 && connectTimeout <= 3600) {
            throw ValidationError("--connect-timeout must be more than 0 and at most 3600 seconds, not \(connectTimeout).")
        }
        for file in [caFile, netrcPath].compactMap({ $0 }) where !FileManager.default.isReadableFile(atPath: file) {
            throw ValidationError("Cannot read \(file).")
        }
    }

    /// The netrc file named on the command line, if any.
    var netrcPath: String? {
        if let netrcFile { return netrcFile }
        guard netrc else { return nil }
        return ProcessInfo.processInfo.environment["NETRC"] ?? (NSHomeDirectory() + "/.netrc")
    }

    /// The transport's configuration: the options (when the command has them), else the cache's
    /// settings, else curl's defaults.
    static func configuration(_ options: ConnectionOptions?, settings: CacheSettings) -> CurlTransport.Configuration {
        var configuration = CurlTransport.Configuration()
        configuration.proxy = options?.proxy ?? settings.proxy
        configuration.noProxy = options?.noProxy ?? settings.noProxy
        configuration.maxReceiveBytesPerSecond = options?.limitRate ?? settings.limitRate
        if let connectTimeout = options?.connectTimeout { configuration.connectTimeout = .milliseconds(Int64(connectTimeout * 1000)) }
        configuration.caFile = options?.caFile ?? settings.cacert
        configuration.netrcFile = options?.netrcPath ?? settings.netrc
        return configuration
    }
}

/// A value parsed by the library, its error said as the option's.
private func checked<T>(_ parse: () throws(BookCacheError) -> T) throws -> T {
    do { return try parse() } catch { throw ValidationError(error.message) }
}

/// What to send to the server of the URLs given: a login and extra headers, with curl's names.
struct LoginOptions: ParsableArguments {
    @Option(
        name: [.customShort("u"), .long],
        help: ArgumentHelp(
            "A login for the URLs' host, as curl takes it (Basic or Digest, sent only to that host, when it asks).",
            valueName: "user:password"))
    var user: String?

    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp(
            "An extra request header, such as \"Authorization: Bearer TOKEN\" (repeatable); it is not sent on after a redirect to another host (curl drops only Authorization and Cookie).",
            valueName: "header"))
    var headers: [String] = []

    func validate() throws {
        _ = try parsedHeaders
    }

    /// The headers, checked.
    var parsedHeaders: [HTTPHeader] {
        get throws {
            do {
                return try headers.map { line throws(InvalidHTTPHeader) in try HTTPHeader(parsing: line) }
            } catch {
                throw ValidationError("--header: \(error.message)")
            }
        }
    }

    /// The login for `url`: `--user` when given (for the URL's origin).
    func credentials(for url: URL) -> HTTPCredentials? {
        guard let user else { return nil }
        let parts = user.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        return HTTPCredentials(user: String(parts[0]), password: parts.count > 1 ? String(parts[1]) : "", for: url)
    }
}
