import BookCache
import Foundation
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// The `text/event-stream` clients of `/api/v1/events`: each event is encoded once and handed to
/// every client's own bounded mailbox, so no client can slow the jobs, the other clients or
/// the other requests.
///
/// - A client that falls behind — its mailbox holds more than ``Limits/maxPendingBytes`` or
///   ``Limits/maxPendingEvents`` because it does not read — is dropped: its stream ends, and an
///   `EventSource` reconnects. Every stream begins with a `snapshot` event (the newest jobs and
///   the counts), so a client that reconnects knows where it stands.
/// - A comment line every ``Limits/heartbeat`` finds clients that went away without a word
///   (their next write fails), so their connections are closed.
/// - At most ``Limits/maxStreams`` streams at once; another is answered `503` with `Retry-After`.
final class EventStreams: Service, Sendable {
    /// The bounds of the streams.
    struct Limits: Sendable {
        /// Streams open at once.
        var maxStreams = 512
        /// Bytes waiting for one client before it is dropped.
        var maxPendingBytes = 64 * 1024
        /// Events waiting for one client before it is dropped.
        var maxPendingEvents = 1024
        /// How often a comment line is sent to every stream.
        var heartbeat: Duration = .seconds(15)
    }

    let service: DownloadService
    let limits: Limits
    let logger: Logger
    private let mailboxes = Mutex<[ObjectIdentifier: Mailbox]>([:])

    init(service: DownloadService, limits: Limits, logger: Logger) {
        self.service = service
        self.limits = limits
        self.logger = logger
    }

    /// Hands the service's events and the heartbeat to the clients until graceful shutdown;
    /// then ends every stream.
    func run() async throws {
        let events = service.events()
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in events.cancelOnGracefulShutdown() {
                    self.deliver(ByteBuffer(string: ServerSentEvent.encode(event)))
                }
            }
            group.addTask {
                let beat = ByteBuffer(string: ": keep-alive\n\n")
                while (try? await Task.sleep(for: self.limits.heartbeat)) != nil, !Task.isShuttingDownGracefully {
                    self.deliver(beat)
                }
            }
            await group.next()
            group.cancelAll()
        }
        for mailbox in mailboxes.withLock({ Array($0.values) }) { mailbox.close() }
    }

    /// A mailbox for a new client; `nil` when ``Limits/maxStreams`` are open.
    /// - Parameter onDrop: Called once if the client falls behind, to close its connection at
    ///   once (a write already waiting for the client would otherwise wait for ever).
    func open(onDrop: @escaping @Sendable () -> Void = {}) -> Mailbox? {
        let mailbox = Mailbox(limits: limits, onDrop: onDrop)
        let opened = mailboxes.withLock { mailboxes -> Bool in
            guard mailboxes.count < limits.maxStreams else { return false }
            mailboxes[ObjectIdentifier(mailbox)] = mailbox
            return true
        }
        return opened ? mailbox : nil
    }

    /// Forgets a client whose stream ended.
    func close(_ mailbox: Mailbox) {
        mailbox.close()
        _ = mailboxes.withLock { $0.removeValue(forKey: ObjectIdentifier(mailbox)) }
    }

    /// How many streams are open.
    var count: Int { mailboxes.withLock { $0.count } }

    /// Hands one event's bytes to every client; drops those it would put over their bounds.
    func deliver(_ bytes: ByteBuffer) {
        let dropped = mailboxes.withLock { mailboxes -> [Mailbox] in
            var dropped: [Mailbox] = []
            for (key, mailbox) in mailboxes where !mailbox.offer(bytes) {
                mailboxes.removeValue(forKey: key)
                dropped.append(mailbox)
            }
            return dropped
        }
        guard !dropped.isEmpty else { return }
        for mailbox in dropped { mailbox.onDrop() }
        logger.info("dropped event streams whose clients fell behind; they reconnect", metadata: ["streams": "\(dropped.count)"])
    }

    /// What waits to be written to one client.
    final class Mailbox: Sendable {
        private struct State {
            var pending: [ByteBuffer] = []
            var bytes = 0
            var waiter: CheckedContinuation<[ByteBuffer]?, Never>?
            var closed = false
        }

        private let limits: Limits
        private let state = Mutex(State())
        /// Closes the client's connection.
        let onDrop: @Sendable () -> Void

        init(limits: Limits, onDrop: @escaping @Sendable () -> Void = {}) {
            self.limits = limits
            self.onDrop = onDrop
        }

        /// Adds bytes for the client; `false` (and the mailbox closed) when that would put it
        /// over its bounds.
        func offer(_ bytes: ByteBuffer) -> Bool {
            let (waiter, kept): (CheckedContinuation<[ByteBuffer]?, Never>?, Bool) = state.withLock { state in
                guard !state.closed else { return (nil, false) }
                if let waiter = state.waiter {
                    state.waiter = nil
                    return (waiter, true)
                }
                guard state.bytes + bytes.readableBytes <= limits.maxPendingBytes, state.pending.count < limits.maxPendingEvents else {
                    state.closed = true
                    state.pending = []
                    return (nil, false)
                }
                state.pending.append(bytes)
                state.bytes += bytes.readableBytes
                return (nil, true)
            }
            waiter?.resume(returning: [bytes])
            return kept
        }

        /// Everything waiting, once there is something; `nil` once the mailbox is closed (the
        /// client fell behind, the service stops, or the task was cancelled).
        func next() async -> [ByteBuffer]? {
            await withTaskCancellationHandler {
                await withCheckedContinuation { (continuation: CheckedContinuation<[ByteBuffer]?, Never>) in
                    let ready: [ByteBuffer]?? = state.withLock { state in
                        if !state.pending.isEmpty {
                            defer { (state.pending, state.bytes) = ([], 0) }
                            return .some(state.pending)
                        }
                        if state.closed { return .some(nil) }
                        state.waiter = continuation
                        return .none
                    }
                    if let ready { continuation.resume(returning: ready) }
                }
            } onCancel: {
                close()
            }
        }

        /// Ends the stream: a waiting `next()` returns `nil`.
        func close() {
            let waiter = state.withLock { state in
                state.closed = true
                state.pending = []
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}

/// `text/event-stream` lines for service events.
enum ServerSentEvent {
    static func encode(_ event: ServiceEvent) -> String {
        let (name, payload): (String, any Encodable)
        switch event {
        case .job(let job): (name, payload) = ("job", APIJob(job: job))
        case .progress(let id, let bytes, let total, let state):
            (name, payload) = ("progress", Progress(id: id, bytes: bytes, total: total, state: state.rawValue))
        case .book(let id, let cached): (name, payload) = ("book", BookChange(id: id, cached: cached))
        case .source(let id, let source): (name, payload) = ("source", SourceChange(id: id, source: source))
        }
        return encode(name: name, payload)
    }

    /// One event: its name and its payload as one line of JSON.
    static func encode(name: String, _ payload: any Encodable) -> String {
        let data = (try? MetadataCoding.encoder().encode(payload)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return "event: \(name)\ndata: \(data)\n\n"
    }

    struct Progress: Encodable {
        var id: String
        var bytes: Int64
        var total: Int64?
        var state: String
    }

    struct BookChange: Encodable {
        var id: String
        var cached: Bool
    }

    struct SourceChange: Encodable {
        var id: String
        var source: ScheduledSource?
    }
}
