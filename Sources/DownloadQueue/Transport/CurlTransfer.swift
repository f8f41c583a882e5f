import CCurl
import Foundation
import Synchronization

/// One transfer: its easy handle (touched only on the driver thread) and the state its caller reads.
// Unchecked: the easy handle is touched on the driver thread only; what callers read is behind `state`'s Mutex.
final class CurlTransfer: @unchecked Sendable {
    struct Head: Sendable {
        var status: Int
        var headers: [(name: String, value: String)]
        var url: URL
    }

    private struct State {
        /// What to do next, decided without I/O (see ``CurlTransferState``).
        var machine: CurlTransferState
        var headers: [(name: String, value: String)] = []
        var failure: DownloadError?
        // The continuations the machine says to resume; set while it says someone waits.
        var head: CheckedContinuation<Head, any Error>?
        var reader: CheckedContinuation<[UInt8]?, any Error>?
    }

    let url: URL
    let requestHeaders: [(name: String, value: String)]
    let credentials: HTTPCredentials?
    let configuration: CurlTransport.Configuration
    // Set and used on the driver thread only.
    var handle: UnsafeMutableRawPointer?
    var headerList: UnsafeMutablePointer<curl_slist>?
    /// Whether its handle came with a Digest nonce from an earlier transfer.
    var answersDigestUpFront = false
    private let state: Mutex<State>

    /// A body read slower than it arrives pauses the transfer past this many buffered bytes.
    static let pauseAbove = 4 << 20
    /// The bytes kept unread by all transfers of the transport, which pause together past its bound.
    let budget: BufferBudget

    /// Whether libcurl follows redirects itself (off when the caller follows them, hop by hop).
    let followsRedirects: Bool

    init(
        url: URL, headers: [(name: String, value: String)], credentials: HTTPCredentials?, configuration: CurlTransport.Configuration,
        budget: BufferBudget, followsRedirects: Bool = true
    ) {
        self.url = url
        self.budget = budget
        state = Mutex(State(machine: CurlTransferState(pauseAbove: Self.pauseAbove, sharedLimit: budget.limit)))
        self.followsRedirects = followsRedirects
        self.requestHeaders = headers
        self.credentials = credentials
        self.configuration = configuration
    }

    deinit {
        // A body not read to its end (cancelled, failed) leaves its bytes to no reader.
        budget.released(state.withLock { $0.machine.bufferedBytes })
    }

    func start(head: CheckedContinuation<Head, any Error>) {
        state.withLock { state in
            state.head = head
            state.machine.headRequested()
        }
    }

    // MARK: Driver thread

    /// A header line of some response; a status line starts a new response (after a redirect
    /// or a `401` answered with a login), so only the last response's headers are kept.
    func received(headerLine line: UnsafeRawBufferPointer) {
        // Bytes, not Foundation's trimming (3.6% of a batch of small books): a header costs its
        // two strings and nothing more.
        let isStatusLine = line.starts(with: "HTTP/".utf8)
        let header = line.firstIndex(of: UInt8(ascii: ":")).map { colon in
            (Self.trimmed(line[..<colon]), Self.trimmed(line[(colon + 1)...]))
        }
        state.withLock { state in
            if isStatusLine {
                state.headers = []
            } else if let header {
                state.headers.append(header)
            }
        }
    }

    /// `bytes` without the spaces, tabs and line ends around them, as UTF-8 text.
    static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A }
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// Body bytes. Returns `false` when the transfer must pause (the bytes are then not taken:
    /// libcurl hands them over again once it is unpaused). `head` reads the response's status
    /// and URL; it is called for the first bytes only.
    func received(body bytes: UnsafeRawBufferPointer, head readHead: () -> (status: Int, url: URL?)) -> Bool {
        // The bytes are copied once: to the waiting reader, or into the buffer.
        let (head, reader, buffer, accepted):
            (CheckedContinuation<Head, any Error>?, CheckedContinuation<[UInt8]?, any Error>?, [UInt8]?, Bool) =
                state.withLock { state in
                    let (deliverHead, arrival) = state.machine.bodyArrived(count: bytes.count, allKeep: budget.keptBytes)
                    let head = deliverHead ? state.head.take() : nil
                    switch arrival {
                    case .pause:
                        return (head, nil, nil, false)
                    case .toReader:
                        return (head, state.reader.take(), [UInt8](bytes), true)
                    case .buffer:
                        state.machine.buffer([UInt8](bytes))
                        budget.kept(bytes.count)
                        return (head, nil, nil, true)
                    }
                }
        if let head {
            let info = readHead()
            head.resume(returning: makeHead(status: info.status, effectiveURL: info.url))
        }
        if let reader, let buffer { reader.resume(returning: buffer) }
        return accepted
    }

    /// The transfer ended: `error` is nil on success.
    func finished(status: Int, effectiveURL: URL?, error: DownloadError?) {
        let (head, reader): (CheckedContinuation<Head, any Error>?, CheckedContinuation<[UInt8]?, any Error>?) = state.withLock { state in
            state.failure = error
            let (deliverHead, endReader) = state.machine.finished(error == nil ? .success : .failure)
            return (deliverHead ? state.head.take() : nil, endReader ? state.reader.take() : nil)
        }
        if let head {
            if let error {
                head.resume(throwing: error)
            } else {
                head.resume(returning: makeHead(status: status, effectiveURL: effectiveURL))
            }
        }
        if let reader {
            if let error { reader.resume(throwing: error) } else { reader.resume(returning: nil) }
        }
    }

    func makeHead(status: Int, effectiveURL: URL?) -> Head {
        Head(status: status, headers: state.withLock { $0.headers }, url: effectiveURL ?? url)
    }

    func resumeIfPaused() -> Bool {
        state.withLock { $0.machine.unpause() }
    }

    // MARK: Reader

    func nextBuffer(unpause: @Sendable () -> Void) async throws -> [UInt8]? {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
            enum Action {
                case give([UInt8]?)
                case fail(any Error)
                case wait(unpause: Bool)
            }
            let action: Action = state.withLock { state in
                switch state.machine.read() {
                case .give(let buffer):
                    budget.released(buffer.count)
                    return .give(buffer)
                case .end: return .give(nil)
                case .fail: return .fail(state.failure ?? DownloadError(kind: .transport, url: url))
                case .wait(let unpause):
                    state.reader = continuation
                    return .wait(unpause: unpause)
                }
            }
            switch action {
            case .give(let buffer): continuation.resume(returning: buffer)
            case .fail(let error): continuation.resume(throwing: error)
            case .wait(let paused): if paused { unpause() }
            }
        }
    }
}
