#!/usr/bin/env python3
"""The page's shelf in a real headless Chromium, on a cache of a few thousand books (made by
Benchmarks/make-index.py --covers): a screenful at a time with covers, search by title and by
author, the next page and back, and a book's link giving its exact bytes. Saves a screenshot at
phone and at desktop width.

    python3 Tests/browser/shelf_check.py LOGIN_LINK COUNT BOOK0_SHA256 PHONE.png DESKTOP.png

Prints "shelf ok" and the times it saw; on any failure prints why and exits 1.
"""
import base64
import json
import sys
import time

from cdp import run_check, until

login_link, count, book0_sha, phone_shot, desktop_shot = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]


def shot(page, path):
    with open(path, "wb") as handle:
        handle.write(base64.b64decode(page.call("Page.captureScreenshot", format="png")["data"]))


def titles(page):
    return page.evaluate("[...document.querySelectorAll('#books .book .title')].map((e) => e.textContent)")


def search(page, words):
    """Types `words` into the search field and waits until the shelf shows the answer."""
    # As JSON.stringify writes it, to compare with what the page shows next
    before = json.dumps(json.dumps(titles(page), separators=(",", ":"), ensure_ascii=False))
    started = time.perf_counter()
    page.evaluate(f"""(() => {{ const input = document.getElementById('q'); input.value = {json.dumps(words)};
        input.dispatchEvent(new Event('input')); return true; }})()""")
    page.evaluate(until(f"JSON.stringify([...document.querySelectorAll('#books .book .title')].map((e) => e.textContent)) !== {before}"))
    return (time.perf_counter() - started) * 1000


def check(browser):
    page = browser.page
    page.call("Emulation.setDeviceMetricsOverride", width=412, height=915, deviceScaleFactor=1, mobile=True)
    started = time.perf_counter()
    browser.open(login_link)
    page.evaluate(until("document.querySelectorAll('#books .book').length > 0", 30000))
    first_screen = (time.perf_counter() - started) * 1000
    shown = page.evaluate("document.querySelectorAll('#books .book').length")
    rows = page.evaluate("document.querySelectorAll('.book, .job, .source').length")
    if shown != 50 or rows > 200:
        raise RuntimeError(f"the first screen has {shown} books and {rows} rows; expected 50 books and at most 200 rows")
    if f"{count:,}".replace(",", "") not in page.evaluate("document.getElementById('usage').textContent").replace(",", "").replace(".", ""):
        raise RuntimeError(f"the usage line does not count {count} books")
    # Covers: every third book has one, the others a placeholder with the title; those on the
    # screen have loaded (the rest load lazily, as they are scrolled to)
    images = page.evaluate("document.querySelectorAll('#books img').length")
    placeholders = page.evaluate("document.querySelectorAll('#books .placeholder').length")
    if images + placeholders != 50 or not 15 <= images <= 18:
        raise RuntimeError(f"covers: {images} images, {placeholders} placeholders")
    # The first cover, scrolled to (covers load lazily, as they come into view), shows its image
    page.evaluate("(() => { document.querySelector('#books img').scrollIntoView(); return true; })()")
    page.evaluate(until("document.querySelector('#books img').complete", 30000))
    width = page.evaluate("document.querySelector('#books img').naturalWidth")
    if width == 0:
        raise RuntimeError("the first cover did not load")
    page.evaluate("(() => { scrollTo(0, 0); return true; })()")
    shot(page, phone_shot)

    took_title = search(page, f"number {count - 1}")
    if titles(page) != [f"Book number {count - 1}"]:
        raise RuntimeError(f"a search by title shows {titles(page)}")
    took_author = search(page, "AUTHOR 1234")
    authors = page.evaluate("[...document.querySelectorAll('#books .book')].map((b) => b.textContent)")
    if len(authors) != 1 or "Author 1234" not in authors[0]:
        raise RuntimeError(f"a search by author shows {len(authors)} books")
    search(page, "no such book anywhere")
    if page.evaluate("document.querySelectorAll('#books .book').length") != 0:
        raise RuntimeError("a search that matches nothing still shows books")

    # By title, the next page and back
    search(page, "")
    page.evaluate("(() => { const sort = document.getElementById('sort'); sort.value = 'title'; sort.dispatchEvent(new Event('change')); return true; })()")
    page.evaluate(until("document.querySelector('#books .book .title') && document.querySelector('#books .book .title').textContent === 'Book number 0'"))
    first = titles(page)
    page.evaluate("document.getElementById('next').click()")
    page.evaluate(until(f"document.getElementById('pageno').textContent.includes('2')"))
    second = titles(page)
    if len(second) != 50 or set(first) & set(second) or second <= first:
        raise RuntimeError(f"the next page repeats or misorders books: {first[-1:]} then {second[:1]}")
    page.evaluate("document.getElementById('prev').click()")
    page.evaluate(until("document.querySelector('#books .book .title').textContent === 'Book number 0'"))

    # The first book's link gives its exact bytes (book0 is the one real file)
    digest = page.evaluate("""(async () => {
        const link = document.querySelector('#books .book[data-book="ebook-book0"] a.cover');
        const response = await fetch(link.href);
        const bytes = await response.arrayBuffer();
        const hash = await crypto.subtle.digest('SHA-256', bytes);
        return [response.status, response.headers.get('content-disposition'),
                [...new Uint8Array(hash)].map((b) => b.toString(16).padStart(2, '0')).join('')]; })()""")
    if digest[0] != 200 or digest[2] != book0_sha or "Book number 0.epub" not in (digest[1] or ""):
        raise RuntimeError(f"the book's link gave {digest}")

    page.call("Emulation.setDeviceMetricsOverride", width=1280, height=900, deviceScaleFactor=1, mobile=False)
    page.evaluate("(() => { const sort = document.getElementById('sort'); sort.value = 'recentlyRead'; sort.dispatchEvent(new Event('change')); return true; })()")
    # Book 0 was just read (its file fetched): recently read puts it first, and the rest by their reading
    page.evaluate(until("document.querySelectorAll('#books .book .title')[1].textContent !== 'Book number 1'"))
    page.evaluate(until("[...document.querySelectorAll('#books img')].filter((img) => img.getBoundingClientRect().top < innerHeight)"
                        ".every((img) => img.complete)", 30000))
    shot(page, desktop_shot)
    print(f"shelf ok: first screen {first_screen:.0f} ms, search by title {took_title:.0f} ms, by author {took_author:.0f} ms")


run_check("shelf check", check)
