import BookCache
import BookCacheTestSupport
import Foundation
import Testing

@Suite("settings errors are named as settings")
struct SettingsErrorTests {
    @Test("a config.json that is not JSON: kind settingsUnusable, naming the file, not the index")
    func unreadableSettings() throws {
        let dir = try TemporaryDirectory()
        defer { dir.remove() }
        try Data("{ not json".utf8).write(to: dir.path("config.json"))
        let error = try #require(throws: BookCacheError.self) { try CacheSettings.read(cacheRoot: dir.url) }
        #expect(error.kind == .settingsUnusable)
        #expect(error.message.contains("config.json") && error.message.contains("fix or delete it"), "\(error.message)")
    }
}
