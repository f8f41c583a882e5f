import BookCache
import DownloadQueue
import Foundation
import HTTPTypes
import Hummingbird
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Who may use the service: the bearer token in `CACHE/service.token` (made at first start, mode
/// 0600), and browser sessions opened with a one-time login link.
///
/// A login link works once and for ``loginLinkLifetime``; a session ends after
/// ``sessionIdleLifetime`` without a request, and every session ends when the service stops
/// (they are kept in memory only).
public final class ServiceAccess: Sendable {
    /// The token every API request carries as `Authorization: Bearer TOKEN`.
    public let token: String

    /// What the service answers to a client's challenge (`GET /api/v1/proof?nonce=NONCE`): the
    /// HMAC-SHA256 of the nonce under the token. A client checks it before it sends the token, so a
    /// process that took the port after the service died (another local user's, say) never gets it:
    /// it cannot make the answer without the token, and the answers it could ask for (HMACs of its
    /// own nonces, under a label of their own) tell it nothing about the token.
    /// - Returns: 64 hex digits, or `nil` when `nonce` is not 64 hex digits.
    package static func proof(token: String, nonce: String) -> String? {
        guard nonce.utf8.count == 64, nonce.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            return nil
        }
        return SHA256Hasher.hmacHex(key: Data(token.utf8), message: Data("bookcache-serve-proof:\(nonce)".utf8))
    }
    /// How long a login link can be used: 5 minutes.
    static let loginLinkLifetime: Duration = .seconds(5 * 60)
    /// How long a session lasts without a request: a day.
    static let sessionIdleLifetime: Duration = .seconds(24 * 3600)
    /// The most login links waiting to be used; the oldest goes first.
    static let maxPendingLoginCodes = 64

    private let now: @Sendable () -> ContinuousClock.Instant
    /// Unused login codes and when each was made.
    private let loginCodes = Mutex<[String: ContinuousClock.Instant]>([:])
    /// Session ids and when each was last used.
    private let sessions = Mutex<[String: ContinuousClock.Instant]>([:])

    /// The name of the session cookie.
    static let cookieName = "bookcache_session"

    /// How a request proved who sent it.
    enum Credential: Equatable {
        /// `Authorization: Bearer` with the token: a program that could read the token file.
        case token
        /// The session cookie of the page.
        case session
        /// Nothing valid.
        case none
    }

    /// Reads the token from `file`, or makes one and writes it there (mode 0600) when there is none.
    /// - Parameters:
    ///   - tokenFile: Where the token is kept.
    ///   - now: The clock login links and sessions age by (tests pass their own).
    /// - Throws: ``ServiceSetupError`` when the file cannot be read or written, or is readable by others.
    public convenience init(tokenFile: URL) throws(ServiceSetupError) {
        try self.init(tokenFile: tokenFile, now: { ContinuousClock.now })
    }

    init(tokenFile: URL, now: @escaping @Sendable () -> ContinuousClock.Instant) throws(ServiceSetupError) {
        self.now = now
        token = try Self.loadOrMakeToken(tokenFile)
    }

    private static func loadOrMakeToken(_ tokenFile: URL) throws(ServiceSetupError) -> String {
        if let existing = try Self.readToken(tokenFile) {
            return existing
        }
        let made = Self.randomHex(bytes: 32)
        let fd = open(tokenFile.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST, let raced = try Self.readToken(tokenFile) {
                return raced
            }
            throw ServiceSetupError("cannot create \(tokenFile.path) (\(String(cString: strerror(errno))))")
        }
        defer { close(fd) }
        let line = made + "\n"
        let written = line.withCString { write(fd, $0, strlen($0)) }
        guard written == line.utf8.count, fsync(fd) == 0 else {
            unlink(tokenFile.path)
            throw ServiceSetupError("cannot write \(tokenFile.path)")
        }
        return made
    }

    private static func readToken(_ file: URL) throws(ServiceSetupError) -> String? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        let text: String
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            guard let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 == 0 else {
                throw ServiceSetupError(
                    "\(file.lastPathComponent) may be read by other users; run chmod 600 \(file.path), or delete it for a new token")
            }
            text = try String(contentsOf: file, encoding: .utf8)
        } catch let error as ServiceSetupError {
            throw error
        } catch {
            throw ServiceSetupError("cannot read \(file.path) (\(error))")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.count >= 32 else {
            throw ServiceSetupError("\(file.path) holds no token; delete it for a new one")
        }
        return token
    }

    /// A new one-time code for a login link; it opens one browser session within
    /// ``loginLinkLifetime``.
    public func newLoginCode() -> String {
        let code = Self.randomHex(bytes: 16)
        let made = now()
        loginCodes.withLock { codes in
            codes = codes.filter { made - $0.value < Self.loginLinkLifetime }
            if codes.count >= Self.maxPendingLoginCodes, let oldest = codes.min(by: { $0.value < $1.value })?.key {
                codes.removeValue(forKey: oldest)
            }
            codes[code] = made
        }
        return code
    }

    /// Exchanges a login code for a session id; `nil` when the code is unknown, used or older
    /// than ``loginLinkLifetime``.
    func redeem(_ code: String) -> String? {
        let at = now()
        guard let made = loginCodes.withLock({ $0.removeValue(forKey: code) }), at - made < Self.loginLinkLifetime else { return nil }
        let session = Self.randomHex(bytes: 32)
        sessions.withLock { sessions in
            sessions = sessions.filter { at - $0.value < Self.sessionIdleLifetime }
            sessions[session] = at
        }
        return session
    }

    /// Whether `session` is open; using it keeps it open for another ``sessionIdleLifetime``.
    func useSession(_ session: String) -> Bool {
        let at = now()
        return sessions.withLock { sessions in
            guard let last = sessions[session] else { return false }
            guard at - last < Self.sessionIdleLifetime else {
                sessions.removeValue(forKey: session)
                return false
            }
            sessions[session] = at
            return true
        }
    }

    /// What a request proves: the token (an `Authorization` header decides alone, even when
    /// wrong), else the cookie of an open session, else nothing. Every cookie of that name is
    /// tried: a page on another port of the same host can set one (cookies ignore ports), and the
    /// browser may send it first, but it cannot displace the page's own.
    func credential(of request: Request) -> Credential {
        credential(of: request.headers)
    }

    /// ``credential(of:)-(Request)`` of a request's header fields.
    func credential(of headers: HTTPFields) -> Credential {
        if let authorization = headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { return .none }
            return Self.constantTimeEqual(HTTPText.trimmed(parts[1]), token) ? .token : .none
        }
        for cookie in headers[values: .cookie].flatMap({ $0.split(separator: ";") }) {
            let pair = HTTPText.trimmed(cookie).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0] == Self.cookieName, useSession(String(pair[1])) { return .session }
        }
        return .none
    }

    /// `count` bytes from the system's CSPRNG (getrandom): tokens, session ids, login codes, salts.
    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// ``randomBytes(_:)`` as lowercase hexadecimal.
    package static func randomHex(bytes: Int) -> String {
        FileDownloader.hex(randomBytes(bytes))
    }

    /// Whether `a` and `b` are the same bytes, in a time that does not depend on where they differ.
    static func constantTimeEqual(_ a: some StringProtocol, _ b: String) -> Bool {
        let x = Array(a.utf8)
        let y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var difference: UInt8 = 0
        for index in x.indices { difference |= x[index] ^ y[index] }
        return difference == 0
    }
}

