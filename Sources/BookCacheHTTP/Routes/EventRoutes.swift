import BookCache
import DownloadQueue
import Foundation
import Hummingbird
import NIOCore

extension APIServer {
    /// `/api/v1/events`: the jobs' changes as server-sent events, after a snapshot.
    func eventRoutes(_ streams: EventStreams) -> RouteCollection<ServiceRequestContext> {
        let routes = RouteCollection(context: ServiceRequestContext.self)
        let (service, options) = (self.service, self.options)
        routes.get("events") { _, context -> Response in
            // The mailbox is opened before the snapshot is read, so no change falls between them.
            // A client that falls behind is disconnected at once: a write waiting for it to read
            // would otherwise hold its buffers for as long as it does not.
            let channel = context.channel
            guard let mailbox = streams.open(onDrop: { channel.close(promise: nil) }) else {
                throw APIError.unavailable("\(options.maxEventStreams) event streams are open already; try again shortly", retryAfter: 5)
            }
            let snapshot: String
            do {
                // The newest jobs and the counts, as GET /api/v1/jobs?limit=200 answers them, so a
                // client that (re)connects knows where it stands.
                snapshot = ServerSentEvent.encode(name: "snapshot", try await JobListing(of: service, limit: 200))
            } catch {
                streams.close(mailbox)
                throw error
            }
            return Response(
                status: .ok,
                headers: [.contentType: "text/event-stream", .cacheControl: "no-store"],
                body: ResponseBody { writer in
                    defer { streams.close(mailbox) }
                    // A small send buffer: a client that does not read holds 64 KiB of the kernel's
                    // memory, not megabytes, and falls behind (and is dropped) that much sooner.
                    let smallBuffer: EventLoopFuture<Void> = channel.setOption(ChannelOptions.socketOption(.so_sndbuf), value: 64 * 1024)
                    try await smallBuffer.get()
                    try await writer.write(ByteBuffer(string: "retry: 2000\n: connected\n\n" + snapshot))
                    // What came in meanwhile goes out as one write, at most 20 a second per client:
                    // a burst of events costs each client a few writes, not one per event.
                    while let batch = await mailbox.next() {
                        var buffer = ByteBuffer()
                        buffer.reserveCapacity(batch.reduce(0) { $0 + $1.readableBytes })
                        for var part in batch { buffer.writeBuffer(&part) }
                        try await writer.write(buffer)
                        try await Task.sleep(for: .milliseconds(50))
                    }
                    try await writer.finish(nil)
                })
        }
        return routes
    }
}
