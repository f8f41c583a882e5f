#!/usr/bin/python3
"""bookcache's power-loss harness: cuts the power under real bookcache runs and checks what is left.

    scripts/powercut/run.py BOOKCACHE FIXTURE_SERVER [--cuts N] [--only NAME]

Each case runs the bookcache binary on a cache inside powercutfs.py (this folder: a FUSE file system
that keeps unsynced writes in memory and drops or tears them when it is unmounted), kills it with
SIGKILL where the case says, cuts (drop or torn), mounts the same folder again and checks what a
reader finds there. Books are served by bookcache-fixture-server on 127.0.0.1. Needs root, /dev/fuse
and Debian's python3-fusepy; scripts/test.sh installs it and runs this after the tests.

The cases, and what must hold after every cut:
- control: a file written without fsync is lost in a `drop` cut, and one written with fsync is
  kept — the harness can see a loss (if this fails, nothing else here proves anything).
- resume: a 40 MiB PDF cut off after some MiB, the cut tearing the partial file; the next download
  caches exactly the server's bytes and `bookcache verify` passes.
- sidecars: a batch of books and a pin, reported done; a `drop` cut; the index deleted: the index
  rebuilt from the sidecars holds every book reported cached, with its pin.
- batch: a batch killed part-way, the cut tearing what was unsynced: the index opens, every book
  reported cached is cached and equal to the server's file, and `bookcache verify` passes.
Prints a table of cuts per case and exits 1 when any cut broke a promise.
"""
import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "Fixtures"))
from generate import pdf_file  # noqa: E402  (Fixtures/generate.py: a PDF 1.4 file of its objects)


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def big_pdf(size):
    """A valid PDF of about `size` bytes: one page whose content stream is mostly comment lines
    (zeros in the middle of it would still parse: only the bytes tell a torn file)."""
    filler = bytearray()
    n = 0
    while len(filler) < size:
        filler += b"%% filler line %09d of a large content stream\n" % n
        n += 1
    text = bytes(filler) + b"BT /F1 24 Tf 72 720 Td (Large) Tj ET\n"
    return pdf_file([
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(text) + text + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ])


class Mount:
    """powercutfs.py mounted over `backing` at `point`; `cut(kind)` unmounts it with that cut."""

    def __init__(self, backing, point):
        self.backing, self.point = backing, point
        self.cutfile = point.rstrip("/") + ".cut"
        for path in (backing, point):
            os.makedirs(path, exist_ok=True)
        self.log = open(point.rstrip("/") + ".log", "a")
        # The cache refuses a root others can write; a folder of the harness's own is 0700.
        os.chmod(backing, 0o700)
        if os.path.exists(self.cutfile):
            os.unlink(self.cutfile)
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "powercutfs.py"), backing, point, self.cutfile], stderr=self.log
        )
        deadline = time.monotonic() + 20
        while not os.path.ismount(point):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"powercutfs did not mount {point}; see {self.log.name}")
            time.sleep(0.05)

    def cut(self, kind):
        with open(self.cutfile, "w") as f:
            f.write(kind)
        subprocess.run(["fusermount", "-u", self.point], check=True)
        self.process.wait(timeout=120)


def bookcache(binary, cache, *args, check=False, **kwargs):
    return subprocess.run([binary, "--cache-dir", cache, *args], capture_output=True, text=True, check=check, **kwargs)


def cached_ids(output):
    """The ids `download --json` reported cached: whole lines only (a kill can cut the last)."""
    ids = set()
    for line in output.splitlines():
        try:
            result = json.loads(line)
        except ValueError:
            continue
        if result.get("status") == "cached":
            ids.add(result["id"])
    return ids


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(what)
        time.sleep(0.02)


def size_of(path):
    try:
        return os.stat(path).st_size
    except FileNotFoundError:
        return 0


