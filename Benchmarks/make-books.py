#!/usr/bin/env python3
"""Writes COUNT valid EPUBs of about SIZE bytes each into DIR, for benchmarks.

    python3 Benchmarks/make-books.py DIR COUNT SIZE [PREFIX] [stored|text]

Each book has the EPUB container entries and then, by kind:
- stored (the default): one stored (uncompressed) chapter of random bytes, so its size is close
  to SIZE and validation reads every byte; a CRC pass over it costs little.
- text: XHTML chapters of pseudo-English prose, deflated like a real ebook's, until the file
  reaches SIZE; a CRC pass must inflate every chapter (about three bytes of text per stored byte).
"""
import os
import random
import sys
import zipfile

WORDS = (
    "the of and to in a is that for it as was with be by on not he I this are or his from at which but have an they "
    "you were her she there one all we their been has when who will more no if out so said what up its about into "
    "than them can only other new some could time these two may then do first any my now such like our over man me "
    "even most made after also did many before must through back years where much your way well down should because "
    "each just those people how too little state good very make world still own see men work long get here between "
    "both life being under never day same another know while last might us great old year off come since against go "
    "came right used take three garden letter morning river window evening carriage sister uncle honour fortune"
).split()

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


def prose(rng, size):
    """About `size` bytes of XHTML paragraphs of random words."""
    paragraphs = []
    total = 0
    while total < size:
        words = [rng.choice(WORDS) for _ in range(rng.randint(40, 160))]
        words[0] = words[0].capitalize()
        paragraph = "<p>" + " ".join(words) + ".</p>\n"
        paragraphs.append(paragraph)
        total += len(paragraph)
    return "".join(paragraphs).encode()


def write_text_book(path, size):
    rng = random.Random(7)
    # A pool of prose reused across chapters: deflate only looks 32 KiB back, so repeats this far
    # apart compress no better than fresh text.
    pool = prose(rng, 4 << 20)
    with zipfile.ZipFile(path, "w") as z:
        write_container(z, opf=False)
        chapter = 0
        while os.path.getsize(path) < size:
            start = rng.randrange(0, len(pool) // 2)
            body = b"<?xml version='1.0'?><html xmlns='http://www.w3.org/1999/xhtml'><body>\n" + pool[start:] + pool[:start] + b"</body></html>\n"
            info = zipfile.ZipInfo(f"OEBPS/chapter{chapter}.xhtml", (2024, 1, 1, 0, 0, 0))
            z.writestr(info, body, zipfile.ZIP_DEFLATED, 6)
            z.fp.flush()
            chapter += 1
        # The package document last, listing every chapter in its spine, as a reader needs.
        items = "".join(f'<item id="c{n}" href="chapter{n}.xhtml" media-type="application/xhtml+xml"/>' for n in range(chapter))
        spine = "".join(f'<itemref idref="c{n}"/>' for n in range(chapter))
        opf = OPF.replace(b'<item id="c" href="c.bin" media-type="application/octet-stream"/>', items.encode())
        opf = opf.replace(b'<itemref idref="c"/>', spine.encode())
        z.writestr(zipfile.ZipInfo("OEBPS/content.opf", (2024, 1, 1, 0, 0, 0)), opf, zipfile.ZIP_DEFLATED)


def is_current_text_book(path, size):
    """Whether a text book made earlier is big enough and lists its chapters in its spine."""
    if not os.path.exists(path) or os.path.getsize(path) < size:
        return False
    try:
        with zipfile.ZipFile(path) as z:
            return b"chapter0.xhtml" in z.read("OEBPS/content.opf")
    except (zipfile.BadZipFile, KeyError):
        return False


def write_container(z, opf=True):
    z.writestr(zipfile.ZipInfo("mimetype", (2024, 1, 1, 0, 0, 0)), b"application/epub+zip", zipfile.ZIP_STORED)
    z.writestr(zipfile.ZipInfo("META-INF/container.xml", (2024, 1, 1, 0, 0, 0)), CONTAINER, zipfile.ZIP_DEFLATED)
    if opf:
        z.writestr(zipfile.ZipInfo("OEBPS/content.opf", (2024, 1, 1, 0, 0, 0)), OPF, zipfile.ZIP_DEFLATED)


def main():
    directory, count, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    prefix = sys.argv[4] if len(sys.argv) > 4 else "book"
    kind = sys.argv[5] if len(sys.argv) > 5 else "stored"
    os.makedirs(directory, exist_ok=True)
    block = os.urandom(1 << 20)
    for i in range(count):
        path = os.path.join(directory, f"{prefix}{i}.epub")
        if kind == "text":
            if not is_current_text_book(path, size):
                write_text_book(path, size)
            continue
        if os.path.exists(path) and abs(os.path.getsize(path) - size) < 4096:
            continue
        with zipfile.ZipFile(path, "w") as z:
            write_container(z)
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
