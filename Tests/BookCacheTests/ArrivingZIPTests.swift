import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

/// The ZIP read as it arrives (`ArrivingZIP`): what it vouches for, and what makes it vouch for
/// nothing. That it never changes a validation's verdict is the mutation fuzzer's to show.
@Suite("An EPUB checked as it arrives")
struct ArrivingZIPTests {
    /// The verdict after `bytes` were read in pieces of at most `piece` bytes (batches of up to
    /// three pieces, as the downloader hands them over).
    static func verdict(of bytes: [UInt8], piece: Int = .max, startingAt start: Int64 = 0) -> ZIPStreamReader.Verdict? {
        var reader = ZIPStreamReader(limits: ValidationLimits())
        var offset = Int(start)
        var sizes = FuzzRandom(seed: UInt64(bytes.count) &* 31 &+ UInt64(min(piece, 1 << 30)))
        while offset < bytes.count {
            let batchStart = offset
            var batch: [[UInt8]] = []
            for _ in 0..<(1 + sizes.next(3)) where offset < bytes.count {
                let count = min(bytes.count - offset, piece == .max ? bytes.count : 1 + sizes.next(piece))
                batch.append(Array(bytes[offset..<(offset + count)]))
                offset += count
            }
            reader.read(batch, at: Int64(batchStart))
        }
        return reader.verdict
    }

    static let epubs = [
        "alice.epub", "pride.epub", "nfc-nfd-names.epub", "real/epubcheck-filename-not-utf8.epub",
        "real/epubcheck-mimetype-extra-field.epub", "real/epubcheck-mimetype-missing.epub",
        "real/epubcheck-spine-in-another-normalization.epub", "quirks/mimetype-compressed.epub",
    ]

    @Test("vouches for every entry of real EPUBs (deflated and stored), however the bytes are cut", arguments: epubs)
    func realBooks(name: String) throws {
        let bytes = [UInt8](try Fixtures.data(name))
        let seen = Self.verdict(of: bytes)
        let whole = try #require(seen)
        #expect(!whole.entries.isEmpty)
        #expect(whole.entries.allSatisfy { $0.vouched })
        #expect(whole.entries.contains { $0.header.method == 8 })
        for piece in [1, 7, 30, 46, 4096, 65536] {
            #expect(Self.verdict(of: bytes, piece: piece)?.entries == whole.entries, "pieces of \(piece) bytes")
        }
    }

    @Test("a damaged byte in one entry's data: that entry alone is not vouched for")
    func damagedData() throws {
        let chapter = StoredZIP.noise(count: 100_000, seed: 5)
        var bytes = StoredZIP.epub(files: [("OEBPS/a.bin", chapter), ("OEBPS/b.bin", chapter)])
        let good = try #require(Self.verdict(of: bytes))
        #expect(good.entries.count == 5)
        #expect(good.entries.allSatisfy { $0.vouched })
        // A byte in the middle of the last entry's data.
        bytes[Self.dataOffset(of: 4, in: bytes) + 50_000] ^= 0x20
        let damaged = try #require(Self.verdict(of: bytes, piece: 8192))
        #expect(damaged.entries.map(\.vouched) == [true, true, true, true, false])

        // Deflated: a real book's compressed byte flipped (its CRC no longer matches, or zlib refuses it).
        var alice = [UInt8](try Fixtures.data("alice.epub"))
        let deflated = try #require(Self.verdict(of: alice)?.entries.firstIndex { $0.header.method == 8 && $0.header.compressedSize > 300 })
        alice[Self.dataOffset(of: deflated, in: alice) + 150] ^= 0x01
        let flipped = try #require(Self.verdict(of: alice))
        #expect(!flipped.entries[deflated].vouched)
        #expect(flipped.entries.enumerated().allSatisfy { $0.offset == deflated || $0.element.vouched })
    }

    @Test(
        "what it does not follow makes it vouch for nothing",
        arguments: ["data descriptor", "comment", "bytes after the end", "bytes before the first entry", "a gap", "resumed", "cut short"])
    func unfollowed(_ case: String) throws {
        var bytes = StoredZIP.epub(chapter: StoredZIP.noise(count: 10_000, seed: 9))
        #expect(Self.verdict(of: bytes) != nil)
        switch `case` {
        case "data descriptor": bytes[6] |= 0x08
        case "comment": bytes[bytes.count - 2] = 3; bytes += Array("abc".utf8)
        case "bytes after the end": bytes += [0]
        case "bytes before the first entry": bytes.insert(0, at: 0)
        case "a gap":
            var reader = ZIPStreamReader(limits: ValidationLimits())
            reader.read([Array(bytes[0..<1000])], at: 0)
            reader.read([Array(bytes[1001...])], at: 1001)
            let verdict = reader.verdict
            #expect(verdict == nil)
            return
        case "resumed":
            #expect(Self.verdict(of: bytes, piece: 4096, startingAt: 100) == nil)
            return
        default: bytes.removeLast()
        }
        #expect(Self.verdict(of: bytes, piece: 4096) == nil)
    }

