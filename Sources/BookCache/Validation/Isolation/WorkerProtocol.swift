/// What a parent asks a validation worker: one frame on the worker's standard input.
struct WorkerRequest: Sendable, Equatable {
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

/// A worker's answer: one frame on its standard output.
struct WorkerReply: Sendable, Equatable {
    var report: ValidationReport?
    var failure: ValidationFailure?
}

/// The frames between a parent and its validation workers: a 4-byte little-endian length, then
/// the fields in a fixed order. Both ends are the same executable (`/proc/self/exe`), so the
/// order is the whole contract; a version byte guards against anything else.
///
/// Not JSON: Foundation's encoder and decoder took about 250 µs of CPU a book on each side
/// together — a third of a small book's whole cost in a batch of 2,000.
enum WorkerFrame {
    static let version: UInt8 = 1
    /// The largest frame read (a request names a path and an archive's entries; a reply, warnings).
    static let maxLength = 64 << 20

    struct Malformed: Error {}

    // MARK: Requests

    static func encode(_ request: WorkerRequest) -> [UInt8] {
        var writer = Writer()
        writer.put(version)
        writer.put(UInt8(request.strict ? 1 : 0))
        writer.put(request.memoryLimit)
        writer.put(request.cpuSeconds.bitPattern)
        let limits = request.limits
        for value in [
            limits.maxTotalUncompressedBytes, limits.maxCompressionRatio, limits.ratioCheckThreshold, Int64(limits.maxEntries),
            Int64(limits.maxContainerXMLBytes), Int64(limits.maxContainerXMLDepth), Int64(limits.maxPackageDocumentBytes),
            limits.maxPDFDecodingRatio,
        ] {
            writer.put(value)
        }
        writer.put(request.path)
        if let arrived = request.arrived {
            writer.put(UInt8(1))
            writer.put(UInt32(arrived.count))
            for entry in arrived {
                writer.put(entry.header.rawName)
                writer.put(UInt64(entry.header.method))
                writer.put(UInt64(entry.header.crc32))
                writer.put(entry.header.compressedSize)
                writer.put(entry.header.size)
                writer.put(UInt8(entry.vouched ? 1 : 0))
            }
        } else {
            writer.put(UInt8(0))
        }
        return writer.framed()
    }

    static func decodeRequest(_ payload: [UInt8]) throws(Malformed) -> WorkerRequest {
        var reader = Reader(payload)
        guard try reader.byte() == version else { throw Malformed() }
        let strict = try reader.byte() == 1
        let memoryLimit = try reader.int64()
        let cpuSeconds = Double(bitPattern: try reader.uint64())
        var limits = ValidationLimits()
        limits.maxTotalUncompressedBytes = try reader.int64()
        limits.maxCompressionRatio = try reader.int64()
        limits.ratioCheckThreshold = try reader.int64()
        limits.maxEntries = Int(try reader.int64())
        limits.maxContainerXMLBytes = Int(try reader.int64())
        limits.maxContainerXMLDepth = Int(try reader.int64())
        limits.maxPackageDocumentBytes = Int(try reader.int64())
        limits.maxPDFDecodingRatio = try reader.int64()
        let path = try reader.string()
        var arrived: [ZIPStreamReader.Entry]?
        if try reader.byte() == 1 {
            let count = Int(try reader.uint32())
            guard count <= payload.count else { throw Malformed() }
            var entries: [ZIPStreamReader.Entry] = []
            entries.reserveCapacity(count)
            for _ in 0..<count {
                let name = try reader.blob()
                let method = try reader.uint64()
                let crc = try reader.uint64()
                guard method <= UInt64(UInt16.max), crc <= UInt64(UInt32.max) else { throw Malformed() }
                let header = ZIPStreamReader.Header(
                    rawName: name, method: UInt16(method), crc32: UInt32(crc), compressedSize: try reader.int64(), size: try reader.int64())
                entries.append(ZIPStreamReader.Entry(header: header, vouched: try reader.byte() == 1))
            }
            arrived = entries
        }
        guard reader.atEnd else { throw Malformed() }
        return WorkerRequest(path: path, strict: strict, limits: limits, arrived: arrived, memoryLimit: memoryLimit, cpuSeconds: cpuSeconds)
    }

