import HTTPTypes
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Sends a book's file to the socket with `sendfile(2)`, as nginx does, where Hummingbird's
/// response writer takes only buffers (every byte read into memory and written out again).
///
/// A route that serves a file hands it to its connection's ``HandOver`` (found by the channel,
/// from the route's own thread: no hop to the event loop) and marks its response's head with
/// ``marker`` and the number the hand-over gave the file. This handler, which sits after the
/// HTTP/1 codec of Hummingbird's connection, takes that file when the marked head passes, removes
/// the mark, lets the head go on, and writes the file's range as a `FileRegion` below the codec
/// (the HTTP/1 encoder sends a body of a known length as it is). The response itself has an
/// empty body; Hummingbird's end of the message follows the file.
///
/// Files are numbered in the order they are handed over and taken by number, so a head can only
/// carry its own file, even when the route of the next request (pipelined) hands over its file
/// before this head has been written. Files handed over for responses that were never sent (a
/// middleware answered instead) are closed when a later file is taken or the connection goes; a
/// marked head whose file is not there closes the connection rather than send a wrong body.
final class FileRegionHandler: ChannelOutboundHandler, RemovableChannelHandler {
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The head field that marks a response whose body is a handed-over file, with the file's
    /// number; never sent.
    static let marker = HTTPField.Name("x-bookcache-file-region")!

    /// A file for a marked response: its bytes `offset ..< offset + length`.
    struct Send: Sendable {
        let file: OpenFile
        let offset: Int64
        let length: Int64
    }

    /// The error a marked head without its file fails with (the connection is closed).
    struct Unavailable: Error {}

    /// Where a connection's routes leave the files of their responses, in order, until the
    /// handler takes them. At most one file a request waits here.
    final class HandOver: Sendable {
        private let state = Mutex<(next: UInt64, files: [(number: UInt64, send: Send)])>((0, []))

        /// Keeps `send` for the response marked with the returned number.
        func put(_ send: Send) -> UInt64 {
            state.withLock { state in
                state.next += 1
                state.files.append((state.next, send))
                return state.next
            }
        }

        /// The file handed over as `number`; files handed over before it (for responses never
        /// sent) are closed.
        func take(_ number: UInt64) -> Send? {
            let (found, stale) = state.withLock { state -> (Send?, [Send]) in
                guard let index = state.files.firstIndex(where: { $0.number == number }) else { return (nil, []) }
                let stale = state.files[..<index].map(\.send)
                let found = state.files[index].send
                state.files.removeSubrange(...index)
                return (found, stale)
            }
            for send in stale { send.file.close() }
            return found
        }

        /// Closes every file still waiting.
        func closeAll() {
            let files = state.withLock { state in
                defer { state.files = [] }
                return state.files
            }
            for (_, send) in files { send.file.close() }
        }
    }

    /// The hand-overs of the connections open now, by channel.
    private static let handOvers = Mutex<[ObjectIdentifier: HandOver]>([:])

    /// The hand-over of `channel`'s connection; `nil` when this handler (with the HTTP/1 codec)
    /// is not in its pipeline, and the route reads the file itself.
    static func handOver(for channel: any Channel) -> HandOver? {
        handOvers.withLock { $0[ObjectIdentifier(channel)] }
    }

    private let handOver = HandOver()
    /// The HTTP/1 codec's place in the pipeline, below which the file is written; `nil` on a
    /// connection without it, where no file is handed over.
    private var codec: ChannelHandlerContext?
    private var registered: ObjectIdentifier?

    func handlerAdded(context: ChannelHandlerContext) {
        codec = try? context.pipeline.syncOperations.context(handlerType: HTTP1ToHTTPServerCodec.self)
        guard codec != nil else { return }
        let key = ObjectIdentifier(context.channel)
        registered = key
        Self.handOvers.withLock { $0[key] = handOver }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .head(var head) = unwrapOutboundIn(data), let mark = head.headerFields[Self.marker] else {
            context.write(data, promise: promise)
            return
        }
        head.headerFields[Self.marker] = nil
        guard let number = UInt64(mark), let send = handOver.take(number), let codec,
            let descriptor = send.file.takeDescriptor()
        else {
            // A marked head without its file: a route's mistake. Its body cannot be sent, so the
            // connection is closed rather than answered with a length it would not keep.
            promise?.fail(Unavailable())
            context.close(promise: nil)
            return
        }
        let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: descriptor)
        let region = FileRegion(fileHandle: handle, readerIndex: Int(send.offset), endIndex: Int(send.offset + send.length))
        // Corked while the head and the file go out, as nginx's tcp_nopush: full segments, the
        // head in the first, rather than each piece pushed as it is written (NIO sets TCP_NODELAY)
        Self.cork(context.channel, true)
        context.write(wrapOutboundOut(.head(head)), promise: promise)
        let sent = context.eventLoop.makePromise(of: Void.self)
        let channel = context.channel
        sent.futureResult.whenComplete { _ in
            Self.close(handle)
            Self.cork(channel, false)
        }
        codec.write(NIOAny(HTTPServerResponsePart.body(.fileRegion(region))), promise: sent)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if let registered { _ = Self.handOvers.withLock { $0.removeValue(forKey: registered) } }
        registered = nil
        handOver.closeAll()
        codec = nil
    }

    /// Sets `TCP_CORK` on the connection's socket. Only how the bytes are cut into segments
    /// depends on it: a socket that refuses it sends them as before.
    private static func cork(_ channel: any Channel, _ on: Bool) {
        do {
            try channel.syncOptions?.setOption(.tcpOption(.init(rawValue: TCP_CORK)), value: on ? 1 : 0)
        } catch {
            // Not a TCP socket (or closed): nothing to hold back.
        }
    }

    /// Closes a file that was only read; closing it cannot lose anything, so its error is not
    /// the client's or the user's.
    private static func close(_ handle: NIOFileHandle) {
        do { try handle.close() } catch {}
    }
}
