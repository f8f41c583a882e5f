import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// Mutated real-world books and generated hostile ones, judged in validation workers
/// (`bookcache validation-worker`) as the command line and the service judge them: every input
/// ends with a verdict within its budget, the verdict is the one given in process (or "could not
/// be judged safely"), and this process survives them all. Rounds: BOOKCACHE_FUZZ_ROUNDS / 10 a seed
/// (the in-process fuzzer takes the full count). One seed at a time, and the in-process verdicts
/// on blocking-work threads: a validation on the cooperative pool stalls every other suite's tasks
/// (on 2 cores, two of them starved the download queue's tests past their time limits).
@Suite("Mutation fuzzing in workers", .serialized, .timeLimit(.minutes(5)))
struct WorkerFuzzTests {
    static let rounds = max(40, MutationFuzzTests.rounds / 10)

    /// Judges `inputs` in two workers and in process; the verdicts must agree.
    static func judge(_ inputs: [(name: String, bytes: [UInt8])]) async throws -> (accepted: Int, refused: Int, unjudged: Int) {
        let validation = BookValidation.workers(ValidationWorkerTests.workers(count: 2))
        let dir = try TemporaryDirectory("bookcache-worker-fuzz")
        defer { dir.remove() }
        var counts = (accepted: 0, refused: 0, unjudged: 0)
        for (index, input) in inputs.enumerated() {
            let path = dir.path("\(index)-\(input.name)").path
            try Data(input.bytes).write(to: URL(fileURLWithPath: path))
            try Data(input.bytes).write(to: MutationFuzzTests.lastInput)
            let there: Result<ValidationReport, ValidationFailure>
            do {
                there = .success(try await validation.judge(path: path, limits: ValidationLimits(), strict: false))
                counts.accepted += 1
            } catch let failure as ValidationFailure {
                there = .failure(failure)
                if failure.kind == .unjudgeable { counts.unjudged += 1 } else { counts.refused += 1 }
            }
            if case .failure(let failure) = there, failure.kind == .unjudgeable { continue }
            let here = await BlockingWork.run { Result { () throws(ValidationFailure) in try BookValidator().check(path: path) } }
            #expect(here == there, "\(input.name) #\(index)")
            try FileManager.default.removeItem(atPath: path)
        }
        return counts
    }

    @Test(
        "mutated books get the same verdict in a worker as in process",
        arguments: ["alice.epub", "pride.epub", "fixture-monthly-2024-05.pdf", "compressed.pdf", "annotation.pdf"])
    func mutated(seedFile: String) async throws {
        let original = try Fixtures.data(seedFile)
        var random = FuzzRandom(seed: seedFile.utf8.reduce(0x8422_2325_cbf2_9ce4) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
        let inputs = (0..<Self.rounds).map { _ in (seedFile, [UInt8](MutationFuzzTests.mutate(original, with: &random))) }
        let counts = try await Self.judge(inputs)
        #expect(counts.refused > 0)
        print(
            "worker fuzz \(seedFile): \(Self.rounds) inputs, \(counts.accepted) accepted, \(counts.refused) refused, \(counts.unjudged) not judged"
        )
    }

    @Test("generated hostile books of each class, at random sizes, are all refused in a worker")
    func generated() async throws {
        var random = FuzzRandom(seed: 55)
        var inputs: [(name: String, bytes: [UInt8])] = []
        for _ in 0..<2 {
            inputs.append(("deep.pdf", HostileBooks.deepPageTree(levels: 257 + random.next(20_000))))
            inputs.append(("bomb.pdf", HostileBooks.nestedFlate(layers: 2 + random.next(3), decodedBytes: (8 + random.next(56)) << 20)))
            inputs.append(("catalogs.pdf", HostileBooks.catalogsWithoutObjects(count: 1_000 + random.next(40_000))))
            let opf = HostileBooks.packageDocumentWithEntity(encodingDeclaration: "UTF-16", references: 100 + random.next(20_000))
            let utf16 = HostileBooks.utf16(opf, bigEndian: random.next(2) == 0, byteOrderMark: random.next(2) == 0)
            inputs.append(("utf16.epub", [UInt8](HostileBooks.epub(packageDocument: utf16))))
        }
        let counts = try await Self.judge(inputs)
        #expect(counts.accepted == 0)
        #expect(counts.refused + counts.unjudged == inputs.count)
    }
}
