import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Who may read the OPDS catalogue: an e-reader with the reader login (HTTP Basic, checked
/// against ``ReaderPassword``), or a holder of the API token or of the page's session.
///
/// The login file is read again when it changes (a password set while the service runs takes
/// effect at once). Every cost a stranger can cause is bounded before it is paid (``Gate``): a
/// login that passed is remembered for ``verifiedLifetime`` by the SHA-256 of its header, so a
/// reader's every cover does not cost a PBKDF2, and it keeps working while its address is locked
/// out; an attempt is counted as a failure *before* it is hashed (and forgiven when it passes), so
/// after ``maxFailures`` in ``failureWindow`` a network (an IPv4 /24, an IPv6 /64: one machine's
/// addresses are counted together) is answered `429` with `Retry-After` however many it sends at
/// once; and logins are hashed in two lanes of one each — one for networks with a recent wrong
/// login, one for those without — the rest answered `429` with `Retry-After: 1`, so wrong logins
/// from many addresses hold one core, a reader's first login is not kept waiting behind them, and
/// the API and downloads never wait behind either. A password changed while a login is hashed
/// voids that hash (a generation number): the old password opens nothing once the file changed.
final class ReaderLogins: Sendable {
    static let verifiedLifetime: Duration = .seconds(15 * 60)
    static let maxVerified = 64
    static let maxFailures = 10
    static let failureWindow: Duration = .seconds(60)
    /// Client addresses whose failures are tracked at once; the oldest is forgotten first.
    static let maxTrackedClients = 4096
    /// Logins hashed at once in each lane (PBKDF2 holds a core for about 0.1 s).
    static let maxHashing = 1

    private let cacheRoot: URL
    /// The login file's path, made once (its folder's layout is built from URLs).
    private let loginPath: String
    private let now: @Sendable () -> ContinuousClock.Instant

    private struct Loaded {
        /// The login file's identity (inode, size, modification time, mode) when last read, and its login.
        var stamp: [Int64] = []
        var login: ReaderPassword?
        var loadProblem: String?
    }

    private let loaded = Mutex(Loaded())
    private let gate = Mutex(Gate())

    init(cacheRoot: URL, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.cacheRoot = cacheRoot
        self.loginPath = CacheLayout(root: cacheRoot).readerPasswordFile.path
        self.now = now
    }

    /// What a Basic login proves.
    enum Outcome: Equatable {
        case reader
        case wrong
        /// No reader login is set (or its file cannot be used: the reason).
        case notSet(String?)
        /// Too many wrong logins from this address.
        case tooMany(retryAfter: Int)
        /// Other logins are being checked; try again shortly.
        case busy(retryAfter: Int)
    }

    /// Which logins may be hashed: a value type with no I/O, tested on its own. Each check is
    /// ``admit(client:key:at:)`` then, for ``Admission/hash``, ``finish(client:key:matched:at:)``.
    struct Gate {
        var verified: [String: ContinuousClock.Instant] = [:]
        var failures: [String: (count: Int, since: ContinuousClock.Instant)] = [:]
        /// Logins being hashed in each lane: for networks with a recent failure, and without.
        var hashing = (failing: 0, clean: 0)
        /// The login's generation: changed with the password, it voids hashes begun before.
        var generation = 0

        enum Admission: Equatable {
            /// Verified recently: no hash needed.
            case known
            /// Locked out for this many seconds.
            case blocked(Int)
            /// The hashing lane is full.
            case busy
            /// Hash it, in the lane it was given; the attempt is already counted as a failure.
            case hash(Lane, generation: Int)
        }

        enum Lane: Equatable {
            case failing
            case clean
        }

        /// The password changed: what was verified is forgotten, and hashes under way are void.
        mutating func loginChanged() {
            verified = [:]
            generation += 1
        }

        mutating func admit(client: String, key: String, at: ContinuousClock.Instant) -> Admission {
            verified = verified.filter { at - $0.value < ReaderLogins.verifiedLifetime }
            if verified[key] != nil { return .known }
            let network = ReaderLogins.network(of: client)
            if let entry = failures[network] {
                let age = at - entry.since
                if age >= ReaderLogins.failureWindow {
                    failures.removeValue(forKey: network)
                } else if entry.count >= ReaderLogins.maxFailures {
                    return .blocked(max(1, Int((ReaderLogins.failureWindow - age).components.seconds) + 1))
                }
            }
            let lane: Lane = (failures[network]?.count ?? 0) == 0 ? .clean : .failing
            switch lane {
            case .clean:
                guard hashing.clean < ReaderLogins.maxHashing else { return .busy }
                hashing.clean += 1
            case .failing:
                guard hashing.failing < ReaderLogins.maxHashing else { return .busy }
                hashing.failing += 1
            }
            recordFailure(network, at: at)
            return .hash(lane, generation: generation)
        }

        /// A hash begun in `lane` under `generation` ended; returns whether the login passed:
        /// it matched, and the password did not change meanwhile.
        @discardableResult
        mutating func finish(
            client: String, key: String, matched: Bool, lane: Lane, generation: Int, at: ContinuousClock.Instant
        ) -> Bool {
            switch lane {
            case .clean: hashing.clean -= 1
            case .failing: hashing.failing -= 1
            }
            guard matched, generation == self.generation else { return false }
            let client = ReaderLogins.network(of: client)
            if var entry = failures[client] {
                entry.count -= 1
                failures[client] = entry
            }
            if verified.count >= ReaderLogins.maxVerified, let oldest = verified.min(by: { $0.value < $1.value })?.key {
                verified.removeValue(forKey: oldest)
            }
            verified[key] = at
            return true
        }

        private mutating func recordFailure(_ client: String, at: ContinuousClock.Instant) {
            if var entry = failures[client], at - entry.since < ReaderLogins.failureWindow {
                entry.count += 1
                failures[client] = entry
                return
            }
            if failures.count >= ReaderLogins.maxTrackedClients {
                failures = failures.filter { at - $0.value.since < ReaderLogins.failureWindow }
                if failures.count >= ReaderLogins.maxTrackedClients, let oldest = failures.min(by: { $0.value.since < $1.value.since })?.key
                {
                    failures.removeValue(forKey: oldest)
                }
            }
            failures[client] = (1, at)
        }
    }

    /// Checks `authorization` (an `Authorization` value with the Basic scheme) from `client`.
    func check(basic authorization: String, client: String) async -> Outcome {
        let at = now()
        let (login, problem) = current()
        guard let login else { return .notSet(problem) }
        let key = Self.key(authorization)
        switch gate.withLock({ $0.admit(client: client, key: key, at: at) }) {
        case .known: return .reader
        case .blocked(let wait): return .tooMany(retryAfter: wait)
        case .busy: return .busy(retryAfter: 1)
        case .hash(let lane, let generation):
            guard let (user, password) = Self.decodeBasic(authorization) else {
                gate.withLock { $0.finish(client: client, key: key, matched: false, lane: lane, generation: generation, at: at) }
                return .wrong
            }
            // PBKDF2 takes a while: on the blocking pool, not an event loop, one a lane at a time.
            let matches = await BlockingWork.run { login.verify(user: user, password: password) }
            // The file is looked at again: a password set while this one was hashed voids it.
            _ = current()
            let passed = gate.withLock { $0.finish(client: client, key: key, matched: matches, lane: lane, generation: generation, at: at) }
            return passed ? .reader : .wrong
        }
    }

    /// The network an address is counted with: its /24 for IPv4 (an IPv4-mapped IPv6 address too),
    /// its /64 for IPv6 — what one machine or home can easily change within; the text as it is
    /// for anything else.
    static func network(of client: String) -> String {
        var v6 = in6_addr()
        var v4 = in_addr()
        if inet_pton(AF_INET, client, &v4) == 1 {
            let bytes = withUnsafeBytes(of: v4) { Array($0) }
            return "\(bytes[0]).\(bytes[1]).\(bytes[2]).0/24"
        }
        if inet_pton(AF_INET6, client, &v6) == 1 {
            let bytes = withUnsafeBytes(of: v6) { Array($0) }
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return "\(bytes[12]).\(bytes[13]).\(bytes[14]).0/24"
            }
            return bytes[0..<8].map { String(format: "%02x", $0) }.joined() + "::/64"
        }
        return client
    }

    /// Whether `authorization` is a Basic login that passed ``check(basic:client:)`` within
    /// ``verifiedLifetime`` and is still the reader login on disk: no hash, no count, no wait (for
    /// ``FastFileRoute``; anything else is the door's to answer).
    func knows(basic authorization: String) -> Bool {
        guard current().0 != nil else { return false }
        let key = Self.key(authorization)
        let at = now()
        return gate.withLock { gate in gate.verified[key].map { at - $0 < Self.verifiedLifetime } ?? false }
    }

    /// Whether `authorization` names the Basic scheme (its first five letters, in any case): what
    /// the catalogue's door checks as a reader login, never as the token. Only those letters are
    /// looked at, whatever the value's length.
    static func isBasic(_ authorization: String) -> Bool {
        let scheme = Array(authorization.utf8.prefix(5))
        return scheme.count == 5 && zip(scheme, "basic".utf8).allSatisfy { $0 | 0x20 == $1 }
    }

    /// What a login is remembered by: the SHA-256 of its header. At most 8 KiB of it is hashed: a
    /// longer one is no login (``decodeBasic(_:)`` takes 4 KiB at most).
    private static func key(_ authorization: String) -> String {
        SHA256Hasher.hex(of: Data(authorization.utf8.prefix(8192)))
    }

    /// The login on disk, read again when the file changed.
    private func current() -> (ReaderPassword?, String?) {
        // One stat a request (every file the catalogue's door lets a reader fetch asks): no
        // attribute dictionary. A file that cannot be stat'ed has no stamp and is read (and refused).
        var info = stat()
        let stamp: [Int64] =
            stat(loginPath, &info) == 0
            ? [
                Int64(info.st_ino), Int64(info.st_size), Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec),
                Int64(info.st_mode & 0o7777),
            ] : []
        if let cached = loaded.withLock({ $0.stamp == stamp && !stamp.isEmpty ? ($0.login, $0.loadProblem) : nil }) {
            return cached
        }
        var login: ReaderPassword?
        var problem: String?
        do {
            login = try ReaderPassword.read(in: cacheRoot)
        } catch {
            problem = error.message
        }
        let changed = loaded.withLock { loaded in
            defer { (loaded.stamp, loaded.login, loaded.loadProblem) = (stamp, login, problem) }
            return loaded.login != login
        }
        if changed { gate.withLock { $0.loginChanged() } }
        return (login, problem)
    }

    /// User and password of a `Basic` value (RFC 7617: base64 of `user:password`, UTF-8);
    /// `nil` when it is not one.
    static func decodeBasic(_ authorization: String) -> (String, String)? {
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic", parts[1].utf8.count <= 4096,
            let data = Data(base64Encoded: String(HTTPText.trimmed(parts[1]))),
            let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":")
        else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }
}

