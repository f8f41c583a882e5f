#!/usr/bin/env python3
"""What each hostile book of issue 55 costs, and whether the service answers while ten are judged
(not a test; prints Markdown table rows).

    python3 Benchmarks/hostile.py BIN [OLD_BIN] WORK_DIR

For each class — a page tree 20,000 levels deep, two deflate layers decoding to 1 GiB, 40,000
catalogs and no object (the quadratic repair), a package document in UTF-16 declaring an entity
used 20,000 times — `bookcache validate FILE` is run under GNU time: its verdict, exit status,
CPU seconds and peak resident memory (the worker's, which the command waits for, included).
With OLD_BIN (a build from before the workers), the same for it beside.

Then `bookcache serve` is given ten jobs of those books at once, and `GET /api/v1/stats` is timed
every 20 ms until every job has ended: the median and the worst, with the jobs' states.
"""
import ctypes
import http.server
import json
import os
import shutil
import signal
import socketserver
import statistics
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
import zlib

bin_path = sys.argv[1]
old_bin = sys.argv[2] if len(sys.argv) > 3 else None
work = sys.argv[-1]
books = os.path.join(work, "hostile-books")
os.makedirs(books, exist_ok=True)


def pdf(objects):
    out = b"%PDF-1.7\n"
    offsets = []
    for index, body in enumerate(objects):
        offsets.append(len(out))
        out += f"{index + 1} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    table = f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n" + "".join("%010d 00000 n \n" % o for o in offsets)
    table += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out + table.encode()


def deep(levels):
    objects = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    for level in range(levels):
        number = 2 + level
        parent = b"" if level == 0 else f" /Parent {number - 1} 0 R".encode()
        objects.append(f"<< /Type /Pages /Kids [{number + 1} 0 R] /Count 1".encode() + parent + b" >>")
    page = levels + 2
    objects.append(f"<< /Type /Page /Parent {page - 1} 0 R /MediaBox [0 0 200 200] /Contents {page + 1} 0 R >>".encode())
    objects.append(b"<< /Length 5 >>\nstream\nBT ET\nendstream")
    return pdf(objects)


def bomb(gib=1):
    compressor = zlib.compressobj(9)
    inner = b"".join(compressor.compress(b"\0" * (1 << 20)) for _ in range(1024 * gib)) + compressor.flush()
    outer = zlib.compress(inner, 9)
    return pdf([b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 200 200] /Contents 4 0 R >>",
                f"<< /Length {len(outer)} /Filter [/FlateDecode /FlateDecode] >>\nstream\n".encode() + outer + b"\nendstream"])


def catalogs(count):
    return b"%PDF-1.4\n" + b"/Type /Catalog\n" * count + b"startxref\n0\n%%EOF\n"


