#!/usr/bin/env bash
# A 200 MB EPUB over a link that resets every 30 MB: does each tool finish, and how long does it
# take? bookcache with its default --retries 3, curl with --retry-all-errors, aria2c. Not a test.
#
#   Benchmarks/resets.sh [ROUNDS] [BOOKCACHE_BINARY]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"
command -v aria2c >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq aria2 >/dev/null; }
if [ -n "${2:-}" ]; then
  bin="$2"
else
  scripts/setup.sh
  swift build -c release --product bookcache >&2
  bin="$(swift build -c release --show-bin-path)/bookcache"
fi
work="${BENCH_DIR:-/tmp/bookcache-bench}/resets"
mkdir -p "$work"
[ -f "$work/big-200MB.epub" ] || python3 Benchmarks/make-books.py "$work" 1 209715200 big-200MB stored
book="$(ls "$work"/big-200MB*.epub | head -1)"
port="${BENCH_PORT:-18468}"
python3 Benchmarks/reset-server.py "$book" "$port" $((30 * 1024 * 1024)) &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 50); do curl -s -o /dev/null -r 0-0 "http://127.0.0.1:$port/b.epub" && break; sleep 0.1; done
url="http://127.0.0.1:$port/b.epub"

run() { # name, command...
  local name="$1"; shift
  rm -rf "$work/out" && mkdir -p "$work/out"
  local start end status
  start=$(date +%s.%N)
  if timeout 300 "$@" >"$work/out.log" 2>&1; then status=ok; else status="FAILED: $(tail -1 "$work/out.log")"; fi
  end=$(date +%s.%N)
  printf '%-32s %6.1f s  %s\n' "$name" "$(echo "$end - $start" | bc)" "$status"
}
for round in $(seq "$rounds"); do
  echo "round $round"
  run "bookcache (--retries 3)" "$bin" download "$url" --id b --cache-dir "$work/out/cache" --reserve 0
  run "curl --retry 10 --retry-all-errors" curl -sS --retry 10 --retry-all-errors --retry-delay 1 -C - -o "$work/out/b.epub" "$url"
  run "aria2c -s 1 --max-tries 10" aria2c -q -s 1 -x 1 --max-tries=10 --retry-wait=1 -d "$work/out" -o b.epub "$url"
done
