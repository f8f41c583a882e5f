import ArgumentParser
import BookCache

/// Turns a library error into one line on stderr and a non-zero exit.
func fail(_ error: BookCacheError) -> ExitCode {
    Terminal.writeError("error: \(error.message)")
    return ExitCode.failure
}

/// Parses an id typed on the command line, as a validation error when malformed.
func parseID(_ string: String) throws -> BookID {
    do {
        return try BookID(parsing: string)
    } catch {
        throw ValidationError(error.message)
    }
}
