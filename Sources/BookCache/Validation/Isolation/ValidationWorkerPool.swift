import CBookCacheShims
import DownloadQueue
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The worker processes that judge books (``ValidationWorkers``): started as books come, at most
/// ``ValidationWorkers/count``, each judging one book at a time and kept for the next; a worker
/// that died, was killed or ran out of time is gone, and a new one starts for the next book.
///
/// A book waits for a free worker; cancelling its task while it waits or while it is judged ends
/// that at once (the worker judging it is killed).
final class ValidationWorkerPool: Sendable {
    /// The settings, read when the first book is judged (a command that judges none reads none).
    private let resolve: @Sendable () throws(BookCacheError) -> ValidationWorkers
    private let resolved = Mutex<ValidationWorkers?>(nil)

    private struct State {
        var idle: [WorkerProcess] = []
        var running = 0
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextWaiter: UInt64 = 0
        var all: [Int32: WorkerProcess] = [:]
    }

    private let state = Mutex(State())

    init(_ resolve: @escaping @Sendable () throws(BookCacheError) -> ValidationWorkers) {
        self.resolve = resolve
    }

    /// The settings, read once.
    func settings() throws(BookCacheError) -> ValidationWorkers {
        if let settings = resolved.withLock({ $0 }) { return settings }
        let settings = try resolve()
        resolved.withLock { $0 = settings }
        return settings
    }

    deinit {
        // Their input ends: each finishes the book it judges, if any, and exits.
        for worker in state.withLock({ Array($0.all.values) }) { worker.close() }
    }

    /// The process ids of the workers alive now.
    var processes: [Int32] { state.withLock { $0.all.keys.sorted() } }

    /// Judges a book in a worker and hands the judgement to `then` on the thread that waited for
    /// the worker's answer (see ``BookValidation/judge(path:limits:strict:arrived:then:)``).
    func judge<T: Sendable, E: Error>(
        path: String, limits: ValidationLimits, strict: Bool, arrived: @escaping @Sendable () -> ZIPStreamReader.Verdict?,
        then: @escaping @Sendable (BookValidation.Judgement) throws(E) -> T
    ) async throws(E) -> T {
        let settings: ValidationWorkers
        do {
            settings = try self.settings()
        } catch {
            return try await BlockingWork.run { () throws(E) -> T in try then(.unusable(error)) }
        }
        do {
            try await acquireTurn(count: settings.count)
        } catch {
            return try await BlockingWork.run { () throws(E) -> T in try then(.cancelled) }
        }
        let worker: WorkerProcess
        do {
            worker = try await takeWorker(settings)
        } catch {
            releaseTurn()
            return try await BlockingWork.run { () throws(E) -> T in try then(.refused(error)) }
        }
        // Cancelling kills the worker only while it judges this book: once it has answered it is
        // back in the pool (and may be judging another book) while `then` runs.
        // (The handler's operation does not throw: a typed error would not pass through it.)
        let ticket = worker.lend()
        let result = await withTaskCancellationHandler {
            await BlockingWork.run { () -> Result<T, E> in
                let request = WorkerRequest(path: path, strict: strict, limits: limits, arrived: arrived()?.entries)
                let outcome = worker.judge(request, within: settings)
                worker.giveBack(ticket)
                let judgement = self.finished(worker, outcome)
                return Result { () throws(E) -> T in try then(judgement) }
            }
        } onCancel: {
            worker.cancel(ticket)
        }
        return try result.get()
    }

    /// Gives a worker back (or forgets it, when it is gone) and its turn to the next book, and
    /// says what its answer came to.
    private func finished(_ worker: WorkerProcess, _ outcome: WorkerProcess.Outcome) -> BookValidation.Judgement {
        let judgement: BookValidation.Judgement
        switch outcome {
        case .reply(let reply):
            state.withLock { $0.idle.append(worker) }
            if let report = reply.report {
                judgement = .accepted(report)
            } else {
                judgement = .refused(reply.failure ?? ValidationFailure("the validator gave no verdict", kind: .unjudgeable))
            }
        case .ended(let reason):
            forget(worker)
            judgement = reason.map { .refused(ValidationFailure($0, kind: .unjudgeable)) } ?? .cancelled
        }
        releaseTurn()
        return judgement
    }

