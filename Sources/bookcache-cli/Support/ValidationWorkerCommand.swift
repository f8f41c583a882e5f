/// The argument that makes `bookcache` a validation worker (``BookCache/ValidationWorker``): the
/// command line and `bookcache serve` judge every book in such workers, started from their own
/// executable (`/proc/self/exe`, so an upgrade on disk never mixes versions).
enum ValidationWorkerCommand {
    static let name = "validation-worker"
}
