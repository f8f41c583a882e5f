import CBookCacheShims
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The CRC-32 of every block of a file, computed while it streams in, so a caller can later check
/// the CRC-32 of any range of the file (a ZIP entry, say) reading only the range's partial edge
/// blocks from disk instead of the whole range.
///
/// Blocks are aligned to the start of the file; the last one may be short.
package struct BlockCRC32: Sendable, Hashable {
    /// The bytes in each block but the last.
    public let blockSize: Int
    /// The CRC-32 of each complete block, in order.
    public private(set) var blocks: [UInt32] = []
    /// The bytes covered so far.
    public private(set) var length: Int64 = 0
    /// The running CRC-32 of the block being filled.
    private var current: UInt32 = 0

    /// Starts empty.
    /// - Parameter blockSize: The block size in bytes (at least 4 KiB).
    public init(blockSize: Int = 1 << 20) {
        precondition(blockSize >= 4096, "blocks of at least 4 KiB")
        self.blockSize = blockSize
    }

    /// Adds the next bytes of the file.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes
        while !rest.isEmpty {
            let filled = Int(length % Int64(blockSize))
            let take = min(rest.count, blockSize - filled)
            current = bookcache_crc32(current, rest.baseAddress, UInt64(take))
            length += Int64(take)
            if filled + take == blockSize {
                blocks.append(current)
                current = 0
            }
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
        }
    }

    /// The CRC-32 of `range` of the file at `path`, from the block CRC-32s plus reads of the
    /// range's partial edge blocks (at most two reads of less than a block each).
    /// - Parameters:
    ///   - range: Byte offsets within the covered length.
    ///   - path: The file these CRCs were computed over.
    /// - Returns: The CRC-32, or `nil` when the range lies outside the covered bytes or the file
    ///   cannot be read (the caller then checks the range some other way).
    public func crc32(of range: Range<Int64>, inFileAt path: String) -> UInt32? {
        guard range.lowerBound >= 0, range.upperBound <= length else { return nil }
        if range.isEmpty { return 0 }
        let size = Int64(blockSize)
        let firstWhole = (range.lowerBound + size - 1) / size
        let endWhole = range.upperBound / size
        guard firstWhole < endWhole else { return Self.read(path, range) }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var crc: UInt32 = 0
        if range.lowerBound < firstWhole * size {
            guard let head = Self.read(fd, range.lowerBound..<(firstWhole * size)) else { return nil }
            crc = head
        }
        // Whole blocks inside the range; a short last block never is one (it ends the file).
        for block in Int(firstWhole)..<Int(endWhole) {
            crc = bookcache_crc32_combine(crc, blocks[block], size)
        }
        if endWhole * size < range.upperBound {
            let tailRange = (endWhole * size)..<range.upperBound
            guard let tail = Self.read(fd, tailRange) else { return nil }
            crc = bookcache_crc32_combine(crc, tail, Int64(tailRange.count))
        }
        return crc
    }

    private static func read(_ path: String, _ range: Range<Int64>) -> UInt32? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        return read(fd, range)
    }

    /// The CRC-32 of `range` read from `fd`.
    private static func read(_ fd: Int32, _ range: Range<Int64>) -> UInt32? {
        let chunk = 256 * 1024
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buffer.deallocate() }
        var crc: UInt32 = 0
        var offset = range.lowerBound
        while offset < range.upperBound {
            let n = pread(fd, buffer, Int(min(Int64(chunk), range.upperBound - offset)), off_t(offset))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            crc = bookcache_crc32(crc, buffer, UInt64(n))
            offset += Int64(n)
        }
        return crc
    }
}