/// The service cannot start: its token file or address is unusable; the message says what to do.
public struct ServiceSetupError: Error, Sendable, CustomStringConvertible {
    /// What is wrong and what to do.
    public var message: String

    package init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// What every request passes before anything else, whether or not a route matches it: its
/// `Host` must be the service's own address (`421`), so a web page on another site cannot reach
/// the service through a DNS name that points at 127.0.0.1 (DNS rebinding, CVE-2018-5702); and
/// its target must be in the one spelling the router and the access check share (`400`).
/// Every answer says `nosniff` and may be read by the service's own origin only.
struct FrontDoorMiddleware<Context: RequestContext>: RouterMiddleware {
    let allowedHosts: HostList

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var response: Response
        if let host = request.head.authority?.lowercased(), allowedHosts.contains(host) {
            if let problem = RequestTarget.problem(request.head.path ?? "") {
                response = APIResponse.error(.badRequest, kind: "invalidTarget", "\(problem); write the path as the API documents it")
            } else {
                response = try await next(request, context)
            }
        } else {
            response = APIResponse.error(
                .misdirectedRequest, kind: "misdirectedRequest",
                "this service answers only to \(allowedHosts.all.sorted().joined(separator: ", "))")
        }
        ServiceHeaders.secure(&response.headers)
        return response
    }
}

