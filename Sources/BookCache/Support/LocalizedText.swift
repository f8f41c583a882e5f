import Foundation
import Synchronization

/// A language BookCache speaks to people in: English, German or Simplified Chinese. The library,
/// the command line and the service's web page choose it the same way, each from what it has: a
/// `Locale`, the environment (`LC_ALL`, `LC_MESSAGES`, `LANG`) or a browser's `Accept-Language`.
///
/// Each target keeps its text in `Resources/LANG.lproj/Localizable.strings`, keyed by the English
/// text (so a key is also the English wording, and a build that lost its resource bundle still
/// reads English); `scripts/check-strings.py` fails CI when a key is missing from a language.
public enum BookCacheLanguage: String, Sendable, CaseIterable {
    /// English, also for every language BookCache does not speak.
    case english = "en"
    /// German.
    case german = "de"
    /// Simplified Chinese.
    case chinese = "zh-Hans"

    /// The language of `locale`: its language code `de` or `zh` (Simplified: not `zh-Hant`,
    /// `zh-TW`, `zh-HK`), else English.
    public init(_ locale: Locale) {
        self = Self.match(locale.identifier) ?? .english
    }

    /// The language of a process: `LC_ALL`, else `LC_MESSAGES`, else `LANG` (`de_DE.UTF-8` →
    /// German, `zh_CN.UTF-8` → Chinese; `C`, `POSIX` and anything else → English).
    public init(environment: [String: String]) {
        let value = ["LC_ALL", "LC_MESSAGES", "LANG"].lazy.compactMap { environment[$0] }.first { !$0.isEmpty } ?? ""
        self = Self.match(String(value.split(separator: ".").first ?? "")) ?? .english
    }

    /// The first language of a browser's `Accept-Language` (`de-DE,de;q=0.9,en;q=0.8`), by
    /// weight, that BookCache speaks; English when none is.
    public init(acceptLanguage header: String?) {
        let ranges = (header ?? "").split(separator: ",").enumerated().compactMap {
            index, part -> (tag: String, weight: Double, index: Int)? in
            let pieces = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            guard let tag = pieces.first, !tag.isEmpty else { return nil }
            let weight = pieces.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return (tag, weight, index)
        }
        let ordered = ranges.filter { $0.weight > 0 }.sorted { ($0.weight, -$0.index) > ($1.weight, -$1.index) }
        self = ordered.lazy.compactMap { Self.match($0.tag) }.first ?? .english
    }

    private static func match(_ tag: String) -> BookCacheLanguage? {
        let parts = tag.lowercased().split(whereSeparator: { $0 == "_" || $0 == "-" }).map(String.init)
        switch parts.first {
        case "en": return .english
        case "de": return .german
        case "zh":
            let rest = Set(parts.dropFirst())
            return rest.isDisjoint(with: ["hant", "tw", "hk", "mo"]) ? .chinese : nil
        default: return nil
        }
    }

    /// A locale for numbers and the library's messages in this language.
    public var locale: Locale {
        switch self {
        case .english: Locale(identifier: "en_US_POSIX")
        case .german: Locale(identifier: "de_DE")
        case .chinese: Locale(identifier: "zh_CN")
        }
    }

    /// A size as `ByteFormat` writes it (`1.2 MB`), with this language's decimal separator (`1,2 MB` in German).
    public func size(_ bytes: Int64) -> String {
        let text = ByteFormat.string(bytes)
        return self == .german ? text.replacingOccurrences(of: ".", with: ",") : text
    }

    /// This language's strings in `bundle` (`LANG.lproj/Localizable.strings`); empty for English,
    /// whose keys are its text, and when the bundle has none (the keys are then shown).
    /// - Parameter bundle: The bundle, looked up only for a language other than English.
    public func strings(in bundle: @autoclosure () -> Bundle) -> [String: String] {
        // The keys are the English text (scripts/check-strings.py fails on an English entry that
        // is not its own key), so English needs no table: not reading one saves every English
        // command the parse and the bundle look-up — the bundle is not even found (`Bundle.module`
        // searches the file system: a fifth of `bookcache --version` when it was an argument).
        if self == .english { return [:] }
        let bundle = bundle()
        // SwiftPM lowercases the folder names it copies on Linux (zh-Hans.lproj → zh-hans.lproj).
        guard
            let path = [rawValue, rawValue.lowercased()].lazy.compactMap({
                bundle.path(forResource: "Localizable", ofType: "strings", inDirectory: nil, forLocalization: $0)
            }).first,
            let data = FileManager.default.contents(atPath: path),
            let strings = try? PropertyListSerialization.propertyList(from: data, format: nil) as? [String: String]
        else { return [:] }
        return strings
    }
}

/// The library's own text for people: error messages, status and refusal names.
enum LocalizedText {
    private static let tables = Mutex<[BookCacheLanguage: [String: String]]>([:])

    /// The library's table for `language`, read once.
    static func table(_ language: BookCacheLanguage) -> [String: String] {
        if let table = tables.withLock({ $0[language] }) { return table }
        let loaded = language.strings(in: .module)
        tables.withLock { $0[language] = loaded }
        return loaded
    }

    /// `key` (English text with `%1$@`-style placeholders) in `locale`'s language, with
    /// `arguments` put in.
    static func format(_ key: String, _ locale: Locale, _ arguments: [String]) -> String {
        let format = table(BookCacheLanguage(locale))[key] ?? key
        guard !arguments.isEmpty else { return format }
        return String(format: format, locale: nil, arguments: arguments.map { $0 as NSString })
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
            case .size(let bytes): return BookCacheLanguage(locale).size(bytes)
            case .phrase(let template): return template.text(locale)
            case .refusal(let kind, let reason):
                guard BookCacheLanguage(locale) != .english else { return reason }
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
}
