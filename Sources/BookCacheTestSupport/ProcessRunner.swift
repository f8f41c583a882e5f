import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a built executable and captures what it printed, for end-to-end CLI tests.
public struct ProcessResult: Sendable {
    /// The exit status; 128 + the signal's number when a signal ended the child (as a shell says).
    public var status: Int32
    /// Everything written to stdout.
    public var stdout: String
    /// Everything written to stderr.
    public var stderr: String
}

/// Starts child processes with `posix_spawn` and waits for them with `waitpid`, on threads of
/// their own.
///
/// Not Foundation's `Process`: on Linux it learns that a child ended from a socket the child
/// inherits, so a daemon the child leaves behind (a tmux server started by `tmux new-session`)
/// keeps that socket open, the child is never reaped, and `waitUntilExit` spins for ever — CI
/// once hung 90 minutes that way. Here a child gets standard input, output and error and nothing
/// else (every other descriptor is closed in it), sits in a process group of its own, and is
/// killed with its group when it outlives its time limit, so a test fails instead of hanging.
public enum ProcessRunner {
    /// How long a child may run before it is killed with its process group (the test then sees
    /// its output so far and a status of 137).
    public static let defaultTimeLimit: Duration = .seconds(300)

    /// The folder holding the built products (`.build/debug`).
    public static var productsDirectory: URL {
        Bundle.main.bundleURL
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
    ///   - timeLimit: How long it may run before it is killed.
    public static func launch(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
        timeLimit: Duration = defaultTimeLimit
    ) throws -> RunningProcess {
        let url = productsDirectory.appendingPathComponent(executable)
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw ProcessRunnerError(message: "\(url.path) is not built; run 'swift build' first")
        }
        return try launch(at: url, arguments, environment: environment, stdin: stdin, timeLimit: timeLimit)
    }

    /// Runs a program given by its path (a system tool such as `/usr/bin/calibredb`) to its end.
    public static func run(
        at url: URL, _ arguments: [String], environment: [String: String] = [:]
    ) async throws -> ProcessResult {
        try await launch(at: url, arguments, environment: environment, stdin: Data()).wait()
    }

    /// Starts a program given by its path and returns at once.
    /// - Parameters:
    ///   - url: The program.
    ///   - arguments: The arguments.
    ///   - environment: Extra environment variables (proxies and the language are cleared first).
    ///   - stdin: Bytes for standard input (then closed); `/dev/null` when `nil`.
    ///   - mergingErrors: Whether standard error goes into the same pipe as standard output.
    ///   - timeLimit: How long it may run before it is killed with its process group.
    public static func launch(
        at url: URL, _ arguments: [String], environment: [String: String] = [:], stdin: Data? = nil,
        mergingErrors: Bool = false, timeLimit: Duration = defaultTimeLimit
    ) throws -> RunningProcess {
        var env = ProcessInfo.processInfo.environment
        // A proxy of the machine's would see the tests' loopback traffic: tests that want one say so.
        for key in ["http_proxy", "https_proxy", "all_proxy", "no_proxy", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"] { env[key] = nil }
        // English, whatever the machine's locale: tests that want another language say so.
        for key in ["LC_ALL", "LC_MESSAGES"] { env[key] = nil }
        env["LANG"] = "C"
        for (key, value) in environment { env[key] = value }
        let process = try RunningProcess(
            path: url.path, arguments: arguments, environment: env.map { "\($0.key)=\($0.value)" }, stdin: stdin,
            mergingErrors: mergingErrors, timeLimit: timeLimit)
        return process
    }
}

/// A child process started by ``ProcessRunner``: its output is read as it arrives, its end is
/// waited for with `waitpid`, each on a thread of its own (blocking them never touches the
/// concurrency pool).
public final class RunningProcess: @unchecked Sendable {
    // Everything mutable is guarded by `state`'s lock; its condition is broadcast on each change.
    private let state = NSCondition()
    private var output = Data()
    private var errors = Data()
    private var openPipes = 0
    private var exitStatus: Int32?
    private var exitedAt: ContinuousClock.Instant?
    private var killedForTime = false

