import Dispatch
import Foundation
import Testing

@testable import DownloadQueue

@Suite("Blocking work runs off the cooperative pool")
struct BlockingWorkTests {
    struct Refused: Error, Equatable {}

    @Test(
        "where a blocking call may run is checked: not a task on the cooperative pool; the pool's threads, an actor on its executor and a test that says so may"
    )
    func mayBlockWhere() async throws {
        #expect(!BlockingWork.mayBlock, "a test's task runs on the cooperative pool")
        #expect(await BlockingWork.run { BlockingWork.mayBlock })
        actor OnPool {
            nonisolated let executor = BlockingWork.SerialExecutor()
            nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
            func mayBlock() -> Bool { BlockingWork.mayBlock }
        }
        #expect(await OnPool().mayBlock())
        #expect(BlockingWork.$testMayBlock.withValue(true) { BlockingWork.mayBlock })
        #if DEBUG
            await #expect(processExitsWith: .failure) {
                // A task of the cooperative pool that makes one: the debug build stops there
                await Task.detached { BlockingWork.assertMayBlock("a test's blocking call") }.value
            }
        #endif
    }

    @Test("a value comes back, and an error keeps its type")
    func valuesAndErrors() async throws {
        #expect(await BlockingWork.run { 6 * 7 } == 42)
        let error = await #expect(throws: Refused.self) {
            try await BlockingWork.run { () throws(Refused) -> Int in throw Refused() }
        }
        #expect(error == Refused())
    }

    @Test("more blocked calls than the pool has threads all run at once (on the pool they would deadlock)")
    func moreThanThePool() async throws {
        // Each call blocks until every call has started. The cooperative pool has one thread per
        // core, so on it the last calls could never start; a 60-second bound turns that
        // deadlock into a failure instead of a hang.
        let count = ProcessInfo.processInfo.activeProcessorCount + 3
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let coordinator = Task.detached {
            var all = true
            for _ in 0..<count where started.wait(timeout: .now() + 60) == .timedOut { all = false }
            for _ in 0..<count { release.signal() }
            return all
        }
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<count {
                group.addTask {
                    await BlockingWork.run {
                        started.signal()
                        release.wait()
                    }
                }
            }
        }
        #expect(await coordinator.value, "every blocked call was running at the same time")
    }
}
