// Serves a folder (Fixtures/books by default) on 127.0.0.1 for the demo and benchmarks.
// Prints the base URL on its first line, then serves until killed.
//
//     swift run bookcache-fixture-server [DIRECTORY] [PORT]
import BookCacheTestSupport
import Foundation

let arguments = CommandLine.arguments.dropFirst()
let directory = URL(fileURLWithPath: arguments.first ?? "Fixtures/books", isDirectory: true)
let port = arguments.dropFirst().first.flatMap(Int.init) ?? 0
guard FileManager.default.fileExists(atPath: directory.path) else {
    FileHandle.standardError.write(Data("error: no such directory \(directory.path)\n".utf8))
    exit(1)
}
let server = TestHTTPServer(directory: directory)
try await server.start(port: port)
FileHandle.standardOutput.write(Data((server.baseURL + "\n").utf8))
while true {
    try await Task.sleep(for: .seconds(3600))
}