    /// Waits for one of the ``ValidationWorkers/count`` turns.
    private func acquireTurn(count: Int) async throws(CancellationError) {
        let id: UInt64? = state.withLock { state in
            if state.running < count {
                state.running += 1
                return nil
            }
            state.nextWaiter += 1
            return state.nextWaiter
        }
        guard let id else { return }
        let granted = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let cancelled = state.withLock { state in
                    if Task.isCancelled { return true }
                    state.waiters.append((id, continuation))
                    return false
                }
                if cancelled { continuation.resume(returning: false) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0).continuation }
            }
            waiter?.resume(returning: false)
        }
        // A turn is handed over with `running` counted already.
        if !granted { throw CancellationError() }
    }

    private func releaseTurn() {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            if state.waiters.isEmpty {
                state.running -= 1
                return nil
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }

    /// An idle worker, or a new one. An idle worker that is gone (killed from outside) is
    /// forgotten, not blamed on the next book.
    private func takeWorker(_ settings: ValidationWorkers) async throws(ValidationFailure) -> WorkerProcess {
        while let idle = state.withLock({ $0.idle.popLast() }) {
            if idle.isRunning { return idle }
            forget(idle)
        }
        let worker = try await BlockingWork.run { () throws(ValidationFailure) in try WorkerProcess.start(settings) }
        state.withLock { $0.all[worker.pid] = worker }
        return worker
    }

    private func forget(_ worker: WorkerProcess) {
        state.withLock { $0.all[worker.pid] = nil }
    }
}

/// One worker process: its id and the two pipes to it.
final class WorkerProcess: Sendable {
    /// Why the parent killed a worker.
    enum KillReason: Sendable {
        case cancelled
        case wallClock(Double)
    }

    /// What asking the worker came to.
    enum Outcome: Sendable {
        case reply(WorkerReply)
        /// It is gone: why, in words for the book's verdict; `nil` when it was cancelled.
        case ended(String?)
    }

    let pid: Int32
    private let input: Int32
    private let output: Int32
    private let killed = Mutex<KillReason?>(nil)
    private let reaped = Mutex(false)
    /// The book it judges now, by the ticket ``lend()`` gave for it.
    private let lent = Mutex<(next: UInt64, current: UInt64?)>((0, nil))

    private init(pid: Int32, input: Int32, output: Int32) {
        self.pid = pid
        self.input = input
        self.output = output
    }

    deinit {
        Glibc.close(input)
        Glibc.close(output)
        // Reaped now if it has ended (a worker that was given back its input's end exits soon).
        if !reaped.withLock({ $0 }) {
            var status: Int32 = 0
            _ = waitpid(pid, &status, WNOHANG)
        }
    }