class Harness:
    def __init__(self, binary, server_binary, work):
        self.binary, self.work = binary, work
        self.books = os.path.join(work, "books")
        os.makedirs(self.books)
        self.server = subprocess.Popen([server_binary, self.books], stdout=subprocess.PIPE, text=True)
        self.base = self.server.stdout.readline().strip()
        self.rows = []

    def close(self):
        self.server.terminate()
        self.server.wait()

    def fresh(self, name):
        backing, point = os.path.join(self.work, name, "backing"), os.path.join(self.work, name, "mnt")
        shutil.rmtree(os.path.join(self.work, name), ignore_errors=True)
        return Mount(backing, point)

    def record(self, case, cut, ok, detail):
        self.rows.append((case, cut, ok, detail))
        print(f"  {case:9} {cut:12} {'ok' if ok else 'BROKEN'}  {detail}", flush=True)

    # The cases

    def control(self):
        mount = self.fresh("control")
        with open(os.path.join(mount.point, "unsynced"), "wb") as f:
            f.write(b"x" * 10000)
        with open(os.path.join(mount.point, "synced"), "wb") as f:
            f.write(b"y" * 10000)
            f.flush()
            os.fsync(f.fileno())
        mount.cut("drop")
        lost = size_of(os.path.join(mount.backing, "unsynced")) == 0
        kept = open(os.path.join(mount.backing, "synced"), "rb").read() == b"y" * 10000
        self.record("control", "drop", lost and kept, f"unsynced file lost: {lost}; synced file kept: {kept}")

    def resume(self, cuts):
        pdf = big_pdf(40 << 20)
        with open(os.path.join(self.books, "large.pdf"), "wb") as f:
            f.write(pdf)
        digest = hashlib.sha256(pdf).hexdigest()
        url = f"{self.base}/large.pdf"
        for seed in range(cuts):
            mount = self.fresh("resume")
            cache = os.path.join(mount.point, "cache")
            partial = os.path.join(cache, "partial", "ebook-P00.part")
            # Cut at a different point each time: after 6 to 30 MiB have arrived.
            at = (6 + (seed * 7) % 25) << 20
            run = subprocess.Popen(
                [self.binary, "--cache-dir", cache, "download", "--id", "P00", "--limit-rate", "16MiB", "-q", url],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            wait_for(lambda: size_of(partial) >= at or run.poll() is not None, 60, "the partial file to grow")
            run.send_signal(signal.SIGKILL)
            run.wait()
            mount.cut(f"torn {seed}")
            # What the cut left: the bytes a resume record vouches for, if one survived
            record = os.path.join(mount.backing, "cache", "partial", "ebook-P00.part.resume")
            try:
                vouched = f"a record vouching for {json.load(open(record)).get('length', 0) / (1 << 20):.0f} MiB"
            except (OSError, ValueError):
                vouched = "no record"
            mount = Mount(mount.backing, mount.point)
            again = bookcache(self.binary, cache, "download", "--id", "P00", "-q", url)
            cached = os.path.join(cache, "ebooks", "P00.pdf")
            right = os.path.exists(cached) and sha256(cached) == digest
            verify = bookcache(self.binary, cache, "verify")
            # Whole or absent: a refused download is allowed (it caches nothing); a wrong file is not.
            ok = (right or not os.path.exists(cached)) and (verify.returncode == 0 or not right)
            if os.path.exists(cached) and not right:
                ok = False
            detail = f"cut at {at >> 20} MiB, {vouched}; next run exit {again.returncode}; cached {'the right bytes' if right else 'WRONG BYTES' if os.path.exists(cached) else 'nothing'}; verify exit {verify.returncode}"
            mount.cut("keep")
            self.record("resume", f"torn {seed}", ok and again.returncode == 0, detail)

    def batch_books(self, count, prefix):
        made = os.path.join(ROOT, "Benchmarks", "make-books.py")
        subprocess.run([sys.executable, made, self.books, str(count), "20000", prefix], check=True, stdout=subprocess.DEVNULL)
        names = sorted(n for n in os.listdir(self.books) if n.startswith(prefix))
        return {os.path.splitext(n)[0]: sha256(os.path.join(self.books, n)) for n in names}

    def manifest(self, books, path):
        with open(path, "w") as f:
            for name in books:
                f.write(json.dumps({"url": f"{self.base}/{name}.epub", "id": name}) + "\n")

    def sidecars(self, cuts):
        books = self.batch_books(60, "side")
        for seed in range(cuts):
            mount = self.fresh("sidecars")
            cache = os.path.join(mount.point, "cache")
            manifest = os.path.join(self.work, "sidecars.jsonl")
            self.manifest(books, manifest)
            done = bookcache(self.binary, cache, "download", "--from", manifest, "--json", "--concurrency", "8")
            reported = cached_ids(done.stdout)
            pinned = sorted(books)[seed :: 7]
            pin = bookcache(self.binary, cache, "pin", *[f"ebook-{name}" for name in pinned])
            mount.cut("drop")
            # The index is lost too, so it is rebuilt from the sidecars.
            for name in os.listdir(os.path.join(mount.backing, "cache")):
                if name.startswith("index.sqlite"):
                    os.unlink(os.path.join(mount.backing, "cache", name))
            mount = Mount(mount.backing, mount.point)
            listing = bookcache(self.binary, cache, "list", "--json")
            rebuilt = {b["id"]: b for b in json.loads(listing.stdout or "[]")} if listing.returncode == 0 else {}
            missing = sorted(i for i in reported if i not in rebuilt)
            unpinned = sorted(f"ebook-{n}" for n in pinned if pin.returncode == 0 and not rebuilt.get(f"ebook-{n}", {}).get("pinned"))
            ok = done.returncode == 0 and len(reported) == len(books) and not missing and not unpinned
            mount.cut("keep")
            self.record("sidecars", "drop", ok, f"{len(reported)} reported cached, {len(reported) - len(missing)} in the rebuilt index, {len(pinned) - len(unpinned)}/{len(pinned)} pins kept")

    def batch(self, cuts):
        books = self.batch_books(120, "batch")
        rng = random.Random(7)
        for seed in range(cuts):
            mount = self.fresh("batch")
            cache = os.path.join(mount.point, "cache")
            manifest = os.path.join(self.work, "batch.jsonl")
            self.manifest(books, manifest)
            out = open(os.path.join(self.work, "batch.out"), "w+")
            run = subprocess.Popen(
                [self.binary, "--cache-dir", cache, "download", "--from", manifest, "--json", "--concurrency", "8"],
                stdout=out, stderr=subprocess.DEVNULL,
            )
            target = rng.randrange(5, len(books) - 10)
            wait_for(lambda: open(out.name).read().count('"cached"') >= target or run.poll() is not None, 120, "books to be cached")
            run.send_signal(signal.SIGKILL)
            run.wait()
            reported = cached_ids(open(out.name).read())
            mount.cut(f"torn {seed}")
            mount = Mount(mount.backing, mount.point)
            listing = bookcache(self.binary, cache, "list", "--json")
            present = {b["id"]: b for b in json.loads(listing.stdout or "[]")} if listing.returncode == 0 else {}
            missing = sorted(i for i in reported if i not in present)
            wrong = []
            for book_id in present:
                name = book_id.split("-", 1)[1]
                path = os.path.join(cache, "ebooks", name + ".epub")
                if not os.path.exists(path) or sha256(path) != books.get(name):
                    wrong.append(book_id)
            # A book renamed into place whose record the kill cut off is a stray (as after kill -9):
            # not a broken promise; anything else verify finds is.
            verify = bookcache(self.binary, cache, "verify", "--json")
            problems = [p["kind"] for p in json.loads(verify.stdout or "{}").get("problems", [])] if verify.stdout else ["no answer"]
            broken = [kind for kind in problems if kind != "stray"]
            # And the next run completes the batch, leaving verify nothing to say.
            final = bookcache(self.binary, cache, "download", "--from", manifest, "-q")
            after = bookcache(self.binary, cache, "verify")
            ok = listing.returncode == 0 and not missing and not wrong and not broken and final.returncode == 0 and after.returncode == 0
            mount.cut("keep")
            self.record(
                "batch", f"torn {seed}", ok,
                f"killed after {len(reported)} reported; index opens: {listing.returncode == 0}; {len(missing)} reported but missing; "
                f"{len(wrong)} wrong files; verify: {len(problems) - len(broken)} strays, {len(broken)} other problems; next run exit {final.returncode}, then verify exit {after.returncode}",
            )


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("bookcache")
    parser.add_argument("server")
    parser.add_argument("--cuts", type=int, default=4, help="cuts per case (default 4)")
    parser.add_argument("--only", help="run one case: control, resume, sidecars or batch")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bookcache-powercut-")
    harness = Harness(os.path.abspath(args.bookcache), os.path.abspath(args.server), work)
    try:
        print(f"power-loss harness: {args.cuts} cuts per case, in {work}", flush=True)
        for case in ["control", "resume", "sidecars", "batch"]:
            if args.only and args.only != case:
                continue
            if case == "control":
                harness.control()
            else:
                getattr(harness, case)(args.cuts)
    finally:
        harness.close()
        for folder in os.listdir(work):
            point = os.path.join(work, folder, "mnt")
            if os.path.ismount(point):
                subprocess.run(["fusermount", "-u", "-z", point])
    broken = [row for row in harness.rows if not row[2]]
    print(f"power-loss harness: {len(harness.rows) - len(broken)} of {len(harness.rows)} cuts kept every promise")
    if not broken:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(1 if broken else 0)


if __name__ == "__main__":
    main()
