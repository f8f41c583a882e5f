#!/usr/bin/python3
"""A real-world corpus for bookcache's verdicts: assemble, label with independent readers, score.

    Benchmarks/corpus.py build DIR          # files into DIR/files, their origin in DIR/origin.json
    Benchmarks/corpus.py label DIR          # ground truth from other tools into DIR/truth.json
    Benchmarks/corpus.py score DIR BIN...   # each bookcache binary downloads every file; the matrix

Sources (public repositories; taken from $BOOKCACHE_CORPUS_MIRROR/<owner>+<name>/repo when that
bare repository exists, else cloned once from GitHub into DIR/sources):
- w3c/epubcheck: its test EPUBs, and its unpacked test publications zipped as EPUB packaging asks
- IDPF/epub3-samples: each sample zipped as EPUB packaging asks, and as ordinary tools zip it
  (`zip -r` without -X, Finder's order, an `echo`-made mimetype)
- mozilla/pdf.js: test PDFs under 2 MB (every third by name)
- Debian documentation PDFs on this machine (/usr/share/doc)
plus realistic damage made from some of them (cut downloads, flipped bytes, CRLF conversion,
HTML pages, junk after %%EOF, a lost startxref), PDFs as readers meet them (a 2 KiB preamble
before %PDF- with the offsets counted from the file's start; linearized files of three pages or
more cut at 90% and at 99.9%), and files that are not books.

Ground truth never asks bookcache:
- EPUB: Python's zipfile CRC test and a reader's path (container.xml, the package document,
  every spine item read) decide damage; ebooklib is the third opinion (when only it fails, the
  readers disagree). Packaging conformance: the OCF rules for `mimetype` (first, stored, no
  extra field, exact bytes), which epubcheck reports as PKG-005/006/007.
- PDF: `qpdf --check`, and page 1 drawn by poppler (`pdftoppm`) and by MuPDF (`mutool draw`).
  Readable: all three succeed. Damaged: two or three fail. Uncertain: exactly one fails. A file
  qpdf calls password-protected is a row of its own (no judge is given the password). The
  header is looked for where readers look (the first MiB). A made cut is drawn at its last page
  too, where what the cut lost shows; made cuts are damaged by construction (downloads that did
  not arrive whole), whatever the judges draw — a reader's repair hides a cut that lost only the
  file's end — and the judges' view is kept in the label's detail.
"""
import hashlib
import http.server
import json
import os
import random
import re
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import time
import unicodedata
import zipfile
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from posixpath import dirname, join, normpath
from urllib.parse import unquote

DATE = (2024, 1, 1, 0, 0, 0)


# ----------------------------------------------------------------------------- sources

def repo(work, name):
    """A git directory for owner/name: the mirror's, or a shallow clone."""
    mirror = os.environ.get("BOOKCACHE_CORPUS_MIRROR", "/work/.mirror")
    bare = os.path.join(mirror, name.replace("/", "+"), "repo")
    if os.path.isdir(bare):
        return bare
    target = os.path.join(work, "sources", name.replace("/", "+"))
    if not os.path.isdir(target):
        subprocess.run(["git", "clone", "-q", "--depth", "1", "--bare", f"https://github.com/{name}.git", target], check=True)
    return target


def git_files(gitdir, prefix):
    out = subprocess.run(["git", "--git-dir", gitdir, "ls-tree", "-r", "-l", "-z", "HEAD", prefix],
                         check=True, capture_output=True).stdout.decode("utf-8", "surrogateescape")
    files = []
    for line in filter(None, out.split("\0")):
        meta, path = line.split("\t", 1)
        size = meta.split()[3]
        files.append((path, int(size) if size.isdigit() else 0))
    return files


class MissingBlob(Exception):
    """A snapshot may list a large file without holding it."""


def git_show(gitdir, path):
    spec = f"HEAD:{path}".encode("utf-8", "surrogateescape")
    p = subprocess.run([b"git", b"--git-dir", gitdir.encode(), b"show", spec], capture_output=True)
    if p.returncode != 0:
        raise MissingBlob(path)
    return p.stdout


