import Foundation
import Logging
import Synchronization

/// Sends the library's log to stderr as one plain line per message: warnings always,
/// everything from `info` up with `--verbose`.
enum CLILogging {
    private static let done = Mutex(false)

    static func bootstrap(verbose: Bool) {
        let first = done.withLock { done in
            defer { done = true }
            return !done
        }
        guard first else { return }
        LoggingSystem.bootstrap { label in
            var handler = StderrLineHandler()
            handler.logLevel = verbose ? .debug : .warning
            return handler
        }
    }
}

struct StderrLineHandler: LogHandler {
    var logLevel: Logger.Level = .warning
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        let details = merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let level = event.level >= .warning ? "\(event.level)" : "\(event.level)"
        Terminal.writeError("\(level): \(event.message)\(details.isEmpty ? "" : " (\(details))")")
    }
}
