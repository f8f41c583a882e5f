import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore
import Synchronization

/// Who may read the OPDS catalogue: an e-reader with the reader login (HTTP Basic, checked
/// against ``ReaderPassword``), or a holder of the API token or of the page's session.
///
/// The login file is read again when it changes (a password set while the service runs takes
/// effect at once). A login that passed is remembered for ``verifiedLifetime`` by the SHA-256
/// of its header, so a reader's every cover does not cost a PBKDF2. Failed logins are counted
/// per client address: after ``maxFailures`` in ``failureWindow`` that address is answered `429`
/// with `Retry-After` until the window has passed, whatever it sends.
final class ReaderLogins: Sendable {
    static let verifiedLifetime: Duration = .seconds(15 * 60)
    static let maxVerified = 64
    static let maxFailures = 10
    static let failureWindow: Duration = .seconds(60)
    /// Client addresses whose failures are tracked at once; the oldest is forgotten first.
    static let maxTrackedClients = 4096

    private let cacheRoot: URL
    private let now: @Sendable () -> ContinuousClock.Instant

    private struct State {
        /// The login file's identity (inode, size, modification time, mode) when last read, and its login.
        var stamp: [Int64] = []
        var login: ReaderPassword?
        var loadProblem: String?
        var verified: [String: ContinuousClock.Instant] = [:]
        var failures: [String: (count: Int, since: ContinuousClock.Instant)] = [:]
    }

    private let state = Mutex(State())

    init(cacheRoot: URL, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.cacheRoot = cacheRoot
        self.now = now
    }

    /// What a Basic login proves.
    enum Outcome: Equatable {
        case reader
        case wrong
        /// No reader login is set (or its file cannot be used: the reason).
        case notSet(String?)
        case tooMany(retryAfter: Int)
    }

    /// Checks `authorization` (an `Authorization` value with the Basic scheme) from `client`.
    func check(basic authorization: String, client: String) async -> Outcome {
        let at = now()
        if let wait = blockedFor(client, at: at) { return .tooMany(retryAfter: wait) }
        let login: ReaderPassword?
        let problem: String?
        (login, problem) = current()
        guard let login else { return .notSet(problem) }
        let key = SHA256Hasher.hex(of: Data(authorization.utf8))
        let known = state.withLock { state -> Bool in
            state.verified = state.verified.filter { at - $0.value < Self.verifiedLifetime }
            return state.verified[key] != nil
        }
        if known { return .reader }
        guard let (user, password) = Self.decodeBasic(authorization) else {
            recordFailure(client, at: at)
            return .wrong
        }
        // PBKDF2 takes a while: on the blocking pool, not an event loop
        let matches = await BlockingWork.run { login.verify(user: user, password: password) }
        guard matches else {
            recordFailure(client, at: at)
            return .wrong
        }
        state.withLock { state in
            if state.verified.count >= Self.maxVerified, let oldest = state.verified.min(by: { $0.value < $1.value })?.key {
                state.verified.removeValue(forKey: oldest)
            }
            state.verified[key] = at
        }
        return .reader
    }

    /// The login on disk, read again when the file changed.
    private func current() -> (ReaderPassword?, String?) {
        let file = CacheLayout(root: cacheRoot).readerPasswordFile
        let stamp: [Int64]
        if let attributes = try? FileManager.default.attributesOfItem(atPath: file.path) {
            stamp = [
                (attributes[.systemFileNumber] as? NSNumber)?.int64Value ?? 0, (attributes[.size] as? NSNumber)?.int64Value ?? 0,
                Int64(((attributes[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0) * 1e6),
                (attributes[.posixPermissions] as? NSNumber)?.int64Value ?? 0,
            ]
        } else {
            stamp = []
        }
        if let cached = state.withLock({ $0.stamp == stamp && !stamp.isEmpty ? ($0.login, $0.loadProblem) : nil }) {
            return cached
        }
        var login: ReaderPassword?
        var problem: String?
        do {
            login = try ReaderPassword.read(in: cacheRoot)
        } catch {
            problem = error.message
        }
        state.withLock { state in
            if state.login != login { state.verified = [:] }
            state.stamp = stamp
            state.login = login
            state.loadProblem = problem
        }
        return (login, problem)
    }

    private func blockedFor(_ client: String, at: ContinuousClock.Instant) -> Int? {
        state.withLock { state in
            guard let entry = state.failures[client] else { return nil }
            let age = at - entry.since
            guard age < Self.failureWindow else {
                state.failures.removeValue(forKey: client)
                return nil
            }
            guard entry.count >= Self.maxFailures else { return nil }
            return max(1, Int((Self.failureWindow - age).components.seconds) + 1)
        }
    }

    private func recordFailure(_ client: String, at: ContinuousClock.Instant) {
        state.withLock { state in
            if var entry = state.failures[client], at - entry.since < Self.failureWindow {
                entry.count += 1
                state.failures[client] = entry
                return
            }
            if state.failures.count >= Self.maxTrackedClients {
                state.failures = state.failures.filter { at - $0.value.since < Self.failureWindow }
                if state.failures.count >= Self.maxTrackedClients,
                    let oldest = state.failures.min(by: { $0.value.since < $1.value.since })?.key
                {
                    state.failures.removeValue(forKey: oldest)
                }
            }
            state.failures[client] = (1, at)
        }
    }

    /// User and password of a `Basic` value (RFC 7617: base64 of `user:password`, UTF-8);
    /// `nil` when it is not one.
    static func decodeBasic(_ authorization: String) -> (String, String)? {
        let parts = authorization.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic", parts[1].utf8.count <= 4096,
            let data = Data(base64Encoded: parts[1].trimmingCharacters(in: .whitespaces)),
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

    static var challenge: String { #"Basic realm="BookCache OPDS", charset="UTF-8""# }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.method == .get || request.method == .head else {
            var response = APIResponse.error(.methodNotAllowed, kind: "methodNotAllowed", "the OPDS catalogue is read with GET")
            response.headers[.allow] = "GET, HEAD"
            return response
        }
        if let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("basic") {
            switch await readers.check(basic: authorization, client: client(context)) {
            case .reader:
                return try await next(request, context)
            case .wrong:
                return unauthorized("the reader login is wrong; it is set with bookcache serve --opds-password")
            case .notSet(let problem):
                return unauthorized(
                    problem ?? "no reader login is set; set one with bookcache serve --opds-password, then log in with it")
            case .tooMany(let wait):
                var response = APIResponse.error(
                    .tooManyRequests, kind: "tooManyLogins",
                    "too many wrong logins from this address; try again in \(wait) seconds")
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
