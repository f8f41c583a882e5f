#!/usr/bin/env python3
"""Writes a cache with COUNT books in its index (metadata.json) for index benchmarks. One book
file, ebooks/book0.epub, is real (copied from SOURCE); the others exist only in the index, which
is all `list` reads. With --sidecars, every book also gets its sidecar and its file (a hard link
to the one real file, so a million books take a million inodes, not a million copies): a cache a
rebuild from sidecars can be measured on. With --covers, every third book has a cover where the
layout puts it (ebooks/bookN.cover.png: hard links to one small PNG).

    python3 Benchmarks/make-index.py CACHE COUNT SOURCE [--sidecars] [--covers]
"""
import datetime
import hashlib
import json
import os
import shutil
import struct
import sys
import zlib

cache, count, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]
sidecars = "--sidecars" in sys.argv[4:]
covers = "--covers" in sys.argv[4:]


def png(width, height, rgb):
    """A PNG of one colour, written by hand (no imaging library needed)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))

os.makedirs(os.path.join(cache, "ebooks"), exist_ok=True)
os.makedirs(os.path.join(cache, "magazines"), exist_ok=True)
os.makedirs(os.path.join(cache, "partial"), exist_ok=True)
data = open(source, "rb").read()
digest = hashlib.sha256(data).hexdigest()
books = {}
start = datetime.datetime(2025, 1, 1)
for i in range(count):
    key = f"ebook-book{i}"
    books[key] = {
        "id": key, "bookType": "ebook", "bookId": f"book{i}", "title": f"Book number {i}",
        "fileUrl": f"http://127.0.0.1:1/book{i}.epub", "localPath": f"ebooks/book{i}.epub",
        "fileSize": len(data),
        # a book a minute, and 5,000 authors: the catalogue's newest order and searches have work to do
        "downloadedAt": (start + datetime.timedelta(minutes=i)).strftime("%Y-%m-%dT%H:%M:%S.000Z"),
        "authors": [f"Author {i % 5000}"],
        "lastAccessedAt": f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}.000Z",
        "checksum": digest, "format": "epub", "etag": f'"e{i}"', "pinned": False, "outdated": False,
    }
    if covers and i % 3 == 0:
        books[key]["coverPath"] = f"ebooks/book{i}.cover.png"
shutil.copyfile(source, os.path.join(cache, "ebooks", "book0.epub"))
if covers:
    # A record's cover path is the layout's (bookcache ignores any other); one PNG, linked under each name.
    with open(os.path.join(cache, "ebooks", "book0.cover.png"), "wb") as handle:
        handle.write(png(60, 90, (70, 110, 160)))
    for i in range(3, count, 3):
        if i % 60000 == 0:
            shutil.copyfile(os.path.join(cache, "ebooks", "book0.cover.png"), os.path.join(cache, "ebooks", f"book{i}.cover.png"))
        else:
            os.link(os.path.join(cache, "ebooks", f"book{(i // 60000) * 60000}.cover.png"), os.path.join(cache, "ebooks", f"book{i}.cover.png"))
if sidecars:
    first = os.path.join(cache, "ebooks", "book0.epub")
    for i, (key, record) in enumerate(books.items()):
        stem = os.path.join(cache, "ebooks", record["bookId"])
        if i and not os.path.exists(stem + ".epub"):
            if i % 60000 == 0:  # ext4 allows 65,000 links to one file
                shutil.copyfile(source, stem + ".epub")
                first = stem + ".epub"
            else:
                os.link(first, stem + ".epub")
        with open(stem + ".meta.json", "w") as f:
            json.dump(record, f, indent=2, sort_keys=True)
with open(os.path.join(cache, "metadata.json"), "w") as f:
    json.dump({"schemaVersion": 1, "books": books}, f, separators=(",", ":"), sort_keys=True)
for name in ("metadata.journal",):
    try:
        os.remove(os.path.join(cache, name))
    except FileNotFoundError:
        pass
