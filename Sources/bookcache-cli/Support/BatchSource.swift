import BookCache
import DownloadQueue
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The books of a `download` run in the order they start: the command line's, then a manifest's
/// (a private copy of it), read twice so that a long manifest costs a few bytes a line, not a
/// request a line. The first reading (``survey(_:warnings:)``) counts the items, finds the ids
/// named twice and gathers the warnings, all before the first book starts; the second hands out
/// one line at a time as the batch asks (``next()``), skipping the duplicates.
final class BatchSource: @unchecked Sendable {
    // Unchecked: `next()` is called by one task, each call awaited before the next; the survey
    // runs before it.
    private var arguments: [BatchItem]
    private let defaultType: BookType
    private var reader: ManifestReader?
    private var manifestFD: Int32 = -1
    /// Manifest lines whose id an earlier item named: reported before the start, then skipped.
    private var duplicates: Set<Int> = []
    /// Lines read ahead of the batch, in one hop to a blocking-work thread.
    private var ahead: [ManifestParser.Line] = []
    private var aheadIndex = 0
    /// Items the batch will see, duplicates left out.
    private(set) var count = 0
    /// The first item of each id, for the warnings about later ones.
    private var seen: [BookID: String] = [:]

    /// The command line's items, in order, each id once (a later one named again is a warning).
    init(arguments: [BatchItem], defaultType: BookType, warnings: inout [String]) {
        self.defaultType = defaultType
        var kept: [BatchItem] = []
        for item in arguments {
            if case .request(let request, let source) = item {
                if let first = seen[request.id] {
                    warnings.append("\(source): \(request.id) is also named by \(first); it is fetched once")
                    continue
                }
                seen[request.id] = source
            }
            kept.append(item)
        }
        self.arguments = kept.reversed()
        count = kept.count
    }

    deinit {
        if manifestFD >= 0 { close(manifestFD) }
    }

    /// Reads the manifest at `fd` once through: counts its items, remembers the lines whose id an
    /// earlier item named, and adds the warnings (unknown keys, then ids named twice). The
    /// descriptor is the source's from here on (closed with it); it must be seekable, and is read
    /// from where it stands.
    func survey(_ fd: Int32, warnings: inout [String]) throws(ManifestReadError) {
        manifestFD = fd
        let start = lseek(fd, 0, SEEK_CUR)
        let parser = ManifestParser()
        let first = ManifestReader(fileDescriptor: fd, parser: parser)
        var named: [String] = []
        while let line = try first.next() {
            guard case .entry(let entry, let warning) = line else {
                count += 1
                continue
            }
            if let warning { warnings.append(warning.description) }
            // A line that cannot be a request is an item (it fails when its turn comes).
            guard let id = try? entry.request(defaultType: defaultType).id else {
                count += 1
                continue
            }
            if let earlier = seen[id] {
                named.append("line \(entry.line): \(id) is also named by \(earlier); it is fetched once")
                duplicates.insert(entry.line)
                continue
            }
            seen[id] = "line \(entry.line)"
            count += 1
        }
        warnings += named
        seen = [:]
        guard start >= 0, lseek(fd, start, SEEK_SET) == start else {
            throw ManifestReadError(message: "the manifest cannot be read again (\(String(cString: strerror(errno))))")
        }
        reader = ManifestReader(fileDescriptor: fd, parser: parser)
    }

    /// The next item to start; `nil` when there is none. A manifest line is handed out as it is:
    /// a request is made of it when it starts. A manifest that can no longer be read ends the
    /// batch with a problem naming why.
    func next() async -> BatchItem? {
        if let argument = arguments.popLast() { return argument }
        while true {
            if aheadIndex == ahead.count {
                guard let reader else { return nil }
                do {
                    ahead = try await BlockingWork.run { () throws(ManifestReadError) -> [ManifestParser.Line] in
                        var lines: [ManifestParser.Line] = []
                        while lines.count < 256, let line = try reader.next() { lines.append(line) }
                        return lines
                    }
                } catch {
                    self.reader = nil
                    return .invalid(ManifestProblem(line: 0, message: "the manifest could not be read to its end: \(error.message)"))
                }
                aheadIndex = 0
                if ahead.isEmpty {
                    self.reader = nil
                    return nil
                }
            }
            let line = ahead[aheadIndex]
            aheadIndex += 1
            switch line {
            case .problem(let problem): return .invalid(problem)
            case .entry(let entry, _):
                if duplicates.contains(entry.line) { continue }
                return .line(entry)
            }
        }
    }
}
