import BookCache
import DownloadQueue
import Foundation
import Synchronization

/// A one-line progress bar on stderr, drawn only when stderr is a terminal, at most ten times
/// a second.
final class ProgressBar: Sendable {
    private struct State {
        var lastDraw: ContinuousClock.Instant?
        var drewAnything = false
    }

    private let label: String
    private let enabled: Bool
    private let start = ContinuousClock.now
    private let state = Mutex(State())

    init(label: String, enabled: Bool = Terminal.stderrIsLiveTerminal) {
        self.label = label
        self.enabled = enabled
    }

    func update(_ progress: DownloadProgress) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let draw = state.withLock { state -> Bool in
            if let last = state.lastDraw, now - last < .milliseconds(100), progress.receivedBytes != progress.totalBytes {
                return false
            }
            state.lastDraw = now
            state.drewAnything = true
            return true
        }
        guard draw else { return }
        let elapsed = max(0.001, (now - start).seconds)
        let rate = Double(progress.receivedBytes) / elapsed
        let received = ByteFormat.string(progress.receivedBytes)
        var line = "\(label) "
        if let fraction = progress.fractionCompleted, let total = progress.totalBytes {
            let width = 24
            let filled = Int(fraction * Double(width))
            line += "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            line += "\(Int(fraction * 100))% \(received)/\(ByteFormat.string(total))"
        } else {
            line += received
        }
        line += " \(ByteFormat.string(Int64(rate)))/s"
        // One screen row, or the carriage return would redraw only the last row of a wrapped line.
        Terminal.overwriteErrorLine(Terminal.fit(line, columns: Terminal.stderrColumns))
    }

    /// Clears the bar so the next line starts clean.
    func finish() {
        guard enabled, state.withLock({ $0.drewAnything }) else { return }
        Terminal.overwriteErrorLine("")
    }
}
