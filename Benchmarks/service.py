#!/usr/bin/env python3
"""Benchmarks of `bookcache serve` (called by Benchmarks/run.sh service; prints Markdown table rows).

    python3 Benchmarks/service.py BIN BASE_URL WORK_DIR ROUNDS

- 1,000 jobs in one POST: time until the 202 (jobs point at a closed port, so none downloads meanwhile).
- Memory with 10,000 queued jobs: the service's peak RSS once they are accepted.
- 500 x 1 MiB from nginx: POST to the last job cached, against `bookcache download --from` (alternating).
- GET /books of 100,000 books (the index benchmark's generator makes the cache).
"""
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request

bin_path, base, work, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])


class Service:
    def __init__(self, cache, *extra):
        self.cache = cache
        self.process = subprocess.Popen(
            [bin_path, "serve", "--listen", "127.0.0.1:0", "--cache-dir", cache, *extra],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in self.process.stdout:
            if "login?code=" in line:
                self.base = line.split()[-1].split("/login")[0]
                break
        self.token = open(os.path.join(cache, "service.token")).read().strip()

    def call(self, method, path, body=None):
        request = urllib.request.Request(self.base + path, method=method, data=body,
                                         headers={"Authorization": "Bearer " + self.token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=120) as response:
            return json.loads(response.read())

    def peak_rss_mib(self):
        for line in open(f"/proc/{self.process.pid}/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) // 1024
        return 0

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=60)


def row(name, value, other="", ratio="", rss=""):
    print(f"| {name} | {value} | {other} | {ratio} | {rss} |", flush=True)


# 1,000 jobs in one POST, and 10,000 queued jobs
cache = os.path.join(work, "svc-accept")
shutil.rmtree(cache, ignore_errors=True)
service = Service(cache)
times = []
for r in range(10):
    jobs = [{"url": f"http://127.0.0.1:9/r{r}-b{i}.epub"} for i in range(1000)]
    body = json.dumps(jobs).encode()
    start = time.perf_counter()
    accepted = service.call("POST", "/api/v1/jobs", body)
    times.append(time.perf_counter() - start)
    assert len(accepted["jobs"]) == 1000
row("service: 1,000 jobs in one POST, until 202", f"{statistics.median(times) * 1000:.0f} ms", "target ≤ 200 ms")
row("service: 10,000 jobs queued (waiting for a closed port)", f"{service.peak_rss_mib()} MiB peak RSS", "target ≤ 64 MiB")
start = time.perf_counter()
listing = service.call("GET", "/api/v1/jobs")
row("service: GET /jobs of 10,000 jobs", f"{time.perf_counter() - start:.2f} s", f"{len(listing['jobs'])} jobs")
service.stop()

def wait_until_ended(service, ids):
    """Waits until every job has ended (each must be cached) and returns the time it saw that.

    Jobs start in the order they were posted: the client waits on the last one still running,
    then lists them all, and so on, a few requests in all. Waiting on each job in turn, as this
    did before 2026-11-25, charged the service 500 of the client's round-trips (0.1-0.3 s)."""
    pending = set(ids)
    while True:
        last = [job_id for job_id in ids if job_id in pending][-1]
        service.call("GET", f"/api/v1/jobs/{last}?wait=60")
        ended = time.perf_counter()
        listing = service.call("GET", f"/api/v1/jobs?limit={len(ids) + 10}")["jobs"]
        states = {job["id"]: job["state"] for job in listing if job["id"] in pending}
        assert len(states) == len(pending), "the listing left out some of the jobs"
        assert all(state in ("cached", "downloading", "queued") for state in states.values()), states
        pending = {job_id for job_id, state in states.items() if state != "cached"}
        if not pending:
            return ended


# 500 x 1 MiB through the service against the CLI's batch
batch = [line.strip() for line in open(os.path.join(work, "batch-500.txt")) if line.strip()]
served, cli, peaks = [], [], []
for r in range(rounds):
    cache = os.path.join(work, "svc-batch")
    shutil.rmtree(cache, ignore_errors=True)
    service = Service(cache, "--concurrency", "8")
    start = time.perf_counter()
    accepted = service.call("POST", "/api/v1/jobs", json.dumps([{"url": url} for url in batch]).encode())
    served.append(wait_until_ended(service, [job["id"] for job in accepted["jobs"]]) - start)
    peaks.append(service.peak_rss_mib())
    service.stop()
    cache = os.path.join(work, "svc-cli")
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    subprocess.run([bin_path, "download", "--from", os.path.join(work, "batch-500.txt"), "--concurrency", "8", "--cache-dir", cache],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cli.append(time.perf_counter() - start)
a, b = statistics.median(served), statistics.median(cli)
row("service: 500 × 1 MiB, POST to all cached, concurrency 8", f"{a:.2f} s", f"bookcache download --from {b:.2f} s", f"{a / b:.2f}×", f"{max(peaks)} MiB")

# GET /books of 100,000 books
cache = os.path.join(work, "c-index-100000")
if not os.path.exists(os.path.join(cache, "index.sqlite")):
    shutil.rmtree(cache, ignore_errors=True)
    subprocess.run(["python3", "Benchmarks/make-index.py", cache, "100000", os.path.join(work, "books", "idx0.epub")], check=True)
    subprocess.run([bin_path, "stats", "--cache-dir", cache], check=True, stdout=subprocess.DEVNULL)
service = Service(cache)
times = []
for r in range(rounds):
    start = time.perf_counter()
    shelf = service.call("GET", "/api/v1/books")
    times.append(time.perf_counter() - start)
row("service: GET /books of 100,000 books", f"{statistics.median(times):.2f} s", f"{len(shelf['books'])} books, target ≤ 1 s", "", f"{service.peak_rss_mib()} MiB")
service.stop()
