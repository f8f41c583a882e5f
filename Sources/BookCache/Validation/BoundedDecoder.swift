import CBookCachePDF
import Synchronization

/// How many bytes decoding a PDF's streams may still produce, shared by the streams qpdf decodes
/// and the deflate streams zlib checks alongside (``ValidationLimits/maxTotalUncompressedBytes``).
final class DecodingBudget: Sendable {
    /// A stream may decode to this many times its stored bytes, and never less than
    /// ``floor`` (``ValidationLimits/maxPDFDecodingRatio``, ``ValidationLimits/ratioCheckThreshold``).
    let ratio: UInt64
    let floor: UInt64
    private let left: Atomic<Int64>

    init(limits: ValidationLimits) {
        ratio = UInt64(max(1, limits.maxPDFDecodingRatio))
        floor = UInt64(max(0, limits.ratioCheckThreshold))
        left = Atomic(limits.maxTotalUncompressedBytes)
    }

    /// What is left of the whole book's budget.
    var remaining: UInt64 { UInt64(max(0, left.load(ordering: .relaxed))) }

    /// Counts `bytes` decoded against the whole book's budget.
    func spend(_ bytes: UInt64) {
        left.subtract(Int64(clamping: bytes), ordering: .relaxed)
    }

    /// The most a stream of `stored` bytes may decode to: its ratio's bound, within what is left.
    func bound(stored: UInt64) -> UInt64 {
        let (product, overflow) = stored.multipliedReportingOverflow(by: ratio)
        return min(max(overflow ? .max : product, floor), remaining)
    }
}

/// A second reading of a PDF by qpdf's C++ API, whose streams are decoded through a counting
/// bound: the bytes that come out are counted and dropped. (qpdf's C API decodes a stream whole
/// into one buffer: a 7 KB PDF of two stacked deflate layers asked for 4 GiB.) Made when the
/// first stream that needs it is met.
final class BoundedDecoder {
    enum Outcome {
        /// Decoded whole within its bound; qpdf's warnings about it.
        case decoded(warnings: [String])
        /// It decodes past its bound; how, in words.
        case overBound(String)
        /// It cannot be decoded; why.
        case damaged(String)
    }

    private let bytes: UnsafeRawBufferPointer
    private var decoder: UnsafeMutableRawPointer?
    private var opened = false

    init(bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    deinit {
        bookcache_pdf_decoder_free(decoder)
    }

    /// Decodes the stream `object generation` at qpdf's generalized or specialized level, within
    /// `budget`.
    func decode(object: Int32, generation: Int32, specialized: Bool, budget: DecodingBudget) -> Outcome {
        if !opened {
            opened = true
            decoder = bookcache_pdf_decoder_new(bytes.baseAddress, UInt64(bytes.count))
        }
        guard let decoder else { return .damaged("qpdf cannot read it a second time") }
        var stored: UInt64 = 0
        var produced: UInt64 = 0
        var message: UnsafePointer<CChar>?
        var said: UnsafePointer<CChar>?
        let verdict = bookcache_pdf_decode(
            decoder, object, generation, specialized ? 2 : 1, budget.ratio, budget.floor, budget.remaining, &stored, &produced,
            &message, &said)
        budget.spend(produced)
        let warnings = said.map { String(cString: $0) }.map { $0.isEmpty ? [] : $0.split(separator: "\n").map(String.init) } ?? []
        switch verdict {
        case 1:
            if produced > stored.multipliedReportingOverflow(by: budget.ratio).partialValue, produced > budget.floor {
                return .overBound(
                    "decodes to more than \(budget.ratio) times its \(stored) stored bytes (a decompression bomb); it was not decoded further"
                )
            }
            return .overBound("would take the book past its limit on decoded bytes; it was not decoded further")
        case 2:
            return .damaged(message.map { String(cString: $0) } ?? "its data cannot be decoded")
        default:
            return .decoded(warnings: warnings)
        }
    }
}
