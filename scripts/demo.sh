#!/usr/bin/env bash
# The main job on a built-in default: serves Fixtures/books on 127.0.0.1, caches every valid book
# into a fresh temporary cache, shows a corrupt one being refused, then lists the cache.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build
bin="$(swift build --show-bin-path)"
cache="$(mktemp -d)/cache"
out="$(mktemp)"
"$bin/bookcache-fixture-server" Fixtures/books >"$out" &
server=$!
trap 'kill $server 2>/dev/null; rm -f "$out"' EXIT
for _ in $(seq 50); do [ -s "$out" ] && break; sleep 0.1; done
base="$(head -n1 "$out")"
[ -n "$base" ] || { echo "error: the fixture server did not start" >&2; exit 1; }
export BOOKCACHE_DIR="$cache"
echo "# serving Fixtures/books at $base; cache: $cache"
run() { echo; echo "\$ bookcache $*"; "$bin/bookcache" "$@"; }
run download "$base/alice.epub" --id alice --title "Alice in Fixtureland"
run download "$base/pride.epub" --title "Pride and Fixtures"
run download "$base/fixture-monthly-2024-05.pdf" --type magazine --id 2024-05 --title "Fixture Monthly"
run download "$base/alice.epub" --id alice
run download "$base/corrupt/crc-flip.epub" || echo "(refused, exit status $?)"
run list
run path ebook-alice
run stats
