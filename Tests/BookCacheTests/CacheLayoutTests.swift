import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

/// A layout's paths are computed, never looked up: building one does no file system call (it is
/// done on the manager's actor and for every book), and what is on the disk cannot change it.
@Suite("CacheLayout")
struct CacheLayoutTests {
    @Test("a file's URL is a file's whatever stands at its path, and a folder's is a folder's")
    func pathsIgnoreTheDisk() throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let layout = CacheLayout(root: directory.url)
        let id = try BookID(type: .ebook, bookId: "alice")
        let files = {
            [
                layout.partialFile(for: id), layout.databaseFile, layout.settingsFile, layout.bookLocksFile,
                layout.url(forRelativePath: layout.relativePath(for: id, format: .epub)),
                layout.url(forRelativePath: layout.relativeSidecarPath(for: id)),
            ]
        }
        // Directories where the files would go: a URL made by asking the disk (as Foundation's
        // `appendingPathComponent(_:)` does) would then be a folder's, ending in a slash.
        for file in files() {
            try FileManager.default.createDirectory(at: file, withIntermediateDirectories: true)
        }
        for file in files() {
            #expect(!file.hasDirectoryPath, "\(file.path)")
        }
        #expect(layout.partialFolder.hasDirectoryPath)
        #expect(layout.folder(for: .magazine).hasDirectoryPath)
        #expect(layout.partialFile(for: id).path == directory.url.path + "/partial/ebook-alice.part")
    }
}
