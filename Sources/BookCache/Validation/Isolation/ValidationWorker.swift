import CBookCacheShims
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The body of a validation worker process (see ``ValidationWorkers``): reads a request from
/// standard input, judges the book within the bounds the request gives, writes the verdict to
/// standard output, and exits when its input ends (its parent is gone).
public enum ValidationWorker {
    /// Runs the worker until its standard input ends; never returns.
    ///
    /// Call it first thing from the executable named by ``ValidationWorkers/executable`` when it
    /// is started with ``ValidationWorkers/arguments``: before anything else reads its input.
    public static func run() -> Never {
        // No core files (a hostile book's crash writes none), few malloc arenas (each reserves
        // address space the memory bound counts), and gone when the parent is.
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        setrlimit(Int32(RLIMIT_CORE.rawValue), &none)
        _ = bookcache_limit_malloc_arenas(2)
        watchParent()
        while let payload = readFrame() {
            let reply: WorkerReply
            do {
                reply = judge(try WorkerFrame.decodeRequest(payload))
            } catch {
                reply = WorkerReply(
                    failure: ValidationFailure("the validator was asked something it does not understand", kind: .unjudgeable))
            }
            let frame = WorkerFrame.encode(reply)
            guard writeAll(frame) else { exit(0) }
        }
        exit(0)
    }

    /// The next request's bytes from standard input; `nil` at its end (the parent is gone).
    private static func readFrame() -> [UInt8]? {
        guard let header = readExactly(4) else { return nil }
        let length = WorkerFrame.length(of: header)
        guard length <= WorkerFrame.maxLength else { return nil }
        return readExactly(length)
    }

    private static func readExactly(_ count: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let read = bytes.withUnsafeMutableBytes { Glibc.read(0, $0.baseAddress! + offset, count - offset) }
            if read < 0 && errno == EINTR { continue }
            if read <= 0 { return nil }
            offset += read
        }
        return bytes
    }

    private static func writeAll(_ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(1, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 && errno == EINTR { continue }
            if written <= 0 { return false }
            offset += written
        }
        return true
    }

    /// Judges one book within the request's bounds.
    private static func judge(_ request: WorkerRequest) -> WorkerReply {
        bound(memory: request.memoryLimit, cpuSeconds: request.cpuSeconds)
        let arrived = request.arrived.map { ZIPStreamReader.Verdict(entries: $0) }
        do {
            let report = try BookValidator(limits: request.limits, strict: request.strict).check(path: request.path, arrived: arrived)
            return WorkerReply(report: report)
        } catch {
            return WorkerReply(failure: error)
        }
    }

    /// Sets the address space and CPU time this book may use: its soft limits, which the kernel
    /// enforces (a failed allocation; `SIGXCPU`). The peak resident size is reset too, so the
    /// parent can tell a book that ran out of memory from one that crashed.
    private static func bound(memory: Int64, cpuSeconds: Double) {
        if memory > 0 {
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_AS.rawValue), &limit)
            limit.rlim_cur = min(rlim_t(memory), limit.rlim_max)
            setrlimit(Int32(RLIMIT_AS.rawValue), &limit)
        }
        if cpuSeconds > 0 {
            var usage = rusage()
            getrusage(Int32(RUSAGE_SELF.rawValue), &usage)
            let used = Int(usage.ru_utime.tv_sec) + Int(usage.ru_stime.tv_sec) + 1
            var limit = rlimit()
            getrlimit(Int32(RLIMIT_CPU.rawValue), &limit)
            limit.rlim_cur = min(rlim_t(used + Int(cpuSeconds.rounded(.up))), limit.rlim_max)
            setrlimit(Int32(RLIMIT_CPU.rawValue), &limit)
        }
        if let file = fopen("/proc/self/clear_refs", "w") {
            fputs("5", file)
            fclose(file)
        }
    }

    /// Ends the worker when its parent is gone, even in the middle of a book (its input's end is
    /// seen only between books): a thread that checks the parent's id once a second.
    private static func watchParent() {
        let parent = getppid()
        let thread = Thread {
            while true {
                Thread.sleep(forTimeInterval: 1)
                if getppid() != parent { _exit(0) }
            }
        }
        thread.start()
    }
}
