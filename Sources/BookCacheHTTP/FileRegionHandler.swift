import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Sends a book's file to the socket with `sendfile(2)`, as nginx does, where Hummingbird's
/// response writer takes only buffers (every byte read into memory and written out again).
///
/// A route that serves a file sends ``Send`` down the connection's pipeline as an outbound event
/// before it returns its response, and marks that response's head with ``marker``. This handler,
/// which sits after the HTTP/1 codec of Hummingbird's connection, keeps the file; when the marked
/// head passes it removes the mark, lets the head go on, and writes the file's range as a
/// `FileRegion` below the codec (the HTTP/1 encoder sends a body of a known length as it is).
/// The response itself has an empty body; Hummingbird's end of the message follows the file.
///
/// One response at a time goes through a connection (Hummingbird answers its requests in turn),
/// so the file kept is the next marked head's. A head without the mark drops a file kept for a
/// response that was never sent (a middleware answered instead), so no later response can carry
/// it. The file is closed when it has been sent, when sending fails, or when the connection goes.
final class FileRegionHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The head field that marks a response whose body is the file sent before it; never sent.
    static let marker = HTTPField.Name("x-bookcache-file-region")!

    /// A file for the next marked response: its bytes `offset ..< offset + length`. The handler
    /// takes the file's descriptor when it receives this; if it never does (no handler on the
    /// connection), the file stays the sender's.
    struct Send: Sendable {
        let file: OpenFile
        let offset: Int64
        let length: Int64
    }

    /// The error a ``Send`` fails with when the connection cannot send files this way.
    struct Unavailable: Error {}

    private var kept: (handle: NIOFileHandle, region: FileRegion)?
    /// The HTTP/1 codec's place in the pipeline, below which the file is written; `nil` on a
    /// connection without it, where every ``Send`` fails and the route reads the file itself.
    private var codec: ChannelHandlerContext?

    func handlerAdded(context: ChannelHandlerContext) {
        codec = try? context.pipeline.syncOperations.context(handlerType: HTTP1ToHTTPServerCodec.self)
    }

    func triggerUserOutboundEvent(context: ChannelHandlerContext, event: Any, promise: EventLoopPromise<Void>?) {
        guard let send = event as? Send else {
            context.triggerUserOutboundEvent(event, promise: promise)
            return
        }
        guard codec != nil, send.length > 0, let descriptor = send.file.takeDescriptor()
        else {
            promise?.fail(Unavailable())
            return
        }
        drop()
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        let end = send.offset + send.length
        kept = (handle, FileRegion(fileHandle: handle, readerIndex: Int(send.offset), endIndex: Int(end)))
        promise?.succeed()
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var head) = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        guard head.headerFields[Self.marker] != nil else {
            drop()
            context.write(data, promise: promise)
            return
        }
        head.headerFields[Self.marker] = nil
        guard let (handle, region) = kept, let codec else {
            // A marked head with no file kept: a route's mistake. Its body cannot be sent, so the
            // connection is closed rather than answered with a length it would not keep.
            drop()
            promise?.fail(Unavailable())
            context.close(promise: nil)
            return
        }
        kept = nil
        context.write(wrapOutboundOut(.head(head)), promise: promise)
        let sent = context.eventLoop.makePromise(of: Void.self)
        sent.futureResult.whenComplete { _ in Self.close(handle) }
        codec.write(NIOAny(HTTPServerResponsePart.body(.fileRegion(region))), promise: sent)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        drop()
        codec = nil
    }

    private func drop() {
        guard let (handle, _) = kept else { return }
        kept = nil
        Self.close(handle)
    }

    /// Closes a file that was only read; closing it cannot lose anything, so its error is not
    /// the client's or the user's.
    private static func close(_ handle: NIOFileHandle) {
        do { try handle.close() } catch {}
    }
}
