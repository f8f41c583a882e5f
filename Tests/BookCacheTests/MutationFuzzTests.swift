import BookCacheTestSupport
import DownloadQueue
import Foundation
import Testing

@testable import BookCache

/// A seeded mutation fuzzer for the validators (and so the container and package parsers), the
/// manifest parser and the feed parser: thousands of damaged
/// variants of real inputs, each of which must be answered (accepted or refused with a reason)
/// without a crash or a hang. Inputs that once crashed are kept in `Fixtures/fuzz/` and rerun.
///
/// Each input is written to `bookcache-fuzz-last-input` in the temporary folder before it is
/// tried, so if the process dies the input that killed it is there to be kept as a fixture.
@Suite("Mutation fuzzing", .timeLimit(.minutes(3)))
struct MutationFuzzTests {
    static let lastInput = FileManager.default.temporaryDirectory.appendingPathComponent("bookcache-fuzz-last-input")

    /// Rounds per seed file; raise with BOOKCACHE_FUZZ_ROUNDS for a longer run.
    static let rounds = Int(ProcessInfo.processInfo.environment["BOOKCACHE_FUZZ_ROUNDS"] ?? "") ?? 1000

    @Test(
        "validators answer every mutated book, the same with and without the entries checked as the bytes arrived",
        arguments: ["alice.epub", "pride.epub", "fixture-monthly-2024-05.pdf", "corrupt/zip-bomb.epub"])
    func validators(seedFile: String) throws {
        let original = try Fixtures.data(seedFile)
        // FNV-1a of the name: a seed that is the same in every run (hashValue is not).
        var random = FuzzRandom(seed: seedFile.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
        let dir = try TemporaryDirectory("bookcache-fuzz")
        defer { dir.remove() }
        let path = dir.path("input").path
        let validator = BookValidator()
        var accepted = 0
        var refused = 0
        var vouched = 0
        for _ in 0..<Self.rounds {
            let input = Self.mutate(original, with: &random)
            try input.write(to: Self.lastInput)
            try input.write(to: URL(fileURLWithPath: path))
            let verdict: Result<ValidationReport, ValidationFailure>
            do {
                verdict = .success(try validator.check(path: path))
                accepted += 1
            } catch {
                #expect(!error.reason.isEmpty)
                verdict = .failure(error)
                refused += 1
            }
            // What the bytes vouched for as they arrived never changes the verdict.
            let arrived = ArrivingZIPTests.verdict(of: [UInt8](input), piece: 1 + random.next(20_000))
            vouched += arrived.map { $0.entries.filter(\.vouched).count } ?? 0
            let withArrived = Result { () throws(ValidationFailure) in try validator.check(path: path, arrived: arrived) }
            #expect(withArrived == verdict, "the same input, validated with what arrived")
        }
        if seedFile.hasSuffix(".epub") { #expect(vouched > 0) }
        #expect(accepted + refused == Self.rounds)
        #expect(refused > 0, "mutations should break some inputs")
        print("fuzz \(seedFile): \(Self.rounds) inputs, \(accepted) accepted, \(refused) refused")
    }

    @Test("kept regression inputs are still answered")
    func regressions() throws {
        let folder = Fixtures.repositoryRoot.appendingPathComponent("Fixtures/fuzz")
        let names = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { !$0.hasSuffix(".md") }
        for name in names {
            let path = folder.appendingPathComponent(name).path
            if name.hasSuffix(".jsonl") {
                _ = ManifestParser().parse(try Data(contentsOf: URL(fileURLWithPath: path)))
            } else if name.hasSuffix(".xml") {
                #expect(throws: BookCacheError.self) { try FeedParser().page(in: try Data(contentsOf: URL(fileURLWithPath: path))) }
            } else {
                _ = try? BookValidator().validate(path: path)
            }
        }
    }

    @Test("the manifest parser answers every mutated manifest, line by line")
    func manifests() throws {
        let seed = """
            # comment
            {"url": "https://example.com/a.epub", "id": "a", "type": "ebook", "title": "A \\u00e9", "sha256": "\(String(repeating: "ab", count: 32))", "coverUrl": "https://example.com/a.jpg", "size": 123}
            https://example.com/b.pdf

            {"url": "https://example.com/c.epub", "title": null, "extra": [1, 2, {"x": true}]}
            """
        let original = Data(seed.utf8)
        var random = FuzzRandom(seed: 0x5EED)
        var entries = 0
        var problems = 0
        for _ in 0..<(Self.rounds * 5) {
            let input = Self.mutate(original, with: &random)
            try input.write(to: Self.lastInput)
            let lineCount = input.split(separator: 0x0A, omittingEmptySubsequences: false).count
            let result = ManifestParser(maxLineBytes: 4096).parse(input)
            for entry in result.entries {
                #expect((1...lineCount).contains(entry.line))
                _ = try? entry.request(defaultType: .ebook)
            }
            for problem in result.problems { #expect((1...lineCount).contains(problem.line)) }
            entries += result.entries.count
            problems += result.problems.count
        }
        #expect(problems > 0)
        print("fuzz manifests: \(Self.rounds * 5) inputs, \(entries) entries, \(problems) problems")
    }

    @Test(
        "the feed parser answers every mutated real feed (Feedbooks' OPDS test catalogue), entity declarations refused",
        arguments: ["catalog/root.xml", "catalog/acquisition/main.xml", "opds-2/publications.json", "opds-2/home.json"])
    func feeds(seedFile: String) throws {
        let folder = Fixtures.repositoryRoot.appendingPathComponent("Fixtures/feeds/feedbooks-opds-test-catalog")
        let original = try Data(contentsOf: folder.appendingPathComponent(seedFile))
        var random = FuzzRandom(seed: seedFile.utf8.reduce(0xcbf2_9ce4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01b3 })
        let parser = FeedParser(baseURL: URL(string: "https://feedbooks.github.io/opds-test-catalog/")!)
        var pages = 0
        var refused = 0
        for round in 0..<Self.rounds {
            var input = Self.mutate(original, with: &random)
            // One input in eight carries a DTD of its own, with entities to expand: always refused.
            let withDTD = round % 8 == 7 && seedFile.hasSuffix(".xml")
            if withDTD {
                let declaration = #"<!DOCTYPE feed [<!ENTITY a "aaaaaaaaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]>"#
                input = Data(declaration.utf8) + input
            }
            try input.write(to: Self.lastInput)
            do {
                let page = try parser.page(in: input)
                #expect(!withDTD, "a feed with a DTD of its own was parsed")
                for entry in page.entries { #expect(entry.position > 0) }
                pages += 1
            } catch {
                #expect(!error.message.isEmpty)
                refused += 1
            }
        }
        #expect(pages + refused == Self.rounds)
        print("fuzz \(seedFile): \(Self.rounds) inputs, \(pages) read, \(refused) refused")
    }

    /// One to four random edits: bit flips, byte overwrites, truncation, duplicated or dropped
    /// blocks, inserted junk, and "interesting" values (0, 0xFF, 0x7F…) in 16- and 32-bit fields.
    static func mutate(_ data: Data, with random: inout FuzzRandom) -> Data {
        var bytes = [UInt8](data)
        for _ in 0..<(1 + random.next(4)) {
            guard !bytes.isEmpty else { bytes = [UInt8(random.next(256))]; continue }
            let at = random.next(bytes.count)
            switch random.next(8) {
            case 0: bytes[at] ^= UInt8(1 << random.next(8))
            case 1: bytes[at] = UInt8(random.next(256))
            case 2: bytes.removeSubrange(at...)
            case 3:
                let length = min(bytes.count - at, 1 + random.next(64))
                bytes.insert(contentsOf: bytes[at..<(at + length)], at: at)
            case 4:
                let length = min(bytes.count - at, 1 + random.next(64))
                bytes.removeSubrange(at..<(at + length))
            case 5: bytes.insert(contentsOf: (0..<(1 + random.next(16))).map { _ in UInt8(random.next(256)) }, at: at)
            case 6:
                let values: [UInt32] = [0, 0xFFFF_FFFF, 0x7FFF_FFFF, 0x8000_0000, 0xFFFF, 1, 0x10000]
                let value = values[random.next(values.count)]
                for k in 0..<min(4, bytes.count - at) { bytes[at + k] = UInt8(truncatingIfNeeded: value >> (8 * k)) }
            default:
                let values: [UInt16] = [0, 0xFFFF, 0x7FFF, 0x8000, 1, 8, 99]
                let value = values[random.next(values.count)]
                for k in 0..<min(2, bytes.count - at) { bytes[at + k] = UInt8(truncatingIfNeeded: value >> (8 * k)) }
            }
        }
        return Data(bytes)
    }
}

/// A deterministic generator, so a failing run can be repeated exactly.
struct FuzzRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next(_ bound: Int) -> Int {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        z ^= z >> 31
        return Int(z % UInt64(max(1, bound)))
    }
}