    /// The child's process id (also its process group's).
    public let pid: pid_t
    /// The command, for messages.
    private let command: String

    /// How long output is still read after the child ended: a grandchild that kept its pipes
    /// open (a daemon) must not make a test wait for ever.
    private static let drainGrace: Duration = .seconds(5)

    init(path: String, arguments: [String], environment: [String], stdin: Data?, mergingErrors: Bool, timeLimit: Duration) throws {
        command = ([path] + arguments).joined(separator: " ")
        let out = try Self.pipe()
        let err = mergingErrors ? out : try Self.pipe()
        let input = try stdin.map { _ in try Self.pipe() }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        posix_spawn_file_actions_adddup2(&actions, out.write, 1)
        posix_spawn_file_actions_adddup2(&actions, err.write, 2)
        // Nothing but these three reaches the child: not another test's pipes or sockets.
        guard Self.closeFrom(&actions, 3) == 0 else {
            throw ProcessRunnerError(message: "posix_spawn_file_actions_addclosefrom_np failed: \(String(cString: strerror(errno)))")
        }

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // A group of its own (killed whole at the time limit), default signal handling and an
        // empty mask, as a child started from a shell has (the test runner ignores SIGPIPE).
        var defaults = sigset_t()
        sigfillset(&defaults)
        sigdelset(&defaults, SIGKILL)
        sigdelset(&defaults, SIGSTOP)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))

