import CBookCacheShims
import DownloadQueue
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Deflate streams checked by zlib to their end, checksum included, as a PDF's pages meet them:
/// ``add(_:)`` each stream's stored bytes, ``finish()``, then ``firstDamage`` is the damaged
/// stream met first. With `alongside`, the checks run on other blocking-work threads (a
/// ``Handoff``) while the caller goes on walking the pages; otherwise on the caller's thread.
final class InflateChecks: Sendable {
    /// A stream's stored bytes, owned (freed with `free`) by the checks once added.
    struct Item: @unchecked Sendable {
        /// Its place in the walk: a smaller position is reported first.
        let position: Int
        let bytes: UnsafeMutablePointer<UInt8>
        let count: Int
        /// What the stream is, as the verdict starts ("the font /F1 on page 3 is damaged").
        let description: String
    }

    /// A damaged stream: where the walk met it, and the verdict.
    struct Damage: Sendable {
        let position: Int
        let reason: String
        var kind: ValidationFailure.Kind = .damaged
    }

    /// How many streams may wait for a check: past that, the walk waits for the running check (or,
    /// when none has started, checks one itself — the `Handoff`'s rule).
    private static let depth = 256

    /// The damaged stream met first, shared with the checks that run alongside.
    private final class FirstDamage: Sendable {
        let value = Mutex<Damage?>(nil)
    }

    private let damage = FirstDamage()
    private let handoff: Handoff<Item>?
    private let budget: DecodingBudget

    /// - Parameters:
    ///   - alongside: Check on other blocking-work threads.
    ///   - budget: What the streams may decode to, shared with the streams qpdf decodes.
    init(alongside: Bool, budget: DecodingBudget) {
        let damage = self.damage
        self.budget = budget
        handoff = alongside ? Handoff(depth: Self.depth) { Self.check($0, into: damage, budget: budget) } : nil
    }

    /// The damaged stream met first, among those checked so far.
    var firstDamage: Damage? { damage.value.withLock { $0 } }

    /// Checks a stream, here or alongside.
    func add(_ item: Item) {
        guard let handoff else { return Self.check(item, into: damage, budget: budget) }
        handoff.put(item)
    }

    /// Returns when every stream added has been checked.
    func finish() {
        handoff?.finish()
    }

    /// Checks `item` (unless damage was met before it) and frees its bytes.
    private static func check(_ item: Item, into damage: FirstDamage, budget: DecodingBudget) {
        defer { free(item.bytes) }
        if let earlier = damage.value.withLock({ $0 }), earlier.position < item.position { return }
        var message: UnsafePointer<CChar>?
        var produced: UInt64 = 0
        let reason: String
        var kind = ValidationFailure.Kind.damaged
        let verdict = bookcache_inflate_check(item.bytes, UInt64(item.count), budget.bound(stored: UInt64(item.count)), &produced, &message)
        budget.spend(produced)
        switch verdict {
        case 1: reason = "its compressed data is wrong (\(message.map { String(cString: $0) } ?? "zlib refuses it"))"
        case 2: reason = "its compressed data stops before its end"
        case 3:
            reason = "decodes past the limit on what a book's streams may decode to; it was not decoded further"
            kind = .tooLarge
        // Whole; or zlib could not start, for want of memory: nothing is said then.
        default: return
        }
        damage.value.withLock { damage in
            if damage.map({ $0.position > item.position }) ?? true {
                damage = Damage(position: item.position, reason: "\(item.description): \(reason)", kind: kind)
            }
        }
    }
}
