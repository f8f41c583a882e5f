import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where each entry's data lies in a ZIP archive, read from its central directory and local
/// headers (ZIP64 included). libzip does not expose data offsets; ``EPUBValidator`` needs them to
/// check a large stored entry's CRC-32 from the block CRC-32s computed while it downloaded.
///
/// This is not a validator: an archive it cannot make sense of simply yields `nil`, and the
/// caller falls back to reading the entry through libzip.
struct ZIPDirectory {
    struct Entry: Equatable {
        var name: [UInt8]
        var method: UInt16
        var crc32: UInt32
        var compressedSize: Int64
        var size: Int64
        var localHeaderOffset: Int64
    }

    let entries: [Entry]
    private let fd: Int32
    /// The archive's size in bytes.
    let fileSize: Int64

    /// Reads the central directory of the file open at `fd`; `nil` when it is not one this
    /// parser follows (the caller then leaves the archive to libzip alone).
    init?(fd: Int32, maxEntries: Int) {
        var info = stat()
        guard fstat(fd, &info) == 0 else { return nil }
        self.fd = fd
        fileSize = Int64(info.st_size)
        // The end-of-central-directory record: in the last 22 + 65,535 bytes.
        let tailLength = Int(min(fileSize, 22 + 65_535))
        guard tailLength >= 22, let tail = Self.read(fd, at: fileSize - Int64(tailLength), count: tailLength) else { return nil }
        guard let end = stride(from: tail.count - 22, through: 0, by: -1).first(where: { Self.u32(tail, $0) == 0x0605_4b50 }) else {
            return nil
        }
        var count = Int64(Self.u16(tail, end + 10))
        var directorySize = Int64(Self.u32(tail, end + 12))
        var directoryOffset = Int64(Self.u32(tail, end + 16))
        if count == 0xFFFF || directorySize == 0xFFFF_FFFF || directoryOffset == 0xFFFF_FFFF {
            // ZIP64: a locator just before the record points at the ZIP64 end record.
            let locatorOffset = fileSize - Int64(tailLength) + Int64(end) - 20
            guard locatorOffset >= 0, let locator = Self.read(fd, at: locatorOffset, count: 20), Self.u32(locator, 0) == 0x0706_4b50,
                let end64 = Self.read(fd, at: Int64(bitPattern: Self.u64(locator, 8)), count: 56), Self.u32(end64, 0) == 0x0606_4b50
            else { return nil }
            count = Int64(bitPattern: Self.u64(end64, 32))
            directorySize = Int64(bitPattern: Self.u64(end64, 40))
            directoryOffset = Int64(bitPattern: Self.u64(end64, 48))
        }
        guard count >= 0, count <= Int64(maxEntries), directorySize >= 0, directorySize <= 64 << 20, directoryOffset >= 0,
            directoryOffset <= fileSize - directorySize,
            let directory = Self.read(fd, at: directoryOffset, count: Int(directorySize))
        else { return nil }

        var entries: [Entry] = []
        var position = 0
        for _ in 0..<count {
            guard position + 46 <= directory.count, Self.u32(directory, position) == 0x0201_4b50 else { return nil }
            let nameLength = Int(Self.u16(directory, position + 28))
            let extraLength = Int(Self.u16(directory, position + 30))
            let commentLength = Int(Self.u16(directory, position + 32))
            let nameStart = position + 46
            guard nameStart + nameLength + extraLength + commentLength <= directory.count else { return nil }
            var entry = Entry(
                name: Array(directory[nameStart..<(nameStart + nameLength)]),
                method: Self.u16(directory, position + 10),
                crc32: Self.u32(directory, position + 16),
                compressedSize: Int64(Self.u32(directory, position + 20)),
                size: Int64(Self.u32(directory, position + 24)),
                localHeaderOffset: Int64(Self.u32(directory, position + 42)))
            if entry.size == 0xFFFF_FFFF || entry.compressedSize == 0xFFFF_FFFF || entry.localHeaderOffset == 0xFFFF_FFFF {
                guard Self.applyZIP64(&entry, extra: Array(directory[(nameStart + nameLength)..<(nameStart + nameLength + extraLength)]))
                else {
                    return nil
                }
            }
            entries.append(entry)
            position = nameStart + nameLength + extraLength + commentLength
        }
        self.entries = entries
    }

    /// Where the entry's data starts: after its local header, name and extra field.
    func dataRange(of entry: Entry) -> Range<Int64>? {
        // Offsets come from the file: compare by subtraction so a huge value cannot overflow.
        guard entry.localHeaderOffset >= 0, entry.localHeaderOffset <= fileSize - 30,
            let header = Self.read(fd, at: entry.localHeaderOffset, count: 30), Self.u32(header, 0) == 0x0403_4b50
        else { return nil }
        let start = entry.localHeaderOffset + 30 + Int64(Self.u16(header, 26)) + Int64(Self.u16(header, 28))
        guard entry.compressedSize >= 0, start <= fileSize, entry.compressedSize <= fileSize - start else { return nil }
        return start..<(start + entry.compressedSize)
    }

    /// Replaces the saturated 32-bit fields with their ZIP64 extra-field values, in the order the
    /// format gives them (size, compressed size, offset; only those saturated).
    private static func applyZIP64(_ entry: inout Entry, extra: [UInt8]) -> Bool {
        var position = 0
        while position + 4 <= extra.count {
            let id = u16(extra, position)
            let length = Int(u16(extra, position + 2))
            guard position + 4 + length <= extra.count else { return false }
            if id == 0x0001 {
                var field = position + 4
                func next() -> Int64? {
                    guard field + 8 <= position + 4 + length else { return nil }
                    defer { field += 8 }
                    return Int64(bitPattern: u64(extra, field))
                }
                if entry.size == 0xFFFF_FFFF { guard let value = next() else { return false }; entry.size = value }
                if entry.compressedSize == 0xFFFF_FFFF { guard let value = next() else { return false }; entry.compressedSize = value }
                if entry.localHeaderOffset == 0xFFFF_FFFF {
                    guard let value = next() else { return false }; entry.localHeaderOffset = value
                }
                return entry.size >= 0 && entry.compressedSize >= 0 && entry.localHeaderOffset >= 0
            }
            position += 4 + length
        }
        return false
    }

    private static func read(_ fd: Int32, at offset: Int64, count: Int) -> [UInt8]? {
        guard offset >= 0, count >= 0 else { return nil }
        var bytes = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = bytes.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + Int64(done))) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return nil }
            done += n
        }
        return bytes
    }

    private static func u16(_ bytes: [UInt8], _ at: Int) -> UInt16 {
        UInt16(bytes[at]) | UInt16(bytes[at + 1]) << 8
    }

    private static func u32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
        UInt32(u16(bytes, at)) | UInt32(u16(bytes, at + 2)) << 16
    }

    private static func u64(_ bytes: [UInt8], _ at: Int) -> UInt64 {
        UInt64(u32(bytes, at)) | UInt64(u32(bytes, at + 4)) << 32
    }
}
