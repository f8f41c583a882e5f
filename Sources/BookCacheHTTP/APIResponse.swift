import BookCache
import DownloadQueue
import Foundation
import Hummingbird

/// JSON responses of the API: UTF-8, ISO-8601 dates, sorted keys; errors as
/// `{"error": {"kind": …, "message": …}}`. No CORS headers, ever.
enum APIResponse {
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        do {
            let data = try MetadataCoding.encoder().encode(value)
            return Response(
                status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
        } catch {
            return self.error(.internalServerError, kind: "internal", "cannot encode the response (\(error))")
        }
    }

    static func error(
        _ status: HTTPResponse.Status, kind: String, _ message: String, problems: [DownloadService.SubmissionError.Problem] = []
    ) -> Response {
        struct Body: Encodable {
            struct Detail: Encodable {
                var kind: String
                var message: String
                var problems: [DownloadService.SubmissionError.Problem]?
            }
            var error: Detail
        }
        let body = Body(error: .init(kind: kind, message: message, problems: problems.isEmpty ? nil : problems))
        let data = (try? MetadataCoding.encoder().encode(body)) ?? Data(#"{"error":{"kind":"internal","message":"?"}}"#.utf8)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// An error with the status that fits it: an ``APIError`` with its own, a refused submission
    /// with its problems, a library error by its kind; anything else is a 500.
    static func error(_ error: any Error) -> Response {
        switch error {
        case let error as APIError:
            var response = self.error(error.status, kind: error.kind, error.message)
            for field in error.headers { response.headers[field.name] = field.value }
            return response
        case let error as DownloadService.SubmissionError:
            return self.error(
                .badRequest, kind: "invalidArgument", error.problems.isEmpty ? error.message : "nothing was enqueued: \(error.description)",
                problems: error.problems)
        case let error as BookCacheError:
            let status: HTTPResponse.Status
            switch error.kind {
            case .notCached: status = .notFound
            case .invalidIdentifier, .invalidURL, .invalidChecksum, .invalidArgument: status = .badRequest
            case .insufficientStorage: status = .init(code: 507, reasonPhrase: "Insufficient Storage")
            default: status = .internalServerError
            }
            return self.error(status, kind: error.kind.description, error.message)
        default:
            return self.error(.internalServerError, kind: "internal", "\(error)")
        }
    }
}

/// An error of the API's own that carries its answer: the status, the `kind` a client acts on,
/// the message, and any header the status needs. The one home of those statuses.
struct APIError: Error {
    var status: HTTPResponse.Status
    var kind: String
    var message: String
    var headers: HTTPFields = [:]

    /// No such job, source or cached book (404).
    static func notFound(kind: String = "notFound", _ message: String) -> Self {
        Self(status: .notFound, kind: kind, message: message)
    }

    /// A request the API cannot use (400).
    static func badRequest(_ message: String) -> Self {
        Self(status: .badRequest, kind: "invalidArgument", message: message)
    }

    /// A body over the cap (413).
    static func tooLarge(_ message: String) -> Self {
        Self(status: .contentTooLarge, kind: "invalidArgument", message: message)
    }

    /// A body that did not arrive in time (408; the connection is closed).
    static func requestTimeout(_ message: String) -> Self {
        Self(status: .requestTimeout, kind: "requestTimeout", message: message, headers: [.connection: "close"])
    }

    /// The service is at a limit for now (503 with `Retry-After` seconds).
    static func unavailable(_ message: String, retryAfter: Int) -> Self {
        Self(status: .serviceUnavailable, kind: "busy", message: message, headers: [.retryAfter: String(retryAfter)])
    }
}

/// Answers every error a handler throws with `APIResponse.error(_:)`, so handlers just `try`.
struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            return APIResponse.error(error)
        }
    }
}

/// `{"jobs": [...], "counts": {...}}`: the newest jobs (all, without a limit) and how many are
/// in each state — `GET /api/v1/jobs` and the first event of every stream.
struct JobListing: Encodable {
    var jobs: [APIJob]
    var counts: [String: Int]

    init(of service: DownloadService, limit: Int?) async throws {
        jobs = try await service.jobs(limit: limit).map(APIJob.init)
        counts = Dictionary(uniqueKeysWithValues: try await service.jobCounts().map { ($0.key.rawValue, $0.value) })
    }
}

/// A job as the API shows it: its priority as a word.
struct APIJob: Encodable {
    var job: ServiceJob

    enum CodingKeys: String, CodingKey {
        case id, bookId, url, title, priority, state, bytes, total, error, attempts, createdAt, updatedAt, nextAttemptAt
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(job.id, forKey: .id)
        try container.encode(job.bookId, forKey: .bookId)
        try container.encode(job.url, forKey: .url)
        try container.encodeIfPresent(job.title, forKey: .title)
        try container.encode(job.priority.word, forKey: .priority)
        try container.encode(job.state.rawValue, forKey: .state)
        try container.encode(job.bytes, forKey: .bytes)
        try container.encodeIfPresent(job.total, forKey: .total)
        try container.encodeIfPresent(job.error, forKey: .error)
        try container.encode(job.attempts, forKey: .attempts)
        try container.encode(job.createdAt, forKey: .createdAt)
        try container.encode(job.updatedAt, forKey: .updatedAt)
        try container.encodeIfPresent(job.nextAttemptAt, forKey: .nextAttemptAt)
    }
}

/// A book as the API shows it: its record, its status, credentials redacted.
struct APIBook: Encodable {
    var book: CachedBookMetadata

    enum CodingKeys: String, CodingKey {
        case status
    }

    func encode(to encoder: any Encoder) throws {
        var redacted = book
        redacted.fileUrl = URL(string: book.fileUrl).map(URLRedaction.redacted) ?? book.fileUrl
        redacted.coverUrl = book.coverUrl.map { URL(string: $0).map(URLRedaction.redacted) ?? $0 }
        try redacted.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(book.outdated ? "outdated" : "cached", forKey: .status)
    }
}
