import BookCache
import DownloadQueue
import Foundation
import Synchronization

/// Shows a download run: a live view on a terminal, a line per finished item otherwise, or
/// NDJSON with `--json`. Every method may be called from any task.
final class BatchReporter: Sendable {
    enum Mode {
        case live
        case lines
        case json
        /// `--quiet`: errors only (the exit status says the rest).
        case quiet
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
        var lastDraw: ContinuousClock.Instant?
    }

    let mode: Mode
    private let total: Int
    private let batch: Bool
    private let start = ContinuousClock.now
    private let state = Mutex(State())
    /// The rows of the live view on the screen now. Everything written to the terminal in live
    /// mode happens under this lock: a clear from one thread between another thread's counting
    /// of its rows and its writing of them once left a whole view behind on the screen.
    private let screen = Mutex(0)

    init(mode: Mode, total: Int, batch: Bool) {
        self.mode = mode
        self.total = total
        self.batch = batch
    }

    // MARK: Events

    func handle(_ event: BookEvent, id: BookID) {
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
        screen.withLock { draw(&$0, force: false) }
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
                state.failureStatuses.append(outcome.failure?.exitStatus ?? ExitStatus.failure)
            case .interrupted: state.interrupted += 1
            }
            if outcome.status == .cached { state.bytes += outcome.bytes }
        }
        switch mode {
        case .json:
            Terminal.write(Self.json(outcome))
        case .quiet:
            switch outcome.status {
            case .failed: Terminal.writeError(Localized.error(outcome.failure?.message(in: Localized.locale) ?? "failed"))
            case .interrupted:
                Terminal.writeError(
                    Localized.text("interrupted %@; its partial download is kept and resumes on the next run", outcome.id ?? "?"))
            case .cached, .alreadyCached: break
            }
        case .lines, .live:
            screen.withLock { drawn in
                clear(&drawn)
                for book in outcome.evicted { Terminal.writeError(book.line) }
                switch outcome.status {
                case .cached:
                    Terminal.write(
                        Localized.text(
                            "cached %1$@ (%2$@, %3$@): %4$@", outcome.id ?? "?", outcome.format ?? "?", Localized.size(outcome.bytes),
                            outcome.path ?? ""))
                    for warning in outcome.warnings { Terminal.writeError(Localized.warning("\(outcome.id ?? "?"): \(warning)")) }
                case .alreadyCached:
                    Terminal.write(
                        Localized.text(
                            "%1$@ is already cached (%2$@): %3$@", outcome.id ?? "?", Localized.size(outcome.bytes), outcome.path ?? ""))
                case .failed:
                    Terminal.writeError(Localized.error(outcome.failure?.message(in: Localized.locale) ?? "failed"))
                case .interrupted:
                    Terminal.writeError(
                        Localized.text("interrupted %@; its partial download is kept and resumes on the next run", outcome.id ?? "?"))
                }
                draw(&drawn, force: true)
            }
        }
    }

    func warning(_ text: String) {
        if mode == .quiet { return }
        screen.withLock { drawn in
            clear(&drawn)
            Terminal.writeError(Localized.warning(text))
            draw(&drawn, force: true)
        }
    }

    /// Takes the live view off the screen (for a command that prints its own lines afterwards).
    func endLive() {
        screen.withLock { clear(&$0) }
    }

    /// The exit status of each failed book so far.
    var failureStatuses: [Int32] { state.withLock { $0.failureStatuses } }

    /// Prints the closing summary; returns whether every item ended cached.
    @discardableResult
    func summarize(interrupted: Bool) -> Bool {
        screen.withLock { clear(&$0) }
        let snapshot = state.withLock { $0 }
        let good = snapshot.cached + snapshot.alreadyCached
        let unfinished = total - snapshot.finished
        var line = Localized.text("%1$lld of %2$lld cached, %3$lld failed", Int64(good), Int64(total), Int64(snapshot.failed))
        if snapshot.alreadyCached > 0 { line += Localized.text(" (%lld already cached)", Int64(snapshot.alreadyCached)) }
        if snapshot.interrupted > 0 { line += Localized.text(", %lld interrupted", Int64(snapshot.interrupted)) }
        if unfinished > 0 { line += Localized.text(", %lld not done", Int64(unfinished)) }
        if interrupted { line += Localized.text("; interrupted — partial downloads are kept and resume on the next run") }
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
        case .quiet:
            break
        }
        return good == total
    }

    // MARK: Live view

    /// Draws the live view over the one on the screen; `drawn` is the rows it takes. Called
    /// under ``screen``.
    private func draw(_ drawn: inout Int, force: Bool) {
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
            // The overall bar and ETA go by bytes: what arrived against the sizes known (finished
            // books, the announced sizes of running ones), with books not started yet counted at
            // the average size so far. Counting finished books showed 0/5 with two at 56%.
            let received = state.bytes + state.active.values.reduce(0) { $0 + $1.received }
            let known = state.bytes + state.active.values.reduce(0) { $0 + max($1.total ?? $1.received, $1.received) }
            let measured = state.cached + state.active.count
            let waiting = max(0, total - state.finished - state.active.count)
            let expected = known + (measured > 0 ? known / Int64(measured) * Int64(waiting) : 0)
            let elapsed = max(0.001, (now - start).seconds)
            let rate = Double(received) / elapsed
            let fraction = total == 0 || state.finished == total ? 1 : (expected > 0 ? min(1, Double(received) / Double(expected)) : 0)
            let width = 24
            let filled = Int(fraction * Double(width))
            var summary = "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            summary += "\(Int(fraction * 100))% · \(state.finished)/\(total) done"
            if state.failed > 0 { summary += ", \(state.failed) failed" }
            summary += " · \(ByteFormat.string(received)) · \(ByteFormat.string(Int64(rate)))/s"
            if rate > 0, expected > received, state.finished < total {
                let eta = Double(expected - received) / rate
                summary += " · ETA \(Self.format(.seconds(Int64(eta.rounded(.up)))))"
            }
            lines.append(summary)
            let columns = Terminal.stderrColumns
            return lines.map { Terminal.fit($0, columns: columns) }
        }
        guard let lines else { return }
        // Rows are erased one by one (ESC[2K), never with "erase to the end of the screen": at
        // the top of a tmux pane that erases the whole screen, which tmux first copies into the
        // scrollback, leaving every earlier view there.
        var output = drawn > 0 ? "\u{1B}[\(drawn)A" : ""
        for line in lines { output += "\r\u{1B}[2K" + line + "\n" }
        if drawn > lines.count {
            let extra = drawn - lines.count
            output += String(repeating: "\r\u{1B}[2K\n", count: extra) + "\u{1B}[\(extra)A"
        }
        FileHandle.standardError.write(Data(output.utf8))
        drawn = lines.count
    }

    /// Removes the live view from the screen, leaving the cursor where it began. Called under ``screen``.
    private func clear(_ drawn: inout Int) {
        guard mode == .live, drawn > 0 else { return }
        let output = "\u{1B}[\(drawn)A" + String(repeating: "\r\u{1B}[2K\n", count: drawn) + "\u{1B}[\(drawn)A"
        FileHandle.standardError.write(Data(output.utf8))
        drawn = 0
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
            "error": outcome.failure?.message(in: Localized.machineLocale) ?? NSNull(), "kind": outcome.failure?.kind ?? NSNull(),
            "refusal": outcome.failure?.error?.refusal?.rawValue ?? NSNull(),
            "neededBytes": outcome.failure?.error?.neededBytes ?? NSNull(),
            "availableBytes": outcome.failure?.error?.availableBytes ?? NSNull(), "attempts": outcome.attempts, "bytes": outcome.bytes,
            "evicted": outcome.evicted.map {
                ["id": $0.metadata.id, "bytes": $0.metadata.fileSize, "reason": $0.reason.rawValue] as [String: Any]
            },
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
