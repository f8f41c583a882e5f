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

    /// Runs `executable` from the products folder with `arguments`, optionally feeding `stdin`.
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
        // Waiting for a child blocks a thread: do it on a thread of its own. Not on a dispatch
        // queue: on Linux the concurrency pool runs on dispatch's threads, and blocking them
        // starves the test's own tasks.
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(with: Result {
                    try runBlocking(executable, arguments, environment: environment, stdin: stdin)
                })
            }.start()
        }
    }

    private static func runBlocking(
        _ executable: String,
        _ arguments: [String],
        environment: [String: String],
        stdin: Data?
    ) throws -> ProcessResult {
        let url = productsDirectory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw ProcessRunnerError(message: "\(url.path) is not built; run 'swift build' first")
        }
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        let input = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try input.fileHandleForWriting.close()
        // Read both pipes to the end before waiting, so a chatty child never blocks on a full pipe.
        let errData = readToEnd(err, while: { out.fileHandleForReading.readDataToEndOfFile() })
        let outData = errData.other
        process.waitUntilExit()
        return ProcessResult(
            status: process.terminationStatus,
            stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData.data, as: UTF8.self)
        )
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
    // Written by one thread before the semaphore is signalled, read after it is waited on.
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

    /// Sends a signal, such as `SIGTERM`.
    public func send(_ signal: Int32) {
        kill(process.processIdentifier, signal)
    }

    /// Waits for the child to exit and returns what it printed.
    public func wait() async -> ProcessResult {
        await withCheckedContinuation { continuation in
            Thread {
                let read = readToEnd(self.errors, while: { self.output.fileHandleForReading.readDataToEndOfFile() })
                self.process.waitUntilExit()
                continuation.resume(
                    returning: ProcessResult(
                        status: self.process.terminationStatus,
                        stdout: String(decoding: read.other, as: UTF8.self),
                        stderr: String(decoding: read.data, as: UTF8.self)))
            }.start()
        }
    }
}

extension ProcessRunner {
    /// Starts `executable` from the products folder and returns at once.
    public static func launch(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws -> RunningProcess {
        let url = productsDirectory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw ProcessRunnerError(message: "\(url.path) is not built; run 'swift build' first")
        }
        let process = Process()
        process.executableURL = url
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        return RunningProcess(process: process, output: out, errors: err)
    }
}

/// The executable under test could not be run.
public struct ProcessRunnerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { message }
}
