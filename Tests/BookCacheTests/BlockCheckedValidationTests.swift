import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// Large stored EPUB entries checked from the block CRC-32s computed while downloading.
@Suite("Validation with block CRC-32s")
struct BlockCheckedValidationTests {
    // Larger than FileDownloader.blockCRC32MinimumLength, so a download computes block CRC-32s for it.
    let chapter = StoredZIP.noise(count: 9 << 20, seed: 11)

    func blocks(of bytes: [UInt8]) -> BlockCRC32 {
        var blocks = BlockCRC32()
        bytes.withUnsafeBytes { blocks.update($0) }
        return blocks
    }

    func write(_ bytes: [UInt8], in directory: TemporaryDirectory) throws -> String {
        let path = directory.path("book.epub").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a valid book passes and its large stored entry is vouched for by the blocks")
    func valid() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let book = StoredZIP.epub(chapter: chapter)
        let path = try write(book, in: directory)
        let validator = EPUBValidator(limits: ValidationLimits())

        #expect(validator.entriesConfirmed(path: path, by: blocks(of: book)) == [3])
        #expect(try validator.validate(path: path, blockCRC32: blocks(of: book)) == [], "a conformant book has no warnings")
        #expect(try BookValidator().check(path: path, blockCRC32: blocks(of: book)).format == .epub)
    }

    @Test("a byte flipped in transit inside the large entry is still refused")
    func flippedInTransit() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        var book = StoredZIP.epub(chapter: chapter)
        book[book.count / 2] ^= 0x20
        // The blocks were computed over the bytes as they arrived, flipped byte included.
        let path = try write(book, in: directory)
        let validator = EPUBValidator(limits: ValidationLimits())
        #expect(validator.entriesConfirmed(path: path, by: blocks(of: book)).isEmpty)
        let failure = #expect(throws: ValidationFailure.self) { try validator.validate(path: path, blockCRC32: blocks(of: book)) }
        #expect(failure?.reason.contains("damaged") == true, "\(String(describing: failure?.reason))")
    }

    @Test("blocks that do not match the file vouch for nothing; libzip reads the entry and the book passes")
    func mismatchedBlocks() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let book = StoredZIP.epub(chapter: chapter)
        let path = try write(book, in: directory)
        let other = StoredZIP.epub(chapter: StoredZIP.noise(count: chapter.count, seed: 12))
        let validator = EPUBValidator(limits: ValidationLimits())
        #expect(validator.entriesConfirmed(path: path, by: blocks(of: other)).isEmpty)
        #expect(validator.entriesConfirmed(path: path, by: blocks(of: Array(book.dropLast()))).isEmpty)
        #expect(try validator.validate(path: path, blockCRC32: blocks(of: other)) == [], "a conformant book has no warnings")
    }

    @Test("a large book is read on several cores, and the damage reported is the first in archive order")
    func parallelReadThrough() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let files = (0..<6).map { (name: "OEBPS/part\($0).bin", bytes: StoredZIP.noise(count: 2 << 20, seed: UInt64($0 + 1))) }
        let validator = EPUBValidator(limits: ValidationLimits())
        let good = StoredZIP.epub(files: files)
        #expect(try validator.validate(path: try write(good, in: directory)) == [], "a conformant book has no warnings")

        // Given parts 2 and 5 damaged after their CRCs were written (the test machine may have one core or several)
        var bytes = good
        for part in [5, 2] {
            // The first occurrence of the name is the local header's; the data follows it (no extra field).
            let name = Array("OEBPS/part\(part).bin".utf8)
            let dataStart = try #require(bytes.firstRange(of: name)).upperBound
            bytes[dataStart + 1000] ^= 0x01
        }
        let path = try write(bytes, in: directory)

        // Then validation fails naming part 2, every time
        for _ in 0..<3 {
            let failure = #expect(throws: ValidationFailure.self) { try validator.validate(path: path) }
            #expect(failure?.reason.contains("'OEBPS/part2.bin' is damaged") == true, "\(String(describing: failure?.reason))")
        }
    }

    @Test("a manager download of a large stored EPUB is cached; the same book damaged on the server is refused")
    func endToEnd() async throws {
        var damaged = StoredZIP.epub(chapter: chapter)
        damaged[damaged.count - 1_000_000] ^= 0x01
        let files = ["big.epub": Data(StoredZIP.epub(chapter: chapter)), "damaged.epub": Data(damaged)]
        try await withServerAndDirectory(files: files) { server, dir in
            let manager = BookCacheManager(configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0))
            let cached = try await manager.download(
                try BookDownloadRequest(url: "\(server.baseURL)/big.epub", id: BookID(parsing: "ebook-big")))
            #expect(cached.metadata.fileSize == Int64(files["big.epub"]!.count))
            let error = await #expect(throws: BookCacheError.self) {
                try await manager.download(
                    try BookDownloadRequest(url: "\(server.baseURL)/damaged.epub", id: BookID(parsing: "ebook-damaged")))
            }
            #expect(error?.kind == .fileCorrupted, "\(String(describing: error))")
            #expect(try await manager.allBooks().map(\.id) == ["ebook-big"])
        }
    }
}
