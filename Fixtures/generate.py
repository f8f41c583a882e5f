#!/usr/bin/env python3
"""Writes the fixture books in Fixtures/books: small valid EPUB 2, EPUB 3 and PDF books; under
quirks/, books that break packaging rules no reader needs (cached with a warning, refused with
--strict); and under corrupt/, damaged or hostile variants that are refused. Deterministic:
running it again gives the same bytes.

    python3 Fixtures/generate.py
"""
import os
import struct
import zipfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
BOOKS = os.path.join(HERE, "books")
CORRUPT = os.path.join(BOOKS, "corrupt")
QUIRKS = os.path.join(BOOKS, "quirks")
DATE = (2024, 1, 1, 0, 0, 0)

CONTAINER = """<?xml version="1.0" encoding="UTF-8"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles>
    <rootfile full-path="{root}" media-type="application/oebps-package+xml"/>
  </rootfiles>
</container>
"""

OPF2 = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>{title}</dc:title><dc:language>en</dc:language><dc:identifier id="id">{ident}</dc:identifier>
  </metadata>
  <manifest>
    <item id="ch1" href="chapter1.xhtml" media-type="application/xhtml+xml"/>
    <item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>
  </manifest>
  <spine toc="ncx"><itemref idref="ch1"/></spine>
</package>
"""

OPF3 = """<?xml version="1.0" encoding="UTF-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:title>{title}</dc:title><dc:language>en</dc:language><dc:identifier id="id">{ident}</dc:identifier>
    <meta property="dcterms:modified">2024-01-01T00:00:00Z</meta>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    <item id="ch1" href="chapter1.xhtml" media-type="application/xhtml+xml"/>
  </manifest>
  <spine><itemref idref="ch1"/></spine>
</package>
"""

NCX = """<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><head/><docTitle><text>{title}</text></docTitle>
<navMap><navPoint id="p1" playOrder="1"><navLabel><text>Chapter 1</text></navLabel><content src="chapter1.xhtml"/></navPoint></navMap></ncx>
"""

NAV = """<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>{title}</title></head>
<body><nav epub:type="toc"><ol><li><a href="chapter1.xhtml">Chapter 1</a></li></ol></nav></body></html>
"""


def chapter(title, paragraphs):
    body = "\n".join(
        f"<p>{i}. It is a truth universally acknowledged that a fixture must be small, deterministic and honest.</p>"
        for i in range(paragraphs)
    )
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<html xmlns="http://www.w3.org/1999/xhtml"><head><title>{title}</title></head><body><h1>{title}</h1>
{body}
</body></html>
"""


def info(name, compress=zipfile.ZIP_DEFLATED):
    zi = zipfile.ZipInfo(name, DATE)
    zi.compress_type = compress
    zi.external_attr = 0o644 << 16
    zi.create_system = 3
    return zi


def epub_entries(title, ident, version=3, paragraphs=40):
    entries = [("mimetype", b"application/epub+zip", zipfile.ZIP_STORED)]
    entries.append(("META-INF/container.xml", CONTAINER.format(root="OEBPS/content.opf").encode(), zipfile.ZIP_DEFLATED))
    if version == 2:
        entries.append(("OEBPS/content.opf", OPF2.format(title=title, ident=ident).encode(), zipfile.ZIP_DEFLATED))
        entries.append(("OEBPS/toc.ncx", NCX.format(title=title).encode(), zipfile.ZIP_DEFLATED))
    else:
        entries.append(("OEBPS/content.opf", OPF3.format(title=title, ident=ident).encode(), zipfile.ZIP_DEFLATED))
        entries.append(("OEBPS/nav.xhtml", NAV.format(title=title).encode(), zipfile.ZIP_DEFLATED))
    entries.append(("OEBPS/chapter1.xhtml", chapter(title, paragraphs).encode(), zipfile.ZIP_DEFLATED))
    return entries


def write_zip(path, entries):
    with zipfile.ZipFile(path, "w") as z:
        for name, data, method in entries:
            z.writestr(info(name, method), data)


def replace_entry(entries, name, data=None, method=None):
    out = []
    for n, d, m in entries:
        if n == name:
            if data is None and method is None:
                continue
            out.append((n, d if data is None else data, m if method is None else method))
        else:
            out.append((n, d, m))
    return out


