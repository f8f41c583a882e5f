import DownloadQueue
import Foundation

/// Settings kept with a cache in `config.json`, set with `bookcache config set KEY VALUE`.
///
/// | key | meaning |
/// | --- | --- |
/// | `max-size` | the size budget; least-recently-used books are evicted to stay under it |
/// | `keep` | the most books kept ("at most N books offline") |
/// | `reserve` | free space to leave on the filesystem when a book's size is known |
/// | `proxy` | the proxy for every download, as curl's `--proxy` takes it (`""`: none, whatever the environment says) |
/// | `noproxy` | hosts reached without the proxy, as curl's `--noproxy` |
/// | `limit-rate` | the most bytes per second one download receives, such as `2MB` |
/// | `netrc` | a netrc file whose logins are answered to their own hosts |
/// | `cacert` | a PEM file of certificate authorities to trust instead of the system's |
/// | `strict` | `true`: refuse books that break packaging rules no reader needs (EPUB `mimetype` rules, a rebuilt PDF cross-reference table), as `--strict` does |
/// | `concurrency` | downloads at once for `download`, `sync` and `serve` when `--concurrency` is not given (1–64; 4 by default) |
/// | `retries` | attempts in a row without progress after a failure, when `--retries` is not given (0–20; 3 by default) |
/// | `validation-workers` | books judged at once, each in a worker process of its own (1–16; 2 by default) |
/// | `validation-memory` | the address space a worker may use to judge a book, before three times the book's size (at least 256 MiB; 1 GiB by default) |
/// | `validation-cpu` | the CPU seconds a book may take to judge, before one second per MiB (1–3600; 20 by default) |
///
/// The command line's options of the same names come first; `proxy` and `noproxy` come before
/// the environment's `http_proxy`, `https_proxy` and `no_proxy`.
public struct CacheSettings: Codable, Sendable, Hashable {
    /// The size budget in bytes.
    public var maxSize: Int64?
    /// The most books kept.
    public var keep: Int?
    /// Free space to leave, in bytes.
    public var reserve: Int64?
    /// The proxy (`http://host:3128`, `socks5h://host:1080`, `host:port`); `""` for none.
    public var proxy: String?
    /// Hosts reached without the proxy, comma-separated, `*` for all.
    public var noProxy: String?
    /// The most bytes per second one download receives.
    public var limitRate: Int64?
    /// An absolute path to a netrc file.
    public var netrc: String?
    /// An absolute path to a PEM file of certificate authorities.
    public var cacert: String?
    /// Refuse books with validation warnings.
    public var strict: Bool?
    /// Downloads at once, when the command line does not say.
    public var concurrency: Int?
    /// Retries after a failure, when the command line does not say.
    public var retries: Int?
    /// Books judged at once, each in a worker process (``ValidationWorkers/count``).
    public var validationWorkers: Int?
    /// The address space a worker may use, before a book's share (``ValidationWorkers/memoryBytes``).
    public var validationMemory: Int64?
    /// The CPU seconds a book may take, before its share (``ValidationWorkers/cpuSeconds``).
    public var validationCPU: Int?

    /// Empty settings: no budget, no count limit, the default reserve.
    public init(maxSize: Int64? = nil, keep: Int? = nil, reserve: Int64? = nil) {
        self.maxSize = maxSize
        self.keep = keep
        self.reserve = reserve
    }

    /// The keys `config` accepts.
    public static let keys = [
        "max-size", "keep", "reserve", "proxy", "noproxy", "limit-rate", "netrc", "cacert", "strict", "concurrency", "retries",
        "validation-workers", "validation-memory", "validation-cpu",
    ]

