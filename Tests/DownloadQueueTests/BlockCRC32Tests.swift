import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@Suite("Block CRC-32s computed while streaming")
struct BlockCRC32Tests {
    @Test("the CRC-32 of any range, from blocks and edge reads, equals zlib's over the bytes")
    func ranges() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Given a file of 5 blocks and a bit, fed in awkward chunk sizes
        let blockSize = 64 * 1024
        let bytes = StoredZIP.noise(count: 5 * blockSize + 123, seed: 42)
        let path = directory.path("file").path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        var blocks = BlockCRC32(blockSize: blockSize)
        var position = 0
        for size in [1, 7, 4096, 100_000, 65_536, 3].cycled(until: bytes.count) {
            let end = min(bytes.count, position + size)
            bytes[position..<end].withUnsafeBytes { blocks.update($0) }
            position = end
            if position == bytes.count { break }
        }
        #expect(blocks.length == Int64(bytes.count))
        #expect(blocks.blocks.count == 5)

        // Then every kind of range agrees with zlib over the same bytes
        let size = Int64(blockSize)
        let ranges: [Range<Int64>] = [
            0..<Int64(bytes.count), 0..<size, size..<(3 * size), 10..<20, (size - 5)..<(size + 5), 1..<(4 * size + 1),
            (2 * size + 17)..<(5 * size + 100), (5 * size)..<Int64(bytes.count), 7..<7,
        ]
        for range in ranges {
            #expect(blocks.crc32(of: range, inFileAt: path) == zlibCRC32(bytes[Int(range.lowerBound)..<Int(range.upperBound)]), "\(range)")
        }
        // And a range beyond what was covered has no answer
        #expect(blocks.crc32(of: 0..<Int64(bytes.count + 1), inFileAt: path) == nil)
    }

    @Test("a download computes block CRC-32s when asked and the body is large, also across a resume")
    func download() async throws {
        let body = Data(StoredZIP.noise(count: Int(FileDownloader.blockCRC32MinimumLength) + 300_000, seed: 7))
        try await withServerAndDirectory(files: ["big": body, "small": Data(body.prefix(1000))]) { server, dir in
            // A large body cut at 40% and resumed
            server.enqueueFault(.dropAfter(bytes: body.count * 4 / 10), for: "/big")
            var request = job(server, "big", in: dir, as: "big")
            request.computesBlockCRC32 = true
            let file = try await makeQueue().download(request)
            #expect(file.resumedFrom > 0)
            let blocks = try #require(file.blockCRC32)
            #expect(blocks.length == Int64(body.count))
            #expect(blocks.crc32(of: 0..<Int64(body.count), inFileAt: file.path) == zlibCRC32(body))

            // A small body, or a request that did not ask, gets none
            var small = job(server, "small", in: dir, as: "small")
            small.computesBlockCRC32 = true
            #expect(try await makeQueue().download(small).blockCRC32 == nil)
            #expect(try await makeQueue().download(job(server, "big", in: dir, as: "big2")).blockCRC32 == nil)
        }
    }
}

extension Array {
    /// The elements repeated until at least `count` have been produced.
    fileprivate func cycled(until count: Int) -> [Element] {
        var out: [Element] = []
        while out.count < count { out += self }
        return out
    }
}