def pdf(title, pages=2, compress=False):
    objects = []
    objects.append("<< /Type /Catalog /Pages 2 0 R >>")
    kids = " ".join(f"{3 + i * 2} 0 R" for i in range(pages))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>")
    font_id = 3 + pages * 2
    for i in range(pages):
        content_id = 4 + i * 2
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content_id} 0 R /Resources << /Font << /F1 {font_id} 0 R >> >> >>"
        )
        text = f"BT /F1 24 Tf 72 720 Td ({title} - page {i + 1}) Tj ET"
        if compress:
            # Long enough, with a line of its own per word, that the deflated bytes hold LFs.
            text = "\n".join([text] + [f"% {w} {i}" for w in range(400)])
            objects.append(zlib.compress(text.encode(), 9))
        else:
            objects.append(f"<< /Length {len(text)} >>\nstream\n{text}\nendstream")
    objects.append("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        if isinstance(body, bytes):
            out += f"{n} 0 obj\n<< /Length {len(body)} /Filter /FlateDecode >>\nstream\n".encode() + body + b"\nendstream\nendobj\n"
        else:
            out += f"{n} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)


def pdf_file(objects):
    """A PDF 1.4 file of `objects` (bytes each, object 1 the catalog), with its cross-reference table."""
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for n, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


def pdf_with_image(flip=False):
    """One page drawing a 64 x 64 grey image kept with FlateDecode; with `flip`, one byte in
    the middle of the image's compressed data is changed (a reader's image decoder fails)."""
    pixels = bytes((x * 4 + y * 2) % 256 for y in range(64) for x in range(64))
    image = bytearray(zlib.compress(pixels, 9))
    if flip:
        image[len(image) // 2] ^= 0xFF
    content = b"q 200 0 0 200 100 400 cm /Im0 Do Q"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /XObject << /Im0 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream",
        b"<< /Type /XObject /Subtype /Image /Width 64 /Height 64 /ColorSpace /DeviceGray /BitsPerComponent 8"
        b" /Filter /FlateDecode /Length %d >>\nstream\n" % len(image) + bytes(image) + b"\nendstream",
    ]
    return pdf_file(objects)


def pdf_with_annotation(flip=False):
    """One page with a square annotation whose appearance draws a form nested in it, both kept
    with FlateDecode (as annotation tools write them); with `flip`, one byte of the nested form's
    compressed data is changed (MuPDF: "zlib error", poppler: "Unknown operator")."""
    inner = bytearray(zlib.compress(b"\n".join([b"0 0 1 rg 0 0 40 40 re f"] * 40), 9))
    if flip:
        inner[len(inner) // 2] ^= 0xFF
    outer = zlib.compress(b"q /Inner Do Q", 9)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Annots [4 0 R] >>",
        b"<< /Type /Annot /Subtype /Square /Rect [100 600 140 640] /AP << /N 5 0 R >> >>",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 40 40] /Resources << /XObject << /Inner 6 0 R >> >>"
        b" /Filter /FlateDecode /Length %d >>\nstream\n" % len(outer) + outer + b"\nendstream",
        b"<< /Type /XObject /Subtype /Form /BBox [0 0 40 40] /Filter /FlateDecode /Length %d >>\nstream\n" % len(inner)
        + bytes(inner) + b"\nendstream",
    ]
    return pdf_file(objects)


def set_flag_bits(data, name, bits):
    """Sets general-purpose flag bits of an entry in both its local and central headers."""
    data = bytearray(data)
    encoded = name.encode()
    i = 0
    while True:
        i = data.find(b"PK\x03\x04", i)
        if i < 0:
            break
        nlen = struct.unpack_from("<H", data, i + 26)[0]
        if data[i + 30 : i + 30 + nlen] == encoded:
            flags = struct.unpack_from("<H", data, i + 6)[0]
            struct.pack_into("<H", data, i + 6, flags | bits)
        i += 4
    i = 0
    while True:
        i = data.find(b"PK\x01\x02", i)
        if i < 0:
            break
        nlen = struct.unpack_from("<H", data, i + 28)[0]
        if data[i + 46 : i + 46 + nlen] == encoded:
            flags = struct.unpack_from("<H", data, i + 8)[0]
            struct.pack_into("<H", data, i + 8, flags | bits)
        i += 4
    return bytes(data)


