import BookCache
import Foundation
import Synchronization

/// Shows a download run: a live view on a terminal, a line per finished item otherwise, or
/// NDJSON with `--json`. Every method may be called from any task.
final class BatchReporter: Sendable {
    enum Mode {
        case live
        case lines
        case json
    }

    private struct Active {
        var id: String
        var received: Int64 = 0
        var total: Int64?
        var attempt = 1
        var note: String?
    }

    private struct State {
        var active: [String: Active] = [:]
        var order: [String] = []
        var finished = 0
        var cached = 0
        var alreadyCached = 0
        var failed = 0
        /// The exit status of each failure (``ExitStatus``).
        var failureStatuses: [Int32] = []
        var interrupted = 0
        var bytes: Int64 = 0
        var drawnLines = 0
        var lastDraw: ContinuousClock.Instant?
    }

    let mode: Mode
    private let total: Int
    private let batch: Bool
    private let start = ContinuousClock.now
    private let state = Mutex(State())

    init(mode: Mode, total: Int, batch: Bool) {
        self.mode = mode
        self.total = total
        self.batch = batch
    }

    // MARK: Events

    func handle(_ event: DownloadEvent, id: BookID) {
        guard mode == .live else { return }
        let key = id.description
        state.withLock { state in
            switch event {
            case .started(_, let attempt):
                if state.active[key] == nil { state.order.append(key) }
                state.active[key, default: Active(id: key)].attempt = attempt
                state.active[key]?.note = nil
            case .progress(_, let progress):
                state.active[key]?.received = progress.receivedBytes
                state.active[key]?.total = progress.totalBytes
            case .retrying(_, let attempt, let delay, let reason):
                state.active[key]?.note = "retrying in \(Self.format(delay)) after attempt \(attempt): \(reason)"
            default:
                break
            }
        }
        redraw(force: false)
    }

    func finished(_ outcome: BatchOutcome) {
        state.withLock { state in
            if let id = outcome.id {
                state.active[id] = nil
                state.order.removeAll { $0 == id }
            }
            state.finished += 1
            switch outcome.status {
            case .cached: state.cached += 1
            case .alreadyCached: state.alreadyCached += 1
            case .failed:
                state.failed += 1
                state.failureStatuses.append(outcome.exitStatus ?? ExitStatus.failure)
            case .interrupted: state.interrupted += 1
            }
            if outcome.status == .cached { state.bytes += outcome.bytes }
        }
        switch mode {
        case .json:
            Terminal.write(Self.json(outcome))
        case .lines, .live:
            clearLive()
            for book in outcome.evicted { Terminal.writeError(book.line) }
            switch outcome.status {
            case .cached:
                Terminal.write("cached \(outcome.id ?? "?") (\(outcome.format ?? "?"), \(ByteFormat.string(outcome.bytes))): \(outcome.path ?? "")")
                for warning in outcome.warnings { Terminal.writeError("warning: \(outcome.id ?? "?"): \(warning)") }
            case .alreadyCached:
                Terminal.write("\(outcome.id ?? "?") is already cached (\(ByteFormat.string(outcome.bytes))): \(outcome.path ?? "")")
            case .failed:
                Terminal.writeError("error: \(outcome.error ?? "failed")")
            case .interrupted:
                Terminal.writeError("interrupted \(outcome.id ?? "?"); its partial download is kept and resumes on the next run")
            }
            redraw(force: true)
        }
    }

    func warning(_ text: String) {
        clearLive()
        Terminal.writeError("warning: \(text)")
        redraw(force: true)
    }

    /// The exit status of each failed book so far.
    var failureStatuses: [Int32] { state.withLock { $0.failureStatuses } }

    /// Prints the closing summary; returns whether every item ended cached.
    @discardableResult
    func summarize(interrupted: Bool) -> Bool {
        clearLive()
        let snapshot = state.withLock { $0 }
        let good = snapshot.cached + snapshot.alreadyCached
        let unfinished = total - snapshot.finished
        var line = "\(good) of \(total) cached, \(snapshot.failed) failed"
        if snapshot.alreadyCached > 0 { line += " (\(snapshot.alreadyCached) already cached)" }
        if snapshot.interrupted > 0 { line += ", \(snapshot.interrupted) interrupted" }
        if unfinished > 0 { line += ", \(unfinished) not done" }
        if interrupted { line += "; interrupted — partial downloads are kept and resume on the next run" }
        switch mode {
        case .json:
            let summary: [String: Any] = [
                "summary": true, "total": total, "cached": snapshot.cached, "alreadyCached": snapshot.alreadyCached,
                "failed": snapshot.failed, "interruptedBooks": snapshot.interrupted, "notDone": unfinished, "interrupted": interrupted,
                "bytes": snapshot.bytes,
            ]
            Terminal.write(Self.encode(summary))
            if batch { Terminal.writeError(line) }
        case .lines, .live:
            if batch || interrupted { Terminal.write(line) }
        }
        return good == total
    }