    /// Starts a worker: its standard input is a socket and its output a pipe to this process, its standard
    /// error goes nowhere (a crash's words are the verdict's), it is in a process group of its own
    /// (a terminal's Ctrl-C reaches the parent, which ends it), and it holds no other descriptor.
    static func start(_ settings: ValidationWorkers) throws(ValidationFailure) -> WorkerProcess {
        var toWorker: [Int32] = [-1, -1]
        var fromWorker: [Int32] = [-1, -1]
        func closeAll() {
            for descriptor in toWorker + fromWorker where descriptor >= 0 { Glibc.close(descriptor) }
        }
        // A socket towards the worker, so that a write to one that died fails (MSG_NOSIGNAL)
        // rather than raising SIGPIPE in this process.
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &toWorker) == 0 else {
            throw startFailure(errno)
        }
        guard pipe(&fromWorker) == 0, fcntl(fromWorker[0], F_SETFD, FD_CLOEXEC) == 0, fcntl(fromWorker[1], F_SETFD, FD_CLOEXEC) == 0
        else {
            let code = errno
            closeAll()
            throw startFailure(code)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, toWorker[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromWorker[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else of this process's goes with it, even a descriptor opened without
        // close-on-exec: a lock's descriptor held by a worker would keep the lock.
        let closing = bookcache_spawn_close_from(&actions, 3)
        guard closing == 0 else {
            closeAll()
            throw startFailure(closing)
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var defaults = sigset_t()
        sigfillset(&defaults)
        var empty = sigset_t()
        sigemptyset(&empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(
            &attributes, Int16(POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP))
        let argv = [settings.executable] + settings.arguments
        // Swift's crash backtracer would spend seconds of CPU on a crash (and keep a crashed
        // worker alive meanwhile): a worker's crash is a verdict, its backtrace nobody's.
        let environment =
            ProcessInfo.processInfo.environment.filter { $0.key != "SWIFT_BACKTRACE" }.map { "\($0.key)=\($0.value)" }
            + ["SWIFT_BACKTRACE=enable=no"]
        var cEnvironment = environment.map { strdup($0) } + [nil]
        defer { for variable in cEnvironment { free(variable) } }
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { for argument in cArguments { free(argument) } }
        var pid: pid_t = 0
        let status = posix_spawn(&pid, settings.executable, &actions, &attributes, &cArguments, &cEnvironment)
        Glibc.close(toWorker[0])
        Glibc.close(fromWorker[1])
        guard status == 0 else {
            Glibc.close(toWorker[1])
            Glibc.close(fromWorker[0])
            throw startFailure(status)
        }
        return WorkerProcess(pid: pid, input: toWorker[1], output: fromWorker[0])
    }

    private static func startFailure(_ code: Int32) -> ValidationFailure {
        ValidationFailure("the validator could not be started (\(String(cString: strerror(code))))", kind: .unjudgeable)
    }

    /// Whether the worker is still running (it is reaped when it is not).
    var isRunning: Bool {
        var status: Int32 = 0
        guard waitpid(pid, &status, WNOHANG) == pid else { return true }
        reaped.withLock { $0 = true }
        return false
    }

    /// Lends the worker to one book; returns that book's ticket.
    func lend() -> UInt64 {
        lent.withLock { lent in
            lent.next += 1
            lent.current = lent.next
            return lent.next
        }
    }

    /// The book with `ticket` has its answer.
    func giveBack(_ ticket: UInt64) {
        lent.withLock { if $0.current == ticket { $0.current = nil } }
    }

    /// The book with `ticket` was cancelled: the worker is killed if it still judges that book.
    func cancel(_ ticket: UInt64) {
        let judging = lent.withLock { $0.current == ticket }
        if judging { kill(because: .cancelled) }
    }

    /// Kills the worker; what it was asked then ends with `reason`.
    func kill(because reason: KillReason) {
        let first = killed.withLock { killed in
            if killed != nil { return false }
            killed = reason
            return true
        }
        if first { Glibc.kill(pid, SIGKILL) }
    }

    /// Closes its input: it exits once it has answered what it was asked.
    func close() {
        shutdown(input, Int32(SHUT_WR))
    }

    /// Sends `request`, with the bounds `settings` give a book of its size, and waits for the
    /// answer at most its wall-clock time.
    func judge(_ request: WorkerRequest, within settings: ValidationWorkers) -> Outcome {
        BlockingWork.assertMayBlock("a validation worker's answer")
        // Its size sets its bounds (a file that cannot be stat'ed gets the smallest; the worker
        // then says why it cannot be read).
        let size = FileSystem.fileSize(atPath: request.path) ?? 0
        var request = request
        request.memoryLimit = settings.memoryLimit(forBookOf: size)
        request.cpuSeconds = settings.cpuLimit(forBookOf: size)
        let wallClock = settings.wallClockLimit(forBookOf: size)
        lastMemoryLimit.withLock { $0 = request.memoryLimit }
        let frame = WorkerFrame.encode(request)
        let written = frame.withUnsafeBytes { bytes -> Bool in
            var offset = 0
            while offset < bytes.count {
                let count = send(input, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return false }
                offset += count
            }
            return true
        }
        if !written { return ended() }
        var answer = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = ContinuousClock.now + .milliseconds(Int64(wallClock * 1000))
        while true {
            if answer.count >= 4 {
                let length = WorkerFrame.length(of: answer)
                guard length <= WorkerFrame.maxLength else {
                    kill(because: .wallClock(0))
                    _ = ended()
                    return .ended("could not be judged safely: the validator's answer could not be read")
                }
                if answer.count >= 4 + length {
                    guard let reply = try? WorkerFrame.decodeReply(Array(answer[4..<(4 + length)])) else {
                        kill(because: .wallClock(0))
                        _ = ended()
                        return .ended("could not be judged safely: the validator's answer could not be read")
                    }
                    return .reply(reply)
                }
            }
            let left = ContinuousClock.now.duration(to: deadline)
            if left <= .zero {
                kill(because: .wallClock(wallClock))
                return ended()
            }
            var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&descriptor, 1, milliseconds)
            if ready < 0 && errno != EINTR {
                kill(because: .wallClock(0))
                _ = ended()
                return .ended("could not be judged safely: the validator's answer could not be read")
            }
            if ready <= 0 { continue }
            let count = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { return ended() }
            answer += buffer[..<count]
        }
    }

    /// The worker is gone: reaps it and says why, from how it ended.
    private func ended() -> Outcome {
        if killed.withLock({ $0 }) == nil {
            // It ended by itself, or its pipe broke: make sure it is gone.
            Glibc.kill(pid, SIGKILL)
        }
        var status: Int32 = 0
        var usage = rusage()
        var result: pid_t
        repeat { result = wait4(pid, &status, 0, &usage) } while result < 0 && errno == EINTR
        reaped.withLock { $0 = true }
        switch killed.withLock({ $0 }) {
        case .cancelled: return .ended(nil)
        case .wallClock(let seconds):
            return .ended("could not be judged safely: the validator ran out of time on it (\(Int(seconds)) s)")
        case nil: break
        }
        let signal = status & 0x7F
        let exitCode = (status >> 8) & 0xFF
        if signal == 0 {
            return .ended("could not be judged safely: the validator stopped on it (exit status \(exitCode))")
        }
        if signal == SIGXCPU {
            return .ended("could not be judged safely: the validator ran out of CPU time on it")
        }
        // ru_maxrss is in KiB; its peak was reset as the book began. An allocation refused near
        // the bound crashes (a trap, an abort, a null pointer): that is memory, not a bug.
        let peak = Int64(usage.ru_maxrss) * 1024
        if peak > 0, peak >= lastMemoryLimit.withLock({ $0 }) / 2 {
            return .ended("could not be judged safely: the validator ran out of memory on it")
        }
        return .ended("could not be judged safely: the validator crashed on it (signal \(signal))")
    }

    /// The memory bound of the book asked last.
    let lastMemoryLimit = Mutex<Int64>(.max)

}
