#!/usr/bin/env python3
"""Plays the web pages that issue 24 found could post jobs, in a real headless Chromium:

    python3 Tests/browser/attack_check.py LOGIN_LINK ATTACK_PAGE_URL [ATTACK_PAGE_URL …]

1. opens the service's one-time login link, so the browser holds the page's session cookie;
2. opens each attack page (one on another port of 127.0.0.1 — the same site, so the cookie goes
   with its requests — and one on another host, which gets no cookie); each page posts jobs to
   the service as a plain HTML form (text/plain and urlencoded, to /api/v1/jobs and
   //api/v1/jobs) and with fetch (no-cors text/plain, and JSON, which needs a preflight), then
   sets its title to "done";
3. prints "attacks done" and exits 0 once every page has run; on any failure prints why and
   exits 1. Whether a job was made is for the caller to check, with the token.
"""
import sys

from cdp import run_check, until

login_link, pages = sys.argv[1], sys.argv[2:]


def check(browser):
    browser.open(login_link)
    if "login" in browser.page.evaluate("location.pathname"):
        raise RuntimeError("the login link did not lead to the page")
    if not browser.page.evaluate("fetch('/api/v1/stats').then((r) => r.ok)"):
        raise RuntimeError("the page's own session cannot read the API")
    for url in pages:
        browser.open(url)
        browser.page.evaluate(until("document.title === 'done'"))
        print("attack page ran:", url, browser.page.evaluate("document.body.dataset.results"))
    print("attacks done")


run_check("attack check", check)
