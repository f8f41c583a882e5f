import BookCache
import Foundation

/// The command line's text in the reader's language: English, German or Simplified Chinese, from
/// `LC_ALL`, else `LC_MESSAGES`, else `LANG` (`de_DE.UTF-8` → German, `zh_CN.UTF-8` → Chinese;
/// `C`, `POSIX` and anything else → English). Machine output (`--json`, exit statuses, ids, error
/// kinds) never goes through here.
///
/// The strings are `Resources/LANG.lproj/Localizable.strings`, keyed by their English text;
/// `scripts/check-strings.py` fails CI when a key is missing from a language. A binary copied
/// without its resource bundle speaks English.
enum Localized {
    /// The language chosen from the environment.
    static let language = BookCacheLanguage(environment: ProcessInfo.processInfo.environment)

    private static let table: [String: String] = language.strings(in: .module)

    /// The text for `key`, with `arguments` put into its `%@`/`%lld` placeholders.
    static func text(_ key: String, _ arguments: any CVarArg...) -> String {
        let format = table[key] ?? key
        return arguments.isEmpty ? format : String(format: format, locale: locale, arguments: arguments)
    }

    /// "1 book, 2 MB" / "3 books, 2 MB", in the language's own plural.
    static func books(_ count: Int, size: String) -> String {
        text(count == 1 ? "%1$lld book, %2$@" : "%1$lld books, %2$@", Int64(count), size)
    }

    /// The locale numbers and the library's messages are written for.
    static let locale = language.locale

    /// The locale of machine output (`--json`): English, whatever the environment says.
    static let machineLocale = BookCacheLanguage.english.locale

    /// "error: TEXT" in the reader's language.
    static func error(_ text: String) -> String { Localized.text("error: %@", text) }

    /// "warning: TEXT" in the reader's language.
    static func warning(_ text: String) -> String { Localized.text("warning: %@", text) }

    /// A size as `ByteFormat` writes it, with the language's decimal separator (`1,2 MB` in German).
    static func size(_ bytes: Int64) -> String {
        language.size(bytes)
    }
}
