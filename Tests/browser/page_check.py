#!/usr/bin/env python3
"""Drives the service's web page in a real headless Chromium over the DevTools protocol
(standard library only: a minimal WebSocket client), as a user would:

    python3 Tests/browser/page_check.py LOGIN_LINK BOOK_URL SCREENSHOT.png [LANGUAGE]

1. opens the one-time login link (the page then holds a session cookie, never the token);
2. checks the page loaded the shelf and follows events;
3. types BOOK_URL into the form and submits it;
4. waits for the job to show a progress bar or its state, then "cached", and the book on the shelf;
5. saves a screenshot (a phone-sized window) and exits 0; on any failure prints why and exits 1.

With LANGUAGE (`de` or `zh-CN`) the browser asks for that language (`--lang`, so its
Accept-Language), and the page's text is checked in it.
"""
import base64
import json
import sys

from cdp import run_check, until

login_link, book_url, screenshot = sys.argv[1], sys.argv[2], sys.argv[3]
language = sys.argv[4] if len(sys.argv) > 4 else None
# What the page says in each language: its lang attribute, the shelf's summary, a cached job.
expected = {
    None: ("en", r"[0-9]+ books?,", "cached"),
    "de": ("de", r"[0-9]+ (Buch|Bücher),", "heruntergeladen"),
    "zh-CN": ("zh-Hans", r"[0-9]+ 本书，", "已下载"),
}[language]


def check(browser):
    page = browser.page
    page.call("Emulation.setDeviceMetricsOverride", width=412, height=915, deviceScaleFactor=1, mobile=True)
    browser.open(login_link)
    # The login link redirects to the page, which loads the shelf and then follows events.
    page.evaluate(until(f"document.querySelector('#usage') && /{expected[1]}/.test(document.querySelector('#usage').textContent)"))
    if page.evaluate("document.documentElement.lang") != expected[0]:
        raise RuntimeError(f"the page's language is {page.evaluate('document.documentElement.lang')}, not {expected[0]}")
    opds = page.evaluate("document.getElementById('opds').textContent")
    if opds != page.evaluate("location.origin") + "/opds":
        raise RuntimeError(f"the page shows the OPDS catalogue's address as {opds!r}")
    if page.evaluate("document.cookie.includes('bookcache_session')"):
        raise RuntimeError("the session cookie is readable by scripts; it must be HttpOnly")
    if "login" in page.evaluate("location.pathname"):
        raise RuntimeError("the login link did not lead to the page")
    page.evaluate(f"""(() => {{ const input = document.getElementById('url'); input.value = {json.dumps(book_url)};
        document.getElementById('add').requestSubmit(); return true; }})()""")
    page.evaluate(until("document.querySelector('.job')"))
    page.evaluate(until(f"[...document.querySelectorAll('.job')].some((job) => job.textContent.includes('{expected[2]}'))"))
    page.evaluate(until("document.querySelectorAll('.book').length >= 1"))
    shelf = page.evaluate("document.getElementById('books').textContent")
    shot = page.call("Page.captureScreenshot", format="png")
    with open(screenshot, "wb") as handle:
        handle.write(base64.b64decode(shot["data"]))
    print("page ok: job cached, shelf shows:", " ".join(shelf.split())[:200])


run_check("page check", check, language)
