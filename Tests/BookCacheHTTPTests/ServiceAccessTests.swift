import Foundation
import Synchronization
import Testing

@testable import BookCacheHTTP

/// Login links and sessions age by an injected clock: no test waits five minutes or a day.
@Suite("ServiceAccess: login links and sessions expire")
final class ServiceAccessTests {
    /// A clock the test moves by hand.
    final class TestClock: Sendable {
        let start = ContinuousClock.now
        let offset = Mutex<Duration>(.zero)
        func advance(_ by: Duration) { offset.withLock { $0 += by } }
        var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    }

    // Each test gets its own instance: a clock, a folder for the token, and the access over them.
    let clock = TestClock()
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("access-\(UUID().uuidString)")
    let access: ServiceAccess

    init() throws {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let clock = self.clock
        access = try ServiceAccess(tokenFile: folder.appendingPathComponent("service.token"), now: { clock.now })
    }

    deinit {
        try? FileManager.default.removeItem(at: folder)
    }

    @Test("a login link works once, and not after five minutes")
    func loginLinkExpires() throws {
        let fresh = access.newLoginCode()
        clock.advance(.seconds(4 * 60 + 59))
        #expect(access.redeem(fresh) != nil, "a link used within five minutes opens a session")
        #expect(access.redeem(fresh) == nil, "once")
        let old = access.newLoginCode()
        clock.advance(ServiceAccess.loginLinkLifetime)
        #expect(access.redeem(old) == nil, "a link five minutes old is refused")
        #expect(access.redeem("0123") == nil)
    }

    @Test("a session ends after a day without a request; each request keeps it open")
    func sessionIdles() throws {
        let session = try #require(access.redeem(access.newLoginCode()))
        for _ in 0..<3 {
            clock.advance(.seconds(23 * 3600))
            #expect(access.useSession(session), "used within a day, it stays open")
        }
        clock.advance(ServiceAccess.sessionIdleLifetime)
        #expect(!access.useSession(session), "a day idle, it is closed")
        #expect(!access.useSession(session), "and stays closed")
        #expect(!access.useSession("forged"))
    }

    @Test("sessions do not outlive the service: a new ServiceAccess on the same token file knows none")
    func sessionsEndOnRestart() throws {
        let session = try #require(access.redeem(access.newLoginCode()))
        let code = access.newLoginCode()
        let clock = self.clock
        let restarted = try ServiceAccess(tokenFile: folder.appendingPathComponent("service.token"), now: { clock.now })
        #expect(restarted.token == access.token, "the token stays")
        #expect(!restarted.useSession(session))
        #expect(restarted.redeem(code) == nil)
    }

    @Test("unused login links are capped: the oldest goes first")
    func pendingLinksCapped() throws {
        let first = access.newLoginCode()
        clock.advance(.seconds(1))
        let rest = (0..<ServiceAccess.maxPendingLoginCodes).map { _ in access.newLoginCode() }
        #expect(access.redeem(first) == nil)
        #expect(access.redeem(rest.last!) != nil)
    }

    @Test(
        "the proof a client asks for before it sends the token: HMAC-SHA256 of the nonce under the token, as Python's hmac makes it; only 64 lowercase hex digits are a nonce"
    )
    func proof() {
        let nonce = String(repeating: "0", count: 64)
        // python3 -c "import hmac,hashlib; print(hmac.new(b'token-abc', b'bookcache-serve-proof:'+b'0'*64, hashlib.sha256).hexdigest())"
        #expect(ServiceAccess.proof(token: "token-abc", nonce: nonce) == "456fd43146a3655efc6239dc1fb1d021f563e04c90a41c41269afd4cbb56d4ab")
        #expect(ServiceAccess.proof(token: "token-abd", nonce: nonce) != ServiceAccess.proof(token: "token-abc", nonce: nonce))
        for bad in [
            "", String(repeating: "A", count: 64), String(repeating: "0", count: 63), String(repeating: "0", count: 65),
            String(repeating: "g", count: 64),
        ] {
            #expect(ServiceAccess.proof(token: "token-abc", nonce: bad) == nil, "\(bad)")
        }
    }
}
