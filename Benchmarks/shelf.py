#!/usr/bin/env python3
"""Times the web page's shelf in a real headless Chromium on a cache of COUNT fabricated books
(make-index.py --covers --sidecars): the first screenful after the login link, a search by a
title word, a search by author, and the next page; and the API's page behind each. Prints
medians of ROUNDS in milliseconds. Not a test.

    python3 Benchmarks/shelf.py BOOKCACHE_BINARY WORKDIR COUNT [ROUNDS]
"""
import os
import statistics
import subprocess
import sys
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "Tests", "browser"))
from cdp import Browser, until  # noqa: E402
from served import Served, fabricated_cache  # noqa: E402

binary, work, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 5
cache = fabricated_cache(binary, work, "shelf", count, "--covers", "--sidecars")
service = Served(binary, cache)
browser = None
try:
    base, token = service.base, service.token

    def api(path):
        started = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})) as response:
            response.read()
        return (time.perf_counter() - started) * 1000

    print(f"shelf, {count} books, medians of {rounds} (ms):")
    for name, path in [("API: first page, recently read", "/api/v1/books?limit=50&sort=recentlyRead&status=all"),
                       ("API: first page, newest", "/api/v1/books?limit=50&sort=newest&status=all"),
                       ("API: first page, by title", "/api/v1/books?limit=50&sort=title&status=all"),
                       ("API: search by title word", "/api/v1/books?limit=50&sort=recentlyRead&status=all&q=number+777"),
                       ("API: search by author", "/api/v1/books?limit=50&sort=recentlyRead&status=all&q=author+4999")]:
        print(f"| {name} | {statistics.median(api(path) for _ in range(rounds)):.1f} ms |")

    browser = Browser()
    page = browser.page
    page.call("Emulation.setDeviceMetricsOverride", width=412, height=915, deviceScaleFactor=1, mobile=True)
    first, searches = [], []
    for _ in range(rounds):
        link = subprocess.run([binary, "serve", "--login-link", "--cache-dir", cache], capture_output=True, text=True, check=True).stdout.strip()
        started = time.perf_counter()
        browser.open(link)
        page.evaluate(until("document.querySelectorAll('#books .book').length === 50"))
        first.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        page.evaluate("""(() => { const input = document.getElementById('q'); input.value = 'number 777';
            input.dispatchEvent(new Event('input')); return true; })()""")
        page.evaluate(until("document.querySelector('#books .book .title') && "
                            "[...document.querySelectorAll('#books .book .title')].every((e) => e.textContent.includes('777'))"))
        searches.append((time.perf_counter() - started) * 1000)
    print(f"| page: login link to first screen (Chromium) | {statistics.median(first):.0f} ms |")
    print(f"| page: typing a search to its results (250 ms of it the page waits for typing to stop) | {statistics.median(searches):.0f} ms |")
finally:
    if browser:
        browser.close()
    service.stop()
