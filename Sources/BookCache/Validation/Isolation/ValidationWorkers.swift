import Foundation

/// How books are judged in worker processes: how many, what starts one, and the bounds each
/// book is judged within.
///
/// A worker is a long-lived process that judges book after book (libzip, qpdf and the XML checks
/// run there), started from an executable that calls ``ValidationWorker/run()`` — the
/// `bookcache` command line's is `bookcache validation-worker`. A worker that crashes, runs out of
/// memory or of time is the verdict on the book it was judging (``ValidationFailure/Kind/unjudgeable``),
/// never the app's; it is replaced for the next book.
///
/// The bounds scale with the book's size: a book of `s` bytes may use ``memoryBytes`` `+ 3 × s`
/// of address space (the file is mapped, and a PDF whose end is repaired is copied once), and
/// ``cpuSeconds`` `+` ``cpuSecondsPerMiB`` `× s / 1 MiB` of CPU time; the wall-clock budget is
/// twice the CPU budget plus ``wallClockSlack`` (a loaded machine). Past a bound the worker is killed.
public struct ValidationWorkers: Sendable, Hashable {
    /// The executable that runs ``ValidationWorker/run()`` when started with ``arguments``.
    public var executable: String
    /// The arguments that make ``executable`` a worker.
    public var arguments: [String]
    /// The most books judged at once (each in its own worker); 2 by default.
    public var count: Int
    /// The address space a worker may use for a book, before the book's share; 1 GiB by default.
    public var memoryBytes: Int64
    /// The CPU time a book may take, before its share by size; 20 s by default.
    public var cpuSeconds: Double
    /// The CPU time a book may take per MiB; 1 s by default (qpdf reads a 43 MB PDF in 0.5 s).
    public var cpuSecondsPerMiB: Double
    /// The wall-clock seconds a book may take beyond twice its CPU budget (a loaded machine, a
    /// slow disk); 10 by default.
    public var wallClockSlack: Double = 10

    /// Creates the settings.
    /// - Parameters:
    ///   - executable: A program that calls ``ValidationWorker/run()`` when given `arguments`.
    ///   - arguments: The arguments that make it a worker.
    ///   - count: The most books judged at once; 2 by default.
    ///   - memoryBytes: The address space a worker may use, before a book's share; 1 GiB by default.
    ///   - cpuSeconds: The CPU time a book may take, before its share; 20 s by default.
    ///   - cpuSecondsPerMiB: The CPU time a book may take per MiB; 1 s by default.
    public init(
        executable: String, arguments: [String], count: Int = 2, memoryBytes: Int64 = 1 << 30, cpuSeconds: Double = 20,
        cpuSecondsPerMiB: Double = 1
    ) {
        self.executable = executable
        self.arguments = arguments
        self.count = max(1, count)
        self.memoryBytes = memoryBytes
        self.cpuSeconds = cpuSeconds
        self.cpuSecondsPerMiB = cpuSecondsPerMiB
    }

    /// The address space a worker may use to judge a book of `size` bytes.
    package func memoryLimit(forBookOf size: Int64) -> Int64 {
        let (share, overflow) = max(0, size).multipliedReportingOverflow(by: 3)
        let (limit, past) = memoryBytes.addingReportingOverflow(share)
        return overflow || past ? .max : limit
    }

    /// The CPU seconds a book of `size` bytes may take.
    package func cpuLimit(forBookOf size: Int64) -> Double {
        cpuSeconds + cpuSecondsPerMiB * Double(max(0, size)) / Double(1 << 20)
    }

    /// The wall-clock seconds a book of `size` bytes may take: twice its CPU time, and
    /// ``wallClockSlack``.
    package func wallClockLimit(forBookOf size: Int64) -> Double {
        2 * cpuLimit(forBookOf: size) + wallClockSlack
    }
}
