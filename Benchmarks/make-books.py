#!/usr/bin/env python3
"""Writes COUNT valid EPUBs of about SIZE bytes each into DIR, for benchmarks.

    python3 Benchmarks/make-books.py DIR COUNT SIZE [PREFIX]

Each book has the EPUB container entries and one stored (uncompressed) chapter of random-ish
bytes, so its size is close to SIZE and validation reads every byte.
"""
import os
import sys
import zipfile

CONTAINER = b"""<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
"""
OPF = b"""<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Bench</dc:title><dc:identifier id="id">bench</dc:identifier>
<dc:language>en</dc:language></metadata><manifest><item id="c" href="c.bin" media-type="application/octet-stream"/></manifest>
<spine><itemref idref="c"/></spine></package>
"""


def main():
    directory, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    prefix = sys.argv[4] if len(sys.argv) > 4 else "book"
    os.makedirs(directory, exist_ok=True)
    block = os.urandom(1 << 20)
    for i in range(count):
        path = os.path.join(directory, f"{prefix}{i}.epub")
        if os.path.exists(path) and abs(os.path.getsize(path) - size) < 4096:
            continue
        with zipfile.ZipFile(path, "w") as z:
            z.writestr(zipfile.ZipInfo("mimetype", (2024, 1, 1, 0, 0, 0)), b"application/epub+zip", zipfile.ZIP_STORED)
            z.writestr(zipfile.ZipInfo("META-INF/container.xml", (2024, 1, 1, 0, 0, 0)), CONTAINER, zipfile.ZIP_DEFLATED)
            z.writestr(zipfile.ZipInfo("OEBPS/content.opf", (2024, 1, 1, 0, 0, 0)), OPF, zipfile.ZIP_DEFLATED)
            info = zipfile.ZipInfo("OEBPS/c.bin", (2024, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_STORED
            target = max(0, size - 900)
            with z.open(info, "w", force_zip64=target > (1 << 31)) as out:
                written = 0
                salt = i.to_bytes(8, "little")
                while written < target:
                    chunk = block[: min(len(block), target - written)]
                    out.write(salt + chunk[8:] if written == 0 and len(chunk) > 8 else chunk)
                    written += len(chunk)


if __name__ == "__main__":
    main()