/// The headers every answer of the service carries.
enum ServiceHeaders {
    static let crossOriginResourcePolicy = HTTPField.Name("Cross-Origin-Resource-Policy")!

    /// Adds them to `headers`.
    static func secure(_ headers: inout HTTPFields) {
        headers[.xContentTypeOptions] = "nosniff"
        headers[crossOriginResourcePolicy] = "same-origin"
    }
}

/// The request target's one accepted spelling: origin-form (`/…`), segments of unreserved
/// characters (`A-Z a-z 0-9 - . _ ~`), none empty (`//`, a trailing `/`), none `.` or `..`, no
/// percent-encoding. Every route of the service is written so; anything else would let the access
/// check and the router read one target two ways.
enum RequestTarget {
    /// Why `target` is refused; `nil` when it is in the accepted spelling.
    static func problem(_ target: String) -> String? {
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard path.hasPrefix("/") else { return "the request target must be a path that starts with /" }
        guard path != "/" else { return nil }
        for segment in path.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            if segment.isEmpty { return "the path has an empty segment (// or a trailing /)" }
            if segment == "." || segment == ".." { return "the path has a . or .. segment" }
            if !segment.utf8.allSatisfy(isUnreserved) {
                return "the path has a character outside A-Z a-z 0-9 - . _ ~ (percent-encoding included)"
            }
        }
        return nil
    }

    private static func isUnreserved(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}

/// Default deny: every route registered after this middleware (and every path no route
/// matches) needs the token or a session, whatever its path. A session — a browser — may read,
/// but may write (any method but GET and HEAD) only as the page itself does: with
/// `Content-Type: application/json` (which no form and no simple cross-origin request can send)
/// and an `Origin` that is the service's own, port included (or, without `Origin`,
/// `Sec-Fetch-Site: same-origin`). A session request that a browser marks as coming from
/// another site or another origin of the same site is refused too (`403`).
struct RequireAccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: ServiceAccess

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        switch access.credential(of: request) {
        case .token:
            return try await next(request, context)
        case .session:
            if let refusal = Self.crossOriginProblem(request) {
                return APIResponse.error(.forbidden, kind: "crossOrigin", refusal)
            }
            return try await next(request, context)
        case .none:
            return APIResponse.error(
                .unauthorized, kind: "unauthorized",
                "send Authorization: Bearer TOKEN (bookcache serve --print-token prints it), or open the login link bookcache serve printed"
            )
        }
    }

    /// Why a request carrying the page's session cookie is not the page's own; `nil` when it is.
    static func crossOriginProblem(_ request: Request) -> String? {
        let fetchSite = request.headers[.init("Sec-Fetch-Site")!]?.lowercased()
        if let fetchSite, fetchSite != "same-origin", fetchSite != "none" {
            return
                "the browser says this request comes from another origin (Sec-Fetch-Site: \(fetchSite)); only the service's own page may use its session"
        }
        guard request.method != .get, request.method != .head else { return nil }
        let mediaType = request.headers[.contentType]?.split(separator: ";").first.map { HTTPText.trimmed($0).lowercased() }
        guard mediaType == "application/json" else {
            return "a change made with the page's session must be sent as Content-Type: application/json"
        }
        let own = "http://" + (request.head.authority ?? "").lowercased()
        if let origin = request.headers[.origin] {
            guard origin.lowercased() == own else {
                return "a change made with the page's session must come from the page itself (Origin \(origin.prefix(80)) is not \(own))"
            }
            return nil
        }
        guard fetchSite == "same-origin" else {
            return "a change made with the page's session must say where it comes from (Origin)"
        }
        return nil
    }
}
