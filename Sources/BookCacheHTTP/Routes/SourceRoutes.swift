import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore

extension APIServer {
    /// `/api/v1/sources`: the catalogues and manifests synced on a schedule.
    func sourceRoutes() -> RouteCollection<ServiceRequestContext> {
        let routes = RouteCollection(context: ServiceRequestContext.self)
        let (service, bodyTimeout) = (self.service, options.bodyTimeout)
        routes.get("sources") { _, _ -> Response in
            struct Sources: Encodable { var sources: [ScheduledSource] }
            return APIResponse.json(Sources(sources: try await service.sources()))
        }
        routes.post("sources") { request, _ -> Response in
            struct NewSource: Decodable {
                var source: String
                var keep: Int
                var type: BookType?
                var formats: [BookFormat]?
                var section: String?
                var every: String?
            }
            let body = try await Self.body(of: request, upTo: 64 * 1024, within: bodyTimeout, "a source is a small JSON object")
            let new: NewSource
            do {
                new = try JSONDecoder().decode(NewSource.self, from: body)
            } catch {
                throw APIError.badRequest("send {\"source\": URL, \"keep\": N, \"every\": \"4h\"} (\(error))")
            }
            let every = try new.every.map { text throws(BookCacheError) in try TimeSpan(parsing: text).seconds } ?? 4 * 3600
            let source = try await service.addSource(
                new.source, keep: new.keep, type: new.type ?? .ebook, formats: new.formats ?? [.epub, .pdf], section: new.section,
                every: every)
            return APIResponse.json(source.redacted, status: .created)
        }
        routes.delete("sources/:id") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            guard try await service.removeSource(id) else { throw APIError.notFound("no source \(id)") }
            struct Removed: Encodable { var removed: String }
            return APIResponse.json(Removed(removed: id))
        }

        return routes
    }
}