def tree_entries(gitdir, folder):
    """(relative name, bytes) of every file under folder, mimetype first."""
    out = []
    for path, _ in git_files(gitdir, folder + "/"):
        rel = path[len(folder) + 1:]
        out.append((rel, git_show(gitdir, path)))
    out.sort(key=lambda e: (e[0] != "mimetype", e[0]))
    return out


# ----------------------------------------------------------------------------- packing

def zinfo(name, method):
    zi = zipfile.ZipInfo(name, DATE)
    zi.compress_type = method
    zi.external_attr = 0o644 << 16
    return zi


def pack_conformant(entries, path):
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries:
            z.writestr(zinfo(name, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED), data)


def pack_finder(entries, path):
    """META-INF first, mimetype deflated: what Finder's Compress and `zip -r` produce."""
    order = sorted(entries, key=lambda e: e[0])
    with zipfile.ZipFile(path, "w") as z:
        for name, data in order:
            z.writestr(zinfo(name, zipfile.ZIP_DEFLATED), data)


def pack_echo(entries, path):
    """A mimetype written with `echo`: a trailing newline."""
    with zipfile.ZipFile(path, "w") as z:
        for name, data in entries:
            if name == "mimetype":
                data = data.rstrip() + b"\n"
            z.writestr(zinfo(name, zipfile.ZIP_STORED if name == "mimetype" else zipfile.ZIP_DEFLATED), data)


def pack_zip_tool(entries, path):
    """The Info-ZIP `zip` tool without -X: mimetype first and stored, but with extra fields."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in entries:
            full = os.path.join(tmp, name)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
        target = os.path.abspath(path)
        subprocess.run(["zip", "-q0", target, "mimetype"], cwd=tmp, check=True)
        rest = [n for n, _ in entries if n != "mimetype"]
        subprocess.run(["zip", "-q", target] + rest, cwd=tmp, check=True)


# ----------------------------------------------------------------------------- damage

def damage(data, kind, seed):
    rng = random.Random(seed)
    if kind == "cut":
        return data[: len(data) * 2 // 3]
    if kind == "flip":
        b = bytearray(data)
        at = len(b) // 2 + rng.randrange(0, max(1, len(b) // 4))
        b[at] ^= 0x5A
        return bytes(b)
    if kind == "crlf":
        return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
    if kind == "junk":
        return data + b"<!-- appended by a proxy -->\n" + bytes(rng.randrange(256) for _ in range(4096))
    if kind == "nostartxref":
        i = data.rfind(b"startxref")
        return data[:i] + b"%%EOF\n" if i > 0 else data
    raise ValueError(kind)


def qpdf_write(data, *options):
    """`data` rewritten by qpdf with `options`, and the page count qpdf gives the result; None
    when qpdf cannot rewrite it."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "in.pdf"), os.path.join(tmp, "out.pdf")
        with open(src, "wb") as f:
            f.write(data)
        p = subprocess.run(["qpdf", *options, src, out], capture_output=True)
        if p.returncode not in (0, 3) or not os.path.exists(out):
            return None
        pages = subprocess.run(["qpdf", "--show-npages", out], capture_output=True, text=True)
        return open(out, "rb").read(), int(pages.stdout.strip() or 0)


def with_preamble(data, preamble):
    """A PDF whose writer put `preamble` before %PDF- and counted its offsets from the file's
    start, as exports with a preamble do: every offset of its (single, classic) cross-reference
    table and its startxref shifted. None when the file has no such table."""
    at = data.rfind(b"startxref")
    m = re.match(rb"startxref\s+(\d+)", data[at:]) if at >= 0 else None
    if not m or data[int(m.group(1)):int(m.group(1)) + 4] != b"xref" or b"/Prev" in data:
        return None
    start = int(m.group(1))
    shift = len(preamble)
    table = re.compile(rb"(\d{10}) (\d{5}) n")

    def moved(entry):
        return b"%010d %s n" % (int(entry.group(1)) + shift, entry.group(2))

    end = data.find(b"trailer", start)
    if end < 0:
        return None
    xref = table.sub(moved, data[start:end])
    tail = data[end:at] + b"startxref\n%d\n%%%%EOF\n" % (start + shift)
    return preamble + data[:start] + xref + tail


