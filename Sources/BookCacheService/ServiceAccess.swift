import BookCache
import Foundation
import Hummingbird
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Who may use the service: the bearer token in `CACHE/service.token` (made at first start, mode
/// 0600), and browser sessions opened with a one-time login link.
public final class ServiceAccess: Sendable {
    /// The token every API request carries as `Authorization: Bearer TOKEN`.
    public let token: String
    private let loginCodes = Mutex<Set<String>>([])
    private let sessions = Mutex<Set<String>>([])

    /// The name of the session cookie.
    static let cookieName = "bookcache_session"

    /// Reads the token from `file`, or makes one and writes it there (mode 0600) when there is none.
    /// - Throws: ``ServiceSetupError`` when the file cannot be read or written, or is readable by others.
    public init(tokenFile: URL) throws(ServiceSetupError) {
        if let existing = try Self.readToken(tokenFile) {
            token = existing
            return
        }
        let made = Self.randomHex(bytes: 32)
        let fd = open(tokenFile.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST, let raced = try Self.readToken(tokenFile) {
                token = raced
                return
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
        token = made
    }

    private static func readToken(_ file: URL) throws(ServiceSetupError) -> String? {
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        let text: String
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
            guard let mode = (attributes[.posixPermissions] as? NSNumber)?.intValue, mode & 0o077 == 0 else {
                throw ServiceSetupError("\(file.lastPathComponent) may be read by other users; run chmod 600 \(file.path), or delete it for a new token")
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

    /// A new one-time code for a login link; it opens one browser session.
    public func newLoginCode() -> String {
        let code = Self.randomHex(bytes: 16)
        loginCodes.withLock { _ = $0.insert(code) }
        return code
    }

    /// Exchanges a login code for a session id; `nil` when the code is unknown or used.
    func redeem(_ code: String) -> String? {
        guard loginCodes.withLock({ $0.remove(code) }) != nil else { return nil }
        let session = Self.randomHex(bytes: 32)
        sessions.withLock { _ = $0.insert(session) }
        return session
    }

    /// Whether a request carries the token, or the cookie of a session.
    func allows(_ request: Request) -> Bool {
        if let authorization = request.headers[.authorization], authorization.hasPrefix("Bearer ") {
            return Self.constantTimeEqual(String(authorization.dropFirst(7)), token)
        }
        for cookie in request.headers[values: .cookie].flatMap({ $0.split(separator: ";") }) {
            let pair = cookie.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
            if pair.count == 2, pair[0] == Self.cookieName {
                let value = String(pair[1])
                return sessions.withLock { $0.contains(value) }
            }
        }
        return false
    }

    static func randomHex(bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: 0...255, using: &generator)) }.joined()
    }

    private static func constantTimeEqual(_ a: String, _ b: String) -> Bool {
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

    init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// Refuses requests whose `Host` is not the service's own address (`421`), so a web page on
/// another site cannot reach the service through a DNS name that points at 127.0.0.1 (DNS
/// rebinding, CVE-2018-5702), and API requests without the token (`401`).
struct AccessMiddleware<Context: RequestContext>: RouterMiddleware {
    let access: ServiceAccess
    let allowedHosts: HostList

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let host = request.head.authority?.lowercased(), allowedHosts.contains(host) else {
            return APIResponse.error(
                .misdirectedRequest, kind: "misdirectedRequest", "this service answers only to \(allowedHosts.all.sorted().joined(separator: ", "))")
        }
        let path = request.uri.path
        if path.hasPrefix("/api/") && !access.allows(request) {
            return APIResponse.error(
                .unauthorized, kind: "unauthorized",
                "send Authorization: Bearer TOKEN (bookcache serve --print-token prints it), or open the login link bookcache serve printed")
        }
        return try await next(request, context)
    }
}
