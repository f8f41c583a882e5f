#!/usr/bin/env bash
# Sets up, builds, and runs every test (the CLI tests run the built bookcache binary).
# Also installs Debian's calibre (the calibre-server integration test) and nginx with openssl (the
# TLS and HTTP/2 test), and chromium (the web page of bookcache serve, driven in a real headless
# browser, in English, German and Chinese — with a Chinese font, fonts-wqy-zenhei; its screenshots
# are kept in .build/test-artifacts/) and tmux (the live display in a real
# terminal at 60 and 120 columns); when they cannot be installed, those
# tests are skipped and say why. From PyPI, in venvs under .build: calibre-web (the sync test against
# it) and feedparser with jsonschema (the OPDS catalogue read by parsers that are not ours).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if ! command -v calibre-server >/dev/null 2>&1; then
  echo "installing Debian's calibre for the calibre-server integration test" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends calibre >/dev/null; }; then
    echo "warning: calibre could not be installed; the calibre-server test will be skipped" >&2
  fi
fi
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] || ! command -v openssl >/dev/null 2>&1; then
  echo "installing Debian's nginx-light and openssl for the TLS test" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  if ! { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nginx-light openssl >/dev/null; }; then
    echo "warning: nginx could not be installed; the TLS test will be skipped" >&2
  fi
fi
if ! command -v chromium >/dev/null 2>&1; then
  echo "installing Debian's chromium for the web page test" >&2
  scripts/apt-install.sh chromium curl || echo "warning: chromium could not be installed; the web page test will be skipped" >&2
fi
if [ ! -e /usr/share/fonts/truetype/wqy/wqy-zenhei.ttc ]; then
  echo "installing a Chinese font for the web page's screenshot in Chinese" >&2
  scripts/apt-install.sh fonts-wqy-zenhei || echo "warning: no Chinese font; the Chinese screenshot will show boxes" >&2
fi
if ! command -v pdfinfo >/dev/null 2>&1 || ! command -v qpdf >/dev/null 2>&1; then
  echo "installing poppler-utils (poppler judges PDFs beside bookcache's validator) and qpdf's command (it linearizes a test PDF)" >&2
  scripts/apt-install.sh poppler-utils qpdf || echo "warning: poppler-utils or qpdf could not be installed; the tests that need them will be skipped" >&2
fi
if ! command -v jing >/dev/null 2>&1; then
  echo "installing jing (the OPDS 1.2 RELAX NG schema checks the Atom feeds of bookcache serve)" >&2
  scripts/apt-install.sh jing || echo "warning: jing could not be installed; the OPDS reader test will fail and say so" >&2
fi
if ! command -v tmux >/dev/null 2>&1; then
  echo "installing tmux for the live display test" >&2
  scripts/apt-install.sh tmux || echo "warning: tmux could not be installed; the live display test will be skipped" >&2
fi
if ! /usr/bin/python3 -c 'import fusepy' >/dev/null 2>&1 || ! command -v fusermount >/dev/null 2>&1; then
  echo "installing python3-fusepy and fuse for the power-loss harness (scripts/powercut)" >&2
  scripts/apt-install.sh python3-fusepy fuse || echo "warning: python3-fusepy could not be installed; the power-loss harness will be skipped" >&2
fi
# Parsers that are not ours for the OPDS catalogue of bookcache serve: feedparser (OPDS 1.2, Atom)
# and jsonschema with the OPDS 2.0 and Readium schemas in Fixtures/opds-schemas, in a venv of their own.
if ! .build/test-python/bin/python3 -c 'import feedparser, jsonschema' >/dev/null 2>&1; then
  echo "installing feedparser and jsonschema (PyPI) into .build/test-python for the OPDS test" >&2
  { python3 -m venv .build/test-python && .build/test-python/bin/pip install -q feedparser==6.0.14 jsonschema==4.26.0; } \
    || echo "warning: feedparser or jsonschema could not be installed; the OPDS reader test will fail and say so" >&2
fi
# calibre-web (PyPI's calibreweb) beside calibre-server, for the sync test against it, in its own venv.
if [ ! -x .build/calibre-web/bin/cps ]; then
  echo "installing calibre-web 0.6.27 (PyPI) into .build/calibre-web for the calibre-web sync test" >&2
  { python3 -m venv .build/calibre-web && .build/calibre-web/bin/pip install -q calibreweb==0.6.27; } \
    || { rm -rf .build/calibre-web; echo "warning: calibre-web could not be installed; its test will be skipped" >&2; }
fi
# The code is formatted as .swift-format says (swift format format -i -r Sources Tests Examples Package.swift fixes it).
swift format lint --strict -r Sources Tests Examples Package.swift
swift build
# The man pages in docs/man are made from the commands' help: fail when a command changed without them.
scripts/manual.sh --check
# A hang must fail with a clue, not run into CI's limit: the run is stopped after
# BOOKCACHE_TEST_MINUTES (30) and the tests that started and never ended are named.
# The output is line-buffered (stdbuf): piped, the test binary's lines sat in a buffer, and a
# hang's log lost its last ones (naming as unfinished a test that had passed). Shortly before the
# limit, the processes the tests started that are still running are noted: what a hang waits on.
log=.build/test-output.log
limit=$(( ${BOOKCACHE_TEST_MINUTES:-30} * 60 ))
( sleep $(( limit - 15 )) && ps -eo pid=,ppid=,etimes=,args= > .build/test-processes.txt ) </dev/null >/dev/null 2>&1 &
watchdog=$!
set +e
timeout --kill-after=30 "$limit" stdbuf -oL -eL swift test "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
pkill -P "$watchdog" 2>/dev/null || true
if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then
  echo "error: swift test did not end within ${BOOKCACHE_TEST_MINUTES:-30} minutes; these tests started and never ended:" >&2
  python3 scripts/unfinished-tests.py "$log" .build/test-processes.txt $$ >&2
  exit 1
fi
[ "$status" -eq 0 ] || exit "$status"
# The README's first command must work too (it broke once unnoticed): run the demo, quietly.
# And the DocC documentation must build without warnings (broken links).
if [ $# -eq 0 ]; then
  # Power cuts under real runs (scripts/powercut/run.py): a FUSE file system that loses or tears
  # unsynced writes; needs root and /dev/fuse, and says why when it cannot run.
  if [ "$(id -u)" -eq 0 ] && [ -c /dev/fuse ] && /usr/bin/python3 -c 'import fusepy' >/dev/null 2>&1; then
    /usr/bin/python3 scripts/powercut/run.py .build/debug/bookcache .build/debug/bookcache-fixture-server --cuts "${BOOKCACHE_POWERCUTS:-4}"
  else
    echo "warning: the power-loss harness needs root, /dev/fuse and python3-fusepy; skipped" >&2
  fi
  scripts/check-docs.sh
  python3 scripts/check-strings.py
  scripts/demo.sh >/dev/null 2>&1 || { echo "error: scripts/demo.sh failed; run it to see why" >&2; exit 1; }
  echo "scripts/demo.sh ran to the end"
fi