    // MARK: Live view

    private func redraw(force: Bool) {
        guard mode == .live else { return }
        let now = ContinuousClock.now
        let lines: [String]? = state.withLock { state in
            if !force, let last = state.lastDraw, now - last < .milliseconds(100) { return nil }
            state.lastDraw = now
            var lines: [String] = []
            for key in state.order.prefix(12) {
                guard let item = state.active[key] else { continue }
                lines.append("  " + Self.describe(item))
            }
            if state.order.count > 12 { lines.append("  … and \(state.order.count - 12) more") }
            let received = state.bytes + state.active.values.reduce(0) { $0 + $1.received }
            let elapsed = max(0.001, (now - start).seconds)
            let rate = Double(received) / elapsed
            let fraction = total == 0 ? 1 : Double(state.finished) / Double(total)
            let width = 24
            let filled = Int(fraction * Double(width))
            var summary = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            summary += "\(state.finished)/\(total) done"
            if state.failed > 0 { summary += ", \(state.failed) failed" }
            summary += " · \(ByteFormat.string(received)) · \(ByteFormat.string(Int64(rate)))/s"
            if state.finished > 0 && state.finished < total {
                let eta = elapsed / Double(state.finished) * Double(total - state.finished)
                summary += " · ETA \(Self.format(.seconds(Int64(eta))))"
            }
            lines.append(summary)
            return lines
        }
        guard let lines else { return }
        let previous = state.withLock { state -> Int in
            defer { state.drawnLines = lines.count }
            return state.drawnLines
        }
        var output = previous > 0 ? "\u{1B}[\(previous)A" : ""
        for line in lines { output += "\r\u{1B}[2K" + line + "\n" }
        output += "\u{1B}[J"
        FileHandle.standardError.write(Data(output.utf8))
    }

    private func clearLive() {
        guard mode == .live else { return }
        let previous = state.withLock { state -> Int in
            defer { state.drawnLines = 0 }
            return state.drawnLines
        }
        guard previous > 0 else { return }
        FileHandle.standardError.write(Data("\u{1B}[\(previous)A\r\u{1B}[J".utf8))
    }

    private static func describe(_ item: Active) -> String {
        if let note = item.note { return "\(item.id)  \(note)" }
        var text = "\(item.id)  "
        if let total = item.total, total > 0 {
            let fraction = min(1, Double(item.received) / Double(total))
            let width = 16
            let filled = Int(fraction * Double(width))
            text += "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            text += "\(Int(fraction * 100))% \(ByteFormat.string(item.received))/\(ByteFormat.string(total))"
        } else {
            text += ByteFormat.string(item.received)
        }
        if item.attempt > 1 { text += " (attempt \(item.attempt))" }
        return text
    }

    static func format(_ duration: Duration) -> String {
        let seconds = Int(duration.seconds.rounded(.up))
        if seconds < 60 { return "\(seconds)s" }
        return "\(seconds / 60)m\(String(format: "%02d", seconds % 60))s"
    }

    private static func json(_ outcome: BatchOutcome) -> String {
        let object: [String: Any] = [
            "id": outcome.id ?? NSNull(), "status": outcome.status.rawValue, "path": outcome.path ?? NSNull(),
            "error": outcome.error ?? NSNull(), "kind": outcome.kind ?? NSNull(), "attempts": outcome.attempts, "bytes": outcome.bytes,
            "evicted": outcome.evicted.map { ["id": $0.metadata.id, "bytes": $0.metadata.fileSize, "reason": $0.reason.rawValue] as [String: Any] },
            "warnings": outcome.warnings,
        ]
        return encode(object)
    }

    private static func encode(_ object: [String: Any]) -> String {
        // Only strings, numbers, booleans and nulls go in, so serialising cannot fail.
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }
}

extension Duration {
    var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
