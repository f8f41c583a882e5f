#!/usr/bin/env bash
# A/B of two revisions of bookcache on loopback nginx: alternating rounds (ABBA), medians, the ratio.
# Not a test. A speed-up earns its place with at least 7 rounds showing 10% or more.
#
#   Benchmarks/ab.sh REV_A REV_B [large|batch|small|latency-batch|latency-small] [ROUNDS]
#
# The latency cases go through Benchmarks/delay-proxy.py (a 40 ms round trip), as `run.sh latency`:
# 200 × 1 MiB over HTTP/1.1 at 8 at once, 1000 × 64 KiB over HTTPS with HTTP/2 at 16 at once.
#
# Each revision is built in release mode in its own worktree under $BENCH_DIR/ab-REV; a path to a
# bookcache binary may stand for a revision (a build of uncommitted work, say).
set -euo pipefail
cd "$(dirname "$0")/.."
rev_a="$1"; rev_b="$2"; what="${3:-large}"; rounds="${4:-7}"
work="${BENCH_DIR:-/tmp/bookcache-bench}"
port="${BENCH_PORT:-18468}"
mkdir -p "$work/books"

build() { # REV or binary -> path of its bookcache binary
  if [ -x "$1" ] && [ -f "$1" ]; then echo "$1"; return; fi
  local rev; rev="$(git rev-parse --short "$1")"; local tree="$work/ab-$rev"
  [ -d "$tree" ] || git worktree add -q --detach "$tree" "$rev" >&2
  (cd "$tree" && swift build -c release --product bookcache --static-swift-stdlib >&2)
  echo "$(cd "$tree" && swift build -c release --static-swift-stdlib --show-bin-path)/bookcache"
}
bin_a="$(build "$rev_a")"; bin_b="$(build "$rev_b")"

nginx_pid="$(Benchmarks/nginx.sh "$work/books" "$port" "$work/nginx-ab" "$((port + 1))")"
proxy_pids=()
trap 'kill "$nginx_pid" ${proxy_pids[@]+"${proxy_pids[@]}"} 2>/dev/null || true; rm -rf "$work/ab-trash"' EXIT
base="http://127.0.0.1:$port"

case "$what" in
  large) python3 Benchmarks/make-books.py "$work/books" 1 1073741824 big
         args() { echo "download $base/big0.epub --reserve 0"; } ;;
  batch) python3 Benchmarks/make-books.py "$work/books" 500 1048576 m
         seq 0 499 | sed "s#.*#$base/m&.epub#" >"$work/ab-batch.txt"
         args() { echo "download --from $work/ab-batch.txt --concurrency 8"; } ;;
  small) python3 Benchmarks/make-books.py "$work/books" 2000 65536 s
         seq 0 1999 | sed "s#.*#$base/s&.epub#" >"$work/ab-small.txt"
         args() { echo "download --from $work/ab-small.txt --concurrency 16"; } ;;
  latency-batch)
         python3 Benchmarks/make-books.py "$work/books" 200 1048576 m
         proxy_pids+=("$(Benchmarks/delay.sh "$((port + 3))" "$port" 20)")
         seq 0 199 | sed "s#.*#http://127.0.0.1:$((port + 3))/m&.epub#" >"$work/ab-lat-batch.txt"
         args() { echo "download --from $work/ab-lat-batch.txt --concurrency 8"; } ;;
  latency-small)
         python3 Benchmarks/make-books.py "$work/books" 1000 65536 s
         proxy_pids+=("$(Benchmarks/delay.sh "$((port + 2))" "$((port + 1))" 20)")
         seq 0 999 | sed "s#.*#https://127.0.0.1:$((port + 2))/s&.epub#" >"$work/ab-lat-small.txt"
         args() { echo "download --from $work/ab-lat-small.txt --concurrency 16 --cacert $work/nginx-ab/ca.pem"; } ;;
  *) echo "unknown case: $what" >&2; exit 64 ;;
esac

# The previous run's cache is put aside, not deleted, until the end: on ext4 without a journal
# a new inode skips every inode deleted in the last minutes (see run.sh, discard), which made
# whichever binary ran second in a round slower.
run() { # BIN -> "SECONDS KIB"
  if [ "$what" = large ]; then rm -rf "$work/ab-cache"  # one inode; a GiB a round is too much to keep
  elif [ -e "$work/ab-cache" ]; then mkdir -p "$work/ab-trash"; mv "$work/ab-cache" "$(mktemp -d "$work/ab-trash/XXXXXX")/"; fi
  sync  # nothing dirty left by the previous run for this one's first fsync to pay
  local tf; tf="$(mktemp)"
  /usr/bin/time -f "%e %M" -o "$tf" "$1" $(args) --cache-dir "$work/ab-cache" >/dev/null
  cat "$tf"; rm -f "$tf"
}
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

ta=(); tb=(); ma=(); mb=()
# ABBA: odd rounds run A first, even rounds B first. On this VM whichever runs second in a
# round is 5-7% slower (its page cache and disk state); a fixed order turned that into a fake
# regression or speed-up.
for r in $(seq "$rounds"); do
  if (( r % 2 )); then
    read -r t m < <(run "$bin_a"); ta+=("$t"); ma+=("$m")
    read -r t m < <(run "$bin_b"); tb+=("$t"); mb+=("$m")
  else
    read -r t m < <(run "$bin_b"); tb+=("$t"); mb+=("$m")
    read -r t m < <(run "$bin_a"); ta+=("$t"); ma+=("$m")
  fi
  echo "round $r: A ${ta[-1]} s, B ${tb[-1]} s" >&2
done
a="$(printf '%s\n' "${ta[@]}" | median)"; b="$(printf '%s\n' "${tb[@]}" | median)"
# This VM runs in two speeds that can change mid-run (every tool's time and CPU time move by up
# to 1.5x together, from the host): the median of each round's own B/A compares A and B within
# the same minute, which the ratio of the two medians does not when the speed changed.
paired="$(for i in "${!ta[@]}"; do awk -v a="${ta[$i]}" -v b="${tb[$i]}" 'BEGIN { printf "%.4f\n", b / a }'; done | median)"
echo "$what, $rounds rounds: A ($rev_a) $a s, peak $(( $(printf '%s\n' "${ma[@]}" | sort -n | tail -1) / 1024 )) MiB;" \
  "B ($rev_b) $b s, peak $(( $(printf '%s\n' "${mb[@]}" | sort -n | tail -1) / 1024 )) MiB;" \
  "B/A $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.3f", b / a }'), median of the rounds' own B/A $(printf '%.3f' "$paired")"
