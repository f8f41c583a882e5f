import BookCacheTestSupport
import Foundation
import Testing

@testable import DownloadQueue

@Suite("The output file")
struct OutputFileTests {
    @Test("a batch of many buffers, of every size and some empty, lands in order, over several gathered writes")
    func gatheredWrites() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        // Given more buffers than one gathered write takes, of sizes from 0 to 40 KiB
        let count = OutputFile.gathered * 3 + 7
        let buffers = (0..<count).map { index in
            [UInt8](repeating: UInt8(truncatingIfNeeded: index), count: index % 5 == 0 ? 0 : (index * 977) % 40_960 + 1)
        }
        let path = dir.path("out").path
        let url = URL(string: "http://127.0.0.1/out")!

        // When they are written in two batches, then appended to after the file is reopened
        let file = try OutputFile(path: path, url: url, append: false)
        try file.write(Array(buffers.prefix(count / 2)))
        try file.write(Array(buffers[(count / 2)...]))
        try file.syncAndClose()
        let appended = try OutputFile(path: path, url: url, append: true)
        try appended.write([[1, 2, 3], [], [4]])
        try appended.syncAndClose()

        // Then the file is every byte, in order
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data(buffers.flatMap { $0 } + [1, 2, 3, 4]))
    }

    @Test("a write the disk refuses says so, with its errno")
    func refusedWrite() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        let file = try OutputFile(path: dir.path("out").path, url: URL(string: "http://127.0.0.1/out")!, append: false)
        // A descriptor closed under it: the kernel refuses the write.
        file.close()
        let error = #expect(throws: DownloadError.self) { try file.write([[1, 2, 3]]) }
        #expect(error?.kind == .fileSystem)
        #expect(error?.errnoCode == EBADF)
    }
}
