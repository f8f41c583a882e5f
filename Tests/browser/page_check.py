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
import os
import select
import socket
import struct
import subprocess
import sys
import tempfile

login_link, book_url, screenshot = sys.argv[1], sys.argv[2], sys.argv[3]
language = sys.argv[4] if len(sys.argv) > 4 else None
# What the page says in each language: its lang attribute, the shelf's summary, a cached job.
expected = {
    None: ("en", r"[0-9]+ books?,", "cached"),
    "de": ("de", r"[0-9]+ (Buch|Bücher),", "heruntergeladen"),
    "zh-CN": ("zh-Hans", r"[0-9]+ 本书，", "已下载"),
}[language]


class WebSocket:
    def __init__(self, url):
        rest = url[len("ws://"):]
        hostport, path = rest.split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=60)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET /{path} HTTP/1.1\r\nHost: {hostport}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += self.sock.recv(1)
        if b" 101 " not in response.split(b"\r\n")[0]:
            raise RuntimeError("no WebSocket upgrade: " + response.decode(errors="replace"))
        self.buffer = b""

    def send(self, text):
        payload = text.encode()
        header = bytes([0x81])
        if len(payload) < 126:
            header += bytes([0x80 | len(payload)])
        elif len(payload) < 65536:
            header += bytes([0x80 | 126]) + struct.pack(">H", len(payload))
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", len(payload))
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def _read(self, count):
        while len(self.buffer) < count:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise RuntimeError("DevTools connection closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data

    def receive(self):
        message = b""
        while True:
            first, second = self._read(2)
            length = second & 0x7F
            if length == 126:
                length = struct.unpack(">H", self._read(2))[0]
            elif length == 127:
                length = struct.unpack(">Q", self._read(8))[0]
            payload = self._read(length)
            if first & 0x0F in (0x1, 0x0):
                message += payload
                if first & 0x80:
                    return message.decode()


class Page:
    def __init__(self, socket, session):
        self.ws, self.session, self.next_id, self.events = socket, session, 0, []

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params, "sessionId": self.session}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message["method"])

    def wait_event(self, name):
        """Returns once the page has sent the event `name` (perhaps already, during a call)."""
        while name not in self.events:
            message = json.loads(self.ws.receive())
            if "method" in message:
                self.events.append(message["method"])
        self.events.remove(name)

    def evaluate(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")


def until(condition, timeout_ms=60000):
    """A promise that resolves when `condition` (a JS expression) is true, checked on each DOM change."""
    return f"""new Promise((resolve, reject) => {{
        const check = () => {{ try {{ if ({condition}) {{ observer.disconnect(); resolve(true); }} }} catch (e) {{}} }};
        const observer = new MutationObserver(check);
        observer.observe(document.documentElement, {{ subtree: true, childList: true, characterData: true, attributes: true }});
        check();
        setTimeout(() => {{ observer.disconnect(); reject(new Error("timed out waiting for: {condition.replace('"', "'")}")); }}, {timeout_ms});
    }})"""


profile = tempfile.mkdtemp(prefix="bookcache-chromium-")
browser = subprocess.Popen(
    ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
     f"--user-data-dir={profile}", "--window-size=412,915"] + ([f"--lang={language}", f"--accept-lang={language}"] if language else []) + ["about:blank"],
    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
try:
    endpoint = None
    for line in browser.stderr:
        if "DevTools listening on " in line:
            endpoint = line.split("DevTools listening on ")[1].strip()
            break
    if not endpoint:
        raise RuntimeError("chromium printed no DevTools endpoint")
    ws = WebSocket(endpoint)
    browser_page = Page(ws, None)

    def browser_call(method, **params):
        browser_page.next_id += 1
        ws.send(json.dumps({"id": browser_page.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(ws.receive())
            if message.get("id") == browser_page.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    target = browser_call("Target.createTarget", url="about:blank")["targetId"]
    session = browser_call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
    page = Page(ws, session)
    page.call("Page.enable")
    page.call("Emulation.setDeviceMetricsOverride", width=412, height=915, deviceScaleFactor=1, mobile=True)
    page.events.clear()
    page.call("Page.navigate", url=login_link)
    page.wait_event("Page.loadEventFired")
    # The login link redirects to the page, which loads the shelf and then follows events.
    page.evaluate(until(f"document.querySelector('#usage') && /{expected[1]}/.test(document.querySelector('#usage').textContent)"))
    if page.evaluate("document.documentElement.lang") != expected[0]:
        raise RuntimeError(f"the page's language is {page.evaluate('document.documentElement.lang')}, not {expected[0]}")
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
except Exception as error:  # noqa: BLE001 — every failure is reported the same way
    print(f"page check failed: {error}")
    sys.exit(1)
finally:
    browser.kill()
    browser.wait()
