import BookCacheTestSupport
import Foundation
import Testing

@testable import DownloadQueue

/// What a power cut or another user can leave of a partial download, and what a resume makes of it:
/// only the bytes the resume record vouches for (synced before it was written, with their hash) are
/// kept, and a partial file is never opened through a link.
@Suite("Resuming only what is known durable", .timeLimit(.minutes(1)))
struct TornPartialTests {
    let body = payload(100_000, seed: 3)

    /// Runs one attempt that the server cuts after `cut` bytes, leaving a partial file and its record.
    private func leavePartial(_ server: TestHTTPServer, _ request: DownloadRequest, cut: Int) async throws -> Int64 {
        server.enqueueFault(.dropAfter(bytes: cut), for: "/b")
        let error = await #expect(throws: DownloadError.self) { try await makeQueue(retries: 0).download(request) }
        return try #require(error?.keptBytes)
    }

    @Test("an earlier piece of the partial lost in a power cut (read back as zeros) is never resumed into the file")
    func tornPrefix() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            // Given a partial file and its record, then a cut that lost an earlier piece of the file
            let request = job(server, "b", in: dir, as: "b")
            _ = try await leavePartial(server, request, cut: 70_000)
            let handle = try FileHandle(forUpdating: dir.path("b"))
            try handle.seek(toOffset: 20_000)
            try handle.write(contentsOf: Data(count: 30_000))
            try handle.close()

            // When the download runs again
            let file = try await makeQueue(retries: 0).download(request)

            // Then it started over, and the file is the server's, byte for byte
            #expect(file.resumedFrom == 0)
            #expect(server.requests.last?.headers["range"] == nil)
            #expect(file.sha256 == sha256(body))
            #expect(try Data(contentsOf: dir.path("b")) == body)
        }
    }

    @Test("bytes past what the record vouches for (a later write that outlived the record's update) are cut off before resuming")
    func unvouchedTail() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            // Given a partial whose record names its first bytes, and more bytes after them
            let request = job(server, "b", in: dir, as: "b")
            let vouched = try await leavePartial(server, request, cut: 70_000)
            let handle = try FileHandle(forUpdating: dir.path("b"))
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(count: 10_000))
            try handle.close()

            // When the download runs again
            let file = try await makeQueue(retries: 0).download(request)

            // Then it resumed where the record says, not at the file's end, and the file is right
            #expect(file.resumedFrom == vouched)
            #expect(server.requests.last?.headers["range"] == "bytes=\(vouched)-")
            #expect(file.sha256 == sha256(body))
            #expect(try Data(contentsOf: dir.path("b")) == body)
        }
    }

    @Test("a record that vouches for more bytes than the partial holds starts the download over")
    func shortPartial() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            let request = job(server, "b", in: dir, as: "b")
            _ = try await leavePartial(server, request, cut: 70_000)
            // A cut that kept the record but lost the file's last pages
            try FileHandle(forUpdating: dir.path("b")).truncate(atOffset: 40_000)

            let file = try await makeQueue(retries: 0).download(request)
            #expect(file.resumedFrom == 0)
            #expect(try Data(contentsOf: dir.path("b")) == body)
        }
    }

    @Test("a link planted where the partial file goes, with a record, is not followed: its target is untouched")
    func plantedLink() async throws {
        try await withServerAndDirectory(files: ["b": body]) { server, dir in
            // Given another user's link at the partial's name, to a file of the victim's, and a
            // record for it that matches the victim's bytes
            let precious = Data("export PATH=/usr/bin\n".utf8)
            let victim = dir.path("victim")
            try precious.write(to: victim)
            try FileManager.default.createSymbolicLink(atPath: dir.path("b").path, withDestinationPath: victim.path)
            let record: [String: Any] = [
                "url": "\(server.baseURL)/b", "validator": try #require(server.etag(for: "b")), "totalLength": body.count,
                "length": precious.count, "sha256": sha256(precious),
            ]
            try JSONSerialization.data(withJSONObject: record).write(to: dir.path("b.resume"))

            // When the download runs
            let file = try await makeQueue(retries: 0).download(job(server, "b", in: dir, as: "b"))

            // Then the victim's file is as it was, and the download is a file of its own
            #expect(try Data(contentsOf: victim) == precious)
            #expect(file.resumedFrom == 0)
            let attributes = try FileManager.default.attributesOfItem(atPath: dir.path("b").path)
            #expect(attributes[.type] as? FileAttributeType == .typeRegular)
            #expect(try Data(contentsOf: dir.path("b")) == body)
        }
    }

    @Test("the record is rewritten as a large body arrives, each time vouching only for synced bytes")
    func checkpoints() {
        // After 1 MiB, then at twice the length, at most 64 MiB further.
        #expect(FileDownloader.checkpoint(after: 0) == 1 << 20)
        #expect(FileDownloader.checkpoint(after: 1 << 20) == 2 << 20)
        #expect(FileDownloader.checkpoint(after: 48 << 20) == 96 << 20)
        #expect(FileDownloader.checkpoint(after: 512 << 20) == 576 << 20)
    }
}
