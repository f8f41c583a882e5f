import CBookCacheShims
import Foundation

/// SHA-256 from the system's OpenSSL (libcrypto, which libcurl already loads), fed in pieces.
///
/// One hasher is used by one thread at a time; ``finalize()`` ends it. Like an allocation, it
/// traps only when OpenSSL cannot allocate its context.
// Unchecked: OpenSSL's context is used by one thread at a time, each use awaited before the next.
package final class SHA256Hasher: @unchecked Sendable {
    private var context: UnsafeMutableRawPointer?

    /// Starts a digest.
    public init() {
        guard let context = bookcache_sha256_new() else { fatalError("OpenSSL could not start a SHA-256 (out of memory)") }
        self.context = context
    }

    deinit {
        if let context { bookcache_sha256_free(context) }
    }

    /// Adds bytes.
    public func update(_ bytes: UnsafeRawBufferPointer) {
        guard let context, let base = bytes.baseAddress, !bytes.isEmpty else { return }
        guard bookcache_sha256_update(context, base, UInt64(bytes.count)) == 1 else { fatalError("OpenSSL's SHA-256 update failed") }
    }

    /// Adds bytes.
    public func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The digest as 64 lowercase hex digits; the hasher takes no more bytes.
    public func finalize() -> String {
        guard let context else { preconditionFailure("a SHA-256 was finalized twice") }
        self.context = nil
        var digest = [UInt8](repeating: 0, count: 32)
        guard bookcache_sha256_finish(context, &digest) == 1 else { fatalError("OpenSSL's SHA-256 could not finish") }
        return FileDownloader.hex(digest)
    }

    /// The digest of the bytes added so far, as 64 lowercase hex digits; the hasher goes on.
    public func digestSoFar() -> String {
        guard let context else { preconditionFailure("a finished SHA-256 was asked for its digest") }
        guard let copy = bookcache_sha256_copy(context) else { fatalError("OpenSSL could not copy a SHA-256 (out of memory)") }
        var digest = [UInt8](repeating: 0, count: 32)
        guard bookcache_sha256_finish(copy, &digest) == 1 else { fatalError("OpenSSL's SHA-256 could not finish") }
        return FileDownloader.hex(digest)
    }

    /// HMAC-SHA256 of `message` under `key`, as 64 lowercase hex digits.
    public static func hmacHex(key: Data, message: Data) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        let ok = key.withUnsafeBytes { key in
            message.withUnsafeBytes { message in
                bookcache_hmac_sha256(key.baseAddress, UInt64(key.count), message.baseAddress, UInt64(message.count), &digest)
            }
        }
        guard ok == 1 else { fatalError("OpenSSL's HMAC-SHA256 failed") }
        return FileDownloader.hex(digest)
    }

    /// The SHA-256 of `data` as 64 lowercase hex digits.
    public static func hex(of data: Data) -> String {
        let hasher = SHA256Hasher()
        hasher.update(data)
        return hasher.finalize()
    }
}
