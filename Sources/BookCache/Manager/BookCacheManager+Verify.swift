import DownloadQueue
import Foundation

extension BookCacheManager {
    /// Re-hashes cached files against their recorded checksums, re-runs format validation, and
    /// (when checking everything) finds files in the type folders that the index does not know.
    ///
    /// With `repair`, broken books (missing, changed, corrupt) are removed — or, with
    /// `redownload`, fetched again from their recorded URL — and strays are adopted when their
    /// sidecar describes them exactly (same size and checksum, valid format), else removed.
    ///
    /// - Parameters:
    ///   - ids: The books to check; every book (and the strays) when empty.
    ///   - repair: Fix what is found.
    ///   - redownload: With `repair`, download broken books again instead of removing them.
    /// - Returns: What was found, and what was done about it.
    public func verify(_ ids: [BookID] = [], repair: Bool = false, redownload: Bool = false) async throws(BookCacheError) -> VerifyReport {
        let known = Dictionary(uniqueKeysWithValues: try store.allRecords().map { ($0.id, $0) })
        var records: [CachedBookMetadata] = []
        var missing: [VerifyReport.Problem] = []
        if ids.isEmpty {
            records = Array(known.values)
        } else {
            for id in ids {
                if let record = known[id.description] {
                    records.append(record)
                } else {
                    missing.append(.init(kind: .missing, id: id.description, path: "", detail: "not in the index"))
                }
            }
        }
        let verifier = Verifier(layout: layout, limits: validationLimits, validation: validation, logger: logger)
        var report = await verifier.check(records, known: known, scanStrays: ids.isEmpty)
        report.problems = missing + report.problems
        guard repair else { return report }
        try prepareDirectories()
        for position in report.problems.indices {
            report.problems[position].repair = try await repairProblem(report.problems[position], redownload: redownload)
        }
        return report
    }

    private func repairProblem(_ problem: VerifyReport.Problem, redownload: Bool) async throws(BookCacheError) -> String {
        switch problem.kind {
        case .stray:
            return try await repairStray(problem.path)
        case .missing, .changed, .corrupt:
            guard let key = problem.id, let id = try? BookID(parsing: key), let record = try store.record(id) else {
                return "nothing to do"
            }
            if redownload {
                // A refresh: the new copy replaces the broken one atomically and keeps its pin.
                do {
                    var request = try BookDownloadRequest(url: record.fileUrl, id: id, title: record.title, coverURL: record.coverUrl)
                    request.replaceExisting = true
                    _ = try await download(request)
                    return "downloaded again"
                } catch {
                    try delete(id)
                    return "removed; downloading again failed: \(error.message)"
                }
            }
            try delete(id)
            return "removed"
        }
    }

    /// A stray is adopted when its sidecar describes it exactly; otherwise it is removed.
    private func repairStray(_ path: String) async throws(BookCacheError) -> String {
        let url = layout.url(forRelativePath: path)
        let name = url.lastPathComponent
        let folderType = BookType.allCases.first { path.hasPrefix($0.folderName + "/") }
        if let type = folderType, !name.hasSuffix(CacheLayout.sidecarSuffix) {
            let bookId = url.deletingPathExtension().lastPathComponent
            if let id = try? BookID(type: type, bookId: bookId),
                let data = FileManager.default.contents(atPath: layout.url(forRelativePath: layout.relativeSidecarPath(for: id)).path),
                let record = try? MetadataCoding.decoder().decode(CachedBookMetadata.self, from: data),
                record.localPath == path,
                await Verifier(layout: layout, limits: validationLimits, validation: validation, logger: logger).check(record).problem
                    == nil
            {
                try store.update { index throws(BookCacheError) in
                    if index[id] == nil { index[id] = record }
                }
                return "adopted into the index"
            }
        }
        if name.hasSuffix(CacheLayout.sidecarSuffix), let type = folderType {
            // A sidecar whose book is adopted or present stays; only an orphan goes.
            let bookId = String(name.dropLast(CacheLayout.sidecarSuffix.count))
            if let id = try? BookID(type: type, bookId: bookId), try store.record(id) != nil {
                return "kept (its book is in the index)"
            }
        }
        do {
            try FileSystem.removeFile(url)
        } catch {
            throw .cacheDirectoryUnusable(layout.root.path, "cannot remove \(path) (\(error))")
        }
        return "removed"
    }
}
