import Foundation
import Testing

@testable import BookCache

@Suite("Sizes as people read them")
struct ByteFormatTests {
    /// What the sizes were written with before: `String(format: "%.1f")`, one call per size.
    func formatted(_ bytes: Int64) -> String {
        let units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"]
        var value = Double(bytes)
        var unit = 0
        while abs(value) >= 1000 && unit < units.count - 1 {
            value /= 1000
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        let text = rounded == rounded.rounded() && rounded >= 100 ? String(Int(rounded)) : String(format: "%.1f", rounded)
        return "\(text) \(units[unit])"
    }

    @Test("the same text as printf's %.1f, at every boundary and for random sizes")
    func sameAsPrintf() {
        var sizes: [Int64] = [0, 1, 999, 1000, 1049, 1050, 1051, 9_950, 99_949, 99_950, 999_949, 999_950, 999_999, 1_000_000, 65_494]
        sizes += [123_456_789, 1 << 30, 1 << 40, Int64.max, -1, -1500, -999_950]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 { sizes.append(Int64.random(in: 0...(1 << 44), using: &generator)) }
        for _ in 0..<5_000 { sizes.append(Int64.random(in: 0...2_000_000, using: &generator)) }
        for size in sizes {
            #expect(ByteFormat.string(size) == formatted(size), "\(size)")
        }
    }
}
