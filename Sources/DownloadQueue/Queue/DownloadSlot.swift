import Foundation
import Synchronization

/// A job's place among the running downloads, given by ``DownloadQueue/withSlot(for:onEvent:_:)``.
///
/// One download through a slot reads top to bottom: ``open()`` sends the request and returns
/// the response head as a value; the caller decides on it; ``receive(_:)`` streams the body
/// into the file. When either step fails and the queue's policy retries it, the step waits out
/// the delay with the slot given up and returns `retrying`: the caller opens again (the partial
/// file is resumed) and decides on the new head as on the first, so every attempt goes through
/// the caller's decisions. Otherwise each step returns its value or throws the final
/// ``DownloadError``. Use a slot from the task that was given it, one call at a time.
package final class DownloadSlot: Sendable {
    /// The job's id, as in its events.
    public let id: DownloadJobID
    let request: DownloadRequest
    let emit: @Sendable (DownloadEvent) -> Void
    private let queue: DownloadQueue
    private let downloader: FileDownloader
    private let state: Mutex<State>

    private struct State {
        var retries: RetryStateMachine
        var slot = SlotState()
    }

    init(
        id: DownloadJobID, request: DownloadRequest, queue: DownloadQueue, downloader: FileDownloader, retries: RetryStateMachine,
        emit: @escaping @Sendable (DownloadEvent) -> Void
    ) {
        self.id = id
        self.request = request
        self.queue = queue
        self.downloader = downloader
        self.emit = emit
        self.state = Mutex(State(retries: retries))
    }

    /// Reads or changes the slot's state under its lock.
    ///
    /// Not inlined, on purpose: `Mutex`'s lock keeps the locking thread's id, read from a
    /// thread-local, and an `async` function may keep that thread-local's address across a
    /// suspension (a release build did in ``waitForAdmission()``: the address taken before the
    /// queue's actor gave the slot, the lock taken after it). A task that resumed on another thread
    /// — any task that prefers an executor with several threads — then wrote the first thread's
    /// id and failed to unlock. In a function of its own, the address is read where it is used.
    @inline(never)
    private func withState<R: Sendable>(_ body: (inout State) -> R) -> R {
        state.withLock { body(&$0) }
    }

    /// Attempts made so far.
    public var attempts: Int { withState { $0.retries.attempts } }

    /// What ``open()`` ended with.
    public enum Opened: Sendable {
        /// The open response: its ``OpenedDownload/head`` to decide on, then pass it to
        /// ``receive(_:)``, or call ``OpenedDownload/cancel()``.
        case head(OpenedDownload)
        /// The attempt failed and the policy retries it: the delay has been waited out with the
        /// slot given up. Call ``open()`` again.
        case retrying
    }

    /// Sends the request — resuming a partial file with `Range`/`If-Range` — and returns once
    /// the response head has arrived, before any byte is written.
    /// - Returns: The open response, or ``Opened/retrying`` when the attempt failed and the
    ///   policy tries again.
    /// - Throws: ``DownloadError`` once no retry is left, or ``DownloadError/Kind/cancelled``.
    public func open() async throws(DownloadError) -> Opened {
        try await holdSlot()
        let attempt = withState { state in
            state.retries.attemptStarted()
            return state.retries.attempts
        }
        emit(.started(id, attempt: attempt))
        do {
            return .head(
                try await downloader.open(
                    from: request.url, to: request.destination, maxBytes: request.maxBytes, resume: request.resume,
                    credentials: request.credentials, headers: request.headers))
        } catch {
            try await failed(error)
            return .retrying
        }
    }

    /// What ``receive(_:)`` ended with.
    public enum Received: Sendable {
        /// The whole body, in the destination.
        case file(DownloadedFile)
        /// The transfer failed and the policy retries it: the delay has been waited out with the
        /// slot given up. Call ``open()`` to send the request again (resuming the partial file)
        /// and decide on its head as on the first.
        case retrying
    }

    /// Streams the body of `opened` into the destination, hashing it. The slot stays held: the
    /// caller gives it up with ``release()`` when the next stage can take the file (so a full next
    /// stage holds the transfers back), or it goes when the caller's work with the slot ends.
    /// - Parameter opened: What ``open()`` returned.
    /// - Returns: The file, with its size and SHA-256; or ``Received/retrying`` when the stream
    ///   failed and the policy tries again.
    /// - Throws: ``DownloadError`` once no retry is left, or ``DownloadError/Kind/cancelled``.
    public func receive(_ opened: OpenedDownload) async throws(DownloadError) -> Received {
        do {
            let file = try await downloader.receive(
                opened, observer: request.observer, onProgress: { [id, emit] progress in emit(.progress(id, progress)) })
            emit(.finished(id, .success(file)))
            return .file(file)
        } catch {
            try await failed(error)
            return .retrying
        }
    }

    /// ``open()`` then ``receive(_:)``, again while the transfer is retried.
    public func download() async throws(DownloadError) -> DownloadedFile {
        while true {
            guard case .head(let opened) = try await open() else { continue }
            if case .file(let file) = try await receive(opened) { return file }
        }
    }

    /// Gives the slot up now that the body has arrived, so the queue starts the next job while the
    /// caller goes on with the file. Does nothing when the slot is not held. A later ``open()``
    /// (the file is fetched again) gets in line for a slot again.
    public func release() async {
        await giveUpSlot()
    }

    // MARK: - Used by the queue

    func waitForAdmission() async {
        do {
            try await queue.waitForSlot(id)
            withState { $0.slot.admitted() }
        } catch {
            // Cancelled while waiting: the slot was never given.
            withState { $0.slot.notAdmitted() }
        }
    }

    /// Frees the slot if it is still held (the caller's work ended without a download, or failed).
    func end() async {
        await giveUpSlot()
        await queue.forget(id)
    }

    // MARK: - Attempts

    /// Takes the slot again for a retry; the first attempt has it from admission.
    private func holdSlot() async throws(DownloadError) {
        switch withState({ $0.slot.hold(cancelled: Task.isCancelled) }) {
        case .alreadyHeld:
            return
        case .cancelled:
            throw finish(DownloadError(kind: .cancelled, url: request.url))
        case .lineAgain:
            await queue.lineAgain(self)
            do {
                try await queue.waitForSlot(id)
            } catch {
                throw finish(DownloadError(kind: .cancelled, url: request.url))
            }
            withState { $0.slot.admitted() }
        }
    }

    private func giveUpSlot() async {
        if withState({ $0.slot.giveUp() }) { await queue.releaseSlot() }
    }

    /// After a failed attempt: waits out the retry delay (the slot given up meanwhile) and
    /// returns, or throws the final error.
    private func failed(_ thrown: DownloadError) async throws(DownloadError) {
        var error = thrown
        let attempts = self.attempts
        error.attempts = attempts
        var retries = withState { $0.retries }
        let action = await queue.decide(after: error, for: self, retries: &retries)
        withState { $0.retries = retries }
        await giveUpSlot()
        guard case .retry(let delay, _) = action else {
            if Task.isCancelled && error.kind != .cancelled {
                error = DownloadError(kind: .cancelled, url: request.url, underlying: error)
                error.attempts = attempts
            }
            if !request.resume || (!error.isRetryable && error.kind != .cancelled) {
                await BlockingWork.run { FileDownloader.discard(self.request.destination) }
            }
            throw finish(error)
        }
        emit(.retrying(id, attempt: attempts, delay: delay, reason: error))
        do {
            try await queue.sleep(for: delay)
        } catch {
            var cancelled = DownloadError(kind: .cancelled, url: request.url)
            cancelled.attempts = attempts
            throw finish(cancelled)
        }
    }

    /// Reports the job's end and returns the error to throw.
    private func finish(_ error: DownloadError) -> DownloadError {
        emit(.finished(id, .failure(error)))
        return error
    }
}