    @Test("the real book with a data descriptor (epubcheck's) is not vouched for: libzip reads all of it")
    func realDataDescriptor() throws {
        let name = "real/epubcheck-names-equal-after-normalization.epub"
        let bytes = [UInt8](try Fixtures.data(name))
        #expect(Self.verdict(of: bytes) == nil)
    }

    @Test("behind the writing, deflated data is left to the validator: those entries are not vouched for, stored ones still are")
    func notInflating() throws {
        let bytes = [UInt8](try Fixtures.data("alice.epub"))
        var reader = ZIPStreamReader(limits: ValidationLimits())
        // The mimetype (stored) and the start of container.xml, inflated; then the reading falls behind.
        reader.read([Array(bytes[..<100])], at: 0)
        reader.read([Array(bytes[100...])], at: 100, inflating: false)
        let seen = reader.verdict
        let verdict = try #require(seen)
        #expect(verdict.entries.map(\.vouched) == verdict.entries.map { $0.header.method == 0 })
        #expect(verdict.entries.contains { $0.vouched })
    }

    @Test("an attempt that starts over from byte 0 is read afresh")
    func restart() throws {
        let bytes = StoredZIP.epub(chapter: StoredZIP.noise(count: 50_000, seed: 3))
        var damaged = bytes
        damaged[30_000] ^= 0xFF
        var reader = ZIPStreamReader(limits: ValidationLimits())
        reader.read([Array(damaged[0..<40_000])], at: 0)
        reader.read([bytes], at: 0)
        let seen = reader.verdict
        let verdict = try #require(seen)
        #expect(verdict.entries.allSatisfy { $0.vouched })
    }

    @Test("names are kept up to a bound: an archive of long names is given up, not held in memory")
    func longNames() throws {
        let long = (0..<70).map { index in (name: String(repeating: "n", count: 60_000) + "\(index)", bytes: [UInt8]("x".utf8)) }
        let bytes = StoredZIP.make(long)
        // 70 names of 60 KB, in the local headers and again in the central directory: 8.4 MB.
        // (Booleans, not the verdicts: a failure would print every name.)
        let gaveUp = Self.verdict(of: bytes) == nil
        #expect(gaveUp)
        let followed = Self.verdict(of: StoredZIP.make(Array(long[..<30]))) != nil
        #expect(followed)
    }

    @Test("an entry declaring more expansion than the validator allows is not inflated")
    func bomb() throws {
        // 19,447 bytes declaring 20,000,000 (1,028×, over the 200× allowed): left to the validator,
        // which refuses it before inflating.
        let bytes = [UInt8](try Fixtures.data("corrupt/zip-bomb.epub"))
        let seen = Self.verdict(of: bytes)
        let verdict = try #require(seen)
        #expect(verdict.entries.map(\.vouched) == [true, true, true, true, true, false])
    }

    @Test("every EPUB among the fixtures gets the same verdict with the entries vouched for as it arrived as without")
    func fixtures() throws {
        let root = Fixtures.repositoryRoot.appendingPathComponent("Fixtures/books")
        let names = try FileManager.default.subpathsOfDirectory(atPath: root.path).filter { $0.hasSuffix(".epub") }.sorted()
        #expect(names.count > 25)
        var vouched = 0
        for name in names {
            let path = root.appendingPathComponent(name).path
            let verdict = Self.verdict(of: [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))), piece: 4096)
            vouched += verdict?.entries.filter(\.vouched).count ?? 0
            let validator = BookValidator()
            let byLibzip = Result { () throws(ValidationFailure) in try validator.check(path: path) }
            #expect(Result { () throws(ValidationFailure) in try validator.check(path: path, arrived: verdict) } == byLibzip, "\(name)")
        }
        #expect(vouched > 100)
    }

    /// The offset of entry `index`'s data: its local header's, found through the central directory.
    static func dataOffset(of index: Int, in bytes: [UInt8]) -> Int {
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        let end = bytes.count - 22
        var central = u32(end + 16)
        for _ in 0..<index { central += 46 + u16(central + 28) + u16(central + 30) + u16(central + 32) }
        let local = u32(central + 42)
        return local + 30 + u16(local + 26) + u16(local + 28)
    }
}
