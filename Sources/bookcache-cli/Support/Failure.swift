import ArgumentParser
import BookCache

/// Turns a library error into one line on stderr and the exit status of its kind (``ExitStatus``).
func fail(_ error: BookCacheError) -> ExitCode {
    Terminal.writeError("error: \(error.message)")
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
