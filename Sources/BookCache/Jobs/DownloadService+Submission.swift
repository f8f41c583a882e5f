import DownloadQueue
import Foundation
import Logging
import Synchronization

/// A submission's body read as jobs: manifest objects, each checked before anything is enqueued.
extension DownloadService {
    // MARK: - Parsing

    static func newID() -> String {
        let value = UInt64.random(in: 0...UInt64.max)
        let hex = String(value, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    static func request(fromEntry entry: String) throws(BookCacheError) -> BookDownloadRequest {
        let result = ManifestParser().parse(Data(entry.utf8))
        guard let first = result.entries.first else {
            throw .invalidArgument(result.problems.first?.message ?? "the job's manifest line is empty")
        }
        do {
            return try first.request(defaultType: .ebook)
        } catch {
            throw .invalidArgument(error.message)
        }
    }

    /// Checks a submission: each element becomes a manifest line, its request and its priority.
    static func parseSubmission(_ body: Data, limit: Int) throws(SubmissionError) -> [(BookDownloadRequest, String, DownloadPriority)] {
        let decoded: Any
        do {
            decoded = try JSONSerialization.jsonObject(with: body)
        } catch {
            throw SubmissionError(problems: [], message: "the body is not JSON: send an object or an array of objects")
        }
        let elements: [Any]
        if let array = decoded as? [Any] {
            elements = array
        } else if decoded is [String: Any] {
            elements = [decoded]
        } else {
            throw SubmissionError(problems: [], message: "send a job object or an array of them")
        }
        guard !elements.isEmpty else { throw SubmissionError(problems: [], message: "the array is empty") }
        guard elements.count <= limit else {
            throw SubmissionError(problems: [], message: "at most \(limit) jobs per request; send the rest in another")
        }
        var accepted: [(BookDownloadRequest, String, DownloadPriority)] = []
        var problems: [SubmissionError.Problem] = []
        for (index, element) in elements.enumerated() {
            guard var object = element as? [String: Any] else {
                problems.append(.init(index: index, reason: "not an object"))
                continue
            }
            var priority = DownloadPriority.normal
            if let given = object.removeValue(forKey: "priority") {
                guard let word = given as? String, let named = DownloadPriority(word: word) else {
                    problems.append(.init(index: index, reason: "priority must be \"low\", \"normal\" or \"high\""))
                    continue
                }
                priority = named
            }
            let unknown = Set(object.keys).subtracting(ManifestParser.knownKeys).sorted()
            guard unknown.isEmpty else {
                problems.append(
                    .init(
                        index: index,
                        reason: "unknown field\(unknown.count == 1 ? "" : "s") \(unknown.map { "'\($0)'" }.joined(separator: ", "))"))
                continue
            }
            guard let line = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
                problems.append(.init(index: index, reason: "cannot be read as a manifest line"))
                continue
            }
            let parsed = ManifestParser().parse(line)
            guard let entry = parsed.entries.first else {
                problems.append(.init(index: index, reason: parsed.problems.first?.message ?? "not a manifest line"))
                continue
            }
            do {
                accepted.append((try entry.request(defaultType: .ebook), String(decoding: line, as: UTF8.self), priority))
            } catch {
                problems.append(.init(index: index, reason: error.message))
            }
        }
        guard problems.isEmpty else { throw SubmissionError(problems: problems, message: "") }
        return accepted
    }
}