    /// Sets a key from its text form (`2GiB`, `50`).
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/invalidArgument``.
    public mutating func set(_ key: String, to text: String) throws(BookCacheError) {
        switch key {
        case "max-size": maxSize = try ByteSize(parsing: text).bytes
        case "reserve": reserve = try ByteSize(parsing: text).bytes
        case "keep": keep = try Self.parseCount(text)
        case "proxy": proxy = try Self.parseProxy(text)
        case "noproxy": noProxy = text.trimmingCharacters(in: .whitespaces)
        case "limit-rate": limitRate = try Self.parseRate(text)
        case "netrc": netrc = try Self.parsePath(text, for: key)
        case "cacert": cacert = try Self.parsePath(text, for: key)
        case "strict": strict = try Self.parseBool(text, for: key)
        case "concurrency": concurrency = try Self.parseNumber(text, for: key, in: 1...64)
        case "retries": retries = try Self.parseNumber(text, for: key, in: 0...20)
        case "validation-workers": validationWorkers = try Self.parseNumber(text, for: key, in: 1...16)
        case "validation-memory":
            let bytes = try ByteSize(parsing: text).bytes
            guard bytes >= 256 << 20 else {
                throw .invalidArgument(
                    "validation-memory must be at least 256 MiB (a worker needs that much before any book), got '\(text)'")
            }
            validationMemory = bytes
        case "validation-cpu": validationCPU = try Self.parseNumber(text, for: key, in: 1...3600)
        default: throw Self.unknown(key)
        }
    }

