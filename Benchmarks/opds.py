#!/usr/bin/env python3
"""Times `bookcache serve`'s OPDS catalogue on a cache of COUNT fabricated books (make-index.py):
the root, the first page of the newest books (OPDS 1.2 and 2.0), the next page, a search by title
word and by author, the authors' feed, and the first Basic login (one PBKDF2) against later ones.
Prints medians of ROUNDS requests in milliseconds. Not a test.

    python3 Benchmarks/opds.py BOOKCACHE_BINARY WORKDIR COUNT [ROUNDS]
"""
import base64
import re
import statistics
import subprocess
import sys
import time
import urllib.request

from served import Served, fabricated_cache

binary, work, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 7
cache = fabricated_cache(binary, work, "opds", count)
subprocess.run([binary, "serve", "--opds-password", "--cache-dir", cache], input=b"benchmark-password\n", check=True,
               stdout=subprocess.DEVNULL)
service = Served(binary, cache)
try:
    base, token = service.base, service.token

    def get(path, authorization=None):
        request = urllib.request.Request(base + path, headers={"Authorization": authorization or f"Bearer {token}"})
        started = time.perf_counter()
        with urllib.request.urlopen(request) as response:
            body = response.read()
        return (time.perf_counter() - started) * 1000, body

    _, first = get("/opds/new")
    next_link = re.search(rb'rel="next" href="([^"]+)"', first).group(1).decode().replace("&amp;", "&")
    cases = [
        ("root (navigation, counts)", "/opds"),
        ("newest, first page (1.2)", "/opds/new"),
        ("newest, first page (2.0)", "/opds/v2/new"),
        ("newest, next page", next_link),
        ("search by title word", "/opds/search?q=number%20777"),
        ("search by author", "/opds/search?q=author%204999"),
        ("authors, first page", "/opds/authors"),
        ("one author's books", "/opds/author?name=Author%2042"),
    ]
    print(f"OPDS catalogue, {count} books, medians of {rounds} (ms):")
    for name, path in cases:
        times = [get(path)[0] for _ in range(rounds)]
        print(f"| {name} | {statistics.median(times):.1f} ms |")
    basic = "Basic " + base64.b64encode(b"reader:benchmark-password").decode()
    login, _ = get("/opds", basic)
    later = statistics.median(get("/opds", basic)[0] for _ in range(rounds))
    print(f"| first Basic login (PBKDF2, 600,000 rounds) | {login:.1f} ms |")
    print(f"| later requests with it (remembered) | {later:.1f} ms |")
finally:
    service.stop()
