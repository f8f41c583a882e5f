import DownloadQueue
import Foundation
import Logging

/// Re-checks cached files against their records: present, same size, same SHA-256, still a
/// valid EPUB or PDF; and finds files in the type folders that the index does not know.
struct Verifier: Sendable {
    let layout: CacheLayout
    let limits: ValidationLimits
    /// Where the files are judged (a worker, or this process).
    let validation: BookValidation
    let logger: Logger

    /// Checks `records` (and, when `scanStrays`, the type folders) and returns what is wrong.
    func check(_ records: [CachedBookMetadata], known: [String: CachedBookMetadata], scanStrays: Bool) async -> VerifyReport {
        var problems: [VerifyReport.Problem] = []
        var warnings: [String: [String]] = [:]
        for record in records.sorted(by: { $0.id < $1.id }) {
            let outcome = await check(record)
            if let problem = outcome.problem { problems.append(problem) }
            if !outcome.warnings.isEmpty { warnings[record.id] = outcome.warnings }
        }
        if scanStrays { problems += await BlockingWork.run { strays(known: known) } }
        var report = VerifyReport(
            checked: records.count, problems: problems.sorted { ($0.path, $0.kind.rawValue) < ($1.path, $1.kind.rawValue) })
        report.warnings = warnings
        return report
    }

    /// The problem with one record's file (`nil` when it is fine), and the warnings validation
    /// gives it. Verification is never strict: a book accepted with a warning is not corrupt.
    func check(_ record: CachedBookMetadata) async -> (problem: VerifyReport.Problem?, warnings: [String]) {
        let url = layout.url(forRelativePath: record.localPath)
        guard let size = FileSystem.fileSize(url) else {
            return (.init(kind: .missing, id: record.id, path: record.localPath, detail: "the file is gone"), [])
        }
        guard size == record.fileSize else {
            return (
                .init(kind: .changed, id: record.id, path: record.localPath, detail: "size is \(size) bytes, recorded \(record.fileSize)"),
                []
            )
        }
        // Re-hash and re-validate at the same time, on two blocking-work threads: both read the whole file.
        async let hashed = BlockingWork.run { Self.sha256(of: url) }
        let validation: Result<ValidationReport, ValidationFailure>
        do {
            validation = .success(try await self.validation.judge(path: url.path, limits: limits, strict: false))
        } catch let failure as ValidationFailure {
            validation = .failure(failure)
        } catch let error as BookCacheError {
            validation = .failure(ValidationFailure("it was not checked: \(error.message)", kind: .unjudgeable))
        } catch {
            validation = .failure(ValidationFailure("it was not checked: the check was cancelled", kind: .unjudgeable))
        }
        let digest = await hashed
        switch digest {
        case .failure(let error):
            return (.init(kind: .missing, id: record.id, path: record.localPath, detail: "cannot be read (\(error))"), [])
        case .success(let digest) where digest != record.checksum:
            return (
                .init(kind: .changed, id: record.id, path: record.localPath, detail: "SHA-256 is \(digest), recorded \(record.checksum)"),
                []
            )
        default:
            break
        }
        switch validation {
        case .failure(let error) where error.kind == .unjudgeable:
            // Not judged (its worker died or ran out of time, the check was cancelled, the worker
            // settings cannot be read): no verdict on the book, so nothing `repair` may remove.
            return (nil, ["not checked: \(error.reason)"])
        case .failure(let error):
            return (.init(kind: .corrupt, id: record.id, path: record.localPath, detail: error.reason), [])
        case .success(let report) where report.format != record.format:
            let detail = "is now a \(report.format.rawValue), recorded \(record.format.rawValue)"
            return (.init(kind: .corrupt, id: record.id, path: record.localPath, detail: detail), [])
        case .success(let report):
            return (nil, report.warnings)
        }
    }

    /// Files in the type folders that no record accounts for.
    private func strays(known: [String: CachedBookMetadata]) -> [VerifyReport.Problem] {
        var expected = Set<String>()
        for record in known.values {
            expected.insert(record.localPath)
            if let id = try? record.bookID { expected.insert(layout.relativeSidecarPath(for: id)) }
            if let cover = record.coverPath { expected.insert(cover) }
        }
        var found: [VerifyReport.Problem] = []
        for type in BookType.allCases {
            let folder = layout.folder(for: type)
            let names: [String]
            do {
                names = try FileManager.default.contentsOfDirectory(atPath: folder.path)
            } catch {
                if FileManager.default.fileExists(atPath: folder.path) {
                    logger.warning("cannot list a cache folder", metadata: ["folder": "\(folder.path)", "error": "\(error)"])
                }
                continue
            }
            for name in names.sorted() {
                let path = "\(type.folderName)/\(name)"
                if !expected.contains(path) {
                    found.append(.init(kind: .stray, id: nil, path: path, detail: "not in the index"))
                }
            }
        }
        return found
    }

    static func sha256(of url: URL) -> Result<String, FileSystem.CallError> {
        let fd = open(url.path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return .failure(FileSystem.CallError(operation: "open", path: url.path, code: errno)) }
        defer { close(fd) }
        let hasher = SHA256Hasher()
        let size = 1 << 20
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer.baseAddress, size)
            if n < 0 {
                if errno == EINTR { continue }
                return .failure(FileSystem.CallError(operation: "read", path: url.path, code: errno))
            }
            if n == 0 { break }
            hasher.update(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return .success(hasher.finalize())
    }
}
