import Foundation
import Testing

@testable import DownloadQueue

@Suite("Retry policy and state machine")
struct RetryPolicyTests {
    let url = URL(string: "http://127.0.0.1/x")!

    @Test("backoff doubles from the base, is capped, and jitter only shortens it")
    func backoffTable() {
        let policy = RetryPolicy(retries: 10)
        let noJitter = (1...9).map { policy.backoff(beforeRetry: $0, random: 0) }
        #expect(
            noJitter == [
                .milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(30), .seconds(30),
                .seconds(30),
            ])
        let fullJitter = (1...3).map { policy.backoff(beforeRetry: $0, random: 0.999_999) }
        #expect(fullJitter == [.milliseconds(250), .milliseconds(500), .seconds(1)])
    }

    @Test("retryable failures are retried until the attempts run out")
    func retriesRunOut() {
        var machine = RetryStateMachine(policy: RetryPolicy(retries: 2))
        let error = DownloadError(kind: .httpStatus, url: url, statusCode: 503)
        machine.attemptStarted()
        #expect(machine.next(after: error, random: 0) == .retry(after: .milliseconds(500), holdHost: false))
        machine.attemptStarted()
        #expect(machine.next(after: error, random: 0) == .retry(after: .seconds(1), holdHost: false))
        machine.attemptStarted()
        #expect(machine.next(after: error, random: 0) == .fail)
        #expect(machine.attempts == 3)
    }

    @Test(
        "what is retried and what is not",
        arguments: [
            (DownloadError.Kind.httpStatus, 404, false), (.httpStatus, 400, false), (.httpStatus, 401, false),
            (.httpStatus, 408, true), (.httpStatus, 429, true), (.httpStatus, 500, true), (.httpStatus, 503, true),
            (.connectionFailed, 0, true), (.timedOut, 0, true), (.bodyCutShort, 0, true),
            (.cancelled, 0, false), (.refused, 0, false), (.invalidURL, 0, false), (.fileSystem, 0, false), (.bodyTooLong, 0, false),
        ])
    func retryable(kind: DownloadError.Kind, status: Int, expected: Bool) {
        var machine = RetryStateMachine(policy: RetryPolicy(retries: 3))
        machine.attemptStarted()
        let error = DownloadError(kind: kind, url: url, statusCode: status == 0 ? nil : status)
        #expect((machine.next(after: error, random: 0) != .fail) == expected)
    }

    @Test("connection failures can be left unretried while other failures still are")
    func failFastOffline() {
        var policy = RetryPolicy(retries: 3)
        policy.retriesConnectionFailures = false
        var machine = RetryStateMachine(policy: policy)
        machine.attemptStarted()
        #expect(machine.next(after: DownloadError(kind: .connectionFailed, url: url), random: 0) == .fail)
        #expect(machine.next(after: DownloadError(kind: .httpStatus, url: url, statusCode: 503), random: 0) != .fail)
    }

    @Test("Retry-After on 429 and 503 lengthens the delay, capped, and holds the host")
    func retryAfter() {
        var machine = RetryStateMachine(policy: RetryPolicy(retries: 3, maxRetryAfter: .seconds(60)))
        machine.attemptStarted()
        let slow = DownloadError(kind: .httpStatus, url: url, statusCode: 503, retryAfter: .seconds(7))
        #expect(machine.next(after: slow, random: 0) == .retry(after: .seconds(7), holdHost: true))
        let huge = DownloadError(kind: .httpStatus, url: url, statusCode: 429, retryAfter: .seconds(86_400))
        #expect(machine.next(after: huge, random: 0) == .retry(after: .seconds(60), holdHost: true))
        // Retry-After on a 500 is not honoured
        var fresh = RetryStateMachine(policy: RetryPolicy(retries: 3, maxRetryAfter: .seconds(60)))
        fresh.attemptStarted()
        let other = DownloadError(kind: .httpStatus, url: url, statusCode: 500, retryAfter: .seconds(7))
        #expect(fresh.next(after: other, random: 0) == .retry(after: .milliseconds(500), holdHost: false))
    }

    func cut(keeping bytes: Int64) -> DownloadError {
        var error = DownloadError(kind: .bodyCutShort, url: url)
        error.keptBytes = bytes
        return error
    }

    @Test("an attempt that adds bytes uses no retry and restarts the backoff; one that adds nothing counts")
    func progressResetsTheBudget() {
        var machine = RetryStateMachine(policy: RetryPolicy(retries: 2))
        // Given: two attempts without progress have used the budget up to its last retry.
        machine.attemptStarted()
        #expect(machine.next(after: cut(keeping: 0), random: 0) == .retry(after: .milliseconds(500), holdHost: false))
        machine.attemptStarted()
        #expect(machine.next(after: cut(keeping: 0), random: 0) == .retry(after: .seconds(1), holdHost: false))
        // When: attempts keep adding bytes, they go on, each after the first delay.
        for kept in [100, 200, 300, 400, 500] as [Int64] {
            machine.attemptStarted()
            #expect(machine.next(after: cut(keeping: kept), random: 0) == .retry(after: .milliseconds(500), holdHost: false))
            #expect(machine.attemptsWithoutProgress == 0)
        }
        // Then: a server that starts over (200 instead of 206) keeps no more than before: no progress.
        machine.attemptStarted()
        #expect(machine.next(after: cut(keeping: 300), random: 0) == .retry(after: .milliseconds(500), holdHost: false))
        machine.attemptStarted()
        #expect(machine.next(after: cut(keeping: 500), random: 0) == .retry(after: .seconds(1), holdHost: false))
        machine.attemptStarted()
        #expect(machine.next(after: cut(keeping: 0), random: 0) == .fail)
        #expect(machine.attempts == 10)
    }

    @Test("no retries means none, even after progress")
    func noRetriesMeansNone() {
        var machine = RetryStateMachine(policy: .none)
        machine.attemptStarted()
        #expect(machine.next(after: cut(keeping: 1000), random: 0) == .fail)
    }

    @Test("errors read in plain words: no library internals, balanced parentheses")
    func plainWords() {
        var error = DownloadError(kind: .bodyCutShort, url: URL(string: "http://u:p@127.0.0.1/a.epub")!, detail: "the connection was reset")
        error.attempts = 4
        #expect(
            error.description
                == "the download of http://***@127.0.0.1/a.epub was cut short: the connection was reset; gave up after 4 attempts")
    }
}
