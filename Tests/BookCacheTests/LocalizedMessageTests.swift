import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// The library's messages in the reader's language: a refused download, a storage error and the
/// status names, in German and Chinese, while `message` (for logs and machine output) stays English.
@Suite("Library messages in German and Chinese")
struct LocalizedMessageTests {
    static let german = Locale(identifier: "de_DE")
    static let chinese = Locale(identifier: "zh_CN")

    @Test("a login page refused by a real download reads naturally in German and Chinese; message and kind stay as they were")
    func refusedDownload() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: .none))
            let refused = try request(server, "corrupt/error-page.epub", id: "ebook-page")
            let error = try await #require(throws: BookCacheError.self) { try await manager.download(refused) }
            #expect(error.kind == .fileCorrupted && error.refusal == .htmlPage)
            #expect(error.message.hasPrefix("ebook-page is not a valid book: "), "\(error.message)")
            #expect(error.message(in: Locale(identifier: "en_US")) == error.message)
            #expect(error.message(in: Locale(identifier: "fr_FR")) == error.message, "a language without a table is English")

            let de = error.message(in: Self.german)
            #expect(
                de.hasPrefix("ebook-page ist kein gültiges Buch: eine HTML-Seite (eine Anmelde- oder Fehlerseite?), kein Buch"), "\(de)")
            #expect(de.contains("es wurde nicht gespeichert"), "\(de)")
            let zh = error.message(in: Self.chinese)
            #expect(zh.hasPrefix("ebook-page 不是有效的书：一个 HTML 网页（登录页或错误页？），而不是书"), "\(zh)")
            #expect(zh.contains("未下载"), "\(zh)")
            // The kind's name says all the English reason said: it is not repeated in English
            #expect(!de.contains(error.reason ?? "?") && !zh.contains(error.reason ?? "?"), "\(de)\n\(zh)")
            // A reason with a detail (an entry's name) keeps it, as the validator wrote it
            let damaged = BookCacheError.fileCorrupted(
                try BookID(type: .ebook, bookId: "x"), reason: "CRC error in OEBPS/ch1.xhtml", refusal: .damagedEntry)
            #expect(damaged.message(in: Self.german).contains("ein Teil des Buchs ist beschädigt (CRC error in OEBPS/ch1.xhtml)"))
        }
    }

    @Test("a configured locale is the language of a download error's localizedDescription, thrown and in the event")
    func configuredLocale() async throws {
        try await withServerAndDirectory(directory: Fixtures.books) { server, dir in
            let manager = BookCacheManager(
                configuration: BookCacheConfiguration(
                    rootDirectory: dir.path("cache"), storageReserveBytes: 0, retryPolicy: .none, locale: Locale(identifier: "zh_CN")))
            let events = manager.events()
            let refused = try request(server, "corrupt/error-page.epub", id: "ebook-page")
            let error = try await #require(throws: BookCacheError.self) { try await manager.download(refused) }
            #expect(error.localizedDescription.hasPrefix("ebook-page 不是有效的书"), "\(error.localizedDescription)")
            #expect(error.message.hasPrefix("ebook-page is not a valid book"), "message stays English")
            for await event in events {
                guard case .failed(_, let failure) = event else { continue }
                #expect(failure.localizedDescription == error.localizedDescription)
                break
            }
        }
    }

    @Test("sizes in storage errors are written for the language: 1,5 MB in German")
    func storageSizes() {
        let error = BookCacheError.insufficientStorage(bookBytes: 1_500_000, reserve: 0, available: 200_000, path: "/books")
        #expect(error.message == "insufficient storage: 1.5 MB for the book; 200 KB free at /books; free some space, delete cached books")
        #expect(error.message(in: Self.german).contains("1,5 MB für das Buch"), "\(error.message(in: Self.german))")
        #expect(error.message(in: Self.chinese).contains("此书需要 1.5 MB"), "\(error.message(in: Self.chinese))")
        #expect(error.neededBytes == 1_500_000, "the figures for code do not change with the language")
    }

    @Test("status names and refusal kinds have a name in each language")
    func names() {
        #expect(BookCacheStatus.notCached.localizedName(in: Self.german) == "nicht heruntergeladen")
        #expect(BookCacheStatus.downloading(progress: 0.456).localizedName(in: Self.chinese) == "正在下载 45%")
        #expect(BookCacheStatus.downloading(progress: 0.456).localizedName(in: Locale(identifier: "en")) == "downloading 45%")
        #expect(BookCacheStatus.cached(size: 1, date: .now).localizedName(in: Self.chinese) == "已下载")
        let kinds: [ValidationFailure.Kind] = [
            .htmlPage, .notABook, .damaged, .damagedEntry, .encrypted, .tooLarge, .missingPackageDocument, .invalidPackageDocument,
            .unsafeEntryName, .strictRule, .unreadable,
        ]
        for locale in [Self.german, Self.chinese] {
            let names = kinds.map { $0.localizedName(in: locale) }
            #expect(Set(names).count == kinds.count, "each kind has its own name")
            for (kind, name) in zip(kinds, names) {
                #expect(name != kind.localizedName(in: Locale(identifier: "en")), "\(kind) is translated for \(locale.identifier)")
            }
        }
    }

    @Test("the language comes from a locale, the environment (LC_ALL > LC_MESSAGES > LANG) or Accept-Language")
    func language() {
        #expect(BookCacheLanguage(Locale(identifier: "de_AT")) == .german)
        #expect(BookCacheLanguage(Locale(identifier: "zh-Hans_CN")) == .chinese)
        #expect(BookCacheLanguage(Locale(identifier: "zh_TW")) == .english, "Traditional Chinese readers do not get Simplified")
        #expect(BookCacheLanguage(Locale(identifier: "fr_FR")) == .english)
        #expect(BookCacheLanguage(environment: ["LANG": "zh_CN.UTF-8"]) == .chinese)
        #expect(BookCacheLanguage(environment: ["LANG": "zh_CN.UTF-8", "LC_MESSAGES": "de_DE.UTF-8"]) == .german)
        #expect(BookCacheLanguage(environment: ["LANG": "de_DE.UTF-8", "LC_ALL": "C"]) == .english)
        #expect(BookCacheLanguage(environment: ["LANG": "de_DE.UTF-8", "LC_ALL": ""]) == .german, "an empty variable is not set")
        #expect(BookCacheLanguage(acceptLanguage: "fr-CH, fr;q=0.9, de;q=0.7, *;q=0.5") == .german)
        #expect(BookCacheLanguage(acceptLanguage: "de;q=0, zh-CN") == .chinese, "q=0 means not acceptable")
        #expect(BookCacheLanguage(acceptLanguage: nil) == .english)
        #expect(BookCacheLanguage(acceptLanguage: ";;,") == .english)
    }
}
