import CBookCacheShims
import DownloadQueue
import Synchronization

/// An EPUB's ZIP read as its bytes arrive, so that the CRC pass of its validation is done while
/// the body is still coming instead of after it, reading the file back.
///
/// Each entry's data is CRC-32'd as it passes (inflated first when deflated), and the central
/// directory at the end says which entries those were. Past the body's first
/// ``FileDownloader/alongsideFrom`` bytes the work runs on another blocking-work thread (a
/// ``Handoff``) while the download writes the next batch; before, on the writer's.
///
/// It only vouches, it never refuses: ``verdict()`` names the entries whose data it saw whole and
/// right — a local header at the offset the central directory gives, with the same name, method,
/// sizes and CRC, and data whose CRC (and, deflated, whose inflated length) is the one declared.
/// The validator then leaves those out of its own pass; every other entry it reads from the file
/// as before, and damage is its to find and say. What this reader does not follow — a data
/// descriptor, ZIP64, encryption, an archive comment, bytes before the first entry or after the
/// end record, a resumed download whose first bytes it never saw — makes it vouch for nothing.
///
/// Its costs are the validator's: an entry whose declared expansion the validator would refuse is
/// not inflated, and inflating stops at the length declared. Inflating is slower than a fast
/// network: when the reading falls two batches behind the writing, it stops inflating (stored
/// entries it still checks, at several GB/s) and leaves the deflated entries to come to the
/// validator, which inflates them on every core once the body is in (a 200 MB book of deflated
/// text from loopback took 3.1 s inflated on one thread as it arrived, 2.2 s inflated after).
final class ArrivingZIP: BodyObserver {
    /// The reader, shared with the handoff's consumer.
    private final class Reader: Sendable {
        let state: Mutex<ZIPStreamReader>
        /// Batches handed over and not yet read.
        let behind = Atomic<Int>(0)
        /// Whether the reading fell behind: from then on, deflated data is not inflated.
        let hurried = Atomic<Bool>(false)
        init(limits: ValidationLimits) { state = Mutex(ZIPStreamReader(limits: limits)) }
    }

    private let reader: Reader
    /// Batches wait here for the reader; two of them at most (a batch is up to 1 MiB).
    private let handoff: Handoff<(buffers: [[UInt8]], offset: Int64)>

    /// - Parameter limits: The validator's limits: what it would not inflate, this does not either.
    init(limits: ValidationLimits) {
        let reader = Reader(limits: limits)
        self.reader = reader
        handoff = Handoff(depth: 2) { batch in
            let inflating = !reader.hurried.load(ordering: .relaxed)
            reader.state.withLock { $0.read(batch.buffers, at: batch.offset, inflating: inflating) }
            reader.behind.subtract(1, ordering: .relaxed)
        }
    }

    /// Bytes before ``FileDownloader/alongsideFrom`` are read on the writer's thread: a small
    /// book's CRC costs less than the hop (handing every book's bytes over made 2000 books of
    /// 64 KiB 8% slower, and held their batches longer).
    func observe(_ buffers: [[UInt8]], at offset: Int64) {
        guard offset >= FileDownloader.alongsideFrom else {
            // In order: what was handed over (an earlier attempt's bytes) is read first.
            handoff.finish()
            return reader.state.withLock { $0.read(buffers, at: offset, inflating: true) }
        }
        if reader.behind.add(1, ordering: .relaxed).newValue > 2 { reader.hurried.store(true, ordering: .relaxed) }
        handoff.put((buffers, offset))
    }

    /// What the bytes seen so far vouch for, once every batch given has been read: `nil` unless
    /// they were a whole archive this reader follows, from its first byte to its end record.
    /// Blocks while the last batches are read.
    func verdict() -> ZIPStreamReader.Verdict? {
        BlockingWork.assertMayBlock("ArrivingZIP.verdict (it waits for the reading alongside)")
        handoff.finish()
        return reader.state.withLock { $0.verdict }
    }
}

/// The reading behind ``ArrivingZIP``: a ZIP's records, one after the other as the bytes come.
struct ZIPStreamReader: ~Copyable {
    /// What a local header, or a central directory entry, declares of an entry.
    struct Header: Equatable {
        let rawName: [UInt8]
        let method: UInt16
        let crc32: UInt32
        let compressedSize: Int64
        let size: Int64
    }

    /// A central directory entry, and whether its data was seen whole and right.
    struct Entry: Equatable {
        let header: Header
        let vouched: Bool
    }

    /// The archive's entries in central directory order (libzip's index order).
    struct Verdict: Sendable {
        let entries: [Entry]
    }

    private enum Phase {
        /// Gathering a record's bytes (a local header, a central directory entry, the end record).
        case record
        /// An entry's data.
        case data
        /// After the end record: nothing more may come.
        case end
        /// Something this reader does not follow: it vouches for nothing.
        case gaveUp
    }

