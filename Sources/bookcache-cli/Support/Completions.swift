import ArgumentParser
import BookCache
import Foundation

/// Shell completions (`bookcache --generate-completion-script bash|zsh|fish`): book ids from the
/// cache named on the line being completed (its `--cache-dir`, else the default), files for
/// manifests and books, folders for `--cache-dir`.
enum Completions {
    /// The ids of the cached books starting with what is typed so far.
    static let bookIDs = CompletionKind.custom { words, _, prefix in
        var explicit: String?
        if let index = words.firstIndex(of: "--cache-dir"), index + 1 < words.count { explicit = words[index + 1] }
        let manager = BookCacheManager(configuration: BookCacheConfiguration(rootDirectory: CacheLayout.defaultRoot(explicit: explicit)))
        var ids: [String] = []
        do {
            // ArgumentParser asks on the main thread, which may block: the shell waits for the answer
            try manager.blockingForEachBook { book in
                if book.id.hasPrefix(prefix) { ids.append(book.id) }
            }
        } catch {
            // A shell completing a word has nowhere to show an error: no ids is the answer.
            return []
        }
        return ids
    }
}
