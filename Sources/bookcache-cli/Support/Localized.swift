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

    /// The text for `key` as a template for a line written many times (one per book): the
    /// translation is looked up once and its `%@`/`%N$@` placeholders filled by substitution,
    /// a tenth of what `String(format:)` costs a line.
    static func template(_ key: String) -> Template {
        Template(format: table[key] ?? key)
    }

    /// A translated line with string placeholders, split once into text and argument positions.
    struct Template {
        private enum Piece {
            case text(String)
            case argument(Int)
        }

        private let pieces: [Piece]

        /// - Parameter format: Text with `%@`, `%N$@` and `%%` only.
        init(format: String) {
            var pieces: [Piece] = []
            var literal = ""
            var next = 0
            var rest = Substring(format)
            while let percent = rest.firstIndex(of: "%") {
                literal += rest[..<percent]
                rest = rest[rest.index(after: percent)...]
                if rest.first == "%" {
                    literal += "%"
                    rest = rest.dropFirst()
                    continue
                }
                let digits = rest.prefix { $0.isASCII && $0.isNumber }
                let afterDigits = rest.dropFirst(digits.count)
                let position: Int
                if !digits.isEmpty, afterDigits.first == "$", afterDigits.dropFirst().first == "@", let number = Int(digits) {
                    position = number - 1
                    rest = afterDigits.dropFirst(2)
                } else if rest.first == "@" {
                    position = next
                    rest = rest.dropFirst()
                } else {
                    preconditionFailure("a template takes string placeholders only: \(format)")
                }
                next = position + 1
                if !literal.isEmpty { pieces.append(.text(literal)) }
                literal = ""
                pieces.append(.argument(position))
            }
            literal += rest
            if !literal.isEmpty { pieces.append(.text(literal)) }
            self.pieces = pieces
        }

        /// The line with `arguments` in their places.
        func callAsFunction(_ arguments: String...) -> String {
            var line = ""
            for piece in pieces {
                switch piece {
                case .text(let text): line += text
                case .argument(let position): line += position < arguments.count ? arguments[position] : ""
                }
            }
            return line
        }
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