def utf16_epub(references):
    entity = "a" * 1_000_000
    opf = (f'<?xml version="1.0" encoding="UTF-16"?>\n<!DOCTYPE package [<!ENTITY big "{entity}">]>\n'
           '<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
           '<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x</dc:identifier>'
           f'<dc:title>{"&big;" * references}</dc:title></metadata>'
           '<manifest><item id="c" href="c.xhtml" media-type="application/xhtml+xml"/></manifest>'
           '<spine><itemref idref="c"/></spine></package>')
    path = os.path.join(books, "utf16.epub")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        archive.writestr("META-INF/container.xml",
                         '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                         '<rootfiles><rootfile full-path="content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        # Stored: deflated, the entity's million letters would be refused as a zip bomb first.
        archive.writestr("content.opf", opf.encode("utf-16"))
        archive.writestr("c.xhtml", '<html xmlns="http://www.w3.org/1999/xhtml"><body><p>x</p></body></html>')
    return open(path, "rb").read()


classes = {
    "deep.pdf": ("a page tree 20,000 levels deep", lambda: deep(20_000)),
    "bomb.pdf": ("two deflate layers, 1 GiB decoded", bomb),
    "catalogs.pdf": ("40,000 catalogs, no object", lambda: catalogs(40_000)),
    "utf16.epub": ("UTF-16 package document, an entity used 20,000 times", lambda: utf16_epub(20_000)),
}
for name, (_, make) in classes.items():
    path = os.path.join(books, name)
    if not os.path.exists(path):
        data = make()
        with open(path, "wb") as f:
            f.write(data)


def measure(binary, path):
    """Verdict line, exit status, CPU seconds and peak RSS in MiB — the command's and its
    validation workers' together (this process is made their subreaper, so it reaps the workers
    when the command has ended and reads their usage)."""
    libc = ctypes.CDLL(None)
    libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    out = os.path.join(work, "verdict.txt")
    started = time.time()
    with open(out, "w") as sink:
        process = subprocess.Popen([binary, "validate", path], stdout=sink, stderr=subprocess.STDOUT)
    cpu, peak, status = 0.0, 0, None
    while True:
        try:
            pid, code, usage = os.wait4(-1, 0)
        except ChildProcessError:
            break
        cpu += usage.ru_utime + usage.ru_stime
        peak = max(peak, usage.ru_maxrss)
        if pid == process.pid:
            status = os.waitstatus_to_exitcode(code)
        if time.time() - started > 600:
            break
    lines = open(out).read().strip().splitlines() or ["(nothing)"]
    verdict = lines[-1].split(": ", 1)[-1]
    return verdict[:90], (128 - status if status is not None and status < 0 else status), f"{cpu:.2f}", peak // 1024


print("| book | bookcache: verdict | exit | CPU s | peak MiB |" + (" before: exit | CPU s | peak MiB |" if old_bin else ""))
print("| --- | --- | --- | --- | --- |" + (" --- | --- | --- |" if old_bin else ""))
for name, (what, _) in classes.items():
    path = os.path.join(books, name)
    verdict, status, cpu, peak = measure(bin_path, path)
    row = f"| {what} ({os.path.getsize(path) // 1024} KiB) | {verdict} | {status} | {cpu} | {peak} |"
    if old_bin:
        _, old_status, old_cpu, old_peak = measure(old_bin, path)
        row += f" {old_status} | {old_cpu} | {old_peak} |"
    print(row, flush=True)


# The service: ten hostile jobs at once, and the API's latency meanwhile.
class Quiet(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, directory=books, **kwargs)

    def log_message(self, *args):
        pass


server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Quiet)
threading.Thread(target=server.serve_forever, daemon=True).start()
files_base = f"http://127.0.0.1:{server.server_address[1]}"

cache = os.path.join(work, "hostile-cache")
shutil.rmtree(cache, ignore_errors=True)
process = subprocess.Popen([bin_path, "serve", "--listen", "127.0.0.1:0", "--cache-dir", cache, "--concurrency", "10"],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
for line in process.stdout:
    if "login?code=" in line:
        base = line.split()[-1].split("/login")[0]
        break
token = open(os.path.join(cache, "service.token")).read().strip()


def call(method, path, body=None):
    request = urllib.request.Request(base + path, method=method, data=body,
                                     headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        return json.loads(response.read())


names = list(classes)
jobs = [{"url": f"{files_base}/{names[i % len(names)]}", "id": f"hostile-{i}"} for i in range(10)]
accepted = call("POST", "/api/v1/jobs", json.dumps(jobs).encode())["jobs"]
latencies = []
started = time.perf_counter()
while True:
    begin = time.perf_counter()
    call("GET", "/api/v1/stats")
    latencies.append((time.perf_counter() - begin) * 1000)
    states = [job["state"] for job in call("GET", "/api/v1/jobs")["jobs"]]
    if all(state in ("cached", "failed", "cancelled") for state in states) or time.perf_counter() - started > 300:
        break
    time.sleep(0.02)
elapsed = time.perf_counter() - started
alive = process.poll() is None
process.send_signal(signal.SIGTERM)
process.wait(timeout=60)
server.shutdown()
print()
print(f"service, ten hostile jobs at once: all ended in {elapsed:.1f} s ({', '.join(sorted(set(states)))}); "
      f"GET /api/v1/stats {len(latencies)} times meanwhile: median {statistics.median(latencies):.1f} ms, "
      f"worst {max(latencies):.1f} ms; the service {'still running' if alive else 'DIED'}")
