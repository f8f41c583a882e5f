import Foundation
import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import Testing

@testable import BookCacheHTTP

/// The handler that sends book files with `sendfile`, in the pipeline Hummingbird builds for an
/// HTTP/1 connection (the NIO encoder, the HTTP types codec, then ours), on an embedded channel.
@Suite("Book files by sendfile")
struct FileRegionHandlerTests {
    /// A connection's pipeline as Hummingbird's HTTP/1 channel makes it, with the handler.
    func connection() throws -> (EmbeddedChannel, FileRegionHandler) {
        let handler = FileRegionHandler()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(HTTPResponseEncoder())
        try channel.pipeline.syncOperations.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try channel.pipeline.syncOperations.addHandler(handler)
        return (channel, handler)
    }

    /// Runs `body` with a connection and a file of `bytes` (open as a route opens a book's
    /// file), and removes the file after.
    func withConnection(file bytes: String, _ body: (EmbeddedChannel, OpenFile, URL) throws -> Void) throws {
        let (channel, _) = try connection()
        let (file, url) = try file(bytes)
        defer { try? FileManager.default.removeItem(at: url) }
        try body(channel, file, url)
    }

    /// A file of `bytes`, open as a route opens a book's file.
    func file(_ bytes: String) throws -> (OpenFile, URL) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("file-region-\(UUID().uuidString).epub")
        try Data(bytes.utf8).write(to: url)
        return (try OpenFile(url), url)
    }

    func marked(length: Int) -> HTTPResponse {
        var head = HTTPResponse(status: .partialContent)
        head.headerFields[.contentLength] = String(length)
        head.headerFields[FileRegionHandler.marker] = "1"
        return head
    }

    /// Everything written to the socket: bytes, and the file regions' bytes (read from `file`: the
    /// handler closed its descriptor when the embedded channel reported the write done).
    func sent(_ channel: EmbeddedChannel, file: URL? = nil) throws -> (text: String, regions: Int) {
        var text = ""
        var regions = 0
        while let data = try channel.readOutbound(as: IOData.self) {
            switch data {
            case .byteBuffer(let buffer):
                text += String(buffer: buffer)
            case .fileRegion(let region):
                regions += 1
                #expect(!region.fileHandle.isOpen, "closed once sent")
                let bytes = try file.map { try Data(contentsOf: $0) } ?? Data()
                text += String(decoding: bytes[region.readerIndex..<region.endIndex], as: UTF8.self)
            }
        }
        return (text, regions)
    }

    @Test("the marked response's body is the file's range, sent as a file region after the head; the mark is never sent")
    func sendsTheRange() throws {
        try withConnection(file: "0123456789") { channel, file, url in
            try channel.triggerUserOutboundEvent(FileRegionHandler.Send(file: file, offset: 2, length: 5)).wait()
            try channel.writeOutbound(HTTPResponsePart.head(marked(length: 5)))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            let (text, regions) = try sent(channel, file: url)
            #expect(regions == 1)
            #expect(text.hasPrefix("HTTP/1.1 206 Partial Content\r\n"))
            #expect(text.hasSuffix("\r\n\r\n23456"), "\(text)")
            #expect(!text.lowercased().contains("x-bookcache"), "\(text)")
            #expect(file.takeDescriptor() == nil, "the handler owns the descriptor")
            _ = try channel.finish()
        }
    }

    @Test("a response without the mark sends its own body and drops a file kept for a response never sent, so no later one carries it")
    func unmarkedDropsKeptFile() throws {
        try withConnection(file: "secret") { channel, file, url in
            try channel.triggerUserOutboundEvent(FileRegionHandler.Send(file: file, offset: 0, length: 6)).wait()
            var other = HTTPResponse(status: .forbidden)
            other.headerFields[.contentLength] = "2"
            try channel.writeOutbound(HTTPResponsePart.head(other))
            try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(string: "no")))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            #expect(try sent(channel).text.hasSuffix("\r\n\r\nno"))
            // The next marked head has no file: the connection closes rather than send a wrong body
            #expect(throws: FileRegionHandler.Unavailable.self) { try channel.writeOutbound(HTTPResponsePart.head(marked(length: 6))) }
            #expect(!channel.isActive)
            #expect(try sent(channel).regions == 0)
        }
    }

    @Test("on a connection without the HTTP/1 codec a file is refused and stays the route's, which then reads it itself")
    func withoutCodecFileStaysTheRoutes() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(FileRegionHandler())
        let (file, url) = try file("abc")
        defer { try? FileManager.default.removeItem(at: url) }
        #expect(throws: FileRegionHandler.Unavailable.self) {
            try channel.triggerUserOutboundEvent(FileRegionHandler.Send(file: file, offset: 0, length: 3)).wait()
        }
        #expect(String(buffer: try file.read(at: 0, count: 3)) == "abc")
        file.close()
        _ = try channel.finish()
    }
}
