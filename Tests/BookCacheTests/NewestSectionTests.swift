import Foundation
import Testing

@testable import BookCache

/// Which section of a navigation feed `sync` follows when none is named: the one the catalogue
/// marks newest-first, else the one whose title says so — in the words real servers use
/// (calibre-web's templates and translations, calibre-server's; taken from their sources).
@Suite("The newest-first section, as catalogues name it")
struct NewestSectionTests {
    func sections(_ titles: [String]) -> [FeedSection] {
        titles.enumerated().map { FeedSection(title: $1, url: URL(string: "http://127.0.0.1:1/s\($0)")!) }
    }

    func chosen(_ titles: [String]) throws -> String {
        try BookCacheManager.choose(from: sections(titles), named: nil, source: "test").title
    }

    @Test("calibre-web 0.6's root feed in English, German, Chinese, French, Spanish, Italian and Japanese")
    func calibreWeb() throws {
        // cps/templates/index.xml's titles in order, from cps/translations/*/messages.po.
        let roots: [(String, [String])] = [
            (
                "Recently added Books",
                [
                    "Alphabetical Books", "Hot Books", "Top Rated Books", "Recently added Books", "Random Books", "Read Books", "Authors",
                    "Categories",
                ]
            ),
            (
                "Kürzlich hinzugefügte Bücher",
                [
                    "Bücher alphabetisch", "Beliebte Bücher", "Am besten bewertete Bücher", "Kürzlich hinzugefügte Bücher",
                    "Zufällige Bücher", "Autoren",
                ]
            ),
            ("最近添加的书籍", ["字母排序书籍", "热门书籍", "最高评分书籍", "最近添加的书籍", "随机书籍", "作者", "分类"]),
            ("Livres récents ajoutés", ["Livres par ordre alphabétique", "Livres populaires", "Livres récents ajoutés", "Auteurs"]),
            ("Libros añadidos recientemente", ["Libros populares", "Libros añadidos recientemente", "Autores"]),
            ("Libri aggiunti di recente", ["Libri popolari", "Libri aggiunti di recente", "Autori"]),
            ("最近追加された本", ["人気の本", "最近追加された本", "著者"]),
        ]
        for (expected, titles) in roots {
            #expect(try chosen(titles) == expected, "\(titles)")
        }
    }

    @Test("calibre-server's root feed (Newest, Title, then its categories) in English, German and Chinese; a News tag is not newest")
    func calibreServer() throws {
        // calibre/srv/opds.py's _('Newest'), _('Title'), and category names, from calibre's locales.
        #expect(try chosen(["News", "Newest", "Title", "Authors", "Tags"]) == "Newest")
        #expect(try chosen(["Nachrichten", "Neue", "Titel", "Autoren", "Schlagwörter"]) == "Neue")
        #expect(try chosen(["新闻", "最新", "书名", "作者", "标签"]) == "最新")
    }

    @Test("a section marked sort/new wins over titles; none at all lists the sections to choose from")
    func relAndNone() throws {
        var marked = sections(["Recently added Books", "By date"])
        marked[1].isNewestFirst = true
        #expect(try BookCacheManager.choose(from: marked, named: nil, source: "test").title == "By date")
        let error = #expect(throws: BookCacheError.self) {
            try BookCacheManager.choose(from: sections(["News", "Newspapers", "Authors", "Renewal"]), named: nil, source: "test")
        }
        #expect(error?.message.contains("no newest-first section") == true)
    }
}
