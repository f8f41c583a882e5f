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
    /// The language chosen from the environment: `en`, `de` or `zh-Hans`.
    static let language: String = language(from: ProcessInfo.processInfo.environment)

    static func language(from environment: [String: String]) -> String {
        let value = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        let code = value.split(separator: ".").first.map(String.init)?.lowercased() ?? ""
        if code.hasPrefix("de") { return "de" }
        if code.hasPrefix("zh") { return "zh-Hans" }
        return "en"
    }

    private static let table: [String: String] = language == "en" ? [:] : strings(for: language)
    private static let english: [String: String] = strings(for: "en")

    /// A language's table; empty when the resource bundle is not beside the binary (then keys,
    /// which are the English text, are shown).
    private static func strings(for language: String) -> [String: String] {
        // SwiftPM lowercases folder names it copies (zh-Hans.lproj becomes zh-hans.lproj on Linux).
        let found = [language, language.lowercased()].compactMap { name -> String? in
            Bundle.module.path(forResource: "Localizable", ofType: "strings", inDirectory: nil, forLocalization: name)
        }.first
        guard let path = found,
            let data = FileManager.default.contents(atPath: path),
            let strings = (try? PropertyListSerialization.propertyList(from: data, format: nil)) as? [String: String]
        else { return [:] }
        return strings
    }

    /// The text for `key`, with `arguments` put into its `%@`/`%lld` placeholders.
    static func text(_ key: String, _ arguments: any CVarArg...) -> String {
        let format = table[key] ?? english[key] ?? key
        return arguments.isEmpty ? format : String(format: format, locale: locale, arguments: arguments)
    }

    /// "1 book, 2 MB" / "3 books, 2 MB", in the language's own plural.
    static func books(_ count: Int, size: String) -> String {
        text(count == 1 ? "books.one %lld %@" : "books.other %lld %@", Int64(count), size)
    }

    /// The locale numbers and the library's messages are written for.
    static let locale = Locale(identifier: language == "de" ? "de_DE" : language == "zh-Hans" ? "zh_CN" : "en_US_POSIX")

    /// The locale of machine output (`--json`): English, whatever the environment says.
    static let machineLocale = Locale(identifier: "en_US_POSIX")

    /// "error: TEXT" in the reader's language.
    static func error(_ text: String) -> String { Localized.text("error: %@", text) }

    /// "warning: TEXT" in the reader's language.
    static func warning(_ text: String) -> String { Localized.text("warning: %@", text) }

    /// A size as `ByteFormat` writes it, with the language's decimal separator (`1,2 MB` in German).
    static func size(_ bytes: Int64) -> String {
        let text = ByteFormat.string(bytes)
        return language == "de" ? text.replacingOccurrences(of: ".", with: ",") : text
    }
}