        var child: pid_t = 0
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup($0) } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        let spawned = posix_spawn(&child, path, &actions, &attributes, argv, envp)
        // The parent keeps only its ends.
        close(out.write)
        if !mergingErrors { close(err.write) }
        if let input { close(input.read) }
        guard spawned == 0 else {
            close(out.read)
            if !mergingErrors { close(err.read) }
            if let input { close(input.write) }
            throw ProcessRunnerError(message: "could not start \(path): \(String(cString: strerror(spawned)))")
        }
        pid = child

        openPipes = mergingErrors ? 1 : 2
        startReading(out.read, errors: false)
        if !mergingErrors { startReading(err.read, errors: true) }
        if let input, let stdin {
            // Fed from a thread of its own, so a large input never blocks on a full pipe.
            Thread {
                stdin.withUnsafeBytes { buffer in
                    var offset = 0
                    while offset < buffer.count {
                        let written = Glibc.write(input.write, buffer.baseAddress! + offset, buffer.count - offset)
                        if written < 0 && errno == EINTR { continue }
                        if written <= 0 { break }
                        offset += written
                    }
                }
                close(input.write)
            }.start()
        }
        startWaiting(timeLimit: timeLimit)
    }

    private static func pipe() throws -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else {
            throw ProcessRunnerError(message: "pipe failed: \(String(cString: strerror(errno)))")
        }
        // The parent's ends are not inherited by anything else this process starts.
        _ = fcntl(fds[0], F_SETFD, FD_CLOEXEC)
        _ = fcntl(fds[1], F_SETFD, FD_CLOEXEC)
        return (fds[0], fds[1])
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later), which Swift's Glibc
    /// module does not declare.
    private static func closeFrom(_ actions: inout posix_spawn_file_actions_t, _ lowest: Int32) -> Int32 {
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else {
            errno = ENOSYS
            return -1
        }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)(&actions, lowest)
    }

    private func startReading(_ fd: Int32, errors isErrors: Bool) {
        Thread {
            var chunk = [UInt8](repeating: 0, count: 64 << 10)
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while true {
                // Polled, so that reading stops a while after the child ended even when a
                // grandchild holds the pipe open.
                let ready = poll(&poller, 1, 200)
                if ready == 0 {
                    if self.drainTimeIsOver() { break }
                    continue
                }
                if ready < 0 && errno == EINTR { continue }
                let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                self.state.lock()
                if isErrors {
                    self.errors.append(contentsOf: chunk[0..<count])
                } else {
                    self.output.append(contentsOf: chunk[0..<count])
                }
                self.state.broadcast()
                self.state.unlock()
            }
            close(fd)
            self.state.lock()
            self.openPipes -= 1
            self.state.broadcast()
            self.state.unlock()
        }.start()
    }

    private func drainTimeIsOver() -> Bool {
        state.lock()
        defer { state.unlock() }
        guard let exitedAt else { return false }
        return ContinuousClock.now - exitedAt > Self.drainGrace
    }

    private func startWaiting(timeLimit: Duration) {
        let pid = self.pid
        Thread {
            // Wait for the end without reaping, then reap under the lock: ``send(_:)`` never
            // signals a process id that has been reaped (and may belong to another process now).
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
            self.state.lock()
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED / WEXITSTATUS / WTERMSIG, which Swift does not import (they are macros).
            let signal = status & 0x7f
            self.exitStatus = signal == 0 ? (status >> 8) & 0xff : 128 + signal
            self.exitedAt = .now
            self.state.broadcast()
            self.state.unlock()
        }.start()
        Thread {
            let deadline = Date.now.addingTimeInterval(Double(timeLimit.components.seconds))
            self.state.lock()
            while self.exitStatus == nil {
                if !self.state.wait(until: deadline) && self.exitStatus == nil {
                    self.killedForTime = true
                    kill(-pid, SIGKILL)
                    break
                }
            }
            self.state.unlock()
        }.start()
    }

    /// Reads standard output until a line containing `marker` has arrived and returns it;
    /// `nil` when the output ends first. What was read stays part of what ``wait()`` returns.
    public func line(containing marker: String) async -> String? {
        await withCheckedContinuation { continuation in
            Thread {
                self.state.lock()
                defer { self.state.unlock() }
                while true {
                    let text = String(decoding: self.output, as: UTF8.self)
                    let complete = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
                    if let found = complete.first(where: { $0.contains(marker) }) {
                        continuation.resume(returning: String(found))
                        return
                    }
                    if self.openPipes == 0 {
                        continuation.resume(returning: nil)
                        return
                    }
                    self.state.wait()
                }
            }.start()
        }
    }

    /// Sends a signal, such as `SIGTERM`, to the child (not its group); nothing once it has ended.
    public func send(_ signal: Int32) {
        state.lock()
        defer { state.unlock() }
        if exitStatus == nil { kill(pid, signal) }
    }

    /// Waits for the child to exit and its output to end, and returns what it printed.
    public func wait() async -> ProcessResult {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: self.waitBlocking()) }.start()
        }
    }

    /// ``wait()`` for synchronous setup code (a `mount` before a suite): blocks the calling thread.
    func waitBlocking() -> ProcessResult {
        state.lock()
        defer { state.unlock() }
        while exitStatus == nil || openPipes > 0 { state.wait() }
        var stderr = String(decoding: errors, as: UTF8.self)
        if killedForTime {
            stderr += "\n[test harness: \(command) outlived its time limit and was killed with its process group]\n"
        }
        return ProcessResult(status: exitStatus ?? -1, stdout: String(decoding: output, as: UTF8.self), stderr: stderr)
    }
}

/// The executable under test could not be run.
public struct ProcessRunnerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let message: String
    public var description: String { message }
}

/// Runs `body` with a started `server` and stops it however `body` ends: the `with` of each
/// real server the tests start.
func running<Server, T>(
    _ server: Server, stop: (Server) async -> Void, _ body: (Server) async throws -> T
) async throws -> T {
    do {
        let result = try await body(server)
        await stop(server)
        return result
    } catch {
        await stop(server)
        throw error
    }
}
