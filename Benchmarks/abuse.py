#!/usr/bin/env python3
"""`bookcache serve` under abuse, on loopback (figures, not a pass/fail test; issue 24).

    python3 Benchmarks/abuse.py BIN [LABEL]

Starts BIN serve as systemd would (a soft limit of 1,024 open files) and, for each case, prints
a Markdown row: GET /api/v1/stats latency (p50/p95 over 60 requests, each on a new connection,
with a 10 s limit; a request past it counts as failed), how many failed, and the service's peak
RSS.

- idle: 1,100 connections that send nothing are held open while the requests are made.
- dropped streams: 1,140 event-stream requests are opened and dropped at once, unread; requests are
  made right after, and again after 35 s (two heartbeats); the service's sockets left in
  CLOSE-WAIT are counted then.
- slow readers: 300 event-stream clients that never read (4 KiB receive buffers), while 2,000
  jobs (posted in one request) run against a loopback book server; requests are made every
  100 ms from the post until the jobs end. The same without event clients, for comparison.

Goals (issue 24): 1,100 idle connections and 1,140 dropped streams leave it answering; 300
non-reading clients with 2,000 jobs running: p95 <= 1 s and peak RSS <= 256 MiB.
"""
import http.server
import json
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

binary = sys.argv[1]
label = sys.argv[2] if len(sys.argv) > 2 else "bookcache"
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
fixtures = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Fixtures", "books")


class Service:
    def __init__(self, cache):
        self.cache = cache
        self.process = subprocess.Popen(
            ["bash", "-c", f"ulimit -Sn 1024 && exec {binary} serve --listen 127.0.0.1:0 --cache-dir {cache}"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in self.process.stdout:
            if "login?code=" in line:
                self.base = line.split()[-1].split("/login")[0]
                break
        self.port = int(self.base.rsplit(":", 1)[1])
        self.token = open(os.path.join(cache, "service.token")).read().strip()

    def request(self, method, path, body=None, timeout=10):
        request = urllib.request.Request(self.base + path, method=method, data=body,
                                         headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read())

    def stats_latency(self):
        """Seconds for GET /api/v1/stats on a new connection; None when it fails or takes over 10 s."""
        started = time.monotonic()
        try:
            self.request("GET", "/api/v1/stats")
            return time.monotonic() - started
        except Exception:  # noqa: BLE001 — any failure counts as one
            return None

    def peak_rss_mib(self):
        try:
            for line in open(f"/proc/{self.process.pid}/status"):
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) // 1024
        except OSError:
            pass
        return -1

    def close_wait(self):
        """Sockets of the service's port in CLOSE-WAIT."""
        out = subprocess.run(["ss", "-tan", "state", "close-wait", f"( sport = :{self.port} )"], capture_output=True, text=True).stdout
        return max(0, len(out.strip().splitlines()) - 1)

    def stop(self):
        self.process.kill()
        self.process.wait()


def connect(port):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    return sock


def row(case, latencies, service, extra=""):
    good = [x for x in latencies if x is not None]
    failed = len(latencies) - len(good)
    if good:
        p50 = statistics.median(good) * 1000
        p95 = sorted(good)[max(0, int(len(good) * 0.95) - 1)] * 1000
        figures = f"{p50:.1f} ms | {p95:.1f} ms"
    else:
        figures = "— | —"
    print(f"| {label}: {case} | {figures} | {failed}/{len(latencies)} | {service.peak_rss_mib()} MiB | {extra} |", flush=True)


def requests(service, count=60):
    """`count` timed requests; after 3 failures in a row the rest are counted failed unsent."""
    latencies = []
    for _ in range(count):
        latencies.append(service.stats_latency())
        if latencies[-3:] == [None, None, None]:
            latencies += [None] * (count - len(latencies))
            break
    return latencies


print("| case | stats p50 | stats p95 | failed | peak RSS | notes |")
print("| --- | --- | --- | --- | --- | --- |")
work = tempfile.mkdtemp(prefix="bookcache-abuse-")
try:
    # 1,100 idle connections
    service = Service(os.path.join(work, "idle"))
    idle = []
    refused = 0
    for _ in range(1100):
        try:
            idle.append(connect(service.port))
        except OSError:
            refused += 1
    row("1,100 idle connections held", requests(service), service, f"{len(idle)} connected, {refused} refused")
    for sock in idle:
        sock.close()
    service.stop()

    # 1,140 event streams opened and dropped
    service = Service(os.path.join(work, "dropped"))
    streams = []
    for _ in range(1140):
        try:
            sock = connect(service.port)
            sock.sendall(f"GET /api/v1/events HTTP/1.1\r\nHost: {service.base[7:]}\r\nAuthorization: Bearer {service.token}\r\n\r\n".encode())
            streams.append(sock)
        except OSError:
            pass
    # Every stream is dropped at once, unread: those the service has accepted and those still in
    # its listen backlog
    for sock in streams:
        sock.close()
    row("right after 1,140 event streams dropped", requests(service), service, f"{len(streams)} opened, dropped unread")
    time.sleep(35)
    row("35 s after", requests(service), service, f"{service.close_wait()} sockets in CLOSE-WAIT")
    service.stop()

    # 300 event clients that never read, 2,000 jobs running (and, for comparison, none)
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=fixtures, **kwargs)

        def log_message(self, *args):
            pass

    books = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=books.serve_forever, daemon=True).start()
    book = f"http://127.0.0.1:{books.server_address[1]}/alice.epub"
    for reader_count in [int(x) for x in os.environ.get("ABUSE_READERS", "0,300").split(",")]:
        service = Service(os.path.join(work, f"slow{reader_count}"))
        readers = []
        for _ in range(reader_count):
            sock = connect(service.port)
            sock.sendall(f"GET /api/v1/events HTTP/1.1\r\nHost: {service.base[7:]}\r\nAuthorization: Bearer {service.token}\r\n\r\n".encode())
            readers.append(sock)
        jobs = [{"url": book, "id": f"b{i}"} for i in range(2000)]
        started = time.monotonic()
        poster = threading.Thread(target=lambda: service.request("POST", "/api/v1/jobs", json.dumps(jobs).encode(), timeout=300))
        poster.start()
        latencies = []
        ended = 0
        while time.monotonic() - started < 600:
            latencies.append(service.stats_latency())
            if latencies[-3:] == [None, None, None]:
                break
            time.sleep(0.1)
            if len(latencies) % 20 == 0 and not poster.is_alive():
                try:
                    counts = service.request("GET", "/api/v1/jobs?limit=1", timeout=30)["counts"]
                except Exception:  # noqa: BLE001 — an unanswered count is a failed request, measured above
                    continue
                ended = counts.get("cached", 0) + counts.get("failed", 0)
                if ended >= len(jobs):
                    break
        poster.join()
        row(f"{reader_count} non-reading event clients, 2,000 jobs", latencies, service,
            f"{ended} jobs ended in {time.monotonic() - started:.0f} s; {len(latencies)} requests during")
        for sock in readers:
            sock.close()
        service.stop()
    books.shutdown()
finally:
    shutil.rmtree(work, ignore_errors=True)
