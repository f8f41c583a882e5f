import BookCacheTestSupport
import Foundation
import Testing

/// What the cache keeps of a login or a header — in book records, the index and its log, job
/// lines, settings — is its owner's alone: folders 0700, every file but the books 0600.
@Suite("secrets at rest: the cache is its owner's", .serialized, .timeLimit(.minutes(5)))
struct SecretsAtRestCLITests {
    /// Every file and folder below `root` with its mode.
    static func modes(below root: String) throws -> [(path: String, mode: Int, isDirectory: Bool)] {
        var found: [(String, Int, Bool)] = []
        let enumerator = try #require(FileManager.default.enumerator(atPath: root))
        while let relative = enumerator.nextObject() as? String {
            let attributes = try FileManager.default.attributesOfItem(atPath: root + "/" + relative)
            let mode = (attributes[.posixPermissions] as? Int) ?? -1
            found.append((relative, mode, attributes[.type] as? FileAttributeType == .typeDirectory))
        }
        return found
    }

    static func isBook(_ path: String) -> Bool { path.hasSuffix(".epub") || path.hasSuffix(".pdf") || path.hasSuffix(".part") }

    @Test(
        "download with a login and a header, sync, serve's jobs, settings: folders 0700, files but the books 0600, and the secrets are only in those"
    )
    func modesOfEverything() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice, "b.epub": alice, "c.epub": alice]) { server, dir in
            let cache = dir.path("home/.cache/BookCache").path
            let secretURL = server.baseURL.replacingOccurrences(of: "http://", with: "http://reader:pa55word@")
            let download = try await ProcessRunner.run(
                "bookcache", ["download", "\(secretURL)/alice.epub", "-H", "X-Api-Key: k3y-s3cret", "--cache-dir", cache])
            #expect(download.status == 0, "\(download.stderr)")
            server.setFile(Data("\(server.baseURL)/b.epub\n".utf8), at: "list.jsonl")
            let sync = try await ProcessRunner.run(
                "bookcache", ["sync", "\(server.baseURL)/list.jsonl", "--keep", "1", "-H", "X-Api-Key: k3y-s3cret", "--cache-dir", cache])
            #expect(sync.status == 0, "\(sync.stderr)")
            #expect(try await ProcessRunner.run("bookcache", ["config", "set", "max-size", "1G", "--cache-dir", cache]).status == 0)
            let service = try await ServiceCLITests.Service.start(cache: cache)
            defer { service.process.send(SIGKILL) }
            let job = try await service.http(
                "POST", "/api/v1/jobs", body: #"{"url": "\#(secretURL)/c.epub", "headers": {"X-Api-Key": "k3y-s3cret"}}"#)
            let id = try #require((job.json["jobs"] as? [[String: Any]])?.first?["id"] as? String)
            #expect(try await service.http("GET", "/api/v1/jobs/\(id)?wait=60").json["state"] as? String == "cached")

            // Every folder the cache made, from the first missing parent down, is 0700
            for folder in ["home", "home/.cache", "home/.cache/BookCache"] {
                let mode = try FileManager.default.attributesOfItem(atPath: dir.path(folder).path)[.posixPermissions] as? Int
                #expect(mode == 0o700, "\(folder): \(String(mode ?? -1, radix: 8))")
            }
            let entries = try Self.modes(below: cache)
            #expect(entries.contains { $0.path.hasPrefix("index.sqlite") })
            #expect(entries.contains { $0.path.hasSuffix(".meta.json") })
            for entry in entries {
                if entry.isDirectory {
                    #expect(entry.mode == 0o700, "\(entry.path): \(String(entry.mode, radix: 8))")
                } else if !Self.isBook(entry.path) {
                    #expect(entry.mode == 0o600, "\(entry.path): \(String(entry.mode, radix: 8))")
                }
            }
            // The secrets are written somewhere (the record keeps the login to refresh the book),
            // and only in files others cannot read
            var holders: [String] = []
            for entry in entries where !entry.isDirectory {
                let data = try Data(contentsOf: URL(fileURLWithPath: cache + "/" + entry.path))
                if data.range(of: Data("pa55word".utf8)) != nil || data.range(of: Data("k3y-s3cret".utf8)) != nil {
                    holders.append(entry.path)
                    #expect(entry.mode == 0o600, "\(entry.path) holds a secret")
                }
            }
            #expect(!holders.isEmpty, "the test must see where the secrets are kept")
        }
    }

    @Test("a cache made by an earlier version (index and sidecars 0644) is tightened when it is opened")
    func upgradeTightens() async throws {
        let alice = try Fixtures.data("alice.epub")
        try await withServerAndDirectory(files: ["alice.epub": alice]) { server, dir in
            let cache = dir.path("cache").path
            let download = try await ProcessRunner.run(
                "bookcache",
                [
                    "download", server.baseURL.replacingOccurrences(of: "http://", with: "http://reader:pa55word@") + "/alice.epub",
                    "--cache-dir", cache,
                ])
            #expect(download.status == 0, "\(download.stderr)")
            let loosened = try Self.modes(below: cache).filter { !$0.isDirectory && !Self.isBook($0.path) }.map(\.path)
            for path in loosened { chmod(cache + "/" + path, 0o644) }
            #expect(loosened.contains("ebooks/ebook-alice.meta.json") || loosened.contains { $0.hasSuffix(".meta.json") })
            #expect(try await ProcessRunner.run("bookcache", ["list", "--cache-dir", cache]).status == 0)
            for entry in try Self.modes(below: cache) where !entry.isDirectory && !Self.isBook(entry.path) && !entry.path.hasSuffix(".lock")
            {
                #expect(entry.mode == 0o600, "\(entry.path): \(String(entry.mode, radix: 8))")
            }
        }
    }
}
