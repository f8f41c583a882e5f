import CBookCacheShims
import Foundation

/// zlib's CRC-32 of `bytes`, for the stored ZIPs the tests build.
public func zlibCRC32<C: Collection<UInt8>>(_ bytes: C) -> UInt32 {
    Array(bytes).withUnsafeBytes { bookcache_crc32(0, $0.baseAddress, UInt64($0.count)) }
}

/// Builds ZIP archives of stored (uncompressed) entries, for tests that need archives larger
/// than the checked-in fixtures.
public enum StoredZIP {
    /// A one-chapter EPUB whose package document (`content.opf`) has `metadata` after its
    /// identifier and title: `<dc:language>`, `<dc:date>` and the like.
    public static func epub(metadata: String) -> Data {
        let opf = """
            <?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
            <metadata xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:opf="http://www.idpf.org/2007/opf">
            <dc:identifier id="id">x</dc:identifier><dc:title>T</dc:title>\(metadata)</metadata>
            <manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c"/></spine></package>
            """
        let container =
            #"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#
        return Data(
            make([
                ("mimetype", Array("application/epub+zip".utf8)), ("META-INF/container.xml", Array(container.utf8)),
                ("content.opf", Array(opf.utf8)),
                ("c.xhtml", Array("<html xmlns=\"http://www.w3.org/1999/xhtml\"><body><p>x</p></body></html>".utf8)),
            ]))
    }

    /// An archive holding `entries` in order, each stored with its CRC-32.
    public static func make(_ entries: [(name: String, bytes: [UInt8])]) -> [UInt8] {
        var out: [UInt8] = []
        var central: [UInt8] = []
        for entry in entries {
            let name = Array(entry.name.utf8)
            let crc = zlibCRC32(entry.bytes)
            let offset = UInt32(out.count)
            // Local header: signature, version 2.0, no flags, stored, no time, CRC, sizes, name.
            out += le32(0x0403_4b50) + le16(20) + le16(0) + le16(0) + le16(0) + le16(0x21)
            out += le32(crc) + le32(UInt32(entry.bytes.count)) + le32(UInt32(entry.bytes.count))
            out += le16(UInt16(name.count)) + le16(0) + name + entry.bytes
            central += le32(0x0201_4b50) + le16(20) + le16(20) + le16(0) + le16(0) + le16(0) + le16(0x21)
            central += le32(crc) + le32(UInt32(entry.bytes.count)) + le32(UInt32(entry.bytes.count))
            central += le16(UInt16(name.count)) + le16(0) + le16(0) + le16(0) + le16(0) + le32(0) + le32(offset) + name
        }
        let directoryOffset = UInt32(out.count)
        out += central
        out += le32(0x0605_4b50) + le16(0) + le16(0) + le16(UInt16(entries.count)) + le16(UInt16(entries.count))
        out += le32(UInt32(central.count)) + le32(directoryOffset) + le16(0)
        return out
    }

    /// A valid EPUB whose one chapter is `chapter`, stored.
    public static func epub(chapter: [UInt8]) -> [UInt8] {
        epub(files: [("OEBPS/images.bin", chapter)])
    }

    /// A valid EPUB holding `files` after its container entries, stored; every file under
    /// `OEBPS/` is in the spine.
    public static func epub(files: [(name: String, bytes: [UInt8])]) -> [UInt8] {
        let items = files.enumerated().filter { $0.element.name.hasPrefix("OEBPS/") }.map { position, file in
            (id: "f\(position)", href: String(file.name.dropFirst("OEBPS/".count)))
        }
        let manifest = items.map { #"<item id="\#($0.id)" href="\#($0.href)" media-type="application/octet-stream"/>"# }.joined()
        let spine = items.map { #"<itemref idref="\#($0.id)"/>"# }.joined()
        let container = """
            <?xml version="1.0"?>
            <container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
            <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
            </container>
            """
        let opf = """
            <?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
            <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Big</dc:title><dc:identifier id="id">big</dc:identifier></metadata>
            <manifest>\(manifest)</manifest><spine>\(spine)</spine></package>
            """
        return make(
            [
                ("mimetype", Array("application/epub+zip".utf8)),
                ("META-INF/container.xml", Array(container.utf8)),
                ("OEBPS/content.opf", Array(opf.utf8)),
            ] + files)
    }

    /// Deterministic pseudo-random bytes.
    public static func noise(count: Int, seed: UInt64) -> [UInt8] {
        var state = seed | 1
        var bytes = [UInt8](repeating: 0, count: count)
        for index in 0..<count {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            bytes[index] = UInt8(truncatingIfNeeded: state)
        }
        return bytes
    }

    private static func le16(_ value: UInt16) -> [UInt8] { [UInt8(value & 0xFF), UInt8(value >> 8)] }
    private static func le32(_ value: UInt32) -> [UInt8] { le16(UInt16(value & 0xFFFF)) + le16(UInt16(value >> 16)) }
}