    /// A whole number in `range`, for `key`.
    public static func parseNumber(_ text: String, for key: String, in range: ClosedRange<Int>) throws(BookCacheError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
            throw .invalidArgument(
                "invalid \(key) '\(text.debugEscaped)': use a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }

    /// Removes a key, returning it to its default.
    public mutating func unset(_ key: String) throws(BookCacheError) {
        switch key {
        case "max-size": maxSize = nil
        case "reserve": reserve = nil
        case "keep": keep = nil
        case "proxy": proxy = nil
        case "noproxy": noProxy = nil
        case "limit-rate": limitRate = nil
        case "netrc": netrc = nil
        case "cacert": cacert = nil
        case "strict": strict = nil
        case "concurrency": concurrency = nil
        case "retries": retries = nil
        case "validation-workers": validationWorkers = nil
        case "validation-memory": validationMemory = nil
        case "validation-cpu": validationCPU = nil
        default: throw Self.unknown(key)
        }
    }

    /// The text form of a key's value, or `nil` when it is not set.
    public func value(of key: String) throws(BookCacheError) -> String? {
        switch key {
        case "max-size": return maxSize.map { ByteSize(bytes: $0).exactDescription }
        case "reserve": return reserve.map { ByteSize(bytes: $0).exactDescription }
        case "keep": return keep.map(String.init)
        // A proxy's password is never printed.
        case "proxy": return proxy.map { $0.isEmpty ? "\"\" (none)" : Self.redactedProxy($0) }
        case "noproxy": return noProxy
        case "limit-rate": return limitRate.map { ByteSize(bytes: $0).exactDescription }
        case "netrc": return netrc
        case "cacert": return cacert
        case "strict": return strict.map { $0 ? "true" : "false" }
        case "concurrency": return concurrency.map(String.init)
        case "retries": return retries.map(String.init)
        case "validation-workers": return validationWorkers.map(String.init)
        case "validation-memory": return validationMemory.map { ByteSize(bytes: $0).exactDescription }
        case "validation-cpu": return validationCPU.map(String.init)
        default: throw Self.unknown(key)
        }
    }

    /// `true` or `false` (also `yes`/`no`, `on`/`off`, `1`/`0`).
    public static func parseBool(_ text: String, for key: String) throws(BookCacheError) -> Bool {
        switch text.trimmingCharacters(in: .whitespaces).lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw .invalidArgument("invalid value '\(text.debugEscaped)' for \(key): use true or false")
        }
    }

    /// A count typed by a person: a whole number from 0 to 10,000,000.
    public static func parseCount(_ text: String) throws(BookCacheError) -> Int {
        guard let value = Int(text.trimmingCharacters(in: .whitespaces)), (0...10_000_000).contains(value) else {
            throw .invalidArgument("invalid count '\(text.debugEscaped)': use a whole number from 0 to 10000000")
        }
        return value
    }

    /// A proxy as curl takes it: `scheme://[user:password@]host[:port]` (http, https, socks4,
    /// socks4a, socks5, socks5h) or `host[:port]`; `""` for none.
    public static func parseProxy(_ text: String) throws(BookCacheError) -> String {
        let text = text.trimmingCharacters(in: .whitespaces)
        if text.isEmpty { return "" }
        let schemes = ["http", "https", "socks4", "socks4a", "socks5", "socks5h"]
        let candidate = text.contains("://") ? text : "http://" + text
        guard let url = URL(string: candidate), let scheme = url.scheme?.lowercased(), schemes.contains(scheme),
            let host = url.host, !host.isEmpty
        else {
            throw .invalidArgument(
                "invalid proxy '\(redactedProxy(text).debugEscaped)': write it as http://HOST:PORT (or https, socks5h…), or \"\" for none")
        }
        return text
    }

    /// The proxy with any password replaced by `***`.
    public static func redactedProxy(_ proxy: String) -> String {
        guard proxy.contains("@") else { return proxy }
        let candidate = proxy.contains("://") ? proxy : "http://" + proxy
        guard let url = URL(string: candidate) else { return "<proxy with a login>" }
        let shown = URLRedaction.redacted(url)
        return proxy.contains("://") ? shown : String(shown.dropFirst("http://".count))
    }

    /// A download rate such as `2MB` or `500KiB` (bytes per second), at least 1 KB.
    public static func parseRate(_ text: String) throws(BookCacheError) -> Int64 {
        let bytes = try ByteSize(parsing: text).bytes
        guard bytes >= 1000 else {
            throw .invalidArgument("a rate limit of \(bytes) bytes per second is too low; give at least 1KB, such as 500KB or 2MB")
        }
        return bytes
    }

    /// An absolute path (a leading `~/` is the home folder).
    public static func parsePath(_ text: String, for key: String) throws(BookCacheError) -> String {
        let path = text.hasPrefix("~/") ? NSHomeDirectory() + text.dropFirst(1) : text
        guard path.hasPrefix("/") else {
            throw .invalidArgument("\(key) needs an absolute path (such as ~/.netrc or /etc/ssl/my-ca.pem), not '\(text.debugEscaped)'")
        }
        return path
    }

    /// Reads the settings kept with the cache at `root` (none when it has no `config.json`).
    /// - Throws: ``BookCacheError`` of kind ``BookCacheError/Kind/settingsUnusable`` when the file
    ///   cannot be read or parsed.
    public static func read(cacheRoot root: URL) throws(BookCacheError) -> CacheSettings {
        try SettingsStore(layout: CacheLayout(root: root)).read()
    }

    private static func unknown(_ key: String) -> BookCacheError {
        .invalidArgument("unknown setting '\(key.debugEscaped)'; the settings are \(keys.joined(separator: ", "))")
    }
}

extension ByteSize {
    /// The size in the largest binary unit that divides it exactly (`2GiB`), else in bytes.
    public var exactDescription: String {
        // The shortest exact form, decimal or binary: 2G is echoed as 2GB (as `stats` says 2.0 GB),
        // not as 1953125KiB; 2GiB stays 2GiB.
        let units: [(String, Int64)] = [
            ("TiB", 1 << 40), ("TB", 1_000_000_000_000), ("GiB", 1 << 30), ("GB", 1_000_000_000), ("MiB", 1 << 20), ("MB", 1_000_000),
            ("KiB", 1 << 10), ("KB", 1000),
        ]
        let exact = units.filter { bytes >= $0.1 && bytes % $0.1 == 0 }.map { "\(bytes / $0.1)\($0.0)" }
        return exact.min { $0.count < $1.count } ?? "\(bytes)B"
    }
}
