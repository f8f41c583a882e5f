import BookCacheTestSupport
import Foundation
import Testing

@testable import BookCache

/// Books made to hurt whatever judges them (issue 55): each class gets a verdict within bounds, in
/// process too — the worker that contains a crash is the second line, these bounds the first.
@Suite("Hostile books", .timeLimit(.minutes(3)))
struct HostileBookTests {
    /// Writes `bytes` into a fresh folder and validates them in process.
    static func verdict(_ bytes: [UInt8], name: String, limits: ValidationLimits = ValidationLimits()) throws -> Result<
        ValidationReport, ValidationFailure
    > {
        let dir = try TemporaryDirectory("bookcache-hostile")
        defer { dir.remove() }
        let path = dir.path(name).path
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return Result { () throws(ValidationFailure) in try BookValidator(limits: limits).check(path: path) }
    }

    @Test("a page tree 20,000 levels deep is refused before anything recurses through it (it crashed the process)")
    func deepPageTree() throws {
        // Given a PDF whose /Pages nest 20,000 deep
        let verdict = try Self.verdict(HostileBooks.deepPageTree(levels: 20_000), name: "deep.pdf")
        // Then it is refused as over a limit, in words
        guard case .failure(let failure) = verdict else {
            Issue.record("a 20,000-level page tree was accepted")
            return
        }
        #expect(failure.kind == .tooLarge)
        #expect(failure.reason.contains("page tree is nested more than 256 levels"))
    }

    @Test("a page tree of a few levels is still read")
    func shallowPageTree() throws {
        let verdict = try Self.verdict(HostileBooks.deepPageTree(levels: 12), name: "shallow.pdf")
        #expect((try? verdict.get())?.format == .pdf)
    }

    @Test(
        "streams that decode far past their stored size are refused without being decoded whole",
        arguments: [(2, false), (1, true), (3, true)])
    func decompressionBombs(layers: Int, predictor: Bool) throws {
        // Given a PDF whose page content is 96 MiB of zeros under stacked deflate layers (a few KiB
        // stored), or under one layer with a predictor to undo (qpdf decodes those)
        let bytes = HostileBooks.nestedFlate(layers: layers, decodedBytes: 96 << 20, predictor: predictor)
        // With a total bound below what it decodes to, so that one layer with a predictor meets it
        var limits = ValidationLimits()
        limits.maxTotalUncompressedBytes = 64 << 20
        let verdict = try Self.verdict(bytes, name: "bomb.pdf", limits: limits)
        guard case .failure(let failure) = verdict else {
            Issue.record("a \(bytes.count)-byte PDF decoding to 96 MiB was accepted")
            return
        }
        #expect(failure.kind == .tooLarge, "\(failure.reason)")
        #expect(failure.reason.contains("not decoded further"), "\(failure.reason)")
    }

    @Test("two stacked deflate layers are refused by the ratio bound alone, whatever the total")
    func nestedDeflateRatio() throws {
        let bytes = HostileBooks.nestedFlate(layers: 2, decodedBytes: 64 << 20)
        let verdict = try Self.verdict(bytes, name: "nested.pdf")
        guard case .failure(let failure) = verdict else {
            Issue.record("two deflate layers decoding to \(64 << 20) bytes from \(bytes.count) were accepted")
            return
        }
        #expect(failure.reason.contains("times its"), "\(failure.reason)")
    }

    @Test("a stream within its bounds is decoded and the PDF read, predictor and all")
    func boundedStreamWithinBounds() throws {
        let verdict = try Self.verdict(HostileBooks.nestedFlate(layers: 1, decodedBytes: 1 << 20, predictor: true), name: "ok.pdf")
        #expect((try? verdict.get())?.format == .pdf, "\(verdict)")
    }

    @Test("40,000 catalogs and no object are judged in one pass (the repair looked back to byte 0 for each)")
    func quadraticRepair() throws {
        // 600 KB: 20.7 s of CPU with a look back per catalog; the suite's time limit stops a regression.
        let verdict = try Self.verdict(HostileBooks.catalogsWithoutObjects(count: 40_000), name: "catalogs.pdf")
        guard case .failure = verdict else {
            Issue.record("a file of catalogs and no object was accepted")
            return
        }
    }

    @Test("the catalog found by the one-pass search is the one a reader's repair finds")
    func catalogSearch() {
        let text =
            "%PDF-1.4\n1 0 obj << /Type /Pages >> endobj\n7 0 obj\n<< /Type /Catalog /Pages 1 0 R >>\nendobj\n"
            + "/Type /Catalog stray\n9 1 obj << /Type  /Catalog >> endobj\ntrailer"
        let found = Array(text.utf8).withUnsafeBytes { PDFValidator.catalogObject(in: $0) }
        #expect(found?.number == 9)
        #expect(found?.generation == 1)
        let none = Array("%PDF-1.4\n/Type /Catalog\n/Type /Catalog\nstartxref".utf8).withUnsafeBytes { PDFValidator.catalogObject(in: $0) }
        #expect(none == nil)
    }
}
