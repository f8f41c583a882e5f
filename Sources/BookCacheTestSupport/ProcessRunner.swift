import Foundation

/// Runs a built executable and captures what it printed, for end-to-end CLI tests.
public struct ProcessResult: Sendable {
    /// The exit status.
    public var status: Int32
    /// Everything written to stdout.
    public var stdout: String
    /// Everything written to stderr.
    public var stderr: String
}

public enum ProcessRunner {
    /// The folder holding the built products (`.build/debug`).
    public static var productsDirectory: URL {
        #if os(macOS)
            for bundle in Bundle.allBundles where bundle.bundlePath.hasSuffix(".xctest") {
                return bundle.bundleURL.deletingLastPathComponent()
            }
            return Bundle.main.bundleURL
        #else
            return Bundle.main.bundleURL
        #endif
    }

    /// Runs `executable` from the products folder with `arguments`, optionally feeding `stdin`,
    /// and waits for it to exit.
    /// - Parameters:
    ///   - executable: The product name, such as `bookcache`.
    ///   - arguments: The arguments.
    ///   - environment: Extra environment variables.
    ///   - stdin: Bytes for standard input; empty input when `nil`.
    /// - Returns: Exit status and output.
    public static func run(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String] = [:],
        stdin: Data? = nil
    ) async throws -> ProcessResult {
        try await launch(executable, arguments, environment: environment, stdin: stdin ?? Data()).wait()
    }

    /// Starts `executable` from the products folder and returns at once.
    /// - Parameters:
    ///   - executable: The product name, such as `bookcache`.
    ///   - arguments: The arguments.
    ///   - environment: Extra environment variables.
    ///   - stdin: Bytes for standard input (then closed); no standard input when `nil`.
    public static func launch(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil
    ) throws -> RunningProcess {
        let url = productsDirectory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw ProcessRunnerError(message: "\(url.path) is not built; run 'swift build' first")
        }
        return try launch(at: url, arguments, environment: environment, stdin: stdin)
    }

    /// Runs a program given by its path (a system tool such as `/usr/bin/calibredb`) to its end.
    public static func run(
        at url: URL, _ arguments: [String], environment: [String: String] = [:]
    ) async throws -> ProcessResult {
        try await launch(at: url, arguments, environment: environment, stdin: Data()).wait()
    }

    /// Starts a program given by its path and returns at once.
    public static func launch(
        at url: URL, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil
    ) throws -> RunningProcess {
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        // A proxy of the machine's would see the tests' loopback traffic: tests that want one say so.
        for key in ["http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"] { env[key] = nil }
        // English, whatever the machine's locale: tests that want another language say so.
        for key in ["LC_ALL", "LC_MESSAGES"] { env[key] = nil }
        env["LANG"] = "C"
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = stdin.map { _ in Pipe() }
        process.standardInput = input ?? FileHandle.nullDevice
        try process.run()
        if let input, let stdin {
            // Fed from a thread of its own, so a large input never blocks on a full pipe.
            Thread {
                input.fileHandleForWriting.write(stdin)
                try? input.fileHandleForWriting.close()
            }.start()
        }
        return RunningProcess(process: process, output: out, errors: err)
    }
}

/// Reads `pipe` to its end on a thread of its own while `other` runs here, so neither pipe of a
/// chatty child fills up and blocks it.
private func readToEnd(_ pipe: Pipe, while other: () -> Data) -> (data: Data, other: Data) {
    let box = DataBox()
    let done = DispatchSemaphore(value: 0)
    Thread {
        box.data = pipe.fileHandleForReading.readDataToEndOfFile()
        done.signal()
    }.start()
    let otherData = other()
    done.wait()
    return (box.data, otherData)
}

private final class DataBox: @unchecked Sendable {
    // Written by one thread before the semaphore is signalled (or the continuation resumed),
    // read after it is waited on.
    var data = Data()
}

/// A child process started by ``ProcessRunner/launch(_:_:environment:)``, for tests that signal it.
public final class RunningProcess: @unchecked Sendable {
    // Process is not Sendable; this wrapper only reads its pid and waits for it, which are safe
    // from any thread.
    private let process: Process
    private let output: Pipe
    private let errors: Pipe

    init(process: Process, output: Pipe, errors: Pipe) {
        self.process = process
        self.output = output
        self.errors = errors
    }

    /// The child's process id.
    public var pid: Int32 { process.processIdentifier }

    /// Standard output already read by ``line(containing:)``, given back by ``wait()``.
    private let consumed = DataBox()

    /// Reads standard output until a line containing `marker` has arrived and returns it;
    /// `nil` when the output ends first. What was read stays part of what ``wait()`` returns.
    public func line(containing marker: String) async -> String? {
        await withCheckedContinuation { continuation in
            Thread {
                var found: String?
                var lines = ""
                while found == nil {
                    let chunk = self.output.fileHandleForReading.availableData
                    if chunk.isEmpty { break }
                    self.consumed.data.append(chunk)
                    lines += String(decoding: chunk, as: UTF8.self)
                    let complete = lines.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    found = complete.first { $0.contains(marker) }.map(String.init)
                }
                continuation.resume(returning: found)
            }.start()
        }
    }

    /// Sends a signal, such as `SIGTERM`.
    public func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the child to exit and returns what it printed. Waiting blocks a thread: it
    /// happens on a thread of its own, not on a dispatch queue — on Linux the concurrency pool
    /// runs on dispatch's threads, and blocking them starves the test's own tasks.
    public func wait() async -> ProcessResult {
        await withCheckedContinuation { continuation in
            Thread {
                let read = readToEnd(self.errors, while: { self.output.fileHandleForReading.readDataToEndOfFile() })
                self.process.waitUntilExit()
                continuation.resume(
                    returning: ProcessResult(
                        status: self.process.terminationStatus,
                        stdout: String(decoding: self.consumed.data + read.other, as: UTF8.self),
                        stderr: String(decoding: read.data, as: UTF8.self)))
            }.start()
        }
    }
}

/// The executable under test could not be run.
public struct ProcessRunnerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { message }
}
