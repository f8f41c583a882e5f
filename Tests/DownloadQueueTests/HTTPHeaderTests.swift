import BookCacheTestSupport
import Foundation
import Testing

@testable import DownloadQueue

/// A header cannot carry a second header or request: every control character in a value is
/// refused where the header is made, and libcurl is never handed one built another way.
@Suite("HTTPHeader refuses what would end a header line")
struct HTTPHeaderTests {
    static let smuggling = [
        "v\r\nX-Injected: yes",  // "\r\n" is one Character: a check over Characters misses it
        "v\nX-Injected: yes", "v\rX-Injected: yes", "v\u{0}x", "v\u{7F}", "v\u{1B}[31m", "\r\n", "v\u{0B}x", "v\u{0C}x",
    ]

    @Test("values with CR, LF, CRLF, NUL, DEL or another control character are refused, by name and value; tab and non-ASCII text are kept")
    func values() throws {
        for value in Self.smuggling {
            #expect(throws: InvalidHTTPHeader.self, "\(value.debugDescription)") { try HTTPHeader(name: "X-A", value: value) }
            #expect(throws: InvalidHTTPHeader.self, "\(value.debugDescription)") { try HTTPHeader(parsing: "X-A: " + value) }
        }
        let error = try #require(throws: InvalidHTTPHeader.self) { try HTTPHeader(name: "X-A", value: "v\r\nX-Injected: yes") }
        #expect(error.message.contains("line break") && error.message.contains("X-A"), "\(error.message)")
        #expect(try HTTPHeader(name: "X-A", value: "a\tb").value == "a\tb")
        #expect(try HTTPHeader(name: "X-Title", value: "Bücher 书").value == "Bücher 书")
        for name in ["X-A\r\nX-B", "X A", "X:A", "", "X\u{0}"] {
            #expect(throws: InvalidHTTPHeader.self, "\(name.debugDescription)") { try HTTPHeader(name: name, value: "v") }
        }
    }

    @Test("a header decoded from JSON is checked as one made in code")
    func decoded() throws {
        let json = Data(#"{"name": "X-A", "value": "v\r\nX-Injected: yes"}"#.utf8)
        #expect(throws: (any Error).self) { try JSONDecoder().decode(HTTPHeader.self, from: json) }
    }

    @Test("the transport refuses a raw header with a line break and sends nothing")
    func transportRefusesRawHeaders() async throws {
        try await withServerAndDirectory(files: ["b": Data("body".utf8)]) { server, _ in
            let url = try #require(URL(string: "\(server.baseURL)/b"))
            for value in Self.smuggling {
                let error = await #expect(throws: DownloadError.self) {
                    _ = try await CurlTransport.shared.send(TransportRequest(url: url, headers: [("X-A", value)]))
                }
                #expect(error?.kind == .invalidRequest, "\(value.debugDescription)")
            }
            await #expect(throws: DownloadError.self) {
                _ = try await CurlTransport.shared.send(TransportRequest(url: url, headers: [("X-A\r\nX-B", "v")]))
            }
            #expect(server.requests.isEmpty, "nothing reached the server: \(server.requests.map(\.path))")
        }
    }
}