def made_pdfs(data, seed, preamble):
    """Files a reader meets that take more than a flipped byte to make, each with how it was made:
    a preamble before %PDF- (offsets counted from the file's start, as exports write them), and,
    of a file with three pages or more, its linearized form cut at 90% and at 99.9%: cut downloads,
    damaged by construction whatever the judges draw (a reader's repair hides a cut that lost only
    the file's end; one that lost pages shows on the last page)."""
    made = {}
    plain = qpdf_write(data, "--object-streams=disable", "--stream-data=preserve") if preamble else None
    if plain:
        rng = random.Random(seed)
        preamble = b"".join(b"%d preamble line before the document\n" % rng.randrange(10**6) for _ in range(60))[:2048]
        shifted = with_preamble(plain[0], preamble)
        if shifted:
            made["preamble"] = {"data": shifted, "made": "a 2 KiB preamble before %PDF-, offsets counted from the file's start"}
    linear = qpdf_write(data, "--linearize")
    if linear and linear[1] >= 3:
        whole, pages = linear
        made["linearized-cut90"] = {"data": whole[: len(whole) * 9 // 10], "made": "damaged: linearized, cut at 90%",
                                    "pages": pages, "truth": "damaged", "why": "a cut download (by construction)"}
        made["linearized-cut999"] = {"data": whole[: len(whole) * 999 // 1000],
                                     "made": "damaged: linearized, cut at 99.9%", "pages": pages,
                                     "truth": "damaged", "why": "a cut download (by construction)"}
    return made


HTML = b"<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body><form>Please sign in</form></body></html>\n"


# ----------------------------------------------------------------------------- build

def build(work):
    files = os.path.join(work, "files")
    shutil.rmtree(files, ignore_errors=True)
    os.makedirs(files)
    origin = {}

    def put(name, data, source, made):
        path = os.path.join(files, name)
        with open(path, "wb") as f:
            f.write(data)
        origin[name] = {"source": source, "made": made}
        return path

    def put_made(base, data, source, seed, preamble):
        for kind, made in made_pdfs(data, seed, preamble).items():
            name = f"{base}--{kind}.pdf"
            put(name, made.pop("data"), source, made.pop("made"))
            origin[name].update(made)

    def put_packed(name, entries, source, packer, made):
        path = os.path.join(files, name)
        packer(entries, path)
        origin[name] = {"source": source, "made": made}

    epubcheck = repo(work, "w3c/epubcheck")
    for path, size in git_files(epubcheck, "src/test/resources"):
        if path.endswith(".epub"):
            name = "epubcheck--" + path.split("src/test/resources/")[1].replace("/", "--")
            try:
                put(name, git_show(epubcheck, path), f"w3c/epubcheck {path}", "as published")
            except MissingBlob:
                continue
    dirs = sorted({dirname(p) for p, _ in git_files(epubcheck, "src/test/resources") if p.endswith("/mimetype")})
    for folder in dirs:
        try:
            entries = tree_entries(epubcheck, folder)
        except MissingBlob as missing:
            print(f"skipped {folder}: {missing} is not in the snapshot", file=sys.stderr)
            continue
        if not any(n == "META-INF/container.xml" for n, _ in entries):
            continue
        name = "epubcheck--" + folder.split("src/test/resources/")[1].replace("/", "--") + ".epub"
        put_packed(name, entries, f"w3c/epubcheck {folder}/", pack_conformant, "zipped as OCF asks")

    samples = repo(work, "IDPF/epub3-samples")
    sample_dirs = sorted({p.split("/")[1] for p, _ in git_files(samples, "30/")})
    for index, sample in enumerate(sample_dirs):
        try:
            entries = tree_entries(samples, f"30/{sample}")
        except MissingBlob as missing:
            print(f"skipped {sample}: {missing} is not in the snapshot", file=sys.stderr)
            continue
        source = f"IDPF/epub3-samples 30/{sample}/"
        put_packed(f"sample--{sample}.epub", entries, source, pack_conformant, "zipped as OCF asks")
        put_packed(f"sample--{sample}--zip-r.epub", entries, source, pack_zip_tool, "zip without -X")
        put_packed(f"sample--{sample}--finder.epub", entries, source, pack_finder, "META-INF first, mimetype deflated")
        put_packed(f"sample--{sample}--echo.epub", entries, source, pack_echo, "mimetype made with echo")
        if index < 10:
            good = open(os.path.join(files, f"sample--{sample}.epub"), "rb").read()
            for kind in ("cut", "flip", "crlf"):
                put(f"sample--{sample}--{kind}.epub", damage(good, kind, index), source, f"damaged: {kind}")

    pdfjs = repo(work, "mozilla/pdf.js")
    pdfs = sorted(p for p, size in git_files(pdfjs, "test/pdfs/") if p.endswith(".pdf") and 0 < size < 2_000_000)
    chosen = pdfs[::3]
    for index, path in enumerate(chosen):
        try:
            data = git_show(pdfjs, path)
        except MissingBlob:
            continue
        base = os.path.basename(path)[:-4]
        put(f"pdfjs--{base}.pdf", data, f"mozilla/pdf.js {path}", "as published")
        if index % 12 == 0:
            for kind in ("cut", "flip", "crlf", "junk", "nostartxref"):
                put(f"pdfjs--{base}--{kind}.pdf", damage(data, kind, index), f"mozilla/pdf.js {path}", f"damaged: {kind}")
        put_made(f"pdfjs--{base}", data, f"mozilla/pdf.js {path}", index, preamble=index % 12 == 0)
    for root, _, names in os.walk("/usr/share/doc"):
        for name in sorted(names):
            if name.endswith(".pdf"):
                data = open(os.path.join(root, name), "rb").read()
                put(f"debian--{name}", data, f"Debian {os.path.join(root, name)}", "as installed")
                put_made(f"debian--{name[:-4]}", data, f"Debian {os.path.join(root, name)}", len(origin), preamble=False)

    put("notabook--login.epub", HTML, "made", "an HTML login page")
    put("notabook--login.pdf", b"%PDF-1.4\n" + HTML, "made", "an HTML page after a %PDF- line")
    put("notabook--empty.epub", b"", "made", "empty")
    with zipfile.ZipFile(os.path.join(files, "notabook--plain.epub"), "w") as z:
        z.writestr("readme.txt", "just a zip")
    origin["notabook--plain.epub"] = {"source": "made", "made": "a ZIP that is not an EPUB"}

    with open(os.path.join(work, "origin.json"), "w") as f:
        json.dump(origin, f, indent=1, sort_keys=True)
    print(f"{len(origin)} files in {files}", file=sys.stderr)


# ----------------------------------------------------------------------------- label

def epub_truth(path):
    """(readable, conformant, detail) as readers see it."""
    data = open(path, "rb").read()
    if not data.startswith(b"PK\x03\x04"):
        return "not-a-book", "not a ZIP archive"
    try:
        z = zipfile.ZipFile(path)
        bad = z.testzip()
        if bad:
            return "damaged", f"zipfile: CRC error in {bad}"
        names = set(z.namelist())
        if "META-INF/container.xml" not in names:
            return ("not-a-book" if not any(n.endswith(".opf") for n in names) else "damaged"), "no container.xml"
        container = ET.fromstring(z.read("META-INF/container.xml"))
        rootfile = next(e.get("full-path") for e in container.iter() if e.tag.endswith("rootfile"))
        opf = ET.fromstring(z.read(rootfile))
        manifest = {e.get("id"): e.get("href") for e in opf.iter() if e.tag.endswith("}item") or e.tag == "item"}
        spine = [e.get("idref") for e in opf.iter() if e.tag.endswith("itemref")]
        if not spine:
            return "damaged", "empty spine"
        # EPUB asks names to be unique after Unicode canonical normalisation (NFC), so a reader
        # following it finds an item spelled in another normalisation.
        by_nfc = {unicodedata.normalize("NFC", n): n for n in names}
        for idref in spine:
            href = normpath(join(dirname(rootfile), unquote(manifest[idref].split("#")[0])))
            z.read(href if href in names else by_nfc[unicodedata.normalize("NFC", href)])
    except Exception as error:  # any failure on a reader's path is a book a reader cannot open
        return "damaged", f"reader path: {type(error).__name__}: {error}"[:200]
    try:
        import ebooklib.epub
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ebooklib.epub.read_epub(path, {"ignore_ncx": True})
    except Exception as error:
        # ebooklib alone fails (it reads remote resources and missing fonts as archive entries,
        # and not OEBPS 1.2 packages): the readers disagree.
        return "uncertain", f"only ebooklib fails: {type(error).__name__}: {error}"[:200]
    first = z.infolist()[0]
    conformant = (first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED and not first.extra
                  and z.read("mimetype") == b"application/epub+zip")
    return ("conformant" if conformant else "quirky"), "" if conformant else "mimetype packaging rules"


def run(cmd, timeout=120):
    try:
        p = subprocess.run(cmd, capture_output=True, timeout=timeout)
        return p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return 124, "timeout"


def pdf_truth(path, made=None):
    made = made or {}
    truth, detail = judged_pdf(path, made)
    if "truth" in made:
        # Damaged by construction (a download that did not arrive whole); what the judges said is kept.
        return made["truth"], f"{made['why']}; judges: {truth}{', ' + detail if detail else ''}"
    return truth, detail


def judged_pdf(path, made):
    # Readers find the header after a preamble (poppler opens one of 1 MiB).
    head = open(path, "rb").read(1 << 20)
    if b"%PDF-" not in head:
        return "not-a-book", "no %PDF- header"
    with tempfile.TemporaryDirectory() as tmp:
        q, qerr = run(["qpdf", "--check", path])
        if "invalid password" in qerr:
            return "password", "readers ask for a password"
        p, perr = run(["pdftoppm", "-f", "1", "-l", "1", "-r", "20", path, os.path.join(tmp, "p")])
        m, merr = run(["mutool", "draw", "-o", os.path.join(tmp, "m.png"), "-r", "20", path, "1"])
        # A made cut: its last page too, where what the cut lost shows.
        last = made.get("pages", 0)
        if last > 1:
            p2, perr2 = run(["pdftoppm", "-f", str(last), "-l", str(last), "-r", "20", path, os.path.join(tmp, "p2")])
            m2, merr2 = run(["mutool", "draw", "-o", os.path.join(tmp, "m2.png"), "-r", "20", path, str(last)])
            p, perr = (p or p2), perr + perr2
            m, merr = (m or m2), merr + merr2
    # A reader that draws the page but says a stream it needed would not decode (a font's or an
    # image's deflated data) has hit damage too, though it exits 0: MuPDF "ignoring zlib error",
    # poppler "... in flate stream" or "Embedded font file may be invalid".
    p_damage = "flate stream" in perr or "Embedded font file may be invalid" in perr
    m_damage = "zlib error" in merr
    fails = [name for name, ok in (("qpdf", q != 2), ("poppler", p == 0 and not p_damage), ("mupdf", m == 0 and not m_damage))
             if not ok]
    if not fails:
        return ("conformant" if q == 0 else "quirky"), "" if q == 0 else "qpdf --check warnings"
    if len(fails) == 1:
        return "uncertain", "only " + fails[0] + " fails"
    return "damaged", " and ".join(fails) + " fail"


def label(work):
    files = os.path.join(work, "files")
    names = sorted(os.listdir(files))
    origin = json.load(open(os.path.join(work, "origin.json")))

    def one(name):
        path = os.path.join(files, name)
        truth, detail = epub_truth(path) if name.endswith(".epub") else pdf_truth(path, origin.get(name))
        return name, {"truth": truth, "detail": detail}

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        truth = dict(pool.map(one, names))
    with open(os.path.join(work, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True)
    counts = {}
    for t in truth.values():
        counts[t["truth"]] = counts.get(t["truth"], 0) + 1
    print(json.dumps(counts, sort_keys=True), file=sys.stderr)


# ----------------------------------------------------------------------------- score

class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def verdicts(binary, files, names):
    """Each file downloaded by `binary` from a loopback server, as a user would: cached,
    cached with a warning, or refused (with the reason)."""
    handler = lambda *a, **k: Quiet(*a, directory=files, **k)
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    out = {}
    try:
        with tempfile.TemporaryDirectory() as cache:
            for index, name in enumerate(names):
                book = "b" + hashlib.sha1(name.encode()).hexdigest()[:12]
                cmd = [binary, "download", f"http://127.0.0.1:{port}/{name}", "--id", book, "--cache-dir", cache, "--retries", "0"]
                p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, BOOKCACHE_RESERVE="0"))
                warned = [l for l in p.stderr.splitlines() if l.startswith("warning:")]
                if p.returncode == 0:
                    out[name] = {"verdict": "warned" if warned else "cached", "detail": " | ".join(warned)}
                else:
                    out[name] = {"verdict": "refused", "detail": p.stderr.strip().splitlines()[-1] if p.stderr.strip() else ""}
                subprocess.run([binary, "delete", f"ebook-{book}", "--cache-dir", cache], capture_output=True)
                subprocess.run([binary, "delete", f"magazine-{book}", "--cache-dir", cache], capture_output=True)
    finally:
        server.shutdown()
    return out


ROWS = [
    ("readers open it, conformant", "conformant"),
    ("readers open it, not conformant", "quirky"),
    ("damaged", "damaged"),
    ("not a book", "not-a-book"),
    ("readers disagree (one of three fails)", "uncertain"),
    ("readers ask for a password", "password"),
]


def matrix(truth, result, kind):
    lines = [f"| {kind}: truth | files | cached | cached with a warning | refused |", "| --- | --- | --- | --- | --- |"]
    for label_, key in ROWS:
        names = [n for n, t in truth.items() if t["truth"] == key and n.endswith(kind) and n in result]
        if not names:
            continue
        c = sum(result[n]["verdict"] == "cached" for n in names)
        w = sum(result[n]["verdict"] == "warned" for n in names)
        r = sum(result[n]["verdict"] == "refused" for n in names)
        lines.append(f"| {label_} | {len(names)} | {c} | {w} | {r} |")
    return "\n".join(lines)


def mistakes(truth, result):
    out = []
    for name in sorted(result):
        t, v = truth[name]["truth"], result[name]["verdict"]
        if (t in ("conformant", "quirky") and v == "refused") or (t in ("damaged", "not-a-book") and v != "refused"):
            out.append(f"- `{name}` ({t}: {truth[name]['detail'] or 'ok'}) → {v}: {result[name]['detail'][:160]}")
    return out


def timed(cmds):
    start = time.perf_counter()
    for cmd in cmds:
        subprocess.run(cmd, capture_output=True)
    return time.perf_counter() - start


def score(work, binaries):
    files = os.path.join(work, "files")
    truth = json.load(open(os.path.join(work, "truth.json")))
    names = sorted(truth)
    report = [f"# Verdicts on {len(names)} real-world files", ""]
    for binary in binaries:
        result = verdicts(binary, files, names)
        report += [f"## `{binary}`", "", matrix(truth, result, ".epub"), "", matrix(truth, result, ".pdf"), ""]
        wrong = mistakes(truth, result)
        report += [f"Mistakes ({len(wrong)}):", ""] + (wrong or ["none"]) + [""]
    # Validation time, one process per file for every tool.
    newest = binaries[-1]
    epubs = [os.path.join(files, n) for n in names if n.endswith(".epub")]
    pdfs = [os.path.join(files, n) for n in names if n.endswith(".pdf")]
    has_validate = subprocess.run([newest, "validate", "--help"], capture_output=True).returncode == 0
    if has_validate:
        b_epub = timed([[newest, "validate", p] for p in epubs])
        u_epub = timed([["unzip", "-tqq", p] for p in epubs])
        b_pdf = timed([[newest, "validate", p] for p in pdfs])
        q_pdf = timed([["qpdf", "--check", p] for p in pdfs])
        report += ["## Validation time (one process per file)", "",
                   "| files | bookcache validate | other | ratio |", "| --- | --- | --- | --- |",
                   f"| {len(epubs)} EPUBs | {b_epub:.2f} s | unzip -t {u_epub:.2f} s | {b_epub / u_epub:.2f}× |",
                   f"| {len(pdfs)} PDFs | {b_pdf:.2f} s | qpdf --check {q_pdf:.2f} s | {b_pdf / q_pdf:.2f}× |"]
        # One process over every EPUB: what validation costs without a process start each.
        b_all = timed([[newest, "validate"] + epubs])
        report.append(f"| {len(epubs)} EPUBs, one bookcache process | {b_all:.2f} s | unzip -t, a process each {u_epub:.2f} s | {b_all / u_epub:.2f}× |")
        # A large EPUB of deflated prose, where the CRC pass is the work.
        large = os.path.join(work, "prose0.epub")
        subprocess.run(["python3", "Benchmarks/make-books.py", work, "1", "209715200", "prose", "text"], check=True)
        b_large = min(timed([[newest, "validate", large]]) for _ in range(3))
        u_large = min(timed([["unzip", "-tqq", large]]) for _ in range(3))
        report.append(f"| one {os.path.getsize(large) / 1e6:.0f} MB EPUB of deflated prose (best of 3) | {b_large:.2f} s | unzip -t {u_large:.2f} s | {b_large / u_large:.2f}× |")
        # A 44 MB PDF: the readable PDFs merged by qpdf, four times over.
        big = os.path.join(work, "big.pdf")
        if not os.path.exists(big):
            parts = [p for p in pdfs if truth[os.path.basename(p)]["truth"] == "conformant"]
            once = os.path.join(work, "merged.pdf")
            subprocess.run(["qpdf", "--empty", "--pages"] + parts + ["--", once], capture_output=True)
            copies = []
            for n in range(4):
                copies.append(os.path.join(work, f"merged{n}.pdf"))
                shutil.copy(once, copies[-1])
            subprocess.run(["qpdf", "--empty", "--pages"] + copies + ["--", big], capture_output=True)
        if os.path.exists(big):
            mb = os.path.getsize(big) / 1e6
            b_big = min(timed([[newest, "validate", big]]) for _ in range(3))
            q_big = min(timed([["qpdf", "--check", big]]) for _ in range(3))
            report.append(f"| one {mb:.0f} MB PDF (best of 3) | {b_big:.2f} s | qpdf --check {q_big:.2f} s | {b_big / q_big:.2f}× |")
    text = "\n".join(report) + "\n"
    os.makedirs("Benchmarks/results", exist_ok=True)
    with open("Benchmarks/results/corpus.md", "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("build", "label", "score"):
        print(__doc__, file=sys.stderr)
        sys.exit(64)
    command, work = sys.argv[1], os.path.abspath(sys.argv[2])
    os.makedirs(work, exist_ok=True)
    if command == "build":
        build(work)
    elif command == "label":
        label(work)
    else:
        score(work, [os.path.abspath(b) for b in sys.argv[3:]] or ["bookcache"])
