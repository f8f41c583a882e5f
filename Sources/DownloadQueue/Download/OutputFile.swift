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

    func write(_ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            let written = systemWrite(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 {
                if errno == EINTR { continue }
                let code = errno
                throw DownloadError(
                    kind: .fileSystem, url: url, errnoCode: code, detail: "writing \(path): \(String(cString: strerror(code)))")
            }
            offset += written
        }
        unflushed += bytes.count
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
private func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    #if canImport(Glibc)
        return Glibc.write(fd, buffer, count)
    #else
        return Darwin.write(fd, buffer, count)
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
