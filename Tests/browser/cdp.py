"""A minimal Chrome DevTools protocol client (standard library only), shared by the browser
checks: a WebSocket, a page session, and a headless Chromium to drive."""
import base64
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile


class WebSocket:
    def __init__(self, url):
        rest = url[len("ws://"):]
        hostport, path = rest.split("/", 1)
        host, port = hostport.split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=120)
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
    """A promise that resolves when `condition` (a JS expression) is true, checked on each DOM change
    and each resource that loads or fails (an image's `complete` changes without a DOM change)."""
    return f"""new Promise((resolve, reject) => {{
        const stop = () => {{ observer.disconnect(); document.removeEventListener('load', check, true); document.removeEventListener('error', check, true); }};
        const check = () => {{ try {{ if ({condition}) {{ stop(); resolve(true); }} }} catch (e) {{}} }};
        const observer = new MutationObserver(check);
        observer.observe(document.documentElement, {{ subtree: true, childList: true, characterData: true, attributes: true }});
        document.addEventListener('load', check, true);
        document.addEventListener('error', check, true);
        check();
        setTimeout(() => {{ stop(); reject(new Error("timed out waiting for: {condition.replace('"', "'")}")); }}, {timeout_ms});
    }})"""



class Browser:
    """A headless Chromium with one page, driven over DevTools; `close()` ends it."""

    def __init__(self, language=None):
        self.profile = tempfile.mkdtemp(prefix="bookcache-chromium-")
        self.process = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", "--window-size=412,915"]
            + ([f"--lang={language}", f"--accept-lang={language}"] if language else []) + ["about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        endpoint = None
        for line in self.process.stderr:
            if "DevTools listening on " in line:
                endpoint = line.split("DevTools listening on ")[1].strip()
                break
        if not endpoint:
            raise RuntimeError("chromium printed no DevTools endpoint")
        self.ws = WebSocket(endpoint)
        self.next_id = 0
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.page = Page(self.ws, session)
        self.page.call("Page.enable")

    def call(self, method, **params):
        """A call to the browser itself (not the page)."""
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.receive())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def open(self, url):
        """Navigates the page to `url` and returns once it has loaded."""
        self.page.events.clear()
        self.page.call("Page.navigate", url=url)
        self.page.wait_event("Page.loadEventFired")

    def close(self):
        self.process.kill()
        self.process.wait()


def run_check(name, body, language=None):
    """Runs `body(browser)` in a new headless Chromium; on any failure prints "NAME failed: why"
    and exits 1. The browser is closed either way."""
    browser = None
    try:
        browser = Browser(language)
        body(browser)
    except Exception as error:  # noqa: BLE001 — every failure is reported the same way
        print(f"{name} failed: {error}")
        sys.exit(1)
    finally:
        if browser:
            browser.close()
