import Foundation
import Synchronization

/// The library's text for people — error messages, status and refusal names — in English,
/// German or Simplified Chinese, chosen by a `Locale`.
///
/// The strings are `Resources/LANG.lproj/Localizable.strings`, keyed by their English text (so a
/// key is also the English wording, and an app whose build lost the resource bundle still reads
/// English); `scripts/check-strings.py` fails CI when a key is missing from a language.
enum LocalizedText {
    /// The library's languages: a locale's language code picks one, anything else is English.
    enum Language: String, Sendable, CaseIterable {
        case english = "en"
        case german = "de"
        case chinese = "zh-Hans"

        init(_ locale: Locale) {
            switch locale.language.languageCode?.identifier {
            case "de": self = .german
            case "zh": self = .chinese
            default: self = .english
            }
        }
    }

    private static let tables = Mutex<[Language: [String: String]]>([:])

    /// The table of `language`, read once from the resource bundle; empty when the bundle is not
    /// there (the keys, which are the English text, are then shown).
    static func table(_ language: Language) -> [String: String] {
        if let table = tables.withLock({ $0[language] }) { return table }
        let loaded = load(language)
        tables.withLock { $0[language] = loaded }
        return loaded
    }

    private static func load(_ language: Language) -> [String: String] {
        guard language != .english else { return [:] }
        // SwiftPM lowercases the folder names it copies on Linux (zh-Hans.lproj → zh-hans.lproj).
        let names = [language.rawValue, language.rawValue.lowercased()]
        guard
            let path = names.lazy.compactMap({
                Bundle.module.path(forResource: "Localizable", ofType: "strings", inDirectory: nil, forLocalization: $0)
            }).first,
            let data = FileManager.default.contents(atPath: path),
            let strings = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: String]
        else { return [:] }
        return strings
    }

    /// `key` (English text with `%1$@`-style placeholders) in `locale`'s language, with
    /// `arguments` put in.
    static func format(_ key: String, _ locale: Locale, _ arguments: [String]) -> String {
        let language = Language(locale)
        let format = table(language)[key] ?? key
        guard !arguments.isEmpty else { return format }
        return String(format: format, locale: nil, arguments: arguments.map { $0 as NSString })
    }

    /// A size as ``ByteFormat`` writes it, with the language's decimal separator (`1,2 MB` in German).
    static func size(_ bytes: Int64, _ locale: Locale) -> String {
        let text = ByteFormat.string(bytes)
        return Language(locale) == .german ? text.replacingOccurrences(of: ".", with: ",") : text
    }
}

/// A message kept as its template and arguments, so it can be said in another language than the
/// English it was made in.
struct MessageTemplate: Sendable {
    /// One value put into the template.
    enum Argument: Sendable {
        /// Said as it is (an id, a path, a URL, a technical cause).
        case verbatim(String)
        /// A size in bytes, written for the language.
        case size(Int64)
        /// Another template, said in the same language (a hint, a clause).
        case phrase(MessageTemplate)
        /// Why a file was refused: the detailed English reason in English, the kind's name in
        /// another language, followed by the detail where it names entries, sizes or rules.
        case refusal(ValidationFailure.Kind, String)
    }

    var key: String
    var arguments: [Argument]

    init(_ key: String, _ arguments: Argument...) {
        self.key = key
        self.arguments = arguments
    }

    /// The message in `locale`'s language.
    func text(_ locale: Locale) -> String {
        let values = arguments.map { argument -> String in
            switch argument {
            case .verbatim(let text): return text
            case .size(let bytes): return LocalizedText.size(bytes, locale)
            case .phrase(let template): return template.text(locale)
            case .refusal(let kind, let reason):
                guard LocalizedText.Language(locale) != .english else { return reason }
                switch kind {
                case .htmlPage, .notABook, .encrypted, .unreadable:
                    // The kind's name says all the English reason does.
                    return kind.localizedName(in: locale)
                default:
                    // The detail names entries, sizes or rules: kept as the validator wrote it.
                    return LocalizedText.format("%1$@ (%2$@)", locale, [kind.localizedName(in: locale), reason])
                }
            }
        }
        return LocalizedText.format(key, locale, values)
    }

    static let english = Locale(identifier: "en")
}
