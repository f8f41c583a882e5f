#!/usr/bin/env bash
# GRDB against SQLite's C API, for the index of a million books (issue 15). Not a test.
#
#   Benchmarks/sqlite.sh [BOOKS] [ROUNDS]      # defaults: 1000000 books, 7 rounds
#
# Builds Benchmarks/sqlite (two executables with the same schema and operations, one on a small
# C-API wrapper, one on GRDB 7.10.0) fresh in release mode and reports the build times and binary
# sizes; makes one database of BOOKS rows; then runs each operation as a new process (process start
# included, as a command would), alternating the two for ROUNDS rounds, and prints medians and
# peak RSS. SYNC=NORMAL in the environment measures WAL with synchronous=NORMAL instead of FULL;
# REUSE_BUILD=1 skips the fresh builds.
set -euo pipefail
cd "$(dirname "$0")/.."
books="${1:-1000000}"; rounds="${2:-7}"
command -v /usr/bin/time >/dev/null || scripts/apt-install.sh time
dpkg -s libsqlite3-dev >/dev/null 2>&1 || scripts/apt-install.sh libsqlite3-dev
work="${BENCH_DIR:-/tmp/bookcache-bench}/sqlite"
mkdir -p "$work"
cd Benchmarks/sqlite
if [ -z "${REUSE_BUILD:-}" ]; then
  rm -rf .build
  start=$(date +%s.%N); swift build -c release --product IndexC >/dev/null; c_build=$(echo "$(date +%s.%N) - $start" | bc)
  start=$(date +%s.%N); swift build -c release --product IndexGRDB >/dev/null; g_build=$(echo "$(date +%s.%N) - $start" | bc)
  rm -rf .build-debug
  start=$(date +%s.%N); swift build --build-path .build-debug --product IndexGRDB >/dev/null; g_debug=$(echo "$(date +%s.%N) - $start" | bc)
else
  swift build -c release >/dev/null
fi
bin="$(swift build -c release --show-bin-path)"
[ -n "${REUSE_BUILD:-}" ] || printf 'fresh release build: C wrapper %.0f s; GRDB on top of it %.0f s (debug %.0f s); binaries %s and %s bytes\n' \
  "$c_build" "$g_build" "$g_debug" "$(stat -c %s "$bin/IndexC")" "$(stat -c %s "$bin/IndexGRDB")"

db="$work/index-$books.sqlite"
if [ ! -f "$db" ]; then
  start=$(date +%s.%N); "$bin/IndexC" create "$db" "$books"
  printf 'made %s books in %.1f s (one transaction), %s bytes\n' "$books" "$(echo "$(date +%s.%N) - $start" | bc)" "$(stat -c %s "$db")"
fi

# milliseconds (wall, from bash's clock: /usr/bin/time counts in hundredths) and peak RSS in KiB
measure() {
  local start end rss
  start=$EPOCHREALTIME
  rss=$(/usr/bin/time -f "%M" "$@" 2>&1 >/dev/null | tail -1)
  end=$EPOCHREALTIME
  echo "$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.1f", (e - s) * 1000 }') $rss"
}
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
echo "| operation ($books books) | C API | GRDB | GRDB / C | peak RSS C / GRDB |"
echo "| --- | --- | --- | --- | --- |"
half=$((books / 2))
for op in "get:book$half" "touch:ebook-book$((half + 1))" "insert:ebook-new" "stats" "plan:5000000000" "list"; do
  name="${op%%:*}"; arg="${op#*:}"; [ "$arg" = "$op" ] && arg=""
  [ "$name" = get ] && arg="ebook-$arg"
  tc=(); tg=(); mc=0; mg=0
  for r in $(seq "$rounds"); do
    read -r t m < <(measure "$bin/IndexC" "$name" "$db" $arg); tc+=("$t"); [ "$m" -gt "$mc" ] && mc=$m
    read -r t m < <(measure "$bin/IndexGRDB" "$name" "$db" $arg); tg+=("$t"); [ "$m" -gt "$mg" ] && mg=$m
  done
  c=$(printf '%s\n' "${tc[@]}" | median); g=$(printf '%s\n' "${tg[@]}" | median)
  echo "| $name | $c ms | $g ms | $(awk -v c="$c" -v g="$g" 'BEGIN { if (c > 0) printf "%.2f×", g / c; else print "n/a" }') | $((mc / 1024)) / $((mg / 1024)) MiB |"
done
