import ArgumentParser
import BookCache

/// The exit statuses of `bookcache`, by what went wrong (the README's table; sysexits.h numbers).
/// Scripts tell an offline network from a corrupt book from a full disk by the status alone;
/// `--json` lines carry the same distinction as `"kind"`.
enum ExitStatus {
    /// Not everything as asked, for reasons that differ (or none of those below).
    static let failure: Int32 = 1
    /// A malformed option, id, URL, checksum, size or duration (ArgumentParser's usage errors too).
    static let usage: Int32 = 64
    /// The data is wrong: not a valid book, a checksum that differs, an id taken by another URL.
    static let dataError: Int32 = 65
    /// Internal software error, here the validator's: a book could not be judged safely (the
    /// worker judging it crashed, or ran out of memory or time); nothing else was affected.
    static let unjudgeable: Int32 = 70
    /// Unavailable: the server refused the book (401, 403, 404…), could not be reached, the
    /// network is down, or no `bookcache serve` runs.
    static let unavailable: Int32 = 69
    /// Cannot create: the cache directory is unusable or the disk has no room.
    static let cannotCreate: Int32 = 73
    /// I/O: the index or the settings cannot be read or written.
    static let ioError: Int32 = 74
    /// Temporary: the server is busy (408, 429, 5xx); try again later.
    static let temporary: Int32 = 75

    /// The status for a library error.
    static func of(_ error: BookCacheError) -> Int32 {
        switch error.kind {
        case .invalidIdentifier, .invalidURL, .invalidChecksum, .invalidArgument: usage
        case .fileCorrupted, .checksumMismatch, .identifierInUse: dataError
        case .unjudgeable: unjudgeable
        case .networkUnavailable, .offline: unavailable
        case .downloadFailed: error.isServerBusy ? temporary : unavailable
        case .cacheDirectoryUnusable, .insufficientStorage: cannotCreate
        case .indexUnusable, .settingsUnusable: ioError
        default: failure
        }
    }

    /// The status for a batch: that of its failures when they all share one, else 1.
    static func of(failures: [Int32]) -> Int32 {
        guard let first = failures.first else { return 0 }
        return failures.allSatisfy { $0 == first } ? first : failure
    }
}