    /// The entry whose data is passing, and what its data showed so far.
    private struct Current {
        /// Its local header's offset.
        let offset: Int64
        let header: Header
        /// Whether its data is checked: stored, or deflated within the validator's limits.
        let checked: Bool
        var remaining: Int64
        var crc: UInt32 = 0
        var produced: UInt64 = 0
        var ended = false
        /// Its data cannot be vouched for: it is wrong, or it was not all checked.
        var wrong = false
    }

    private let limits: ValidationLimits
    private var phase = Phase.record
    /// Bytes read so far: the offset of the next one.
    private var position: Int64 = 0
    /// The record being gathered.
    private var record: [UInt8] = []
    private var current: Current?
    /// Local entries seen whole and right, by their header's offset.
    private var vouched: [Int64: Header] = [:]
    private var locals = 0
    private var declared: Int64 = 0
    /// Name bytes kept (of local and central entries): bounded, as names can be 64 KiB each.
    private var nameBytes = 0
    private var centrals: [(header: Header, offset: Int64)] = []
    private var centralStart: Int64?
    private var inflater: UnsafeMutableRawPointer?
    /// Whether deflated data is inflated (and so checked) now.
    private var inflating = true
    private(set) var verdict: Verdict?

    init(limits: ValidationLimits) {
        self.limits = limits
    }

    deinit {
        bookcache_entry_inflater_free(inflater)
    }

    private static let localSignature: UInt32 = 0x0403_4b50
    private static let centralSignature: UInt32 = 0x0201_4b50
    private static let endSignature: UInt32 = 0x0605_4b50
    /// A ZIP64 size or offset: this reader does not follow ZIP64.
    private static let zip64Marker: UInt32 = 0xFFFF_FFFF
    /// The most name bytes kept before the reader gives up (a real book's are a few KiB; this
    /// is 100,000 entries of 40 bytes each, twice).
    static let maxNameBytes = 8 << 20

    /// Reads `buffers`, the bytes at `offset`. At offset 0 it starts over (a new attempt from the
    /// first byte); at any other offset than the next expected it gives up. Without `inflating`,
    /// deflated data passes unchecked (the entry it belongs to is not vouched for).
    mutating func read(_ buffers: [[UInt8]], at offset: Int64, inflating: Bool = true) {
        if offset == 0 && position != 0 { restart() }
        self.inflating = inflating
        guard offset == position else { return giveUp() }
        for buffer in buffers {
            buffer.withUnsafeBytes { read($0) }
            position += Int64(buffer.count)
        }
    }

    private mutating func restart() {
        let kept = inflater
        inflater = nil
        self = ZIPStreamReader(limits: limits)
        inflater = kept
    }

    /// Frees the inflater (about 60 KiB with zlib's window) once no entry needs it: dozens of books
    /// wait for validation at once.
    private mutating func dropInflater() {
        bookcache_entry_inflater_free(inflater)
        inflater = nil
    }

    private mutating func giveUp() {
        dropInflater()
        phase = .gaveUp
        verdict = nil
        vouched = [:]
        centrals = []
        record = []
        current = nil
    }

    private mutating func read(_ bytes: UnsafeRawBufferPointer) {
        var at = 0
        while at < bytes.count {
            switch phase {
            case .gaveUp:
                return
            case .end:
                // Bytes after the end record: libzip might find another end; vouch for nothing.
                return giveUp()
            case .data:
                let count = Int(min(Int64(bytes.count - at), current!.remaining))
                take(UnsafeRawBufferPointer(rebasing: bytes[at..<at + count]))
                at += count
                if current!.remaining == 0 { endEntry() }
            case .record:
                let needed = recordLength()
                guard let needed else { return giveUp() }
                if record.count < needed {
                    let count = min(needed - record.count, bytes.count - at)
                    record.append(contentsOf: bytes[at..<at + count])
                    at += count
                }
                // The length can grow once the fixed part is in (names, extra fields).
                if record.count == needed, recordLength() == needed {
                    let start = position + Int64(at) - Int64(needed)
                    finishRecord(at: start)
                    record.removeAll(keepingCapacity: true)
                }
            }
        }
    }

    private func u16(_ at: Int) -> Int { Int(record[at]) | Int(record[at + 1]) << 8 }
    private func u32(_ at: Int) -> UInt32 {
        UInt32(record[at]) | UInt32(record[at + 1]) << 8 | UInt32(record[at + 2]) << 16 | UInt32(record[at + 3]) << 24
    }

    /// How many bytes the record being gathered has, as far as its bytes so far tell; `nil` for
    /// one this reader does not follow.
    private func recordLength() -> Int? {
        guard record.count >= 4 else { return 4 }
        switch u32(0) {
        case Self.localSignature: return record.count < 30 ? 30 : 30 + u16(26) + u16(28)
        case Self.centralSignature: return record.count < 46 ? 46 : 46 + u16(28) + u16(30) + u16(32)
        case Self.endSignature: return record.count < 22 ? 22 : (u16(20) == 0 ? 22 : nil)
        default: return nil
        }
    }

