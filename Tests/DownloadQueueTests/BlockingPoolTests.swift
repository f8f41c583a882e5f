import Dispatch
import Foundation
import Synchronization
import Testing

@testable import DownloadQueue

/// Waits on a semaphore from async code without blocking the cooperative pool; `false` after
/// 60 seconds, so a deadlock fails the test instead of hanging it.
private func arrived(_ semaphore: DispatchSemaphore) async -> Bool {
    await Task.detached { semaphore.wait(timeout: .now() + 60) == .success }.value
}

@Suite("The blocking pool: fixed size, lifecycle, and fan-out that cannot deadlock it")
struct BlockingPoolTests {
    @Test("a pool of two runs two pieces of work at once, never three")
    func fixedSize() async throws {
        let pool = BlockingPool(size: 2, label: "test.fixed")
        let running = Mutex((now: 0, most: 0))
        let started = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        for _ in 0..<5 {
            pool.submit { _ in
                running.withLock {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                started.signal()
                release.wait()
                running.withLock { $0.now -= 1 }
            }
        }
        // Two must be running before any is let go; then one more starts per one released.
        #expect(await arrived(started))
        #expect(await arrived(started))
        for _ in 0..<3 {
            release.signal()
            #expect(await arrived(started))
        }
        release.signal()
        release.signal()
        await pool.shutdownGracefully()
        #expect(running.withLock { $0.most } == 2)
    }

    @Test("shutting down runs the queued work, then refuses more")
    func lifecycle() async throws {
        let pool = BlockingPool(size: 1, label: "test.lifecycle")
        let ran = Mutex(0)
        let release = DispatchSemaphore(value: 0)
        pool.submit { _ in release.wait() }
        for _ in 0..<10 {
            pool.submit { state in
                if case .active = state { ran.withLock { $0 += 1 } }
            }
        }
        async let stopped: Void = pool.shutdownGracefully()
        release.signal()
        await stopped
        #expect(ran.withLock { $0 } == 10, "work queued before the shutdown ran")
        await #expect(throws: BlockingPool.Inactive.self) {
            try await pool.runIfActive { 1 }
        }
        let told = Mutex<BlockingPool.WorkState?>(nil)
        pool.submit { state in told.withLock { $0 = state } }
        #expect(told.withLock { if case .cancelled = $0 { true } else { false } })
        await pool.shutdownGracefully()  // a second shutdown returns at once
    }

    @Test("lanes on a pool whose only thread is taken still all run, nested too")
    func lanesNeverWaitForUnstartedWork() async throws {
        let pool = BlockingPool(size: 1, label: "test.lanes")
        let release = DispatchSemaphore(value: 0)
        pool.submit { _ in release.wait() }
        let ran = Mutex(Set<Int>())
        let done = DispatchSemaphore(value: 0)
        // From a thread of its own, as blocking code calls it.
        Thread {
            Lanes.run(3, on: pool) { outer in
                Lanes.run(2, on: pool) { inner in
                    ran.withLock { _ = $0.insert(outer * 10 + inner) }
                }
            }
            done.signal()
        }.start()
        // With the pool's one thread blocked, only the calling thread can run the lanes.
        #expect(await arrived(done), "Lanes waited for lanes no thread had started")
        #expect(ran.withLock { $0 } == [0, 1, 10, 11, 20, 21])
        release.signal()
        await pool.shutdownGracefully()
    }

    @Test("lanes return their results in lane order")
    func lanesInOrder() async throws {
        let values = await BlockingWork.run { Lanes.map(8) { $0 * $0 } }
        #expect(values == (0..<8).map { $0 * $0 })
    }

    @Test("a hand-off consumes every value once, in order, even when no consumer can start")
    func handoffOrderWithoutAThread() async throws {
        let pool = BlockingPool(size: 1, label: "test.handoff")
        let release = DispatchSemaphore(value: 0)
        pool.submit { _ in release.wait() }
        let consumed = Mutex<[Int]>([])
        let done = DispatchSemaphore(value: 0)
        Thread {
            let handoff = Handoff<Int>(depth: 2, pool: pool) { value in consumed.withLock { $0.append(value) } }
            for value in 0..<100 { handoff.put(value) }
            handoff.finish()
            done.signal()
        }.start()
        #expect(await arrived(done), "the producer waited for a consumer that could not start")
        #expect(consumed.withLock { $0 } == Array(0..<100))
        release.signal()
        await pool.shutdownGracefully()
    }

    @Test("a hand-off with free threads: consumers on the pool, in order, at most depth waiting")
    func handoffOnThePool() async throws {
        let pool = BlockingPool(size: 4, label: "test.handoff-pool")
        let consumed = Mutex<[Int]>([])
        let concurrent = Mutex((now: 0, most: 0))
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            pool.submit { _ in
                let handoff = Handoff<Int>(depth: 3, pool: pool) { value in
                    concurrent.withLock {
                        $0.now += 1
                        $0.most = max($0.most, $0.now)
                    }
                    consumed.withLock { $0.append(value) }
                    concurrent.withLock { $0.now -= 1 }
                }
                for value in 0..<10_000 { handoff.put(value) }
                handoff.finish()
                continuation.resume()
            }
        }
        #expect(consumed.withLock { $0 } == Array(0..<10_000))
        #expect(concurrent.withLock { $0.most } == 1, "values are consumed one at a time")
        await pool.shutdownGracefully()
    }

    @Test("the pool's threads carry its name where ps, top, perf and gdb read it (the kernel's, 15 bytes)")
    func threadName() async throws {
        let pool = BlockingPool(size: 1, label: "test-pool-name")
        let name = try await pool.runIfActive { try String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8) }
        #expect(name.trimmingCharacters(in: .newlines) == "test-pool-name")
        #expect(BlockingPool.shared.label.utf8.count <= 15, "longer names are cut by the kernel")
        await pool.shutdownGracefully()
    }

    actor Counter {
        private let executor: BlockingWork.SerialExecutor
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        private(set) var count = 0
        private(set) var threads = Set<pthread_t>()

        init(pool: BlockingPool) {
            executor = BlockingWork.SerialExecutor(pool: pool)
        }

        func increment() {
            count += 1
            threads.insert(pthread_self())
        }
    }

    @Test("an actor on the pool's serial executor runs every call, on the pool's thread")
    func serialExecutor() async throws {
        let pool = BlockingPool(size: 1, label: "test.executor")
        let poolThread = try await pool.runIfActive { pthread_self() }
        let counter = Counter(pool: pool)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 {
                group.addTask { await counter.increment() }
            }
        }
        #expect(await counter.count == 1000)
        #expect(await counter.threads == [poolThread])
        await pool.shutdownGracefully()
    }
}
