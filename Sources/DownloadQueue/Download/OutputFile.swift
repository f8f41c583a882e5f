import CBookCacheShims
import Foundation
import Logging

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file opened for writing with plain POSIX calls, so every failure keeps its `errno`.
// Unchecked: one blocking-work call at a time uses the descriptor, each awaited before the next.
final class OutputFile: @unchecked Sendable {
    // Used by one blocking-work call at a time, each awaited by the download that created it.
    private var fd: Int32
    private let path: String
    private let url: URL
    /// Bytes written since writeback was last started.
    private var unflushed = 0
    private var offset: Int64 = 0
    /// Writeback is started every this many bytes, so the final fsync of a large file is short
    /// and the disk works while the network does.
    private static let writebackChunk = 8 << 20

    init(path: String, url: URL, append: Bool) throws {
        self.path = path
        self.url = url
        // Never through a link: appending opens only the file itself; a new file replaces whatever
        // had the name (a link included, which unlink removes, not its target) and is made anew.
        if !append { unlink(path) }
        let flags = O_WRONLY | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_CREAT | O_EXCL)
        let fd = open(path, flags, 0o644)
        guard fd >= 0 else {
            let code = errno
            throw DownloadError(
                kind: .fileSystem, url: url, errnoCode: code, detail: "cannot create \(path): \(String(cString: strerror(code)))")
        }
        self.fd = fd
        if append {
            offset = Int64(lseek(fd, 0, SEEK_END))
        }
    }

    /// Writes `buffers` in order, gathered into one `writev` for up to ``gathered`` of them. A
    /// `write` for each (a batch holds libcurl's 16 KiB pieces) made the kernel's work per call —
    /// the inode's lock, finding the pages — a quarter of a 1 GiB book's time (7 and 9 alternating
    /// rounds: B/A 0.745 and 0.794 with `writev`).
    func write(_ buffers: [[UInt8]]) throws {
        var start = 0
        var vectors: [iovec] = []
        vectors.reserveCapacity(min(buffers.count, Self.gathered))
        while start < buffers.count {
            let end = min(start + Self.gathered, buffers.count)
            vectors.removeAll(keepingCapacity: true)
            try gather(buffers, from: start, to: end, into: &vectors)
            start = end
        }
    }

    /// The most buffers one `writev` takes (the kernel's limit is 1,024; this bounds the nesting
    /// that keeps each buffer's address valid while it is written).
    static let gathered = 64

    /// Notes where each buffer of `index..<end` is while its address is valid — inside its
    /// `withUnsafeBytes`, one nested in the next — and writes them all from the innermost.
    private func gather(_ buffers: [[UInt8]], from index: Int, to end: Int, into vectors: inout [iovec]) throws {
        guard index < end else { return try writeAll(&vectors) }
        try buffers[index].withUnsafeBytes { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                vectors.append(iovec(iov_base: UnsafeMutableRawPointer(mutating: base), iov_len: bytes.count))
            }
            try gather(buffers, from: index + 1, to: end, into: &vectors)
        }
    }

    /// Writes every byte `vectors` point at, again after a short write.
    private func writeAll(_ vectors: inout [iovec]) throws {
        let total = vectors.reduce(0) { $0 + $1.iov_len }
        var first = 0
        while first < vectors.count {
            let written = vectors.withUnsafeBufferPointer { all in
                systemWritev(fd, all.baseAddress! + first, Int32(all.count - first))
            }
            if written <= 0 {
                if written < 0 && errno == EINTR { continue }
                let code = written < 0 ? errno : EIO
                throw DownloadError(
                    kind: .fileSystem, url: url, errnoCode: code, detail: "writing \(path): \(String(cString: strerror(code)))")
            }
            var left = written
            while left > 0 {
                if left >= vectors[first].iov_len {
                    left -= vectors[first].iov_len
                    first += 1
                } else {
                    vectors[first].iov_base += left
                    vectors[first].iov_len -= left
                    left = 0
                }
            }
        }
        unflushed += total
        if unflushed >= Self.writebackChunk {
            _ = bookcache_start_writeback(fd, self.offset, Int64(unflushed))
            self.offset += Int64(unflushed)
            unflushed = 0
        }
    }

    /// Makes everything written so far durable (`fsync`).
    func sync() throws {
        if fsync(fd) != 0 {
            let code = errno
            throw DownloadError(
                kind: .fileSystem, url: url, errnoCode: code, detail: "flushing \(path): \(String(cString: strerror(code)))")
        }
    }

    func syncAndClose() throws {
        try sync()
        let result = systemClose(fd)
        fd = -1
        if result != 0 {
            let code = errno
            throw DownloadError(kind: .fileSystem, url: url, errnoCode: code, detail: "closing \(path): \(String(cString: strerror(code)))")
        }
    }

    func close() {
        if fd >= 0 {
            _ = systemClose(fd)
            fd = -1
        }
    }

    deinit {
        close()
    }
}

@inline(__always)
private func systemWritev(_ fd: Int32, _ vectors: UnsafePointer<iovec>, _ count: Int32) -> Int {
    #if canImport(Glibc)
        return Glibc.writev(fd, vectors, count)
    #else
        return Darwin.writev(fd, vectors, count)
    #endif
}

@inline(__always)
func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    #if canImport(Glibc)
        return Glibc.open(path, flags, mode)
    #else
        return Darwin.open(path, flags, mode)
    #endif
}

@inline(__always)
private func systemClose(_ fd: Int32) -> Int32 {
    #if canImport(Glibc)
        return Glibc.close(fd)
    #else
        return Darwin.close(fd)
    #endif
}
