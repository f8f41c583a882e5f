import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writing to the terminal: plain lines, and whether a stream is a terminal.
enum Terminal {
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }
    static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }

    static func writeError(_ line: String) {
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    static func write(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    /// Writes `bytes` and a newline to stdout.
    static func write(bytes: [UInt8]) {
        var data = Data(bytes)
        data.append(0x0A)
        FileHandle.standardOutput.write(data)
    }

    /// Overwrites the current stderr line (for progress bars).
    static func overwriteErrorLine(_ text: String) {
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
    }
}
