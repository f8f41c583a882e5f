import Foundation

/// Checks a PDF's structure at both ends: `%PDF-` near the start; `startxref` and `%%EOF` near
/// the end, which a truncated download loses. Trailing whitespace or junk after `%%EOF` is
/// accepted, as readers do.
struct PDFValidator {
    static let window = 1024

    func validate(path: String) throws(ValidationFailure) {
        guard let size = FileSystem.fileSize(URL(fileURLWithPath: path)) else {
            throw ValidationFailure("cannot read the file")
        }
        let head = try FileBytes.read(path: path, offset: 0, count: Self.window)
        guard let headerRange = head.firstRange(of: Array("%PDF-".utf8)) else {
            throw ValidationFailure("no %PDF- header in the first 1 KiB")
        }
        let versionStart = headerRange.upperBound
        guard versionStart + 2 < head.count, head[versionStart].isASCIIDigit, head[versionStart + 1] == UInt8(ascii: "."),
            head[versionStart + 2].isASCIIDigit
        else {
            throw ValidationFailure("the %PDF- header has no version number")
        }
        let tailStart = max(0, size - Int64(Self.window))
        let tail = try FileBytes.read(path: path, offset: tailStart, count: Self.window)
        guard let eofRange = tail.lastRange(of: Array("%%EOF".utf8)) else {
            throw ValidationFailure("no %%EOF marker at the end; the PDF is truncated")
        }
        guard let xrefRange = tail[..<eofRange.lowerBound].lastRange(of: Array("startxref".utf8)) else {
            throw ValidationFailure("no startxref before the final %%EOF; the PDF is truncated or damaged")
        }
        let digits = tail[xrefRange.upperBound..<eofRange.lowerBound].drop { $0.isASCIIWhitespace }.prefix { $0.isASCIIDigit }
        guard !digits.isEmpty, let offset = Int64(String(decoding: digits, as: UTF8.self)), offset < size else {
            throw ValidationFailure("startxref does not give an offset inside the file")
        }
    }
}

extension UInt8 {
    var isASCIIDigit: Bool { self >= 0x30 && self <= 0x39 }
    var isASCIIWhitespace: Bool { self == 0x20 || self == 0x0A || self == 0x0D || self == 0x09 || self == 0x0C || self == 0x00 }
}

extension Collection where Element == UInt8, Index == Int {
    /// The last occurrence of `pattern`.
    func lastRange(of pattern: [UInt8]) -> Range<Int>? {
        guard pattern.count <= count else { return nil }
        var start = endIndex - pattern.count
        while start >= startIndex {
            if self[start..<(start + pattern.count)].elementsEqual(pattern) { return start..<(start + pattern.count) }
            start -= 1
        }
        return nil
    }
}
