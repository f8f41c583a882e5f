/// What a parent asks a validation worker: one JSON object a line on the worker's standard input.
struct WorkerRequest: Codable, Sendable {
    var path: String
    var strict: Bool
    var limits: ValidationLimits
    /// The entries an ``ArrivingZIP`` saw as the file arrived (``ZIPStreamReader/Verdict``).
    var arrived: [ZIPStreamReader.Entry]?
    /// The address space the worker may use for this book; set by the pool.
    var memoryLimit: Int64 = 0
    /// The CPU seconds the worker may spend on this book; set by the pool.
    var cpuSeconds: Double = 0
}

/// A worker's answer: one JSON object a line on its standard output.
struct WorkerReply: Codable, Sendable {
    var report: ValidationReport?
    var failure: ValidationFailure?
}
