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
        return (try OpenFile(url.path), url)
    }

    func marked(length: Int, file number: UInt64) -> HTTPResponse {
        var head = HTTPResponse(status: .partialContent)
        head.headerFields[.contentLength] = String(length)
        head.headerFields[FileRegionHandler.marker] = String(number)
        return head
    }

    /// The connection's hand-over, as a route finds it.
    func handOver(_ channel: EmbeddedChannel) throws -> FileRegionHandler.HandOver {
        try #require(FileRegionHandler.handOver(for: channel))
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
            let number = try handOver(channel).put(FileRegionHandler.Send(file: file, offset: 2, length: 5))
            try channel.writeOutbound(HTTPResponsePart.head(marked(length: 5, file: number)))
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

    @Test("two files handed over before either head is written (pipelined requests): each head carries its own file")
    func eachHeadItsOwnFile() throws {
        let (channel, _) = try connection()
        let (first, firstURL) = try file("first book")
        let (second, secondURL) = try file("SECOND")
        defer { for url in [firstURL, secondURL] { try? FileManager.default.removeItem(at: url) } }
        let handOver = try handOver(channel)
        let one = handOver.put(FileRegionHandler.Send(file: first, offset: 0, length: 10))
        let two = handOver.put(FileRegionHandler.Send(file: second, offset: 0, length: 6))
        try channel.writeOutbound(HTTPResponsePart.head(marked(length: 10, file: one)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(try sent(channel, file: firstURL).text.hasSuffix("\r\n\r\nfirst book"))
        try channel.writeOutbound(HTTPResponsePart.head(marked(length: 6, file: two)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(try sent(channel, file: secondURL).text.hasSuffix("\r\n\r\nSECOND"))
        _ = try channel.finish()
    }

    @Test("a file handed over for a response never sent is closed when a later one is taken, and no head can carry it")
    func unsentFileIsDropped() throws {
        let (channel, _) = try connection()
        let (secret, secretURL) = try file("secret")
        let (book, bookURL) = try file("book")
        defer { for url in [secretURL, bookURL] { try? FileManager.default.removeItem(at: url) } }
        let handOver = try handOver(channel)
        let unsent = handOver.put(FileRegionHandler.Send(file: secret, offset: 0, length: 6))
        // A middleware answered instead: a head without the mark, with its own body
        var other = HTTPResponse(status: .forbidden)
        other.headerFields[.contentLength] = "2"
        try channel.writeOutbound(HTTPResponsePart.head(other))
        try channel.writeOutbound(HTTPResponsePart.body(ByteBuffer(string: "no")))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(try sent(channel).text.hasSuffix("\r\n\r\nno"))
        let next = handOver.put(FileRegionHandler.Send(file: book, offset: 0, length: 4))
        try channel.writeOutbound(HTTPResponsePart.head(marked(length: 4, file: next)))
        try channel.writeOutbound(HTTPResponsePart.end(nil))
        #expect(try sent(channel, file: bookURL).text.hasSuffix("\r\n\r\nbook"))
        #expect(secret.takeDescriptor() == nil, "closed when the later file was taken")
        // A head marked with the unsent file's number has no file: the connection closes rather than send a wrong body
        #expect(throws: FileRegionHandler.Unavailable.self) {
            try channel.writeOutbound(HTTPResponsePart.head(marked(length: 6, file: unsent)))
        }
        #expect(!channel.isActive)
        #expect(try sent(channel).regions == 0)
    }

    @Test("files still waiting when the connection goes are closed, and the connection's hand-over is gone")
    func closedConnectionClosesFiles() throws {
        try withConnection(file: "abc") { channel, file, _ in
            _ = try handOver(channel).put(FileRegionHandler.Send(file: file, offset: 0, length: 3))
            _ = try channel.finish()
            #expect(file.takeDescriptor() == nil)
            #expect(FileRegionHandler.handOver(for: channel) == nil)
        }
    }

    @Test("on a connection without the HTTP/1 codec there is no hand-over: the route reads the file itself")
    func withoutCodecNoHandOver() throws {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(FileRegionHandler())
        #expect(FileRegionHandler.handOver(for: channel) == nil)
        _ = try channel.finish()
    }
}
