import CBookCacheShims
import Foundation

/// Books and feeds made to hurt whatever judges them, one class each (issue 55's red team): a
/// page tree deeper than a stack, streams that decode to gigabytes, a file whose repair a naive
/// scan makes quadratic, and XML in UTF-16 that declares entities.
public enum HostileBooks {
    /// A PDF whose page tree is `levels` `/Pages` nodes deep, each `/Kids` holding the next, the
    /// last holding one page; a reader's recursive walk overflows its stack at about 20,000.
    public static func deepPageTree(levels: Int) -> [UInt8] {
        var objects: [String] = []
        // 1: catalog; 2…levels+1: the /Pages chain; levels+2: the page; levels+3: its content.
        objects.append("<< /Type /Catalog /Pages 2 0 R >>")
        for level in 0..<levels {
            let number = 2 + level
            let parent = level == 0 ? "" : " /Parent \(number - 1) 0 R"
            objects.append("<< /Type /Pages /Kids [\(number + 1) 0 R] /Count 1\(parent) >>")
        }
        let page = levels + 2
        objects.append("<< /Type /Page /Parent \(page - 1) 0 R /MediaBox [0 0 200 200] /Contents \(page + 1) 0 R >>")
        let content = "BT /F1 12 Tf 20 100 Td (deep) Tj ET"
        objects.append("<< /Length \(content.utf8.count) >>\nstream\n\(content)\nendstream")
        return pdf(objects.map { Array($0.utf8) })
    }

    /// A PDF whose one page is drawn from a stream stored under `layers` `/FlateDecode` filters
    /// that decodes to `decodedBytes` zeros (a few KiB stored for gigabytes decoded), with
    /// `/DecodeParms` (a PNG predictor, as images carry) when `predictor` is set.
    public static func nestedFlate(layers: Int, decodedBytes: Int, predictor: Bool = false) -> [UInt8] {
        let chunk = [UInt8](repeating: 0, count: 1 << 20)
        var data = deflate(chunk, repeat: max(1, decodedBytes / chunk.count))
        for _ in 1..<max(1, layers) { data = deflate(data, repeat: 1) }
        let filter = "[" + Array(repeating: "/FlateDecode", count: max(1, layers)).joined(separator: " ") + "]"
        // A predictor of 2 is TIFF's: it keeps the row's bytes (zeros stay zeros) whatever the columns.
        let parms =
            predictor
            ? " /DecodeParms [" + Array(repeating: "null", count: max(1, layers) - 1).map { $0 + " " }.joined()
                + "<< /Predictor 2 /Columns 1024 /Colors 1 /BitsPerComponent 8 >>]" : ""
        let objects: [[UInt8]] = [
            Array("<< /Type /Catalog /Pages 2 0 R >>".utf8),
            Array("<< /Type /Pages /Kids [3 0 R] /Count 1 >>".utf8),
            Array("<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>".utf8),
            Array("<< /Length \(data.count) /Filter \(filter)\(parms) >>\nstream\n".utf8) + data + Array("\nendstream".utf8),
        ]
        return pdf(objects)
    }

    /// A "PDF" of `count` `/Type /Catalog` and no object, ending as if written to its end: a
    /// repair that looks back to the file's start for `obj` once per catalog is quadratic.
    public static func catalogsWithoutObjects(count: Int) -> [UInt8] {
        var bytes = Array("%PDF-1.4\n".utf8)
        let line = Array("/Type /Catalog\n".utf8)
        bytes.reserveCapacity(bytes.count + line.count * count + 32)
        for _ in 0..<count { bytes += line }
        return bytes + Array("startxref\n0\n%%EOF\n".utf8)
    }

    /// XML text in UTF-16, little-endian or big-endian, with or without its byte order mark.
    public static func utf16(_ text: String, bigEndian: Bool = false, byteOrderMark: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = byteOrderMark ? (bigEndian ? [0xFE, 0xFF] : [0xFF, 0xFE]) : []
        for unit in text.utf16 {
            let high = UInt8(unit >> 8)
            let low = UInt8(unit & 0xFF)
            bytes += bigEndian ? [high, low] : [low, high]
        }
        return bytes
    }

