"""What the service benchmarks share (shelf.py, opds.py): a cache of fabricated books made once
(make-index.py, then imported), and `bookcache serve` started on it, read for its address and
token. Not a test."""
import os
import re
import shutil
import subprocess
import sys

here = os.path.dirname(os.path.abspath(__file__))


def fabricated_cache(binary, work, name, count, *flags):
    """WORK/NAME-COUNT, a cache of COUNT copies of alice.epub (make-index.py with `flags`), made
    the first time and kept for the next run."""
    cache = os.path.join(work, f"{name}-{count}")
    if not os.path.exists(os.path.join(cache, "index.sqlite")):
        shutil.rmtree(cache, ignore_errors=True)
        subprocess.run([sys.executable, os.path.join(here, "make-index.py"), cache, str(count),
                        os.path.join(here, "..", "Fixtures", "books", "alice.epub"), *flags], check=True)
        subprocess.run([binary, "stats", "--cache-dir", cache], check=True, stdout=subprocess.DEVNULL)  # imports the index
    return cache


class Served:
    """`bookcache serve` on `cache`, on a free loopback port: `base` is its address, `token` its
    API token; `stop()` ends it."""

    def __init__(self, binary, cache):
        self.process = subprocess.Popen([binary, "serve", "--listen", "127.0.0.1:0", "--cache-dir", cache],
                                        stdout=subprocess.PIPE, text=True)
        self.base = None
        for line in self.process.stdout:
            match = re.search(r"at (http://127\.0\.0\.1:\d+)", line)
            if match:
                self.base = match.group(1)
            if "API token" in line:
                break
        self.token = open(os.path.join(cache, "service.token")).read().strip()

    def stop(self):
        self.process.terminate()
        self.process.wait()
