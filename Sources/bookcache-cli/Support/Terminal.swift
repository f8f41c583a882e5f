import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Writing to the terminal: plain lines, and whether a stream is a terminal.
enum Terminal {
    static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Whether stderr can show a live view: a terminal that moves its cursor (not `TERM=dumb`).
    static var stderrIsLiveTerminal: Bool {
        guard stderrIsTerminal else { return false }
        let term = ProcessInfo.processInfo.environment["TERM"] ?? ""
        return !term.isEmpty && term != "dumb"
    }

    /// The width of the terminal on stderr, read each time (it may be resized); 80 when unknown.
    static var stderrColumns: Int {
        var size = winsize()
        guard ioctl(STDERR_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// `line` cut to `columns - 1` characters (with '…'), so it takes exactly one screen row and
    /// a redraw that moves the cursor up by lines moves it up by rows.
    static func fit(_ line: String, columns: Int) -> String {
        let limit = max(10, columns - 1)
        guard line.count > limit else { return line }
        return String(line.prefix(limit - 1)) + "…"
    }
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

/// Lines for standard output gathered and written a megabyte at a time: a write per line is a
/// system call per book (50,000 for a prune of half of 100,000 books).
struct BufferedLines {
    private var buffer: [UInt8] = []
    private let output: ([UInt8]) -> Void

    /// - Parameter output: Called with each megabyte, and the rest at ``flush()``.
    init(output: @escaping ([UInt8]) -> Void = { FileHandle.standardOutput.write(Data($0)) }) {
        self.output = output
    }

    /// Adds `line` and a newline.
    mutating func write(_ line: String) {
        buffer.append(contentsOf: line.utf8)
        buffer.append(0x0A)
        if buffer.count >= 1 << 20 { flush() }
    }

    /// Writes what is gathered.
    mutating func flush() {
        guard !buffer.isEmpty else { return }
        output(buffer)
        buffer.removeAll(keepingCapacity: true)
    }
}