def main():
    os.makedirs(CORRUPT, exist_ok=True)
    os.makedirs(QUIRKS, exist_ok=True)
    base3 = epub_entries("Alice in Fixtureland", "urn:bookcache:alice", version=3)
    base2 = epub_entries("Pride and Fixtures", "urn:bookcache:pride", version=2)

    # Valid books.
    write_zip(os.path.join(BOOKS, "alice.epub"), base3)
    write_zip(os.path.join(BOOKS, "pride.epub"), base2)
    with open(os.path.join(BOOKS, "fixture-monthly-2024-05.pdf"), "wb") as f:
        f.write(pdf("Fixture Monthly, May 2024", pages=3))
    # Compressed page content, as most PDFs have: what a CRLF conversion damages.
    with open(os.path.join(BOOKS, "compressed.pdf"), "wb") as f:
        f.write(pdf("Compressed content", pages=2, compress=True))
    with open(os.path.join(BOOKS, "image.pdf"), "wb") as f:
        f.write(pdf_with_image())
    with open(os.path.join(BOOKS, "annotation.pdf"), "wb") as f:
        f.write(pdf_with_annotation())
    with open(os.path.join(BOOKS, "trailing-junk.pdf"), "wb") as f:
        f.write(pdf("Trailing junk after EOF") + b"\r\n\x00\x00junk appended by a server\n")

    # Corrupt and hostile EPUBs.
    stored = replace_entry(base3, "OEBPS/chapter1.xhtml", method=zipfile.ZIP_STORED)
    path = os.path.join(CORRUPT, "crc-flip.epub")
    write_zip(path, stored)
    data = bytearray(open(path, "rb").read())
    marker = data.find(b"a truth universally")
    data[marker] ^= 0x20  # flip one bit inside the stored chapter: only its CRC can tell
    open(path, "wb").write(bytes(data))

    valid = open(os.path.join(BOOKS, "alice.epub"), "rb").read()
    open(os.path.join(CORRUPT, "truncated.epub"), "wb").write(valid[: len(valid) * 2 // 3])
    write_zip(os.path.join(CORRUPT, "no-container.epub"), replace_entry(base3, "META-INF/container.xml"))

    # Packaging quirks readers do not mind: cached with a warning, refused with --strict.
    write_zip(os.path.join(QUIRKS, "wrong-mimetype.epub"), replace_entry(base3, "mimetype", data=b"application/zip"))
    write_zip(
        os.path.join(QUIRKS, "mimetype-compressed.epub"),
        replace_entry(base3, "mimetype", method=zipfile.ZIP_DEFLATED),
    )
    # Finder and `zip -r` put META-INF/ first.
    write_zip(os.path.join(QUIRKS, "mimetype-not-first.epub"), base3[1:2] + base3[:1] + base3[2:])
    # `echo application/epub+zip > mimetype`, and a real test book's CRLF.
    write_zip(os.path.join(QUIRKS, "mimetype-newline.epub"), replace_entry(base3, "mimetype", data=b"application/epub+zip\n"))
    write_zip(os.path.join(QUIRKS, "mimetype-crlf.epub"), replace_entry(base3, "mimetype", data=b"application/epub+zip\r\n"))
    write_zip(os.path.join(QUIRKS, "no-mimetype.epub"), replace_entry(base3, "mimetype"))
    # Two names that differ only in Unicode normalisation (NFC and NFD "é"): different bytes,
    # so different entries to every ZIP reader; the spine names the NFC one.
    nfc, nfd = "OEBPS/caf\u00e9.xhtml", "OEBPS/cafe\u0301.xhtml"
    opf = OPF3.format(title="Caf\u00e9", ident="urn:bookcache:cafe").replace(
        '<item id="ch1" href="chapter1.xhtml"', '<item id="ch1" href="caf%C3%A9.xhtml"')
    write_zip(
        os.path.join(BOOKS, "nfc-nfd-names.epub"),
        replace_entry(replace_entry(base3, "OEBPS/content.opf", data=opf.encode()), "OEBPS/chapter1.xhtml")
        + [(nfc, chapter("Caf\u00e9 (NFC)", 3).encode(), zipfile.ZIP_DEFLATED),
           (nfd, chapter("Cafe\u0301 (NFD)", 3).encode(), zipfile.ZIP_DEFLATED)],
    )

    # What a reader needs from the package document: it parses, and its spine is there.
    missing = OPF3.format(title="Missing", ident="urn:bookcache:missing").replace(
        '<spine><itemref idref="ch1"/></spine>',
        '<spine><itemref idref="ch1"/><itemref idref="ch2"/></spine>').replace(
        "</manifest>", '  <item id="ch2" href="chapter2.xhtml" media-type="application/xhtml+xml"/>\n  </manifest>')
    write_zip(os.path.join(CORRUPT, "missing-spine-item.epub"), replace_entry(base3, "OEBPS/content.opf", data=missing.encode()))
    write_zip(
        os.path.join(CORRUPT, "malformed-package.epub"),
        replace_entry(base3, "OEBPS/content.opf", data=b"<package><manifest></package>"),
    )
    unknown = OPF3.format(title="Unknown", ident="urn:bookcache:unknown").replace('<itemref idref="ch1"/>', '<itemref idref="nope"/>')
    write_zip(os.path.join(CORRUPT, "spine-unknown-item.epub"), replace_entry(base3, "OEBPS/content.opf", data=unknown.encode()))
    write_zip(
        os.path.join(CORRUPT, "malformed-container.epub"),
        replace_entry(base3, "META-INF/container.xml", data=b"<container><rootfiles></container>"),
    )
    write_zip(
        os.path.join(CORRUPT, "missing-rootfile.epub"),
        replace_entry(base3, "META-INF/container.xml", data=CONTAINER.format(root="OEBPS/missing.opf").encode()),
    )
    write_zip(
        os.path.join(CORRUPT, "path-traversal.epub"),
        base3 + [("../../evil.txt", b"escaped", zipfile.ZIP_DEFLATED)],
    )
    write_zip(
        os.path.join(CORRUPT, "backslash-name.epub"),
        base3 + [("OEBPS\\evil.txt", b"windows path", zipfile.ZIP_DEFLATED)],
    )
    write_zip(os.path.join(CORRUPT, "absolute-name.epub"), base3 + [("/etc/evil.txt", b"absolute", zipfile.ZIP_DEFLATED)])
    # Duplicate names: zipfile warns but writes both.
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        write_zip(
            os.path.join(CORRUPT, "duplicate-name.epub"),
            base3 + [("OEBPS/chapter1.xhtml", b"<html/>", zipfile.ZIP_DEFLATED)],
        )
    # A zip bomb: 20 MB of zeros compress to ~20 KB (ratio ~1000).
    write_zip(os.path.join(CORRUPT, "zip-bomb.epub"), base3 + [("OEBPS/bomb.bin", b"\0" * 20_000_000, zipfile.ZIP_DEFLATED)])
    # An encrypted entry: set the "encrypted" flag bit on the chapter in both headers.
    write_zip(os.path.join(CORRUPT, "encrypted-entry.epub"), base3)
    enc = open(os.path.join(CORRUPT, "encrypted-entry.epub"), "rb").read()
    open(os.path.join(CORRUPT, "encrypted-entry.epub"), "wb").write(set_flag_bits(enc, "OEBPS/chapter1.xhtml", 0x1))
    # An extra field on mimetype.
    mz = zipfile.ZipInfo("mimetype", DATE)
    mz.compress_type = zipfile.ZIP_STORED
    mz.extra = struct.pack("<HH4s", 0xCAFE, 4, b"junk")
    with zipfile.ZipFile(os.path.join(QUIRKS, "mimetype-extra-field.epub"), "w") as z:
        z.writestr(mz, b"application/epub+zip")
        for name, data_, method in base3[1:]:
            z.writestr(info(name, method), data_)
    # A deeply nested container.xml.
    deep = b"<container>" + b"<a>" * 100 + b"</a>" * 100 + b"</container>"
    write_zip(os.path.join(CORRUPT, "deep-container.epub"), replace_entry(base3, "META-INF/container.xml", data=deep))

    # An enormous container.xml: 300 KB of whitespace inside an otherwise valid document.
    huge = CONTAINER.format(root="OEBPS/content.opf").replace("<rootfiles>", "<rootfiles>" + " " * 300_000).encode()
    write_zip(os.path.join(CORRUPT, "huge-container.epub"), replace_entry(base3, "META-INF/container.xml", data=huge))

    # Not books at all.
    open(os.path.join(CORRUPT, "error-page.epub"), "wb").write(
        b"<!DOCTYPE html>\n<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>\n"
    )
    full = pdf("Truncated PDF", pages=3)
    open(os.path.join(CORRUPT, "truncated.pdf"), "wb").write(full[: len(full) - 60])
    open(os.path.join(CORRUPT, "empty.pdf"), "wb").write(b"")
    open(os.path.join(CORRUPT, "image-byte-flipped.pdf"), "wb").write(pdf_with_image(flip=True))
    open(os.path.join(CORRUPT, "annotation-byte-flipped.pdf"), "wb").write(pdf_with_annotation(flip=True))


if __name__ == "__main__":
    main()
