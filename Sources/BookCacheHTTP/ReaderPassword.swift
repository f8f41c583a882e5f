import BookCache
import CBookCacheShims
import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The login e-readers use for the OPDS catalogue (`/opds`): a user name and a password kept
/// as a salted PBKDF2-HMAC-SHA256 hash in `CACHE/opds-password.json` (mode 0600), set with
/// `bookcache serve --opds-password`.
///
/// E-readers (KOReader, Moon+ Reader, Thorium, Foliate…) send it with HTTP Basic; it opens the
/// catalogue and the books' files and covers, nothing of the API. Digest is not offered: a
/// Digest server must keep a password-equivalent (the MD5 of user, realm and password), which
/// would make the file on disk as good as the password itself.
package struct ReaderPassword: Codable, Sendable, Hashable {
    /// The user name readers log in with.
    package var user: String
    var algorithm: String
    var iterations: UInt32
    var salt: String
    var hash: String

    /// PBKDF2 rounds: OWASP's 2023 figure for HMAC-SHA256.
    static let defaultIterations: UInt32 = 600_000
    static let algorithmName = "pbkdf2-sha256"

    /// A new login with a random salt.
    /// - Throws: ``ServiceSetupError`` when the user name or password is not usable.
    package init(user: String, password: String) throws(ServiceSetupError) {
        guard !user.isEmpty, user.utf8.count <= 64, !user.contains(":"),
            user.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0 != "\u{7F}" })
        else {
            throw ServiceSetupError("the reader user name must be 1–64 characters, without a colon or control characters")
        }
        guard password.utf8.count >= 8, password.utf8.count <= 1024 else {
            throw ServiceSetupError("the reader password must be 8–1024 bytes long")
        }
        guard !password.unicodeScalars.contains(where: { $0.value < 0x20 || $0 == "\u{7F}" }) else {
            throw ServiceSetupError("the reader password must not hold control characters (an e-reader cannot type them)")
        }
        self.user = user
        algorithm = Self.algorithmName
        iterations = Self.defaultIterations
        let saltBytes = ServiceAccess.randomBytes(16)
        salt = FileDownloader.hex(saltBytes)
        hash = try Self.derive(password, salt: saltBytes, iterations: Self.defaultIterations)
    }

    /// Whether `user` and `password` are this login (the hash compared in constant time).
    func verify(user: String, password: String) -> Bool {
        guard algorithm == Self.algorithmName, let saltBytes = Self.bytes(hex: salt),
            let derived = try? Self.derive(password, salt: saltBytes, iterations: iterations)
        else { return false }
        // Both compared whole, so a wrong user name costs what a wrong password does
        let userMatches = ServiceAccess.constantTimeEqual(user, self.user)
        return ServiceAccess.constantTimeEqual(derived, hash) && userMatches
    }

    // MARK: - The file

    /// Reads the login kept with the cache at `cacheRoot`; `nil` when none is set.
    /// - Throws: ``ServiceSetupError`` when the file is readable by others or not a login.
    package static func read(in cacheRoot: URL) throws(ServiceSetupError) -> ReaderPassword? {
        let file = CacheLayout(root: cacheRoot).readerPasswordFile
        guard FileManager.default.fileExists(atPath: file.path) else { return nil }
        let mode: Int
        do {
            mode = (try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? NSNumber)?.intValue ?? 0o777
        } catch {
            throw ServiceSetupError("cannot read \(file.path) (\(error))")
        }
        guard mode & 0o077 == 0 else {
            throw ServiceSetupError("\(file.path) may be read by other users; run chmod 600 \(file.path), or set the password again")
        }
        do {
            let login = try JSONDecoder().decode(ReaderPassword.self, from: Data(contentsOf: file))
            guard login.algorithm == algorithmName, (1...10_000_000).contains(login.iterations), bytes(hex: login.salt) != nil else {
                throw ServiceSetupError("\(file.path) is not a reader login this version knows; set the password again")
            }
            return login
        } catch let error as ServiceSetupError {
            throw error
        } catch {
            throw ServiceSetupError("cannot read \(file.path) (\(error)); set the password again with bookcache serve --opds-password")
        }
    }

    /// Keeps this login with the cache at `cacheRoot` (mode 0600, written atomically and synced).
    package func write(in cacheRoot: URL) throws(ServiceSetupError) {
        let file = CacheLayout(root: cacheRoot).readerPasswordFile
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try FileSystem.writeAtomically(try encoder.encode(self), to: file)
        } catch {
            throw ServiceSetupError("cannot write \(file.path) (\(error))")
        }
    }

    /// Removes the login kept with the cache at `cacheRoot`: the catalogue then takes only the
    /// token and the page's session.
    /// - Returns: Whether there was one.
    @discardableResult
    package static func remove(in cacheRoot: URL) throws(ServiceSetupError) -> Bool {
        let file = CacheLayout(root: cacheRoot).readerPasswordFile
        guard unlink(file.path) == 0 else {
            guard errno == ENOENT else { throw ServiceSetupError("cannot remove \(file.path) (\(String(cString: strerror(errno))))") }
            return false
        }
        return true
    }

    // MARK: - Hashing

    private static func derive(_ password: String, salt: [UInt8], iterations: UInt32) throws(ServiceSetupError) -> String {
        var key = [UInt8](repeating: 0, count: 32)
        let bytes = Array(password.utf8)
        guard bookcache_pbkdf2_sha256(bytes, UInt64(bytes.count), salt, UInt64(salt.count), iterations, &key, 32) == 1 else {
            throw ServiceSetupError("PBKDF2 failed in OpenSSL")
        }
        return FileDownloader.hex(key)
    }

    static func bytes(hex: String) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0, !digits.isEmpty else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
        default: nil
        }
    }
}
