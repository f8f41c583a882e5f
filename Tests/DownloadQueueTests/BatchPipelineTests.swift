import Foundation
import Synchronization
import Testing

@testable import DownloadQueue

@Suite("The writer thread of large downloads")
struct BatchPipelineTests {
    struct Refused: Error, Equatable {}

    func batch(_ byte: UInt8) -> [[UInt8]] {
        [[byte]]
    }

    @Test("batches are worked on in the order they were submitted, and drain waits for the last")
    func order() async throws {
        let seen = Mutex<[UInt8]>([])
        let pipeline = BatchPipeline { batch in
            seen.withLock { $0.append(batch[0][0]) }
        }
        defer { pipeline.close() }
        for byte in UInt8(0)..<50 { try await pipeline.submit(batch(byte)) }
        try await pipeline.drain()
        #expect(seen.withLock { $0 } == Array(0..<50))
    }

    @Test("the first failure is thrown by the next submit and by drain; later batches are not worked on")
    func failure() async throws {
        let worked = Mutex(0)
        let pipeline = BatchPipeline { batch in
            worked.withLock { $0 += 1 }
            if batch[0][0] == 2 { throw Refused() }
        }
        defer { pipeline.close() }
        try await pipeline.submit(batch(1))
        try await pipeline.submit(batch(2))
        await #expect(throws: Refused.self) { try await pipeline.submit(batch(3)) }
        await #expect(throws: Refused.self) { try await pipeline.drain() }
        #expect(worked.withLock { $0 } == 2)
    }
}