    // MARK: Replies

    static func encode(_ reply: WorkerReply) -> [UInt8] {
        var writer = Writer()
        writer.put(version)
        if let report = reply.report {
            writer.put(UInt8(0))
            writer.put(report.format.rawValue)
            writer.put(UInt32(report.warnings.count))
            for warning in report.warnings { writer.put(warning) }
            writer.put(optional: report.language)
            writer.put(optional: report.published)
        } else {
            let failure = reply.failure ?? ValidationFailure("the validator gave no verdict", kind: .unjudgeable)
            writer.put(UInt8(1))
            writer.put(failure.reason)
            writer.put(failure.kind.rawValue)
        }
        return writer.framed()
    }

    static func decodeReply(_ payload: [UInt8]) throws(Malformed) -> WorkerReply {
        var reader = Reader(payload)
        guard try reader.byte() == version else { throw Malformed() }
        let reply: WorkerReply
        switch try reader.byte() {
        case 0:
            guard let format = BookFormat(rawValue: try reader.string()) else { throw Malformed() }
            let count = Int(try reader.uint32())
            guard count <= payload.count else { throw Malformed() }
            var warnings: [String] = []
            for _ in 0..<count { warnings.append(try reader.string()) }
            let report = ValidationReport(
                format: format, warnings: warnings, language: try reader.optionalString(), published: try reader.optionalString())
            reply = WorkerReply(report: report)
        case 1:
            let reason = try reader.string()
            guard let kind = ValidationFailure.Kind(rawValue: try reader.string()) else { throw Malformed() }
            reply = WorkerReply(failure: ValidationFailure(reason, kind: kind))
        default:
            throw Malformed()
        }
        guard reader.atEnd else { throw Malformed() }
        return reply
    }

    // MARK: Fields

    private struct Writer {
        var bytes: [UInt8] = [0, 0, 0, 0]

        mutating func put(_ byte: UInt8) { bytes.append(byte) }
        mutating func put(_ value: UInt32) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        mutating func put(_ value: UInt64) { withUnsafeBytes(of: value.littleEndian) { bytes += $0 } }
        mutating func put(_ value: Int64) { put(UInt64(bitPattern: value)) }
        mutating func put(_ value: [UInt8]) {
            put(UInt32(value.count))
            bytes += value
        }
        mutating func put(_ value: String) { put(Array(value.utf8)) }
        mutating func put(optional value: String?) {
            if let value {
                put(UInt8(1))
                put(value)
            } else {
                put(UInt8(0))
            }
        }

        /// The bytes with their length in front.
        func framed() -> [UInt8] {
            var out = bytes
            let length = UInt32(bytes.count - 4).littleEndian
            withUnsafeBytes(of: length) { for (index, byte) in $0.enumerated() { out[index] = byte } }
            return out
        }
    }

    private struct Reader {
        let bytes: [UInt8]
        var offset = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool { offset == bytes.count }

        mutating func take(_ count: Int) throws(Malformed) -> ArraySlice<UInt8> {
            guard count >= 0, bytes.count - offset >= count else { throw Malformed() }
            defer { offset += count }
            return bytes[offset..<(offset + count)]
        }

        mutating func byte() throws(Malformed) -> UInt8 { try take(1).first! }
        mutating func uint32() throws(Malformed) -> UInt32 {
            try take(4).reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
        }
        mutating func uint64() throws(Malformed) -> UInt64 {
            try take(8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        }
        mutating func int64() throws(Malformed) -> Int64 { Int64(bitPattern: try uint64()) }
        mutating func blob() throws(Malformed) -> [UInt8] { Array(try take(Int(try uint32()))) }
        mutating func string() throws(Malformed) -> String {
            guard let text = String(validating: try take(Int(try uint32())), as: UTF8.self) else { throw Malformed() }
            return text
        }
        mutating func optionalString() throws(Malformed) -> String? {
            try byte() == 1 ? try string() : nil
        }
    }

    /// The length a frame's first four bytes give.
    static func length(of header: some Collection<UInt8>) -> Int {
        header.prefix(4).reversed().reduce(0) { $0 << 8 | Int($1) }
    }
}