    /// An internal subset declaring one entity of `size` characters, and `references` uses of it:
    /// what a parser that expands entities turns into `size × references` characters.
    public static func entityExpansion(size: Int, references: Int) -> (doctype: String, uses: String) {
        let doctype = "<!DOCTYPE package [<!ENTITY big \"\(String(repeating: "a", count: size))\">]>"
        return (doctype, String(repeating: "&big;", count: references))
    }

    /// An EPUB whose package document is `opf` as bytes (any encoding).
    public static func epub(packageDocument opf: [UInt8]) -> Data {
        let container =
            #"<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>"#
        return Data(
            StoredZIP.make([
                ("mimetype", Array("application/epub+zip".utf8)), ("META-INF/container.xml", Array(container.utf8)),
                ("content.opf", opf),
                ("c.xhtml", Array("<html xmlns=\"http://www.w3.org/1999/xhtml\"><body><p>x</p></body></html>".utf8)),
            ]))
    }

    /// A package document that declares an entity in its internal subset and uses it in its title.
    public static func packageDocumentWithEntity(encodingDeclaration: String, size: Int = 1000, references: Int = 1000) -> String {
        let (doctype, uses) = entityExpansion(size: size, references: references)
        return """
            <?xml version="1.0" encoding="\(encodingDeclaration)"?>
            \(doctype.replacingOccurrences(of: "package [", with: "package ["))
            <package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
            <metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier><dc:title>\(uses)</dc:title></metadata>
            <manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c"/></spine></package>
            """
    }

    /// An Atom feed that declares an entity in its internal subset and uses it in an entry's title,
    /// with one acquisition link to `bookURL`.
    public static func feedWithEntity(encodingDeclaration: String, bookURL: String, size: Int = 1000, references: Int = 1000) -> String {
        let (_, uses) = entityExpansion(size: size, references: references)
        return """
            <?xml version="1.0" encoding="\(encodingDeclaration)"?>
            <!DOCTYPE feed [<!ENTITY big "\(String(repeating: "a", count: size))">]>
            <feed xmlns="http://www.w3.org/2005/Atom"><id>urn:x</id><title>Hostile</title><updated>2026-01-01T00:00:00Z</updated>
            <entry><id>urn:book</id><title>\(uses)</title><updated>2026-01-01T00:00:00Z</updated>
            <link rel="http://opds-spec.org/acquisition" href="\(bookURL)" type="application/epub+zip"/></entry></feed>
            """
    }

    /// `objects` (numbered from 1) as a PDF with a correct cross-reference table.
    public static func pdf(_ objects: [[UInt8]]) -> [UInt8] {
        var out = Array("%PDF-1.7\n%\u{00E2}\u{00E3}\n".utf8)
        var offsets: [Int] = []
        for (index, object) in objects.enumerated() {
            offsets.append(out.count)
            out += Array("\(index + 1) 0 obj\n".utf8) + object + Array("\nendobj\n".utf8)
        }
        let xref = out.count
        var table = "xref\n0 \(objects.count + 1)\n0000000000 65535 f \n"
        for offset in offsets { table += String(format: "%010d 00000 n \n", offset) }
        table += "trailer\n<< /Size \(objects.count + 1) /Root 1 0 R >>\nstartxref\n\(xref)\n%%EOF\n"
        return out + Array(table.utf8)
    }

    /// `bytes` repeated `repeat` times, deflated in zlib's format.
    public static func deflate(_ bytes: [UInt8], repeat count: Int) -> [UInt8] {
        var out: UnsafeMutableRawPointer?
        var outCount: UInt64 = 0
        let status = bytes.withUnsafeBytes { bookcache_deflate_repeated($0.baseAddress, UInt64($0.count), UInt64(count), &out, &outCount) }
        precondition(status == 0, "zlib could not deflate")
        defer { free(out) }
        return [UInt8](UnsafeRawBufferPointer(start: out, count: Int(outCount)))
    }
}