    private mutating func finishRecord(at start: Int64) {
        switch u32(0) {
        case Self.localSignature: startEntry(at: start)
        case Self.centralSignature: addCentral(at: start)
        default: end(at: start)
        }
    }

    private mutating func startEntry(at start: Int64) {
        let (flags, method, crc, compressed, size) = (u16(6), UInt16(u16(8)), u32(14), u32(18), u32(22))
        locals += 1
        // Encrypted, or its sizes in a data descriptor after the data; ZIP64; a local entry after
        // the central directory began; too many entries.
        guard flags & 0x0009 == 0, compressed != Self.zip64Marker, size != Self.zip64Marker, centralStart == nil,
            locals <= limits.maxEntries
        else { return giveUp() }
        declared += Int64(size)
        guard declared <= limits.maxTotalUncompressedBytes else { return giveUp() }
        let (compressedSize, length) = (Int64(compressed), Int64(size))
        let withinRatio = length <= limits.ratioCheckThreshold || length / max(compressedSize, 1) <= limits.maxCompressionRatio
        let checked: Bool
        switch method {
        case 0: checked = compressedSize == length
        case 8 where inflating && withinRatio:
            if inflater == nil { inflater = bookcache_entry_inflater_new() }
            checked = inflater != nil && bookcache_entry_inflater_reset(inflater) == 0
        default: checked = false
        }
        let nameEnd = 30 + u16(26)
        nameBytes += nameEnd - 30
        guard nameBytes <= Self.maxNameBytes else { return giveUp() }
        let header = Header(
            rawName: Array(record[30..<nameEnd]), method: method, crc32: crc, compressedSize: compressedSize, size: length)
        current = Current(offset: start, header: header, checked: checked, remaining: compressedSize)
        phase = .data
        if compressedSize == 0 { endEntry() }
    }

    /// Takes the next `bytes` of the current entry's data.
    private mutating func take(_ bytes: UnsafeRawBufferPointer) {
        guard var entry = current else { return }
        defer { current = entry }
        entry.remaining -= Int64(bytes.count)
        guard entry.checked, !entry.wrong else { return }
        if entry.header.method == 0 {
            entry.crc = bookcache_crc32(entry.crc, bytes.baseAddress, UInt64(bytes.count))
            entry.produced += UInt64(bytes.count)
        } else if entry.ended {
            // Compressed bytes after the deflate stream's end.
            entry.wrong = true
        } else if !inflating {
            // Left to the validator.
            entry.wrong = true
        } else {
            let fed = bookcache_entry_inflater_feed(
                inflater, bytes.baseAddress, UInt64(bytes.count), &entry.crc, &entry.produced, UInt64(entry.header.size))
            if fed == 1 { entry.ended = true } else if fed != 0 { entry.wrong = true }
        }
    }

    private mutating func endEntry() {
        let entry = current!
        current = nil
        phase = .record
        let header = entry.header
        let whole = header.method == 0 || entry.ended
        if entry.checked, !entry.wrong, whole, entry.produced == UInt64(header.size), entry.crc == header.crc32 {
            vouched[entry.offset] = header
        }
    }

    private mutating func addCentral(at start: Int64) {
        if centralStart == nil { centralStart = start }
        let (compressed, size, offset) = (u32(20), u32(24), u32(42))
        guard compressed != Self.zip64Marker, size != Self.zip64Marker, offset != Self.zip64Marker, u16(34) == 0,
            centrals.count < limits.maxEntries
        else { return giveUp() }
        let nameEnd = 46 + u16(28)
        nameBytes += nameEnd - 46
        guard nameBytes <= Self.maxNameBytes else { return giveUp() }
        let header = Header(
            rawName: Array(record[46..<nameEnd]), method: UInt16(u16(10)), crc32: u32(16), compressedSize: Int64(compressed),
            size: Int64(size))
        centrals.append((header, Int64(offset)))
    }

    /// The end record: it must name the central directory just read, on one disk.
    private mutating func end(at start: Int64) {
        let (disk, directoryDisk, onDisk, total) = (u16(4), u16(6), u16(8), u16(10))
        let (size, offset) = (Int64(u32(12)), Int64(u32(16)))
        let directoryStart = centralStart ?? start
        guard disk == 0, directoryDisk == 0, onDisk == centrals.count, total == centrals.count, offset == directoryStart,
            size == start - directoryStart
        else { return giveUp() }
        dropInflater()
        phase = .end
        verdict = Verdict(entries: centrals.map { Entry(header: $0.header, vouched: vouched[$0.offset] == $0.header) })
    }
}
