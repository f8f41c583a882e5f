import BookCache
import Foundation
import HTTPTypes
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Synchronization

/// `GET` and `HEAD` of a book's file answered in the connection's pipeline on its event loop,
/// where Hummingbird would hand the request to a task and its answer back (two thread hops a
/// request: a third of the CPU of a file sent with `sendfile`).
///
/// It takes only what the router would answer with a file route: a `GET` or `HEAD` without a
/// body, to an allowed `Host`, in the one accepted spelling and no query, of
/// `/api/v1/books/:id/file` with the token (``ServiceAccess/credential(of:)-(HTTPFields)``, the
/// decision the router's doors make) or of `/opds/books/:id/file` with the token or a reader
/// login the catalogue's door let in lately (``ReaderLogins/knows(basic:)``); a valid book id, no
/// `Connection` or `Expect` field, and nothing of the router's still being answered on the
/// connection. The book is looked up as the route looks it up (``ServedBooks``), the answer's head
/// is the route's (``BookFile/answer(file:book:range:ifRange:headOnly:)``, with `Date` as
/// Hummingbird adds it), and the file goes out through ``FileRegionHandler``. Every other
/// request, and one whose book is not there, goes on to the router unchanged, which answers it
/// (its errors included) as it always did.
///
/// Order is kept: a request the handler takes waits until the router's answers before it are
/// written, and parts that arrive while the handler answers (pipelined requests) wait until its
/// answer is written; reads are held meanwhile, as Hummingbird holds them.
final class FastFileRoute: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// What decides whether a request is taken, and what answers it; one for every connection.
    struct Door: Sendable {
        let allowedHosts: HostList
        let access: ServiceAccess
        let readers: ReaderLogins
        let manager: BookCacheManager
        let served: ServedBooks
        let dates: HTTPDates

        /// The book `head` asks for and whether it asks for the head alone, when the router would
        /// answer it with the file route behind the token; `nil`: the router answers it.
        func takes(_ head: HTTPRequest) -> (id: BookID, headOnly: Bool)? {
            // Every request passes here before the router's door: what is not a file's path leaves
            // at the cheapest test, and the door's checks are paid once.
            guard head.method == .get || head.method == .head, let path = head.path, path.hasSuffix("/file"), !path.contains("?"),
                let host = head.authority?.lowercased(), allowedHosts.contains(host), RequestTarget.problem(path) == nil
            else { return nil }
            let segments = path.split(separator: "/", omittingEmptySubsequences: false)
            let fields = head.headerFields
            guard fields[.transferEncoding] == nil, fields[.contentLength] == nil, fields[.expect] == nil, fields[.connection] == nil
            else { return nil }
            let id: Substring
            switch segments.count {
            case 6 where segments[1] == "api" && segments[2] == "v1" && segments[3] == "books" && segments[5] == "file":
                // The API's door: the token
                guard access.credential(of: fields) == .token else { return nil }
                id = segments[4]
            case 5 where segments[1] == "opds" && segments[2] == "books" && segments[4] == "file":
                // The catalogue's door: a reader login it let in lately (a Basic value is never
                // taken as the token there), or the token
                if let authorization = fields[.authorization], ReaderLogins.isBasic(authorization) {
                    guard readers.knows(basic: authorization) else { return nil }
                } else {
                    guard access.credential(of: fields) == .token else { return nil }
                }
                id = segments[3]
            default:
                return nil
            }
            do {
                return (try BookID(parsing: String(id)), head.method == .head)
            } catch {
                // Not a book id: the router answers 400, with its words.
                return nil
            }
        }
    }

    private let door: Door
    /// Requests given to the router whose answers have not ended.
    private var routerAnswers = 0
    /// A request of this handler's is being answered.
    private var answering = false
    /// The end of the request this handler took has not arrived yet (it is this handler's).
    private var ownEndDue = false
    /// Parts that arrived while answering, in order.
    private var waiting: [HTTPRequestPart] = []
    /// A read asked for while answering, made once the answer is written.
    private var readHeld = false

    init(door: Door) {
        self.door = door
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        if answering {
            waiting.append(part)
        } else {
            take(part, context: context)
        }
    }

    func read(context: ChannelHandlerContext) {
        if answering {
            readHeld = true
        } else {
            context.read()
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), routerAnswers > 0 { routerAnswers -= 1 }
        context.write(data, promise: promise)
    }

    private func take(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let head):
            guard routerAnswers == 0, let (id, headOnly) = door.takes(head) else {
                forward(head, context: context)
                return
            }
            answering = true
            ownEndDue = true
            look(up: id, for: head, headOnly: headOnly, context: context)
        case .body:
            context.fireChannelRead(wrapInboundOut(part))
        case .end:
            if ownEndDue {
                ownEndDue = false
            } else {
                context.fireChannelRead(wrapInboundOut(part))
            }
        }
    }

    /// Gives the request to the router.
    private func forward(_ head: HTTPRequest, context: ChannelHandlerContext) {
        routerAnswers += 1
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }

    private func look(up id: BookID, for head: HTTPRequest, headOnly: Bool, context: ChannelHandlerContext) {
        if let (book, file) = door.served.fresh(id, reading: !headOnly) {
            answer(head, book: book, file: file, headOnly: headOnly, context: context)
            return
        }
        let door = self.door
        let found = context.eventLoop.makePromise(of: (CachedBookMetadata, OpenFile)?.self)
        found.completeWithTask {
            do {
                return try await door.served.open(id, in: door.manager, reading: !headOnly)
            } catch {
                // Not cached, or its file cannot be read: the router looks again and answers the error.
                return nil
            }
        }
        found.futureResult.assumeIsolated().whenSuccess { found in
            guard context.channel.isActive else {
                // The client went while the index was asked: nobody to answer.
                found?.1.close()
                return
            }
            if let (book, file) = found {
                self.answer(head, book: book, file: file, headOnly: headOnly, context: context)
            } else {
                self.giveUp(head, context: context)
            }
            // Outside a read: what was given to the router meanwhile (this request, or parts that
            // waited) is delivered on a read's completion, so one is signalled.
            context.fireChannelReadComplete()
        }
    }

    /// Answers with the file route's head, and the file after it.
    private func answer(_ head: HTTPRequest, book: CachedBookMetadata, file: OpenFile, headOnly: Bool, context: ChannelHandlerContext) {
        guard context.channel.isActive else {
            file.close()
            return
        }
        var answer = BookFile.answer(
            file: file, book: book, range: head.headerFields[.range], ifRange: head.headerFields[.ifRange], headOnly: headOnly)
        answer.headers[.date] = door.dates.now
        if answer.length > 0 {
            guard let handOver = FileRegionHandler.handOver(for: context.channel) else {
                file.close()
                giveUp(head, context: context)
                return
            }
            answer.headers[FileRegionHandler.marker] = String(
                handOver.put(FileRegionHandler.Send(file: file, offset: answer.offset, length: answer.length)))
        } else {
            file.close()
        }
        context.write(wrapOutboundOut(.head(HTTPResponse(status: answer.status, headerFields: answer.headers))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        answered(context: context)
    }

    /// The request goes to the router after all, its end with it (now or when it comes).
    private func giveUp(_ head: HTTPRequest, context: ChannelHandlerContext) {
        ownEndDue = false
        forward(head, context: context)
        answered(context: context)
    }

    /// Takes the parts that waited, then makes a read held meanwhile.
    private func answered(context: ChannelHandlerContext) {
        answering = false
        while !answering, !waiting.isEmpty {
            take(waiting.removeFirst(), context: context)
        }
        if !answering, readHeld {
            readHeld = false
            context.read()
        }
    }
}

/// Hummingbird's HTTP/1 connection with ``FastFileRoute`` after its connection-state handler
/// (which so counts the requests it answers for the idle timeout and graceful shutdown) and
/// before the handler that gives requests to the router; and ``HTTP10Close`` before the codec
/// that drops the request's version.
struct ServiceHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value

    let base: HTTP1Channel
    let door: FastFileRoute.Door

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let door = self.door
        return base.setup(channel: channel, logger: logger).flatMapThrowing { value in
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(HTTP10Close(), position: .before(try pipeline.handler(type: HTTP1ToHTTPServerCodec.self)))
            try pipeline.addHandler(
                FastFileRoute(door: door), position: .after(try pipeline.handler(type: HTTPConnectionStateHandler.self)))
            return value
        }
    }

    func handle(value: Value, logger: Logger) async {
        await base.handle(value: value, logger: logger)
    }
}

/// An HTTP/1.0 request without `Connection: keep-alive` ends its connection (RFC 9112 §9.3): it
/// is marked `Connection: close` before the request's version is dropped (HTTP types have none),
/// so the service closes the connection after the answer instead of reading the client's next
/// request, on a connection it ended, as an error (`400`).
final class HTTP10Close: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard case .head(var head) = unwrapInboundIn(data), head.version.major == 1, head.version.minor == 0, !head.isKeepAlive
        else {
            context.fireChannelRead(data)
            return
        }
        head.headers.replaceOrAdd(name: "Connection", value: "close")
        context.fireChannelRead(wrapInboundOut(.head(head)))
    }
}

/// The `Date` field of answers (RFC 9110 §5.6.7, IMF-fixdate), made once a second.
final class HTTPDates: Sendable {
    private let made = Mutex<(second: Int, text: String)>((-1, ""))

    /// Now, as an HTTP date.
    var now: String {
        var seconds = time(nil)
        return made.withLock { made in
            if made.second == seconds { return made.text }
            var parts = tm()
            gmtime_r(&seconds, &parts)
            let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
            let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
            func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
            let text =
                "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
                + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
            made = (seconds, text)
            return text
        }
    }
}