/// Where a job stands with the queue's slots, and what taking or giving one up means: a value
/// type with no I/O, tested on its own.
struct SlotState: Equatable {
    enum Phase: Equatable {
        /// In line, not admitted yet.
        case waiting
        /// Holds one of the queue's slots.
        case holding
        /// Was admitted and gave its slot up (waiting out a retry, or done).
        case released
        /// Cancelled while in line: no slot was ever given.
        case neverAdmitted
    }

    /// What taking the slot for an attempt means.
    enum Hold: Equatable {
        /// The slot is held already (the first attempt has it from admission).
        case alreadyHeld
        /// Get in line again and wait for a slot.
        case lineAgain
        /// Do not: the job was never admitted, or is cancelled.
        case cancelled
    }

    private(set) var phase = Phase.waiting

    /// The queue gave the job a slot (at admission, or again for a retry).
    mutating func admitted() {
        phase = .holding
    }

    /// The job was cancelled while in line.
    mutating func notAdmitted() {
        if phase == .waiting { phase = .neverAdmitted }
    }

    /// An attempt is about to start.
    func hold(cancelled: Bool) -> Hold {
        switch phase {
        case .holding: .alreadyHeld
        case .waiting, .neverAdmitted: .cancelled
        case .released: cancelled ? .cancelled : .lineAgain
        }
    }

    /// Gives the slot up; `true` when one was held (and must be released to the queue).
    mutating func giveUp() -> Bool {
        guard phase == .holding else { return false }
        phase = .released
        return true
    }
}
