import DownloadQueue
import Testing

/// A suite trait for white-box tests of the index's blocking layers (SQLite, the store): their
/// tests call it from their own tasks on purpose, which debug builds otherwise stop (the check
/// that keeps blocking calls off the cooperative pool). Suites of the library's async paths do
/// not take it, so their blocking calls stay checked.
struct BlockingInternals: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        try await BlockingWork.$testMayBlock.withValue(true) { try await function() }
    }
}

extension Trait where Self == BlockingInternals {
    /// The suite's tests call the index's blocking layers from their own tasks.
    static var blockingInternals: Self { BlockingInternals() }
}