/// The OPDS catalogue's door: GET and HEAD only; an e-reader's Basic login, the API token, or
/// the page's session (held to the page's own origin as the API holds it). Anything else is
/// `401` with a Basic challenge, so a reader asks its user for the login.
struct OPDSAccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: ServiceAccess
    let readers: ReaderLogins
    let client: @Sendable (Context) -> String
    let logger: Logger

    static var challenge: String { #"Basic realm="BookCache OPDS", charset="UTF-8""# }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .get || request.method == .head else {
            var response = APIResponse.error(.methodNotAllowed, kind: "methodNotAllowed", "the OPDS catalogue is read with GET")
            response.headers[.allow] = "GET, HEAD"
            return response
        }
        if let authorization = request.headers[.authorization], ReaderLogins.isBasic(authorization) {
            switch await readers.check(basic: authorization, client: client(context)) {
            case .reader:
                return try await next(request, context)
            case .wrong:
                return unauthorized("the reader login is wrong; it is set with bookcache serve --opds-password")
            case .notSet(nil):
                return unauthorized("no reader login is set; set one with bookcache serve --opds-password, then log in with it")
            case .notSet(.some(let problem)):
                // The detail (a path, a decoder's words) is for the service's log, not the client.
                logger.warning("the reader login cannot be used", metadata: ["problem": "\(problem)"])
                return unauthorized(
                    "the reader login cannot be used (the service's log says why); set it again with bookcache serve --opds-password")
            case .tooMany(let wait):
                var response = APIResponse.error(
                    .tooManyRequests, kind: "tooManyLogins",
                    "too many wrong reader passwords from this address; try again in \(wait) seconds (a reader logged in already is not locked out)"
                )
                response.headers[.retryAfter] = "\(wait)"
                return response
            case .busy(let wait):
                var response = APIResponse.error(
                    .tooManyRequests, kind: "loginsBusy", "other logins are being checked; try again in \(wait) second")
                response.headers[.retryAfter] = "\(wait)"
                return response
            }
        }
        switch access.credential(of: request) {
        case .token:
            return try await next(request, context)
        case .session:
            if let refusal = RequireAccessMiddleware<Context>.crossOriginProblem(request) {
                return APIResponse.error(.forbidden, kind: "crossOrigin", refusal)
            }
            return try await next(request, context)
        case .none:
            return unauthorized("log in with the reader login (bookcache serve --opds-password sets it)")
        }
    }

    private func unauthorized(_ message: String) -> Response {
        var response = APIResponse.error(.unauthorized, kind: "unauthorized", message)
        response.headers[.wwwAuthenticate] = Self.challenge
        return response
    }
}
