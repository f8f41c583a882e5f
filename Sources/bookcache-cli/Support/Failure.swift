import ArgumentParser
import BookCache
import Foundation

/// Turns a library error into one line on stderr and the exit status of its kind (``ExitStatus``).
func fail(_ error: BookCacheError) -> ExitCode {
    Terminal.writeError(Localized.error(cliMessage(error)))
    return ExitCode(ExitStatus.of(error))
}

/// Parses an id typed on the command line, as a validation error when malformed.
func parseID(_ string: String) throws -> BookID {
    do {
        return try BookID(parsing: string)
    } catch {
        throw ValidationError(error.message)
    }
}

/// The command line's wording of what to do about an error: the library's message (in the
/// reader's language, or in English for `--json`), followed by the option or command that does it
/// (the library names no command-line options).
func cliMessage(_ error: BookCacheError, in locale: Locale = Localized.locale) -> String {
    let message = error.message(in: locale)
    guard let remedy = error.remedy else { return message }
    let hint: String
    switch remedy {
    case .downloadFirst:
        let id = error.bookID.flatMap { try? BookID(parsing: $0) }
        hint = id.map { "bookcache download URL --id \($0.bookId) --type \($0.type.rawValue)" } ?? "bookcache download URL --id ID"
    case .raiseBudget: hint = "bookcache config set max-size SIZE, or --max-size"
    case .lowerReserve: hint = "--reserve, or bookcache config set reserve"
    case .giveOwnID: hint = "--id, or the manifest's \"id\""
    case .trustAuthority: hint = "--cacert FILE, or bookcache config set cacert FILE"
    case .giveLogin: hint = "--user USER:PASSWORD, --netrc, or the login in the URL"
    case .chooseSection: hint = "--section TITLE"
    case .upgrade: hint = "install a newer bookcache"
    }
    return "\(message) (\(hint))"
}
