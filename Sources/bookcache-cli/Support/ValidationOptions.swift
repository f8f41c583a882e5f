import ArgumentParser

/// `--strict`, on every command that caches books.
struct ValidationOptions: ParsableArguments {
    @Flag(
        help: ArgumentHelp(
            "Refuse books that break packaging rules no reader needs (EPUB mimetype rules, a rebuilt PDF cross-reference table) instead of caching them with a warning.",
            discussion: "Without it, the cache's setting decides: bookcache config set strict true."))
    var strict = false
}
