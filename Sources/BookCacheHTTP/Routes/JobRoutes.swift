import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore

extension APIServer {
    /// `/api/v1/jobs` (submit, list, wait for, retry, cancel, clear finished) and
    /// `/api/v1/login-links`.
    func jobRoutes() -> RouteCollection<ServiceRequestContext> {
        let routes = RouteCollection(context: ServiceRequestContext.self)
        let (service, access, maxBody, bodyTimeout) = (self.service, self.access, options.maxBodyBytes, options.bodyTimeout)
        routes.post("login-links") { request, _ -> Response in
            // A new one-time link for the page (`bookcache serve --login-link`).
            let host = request.head.authority ?? "127.0.0.1"
            struct Link: Encodable { var url: String }
            return APIResponse.json(Link(url: "http://\(host)/login?code=\(access.newLoginCode())"), status: .created)
        }
        routes.post("jobs") { request, _ -> Response in
            let body = try await Self.body(of: request, upTo: maxBody, within: bodyTimeout, "send the jobs in several requests")
            let jobs = try await service.submit(body)
            struct Accepted: Encodable { var jobs: [APIJob] }
            return APIResponse.json(Accepted(jobs: jobs.map(APIJob.init)), status: .accepted)
        }
        routes.get("jobs") { request, _ -> Response in
            let limit = request.uri.queryParameters.get("limit").flatMap { Int($0) }
            return APIResponse.json(try await JobListing(of: service, limit: limit))
        }
        routes.get("jobs/:id") { request, context -> Response in
            let id = context.parameters.get("id") ?? ""
            // ?wait=SECONDS (at most 60): answer once the job has ended, or when the time is up.
            let wait = request.uri.queryParameters.get("wait").flatMap { Int($0) }.map { min(max($0, 0), 60) }
            let found = if let wait { try await service.waitForEnd(of: id, timeout: .seconds(wait)) } else { try await service.job(id) }
            guard let job = found else { throw APIError.notFound("no job \(id)") }
            return APIResponse.json(APIJob(job: job))
        }
        routes.post("jobs/:id/retry") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            guard let job = try await service.retry(id) else { throw APIError.notFound("no job \(id)") }
            return APIResponse.json(APIJob(job: job))
        }
        routes.delete("jobs/:id") { _, context -> Response in
            let id = context.parameters.get("id") ?? ""
            guard let job = try await service.cancel(id) else { throw APIError.notFound("no job \(id)") }
            return APIResponse.json(APIJob(job: job))
        }

        routes.delete("jobs") { _, _ -> Response in
            // Clear finished: forget the jobs that have ended; queued and running ones stay.
            struct Cleared: Encodable { var removed: Int }
            return APIResponse.json(Cleared(removed: try await service.removeEndedJobs()))
        }
        return routes
    }
}
