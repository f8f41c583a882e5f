import BookCacheTestSupport
import Foundation
import Testing

/// The harness that runs the CLI and real servers must end however its children behave: CI once
/// hung for 90 minutes on a fresh machine because `tmux new-session` left its server holding a
/// descriptor Foundation's `Process` watches, so the finished client was never reaped.
@Suite("The test harness's child processes")
struct ProcessRunnerTests {
    @Test("a child gets standard input, output and error and no other descriptor of the test process")
    func onlyStandardDescriptors() async throws {
        // Descriptors the test process holds at the time: a listening socket and a pipe.
        let server = TestHTTPServer()
        try await server.start()
        defer { Task { try? await server.shutdown() } }
        let pipe = Pipe()
        defer { try? pipe.fileHandleForWriting.close() }
        let result = try await ProcessRunner.run(at: URL(fileURLWithPath: "/bin/ls"), ["-1", "/proc/self/fd"])
        #expect(result.status == 0, "\(result.stderr)")
        // 3 is the folder ls itself opened to list
        #expect(result.stdout.split(separator: "\n") == ["0", "1", "2", "3"], "\(result.stdout)")
    }

    @Test("a child that leaves a process running in the background is waited for once it ends")
    func backgroundGrandchild() async throws {
        let marker = "bookcache-harness-\(UUID().uuidString.prefix(8))"
        // The grandchild sleeps on, with its output sent elsewhere, as a daemon does.
        let result = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/bin/bash"), ["-c", "(exec -a \(marker) sleep 600) >/dev/null 2>&1 </dev/null & echo started"])
        #expect(result.status == 0)
        #expect(result.stdout == "started\n")
        let left = try await ProcessRunner.run(at: URL(fileURLWithPath: "/usr/bin/pkill"), ["-f", marker])
        #expect(left.status == 0, "the grandchild was still running, as it should be, until it was stopped here")
    }

    @Test("a grandchild that keeps the output pipe open does not keep the wait from ending")
    func grandchildHoldsPipe() async throws {
        let marker = "bookcache-harness-\(UUID().uuidString.prefix(8))"
        let result = try await ProcessRunner.run(
            at: URL(fileURLWithPath: "/bin/bash"), ["-c", "(exec -a \(marker) sleep 600) & echo started"])
        #expect(result.status == 0)
        #expect(result.stdout == "started\n")
        let left = try await ProcessRunner.run(at: URL(fileURLWithPath: "/usr/bin/pkill"), ["-f", marker])
        #expect(left.status == 0, "the wait ended while the grandchild still held the pipe, as it should")
    }

    @Test("a child that outlives its time limit is killed with its process group, and says so")
    func timeLimit() async throws {
        let marker = "bookcache-harness-\(UUID().uuidString.prefix(8))"
        let process = try ProcessRunner.launch(
            at: URL(fileURLWithPath: "/bin/bash"), ["-c", "(exec -a \(marker) sleep 600) & echo started; wait"], timeLimit: .seconds(1))
        let result = await process.wait()
        #expect(result.status == 128 + SIGKILL)
        #expect(result.stdout == "started\n")
        #expect(result.stderr.contains("outlived its time limit"), "\(result.stderr)")
        let left = try await ProcessRunner.run(at: URL(fileURLWithPath: "/usr/bin/pgrep"), ["-f", marker])
        #expect(left.status == 1, "the grandchild in the same group was killed too: \(left.stdout)")
    }

    @Test("exit statuses: a code as given, a signal as 128 plus its number")
    func statuses() async throws {
        #expect(try await ProcessRunner.run(at: URL(fileURLWithPath: "/bin/sh"), ["-c", "exit 69"]).status == 69)
        #expect(try await ProcessRunner.run(at: URL(fileURLWithPath: "/bin/sh"), ["-c", "kill -TERM $$"]).status == 143)
        let echoed = try await ProcessRunner.launch(at: URL(fileURLWithPath: "/bin/cat"), [], stdin: Data("fed\n".utf8)).wait()
        #expect(echoed.stdout == "fed\n")
    }
}
