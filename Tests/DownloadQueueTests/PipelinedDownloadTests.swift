import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@Suite("Large downloads, written off the cooperative pool")
struct PipelinedDownloadTests {
    @Test("cancelled mid-body, a large download keeps what arrived, in order, and the next run resumes it")
    func cancelAndResume() async throws {
        let body = Data(StoredZIP.noise(count: 9 << 20, seed: 5))
        let stallAt = 5 << 20
        try await withServerAndDirectory(files: ["big": body]) { server, dir in
            // Given a server that sends 5 MiB of the body and then nothing
            server.enqueueFault(.stallAfter(bytes: stallAt), for: "/big")
            let queue = makeQueue()
            let handle = await queue.enqueue(job(server, "big", in: dir, as: "big"))

            // When the job is cancelled once all of that has arrived
            for await event in handle.events {
                if case .progress(_, let progress) = event, progress.receivedBytes == Int64(stallAt) { break }
            }
            handle.cancel()
            let error = await #expect(throws: DownloadError.self) { try await handle.result() }
            #expect(error?.kind == .cancelled)

            // Then the partial file holds a prefix of the body, written in order
            let partial = try Data(contentsOf: dir.path("big"))
            #expect(partial.count == stallAt, "everything that arrived was written")
            #expect(partial == body.prefix(partial.count))

            // And the next run resumes after it and completes the file
            let file = try await makeQueue().download(job(server, "big", in: dir, as: "big"))
            #expect(file.resumedFrom == Int64(partial.count))
            #expect(try Data(contentsOf: dir.path("big")) == body)
        }
    }
}
