#!/usr/bin/env bash
# BookCache benchmarks against curl and aria2 on loopback (nginx with sendfile). Not a test: it
# prints a table of medians and ratios and writes it to Benchmarks/results/latest.md.
#
#   Benchmarks/run.sh [all|batch|small|large|latency|limit|index|service|abuse|verify|start|memory] [ROUNDS]
#
# Installs nginx, aria2, wget2, curl and python3 when missing; builds bookcache in release mode.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
rounds="${2:-5}"

need=()
command -v nginx >/dev/null || need+=(nginx-light)
command -v aria2c >/dev/null || need+=(aria2)
command -v wget2 >/dev/null || need+=(wget2)
command -v curl >/dev/null || need+=(curl)
command -v python3 >/dev/null || need+=(python3)
command -v /usr/bin/time >/dev/null || need+=(time)
command -v hyperfine >/dev/null || need+=(hyperfine)
command -v openssl >/dev/null || need+=(openssl)
command -v cc >/dev/null || need+=(gcc)
scripts/apt-install.sh ${need[@]+"${need[@]}"}
scripts/setup.sh
# BOOKCACHE_BIN=PATH measures that binary (another commit's release build) instead of building.
if [ -n "${BOOKCACHE_BIN:-}" ]; then
  bin="$BOOKCACHE_BIN"
else
  swift build -c release --product bookcache --static-swift-stdlib >&2
  bin="$(swift build -c release --static-swift-stdlib --show-bin-path)/bookcache"
fi
# Only an optimized build shows the compiler hazard this looks for; CI builds for debugging.
scripts/check-thread-locals.sh "$bin"

work="${BENCH_DIR:-/tmp/bookcache-bench}"
mkdir -p "$work/books" Benchmarks/results
port="${BENCH_PORT:-18467}"
nginx_pid=""
proxy_pids=()
cleanup() {
  [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null || true
  for p in ${proxy_pids[@]+"${proxy_pids[@]}"}; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work/trash"
}
trap cleanup EXIT

# Runs put their output aside instead of deleting it; the trash goes when the benchmark ends.
# On ext4 without a journal (this VM's root), a new inode skips every inode deleted in the last
# 60-360 s (fs/ext4/ialloc.c, recently_deleted), each skip a look-up: a run right after
# `rm -rf` of 2,000 books spent 1-2 s more in the kernel's openat (perf: find_inode_bit,
# recently_deleted) - a cost of the benchmark, not of the tool, and larger for whichever
# tool creates more files.
discard() { mkdir -p "$work/trash"; local d; for d in "$@"; do [ -e "$d" ] && mv "$d" "$(mktemp -d "$work/trash/XXXXXX")/"; done; return 0; }

out="Benchmarks/results/latest.md"
{
  echo "# BookCache benchmarks"
  echo
  echo "$(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(uname -r), rounds: $rounds (medians; A/B runs alternate)"
  echo
  echo "| case | bookcache | other | ratio (bookcache / other) | bookcache peak RSS |"
  echo "| --- | --- | --- | --- | --- |"
} >"$out"

# seconds and peak RSS (KiB) of a command: "SECONDS KIB"
measure() {
  local tf; tf="$(mktemp)"
  /usr/bin/time -f "%e %M" -o "$tf" "$@" >/dev/null 2>"$tf.err" || { echo "command failed: $*" >&2; cat "$tf.err" >&2; rm -f "$tf" "$tf.err"; return 1; }
  cat "$tf"; rm -f "$tf" "$tf.err"
}

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.3f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

# compare NAME OTHER_LABEL PREPARE_A CMD_A PREPARE_B CMD_B: alternates A and B for $rounds rounds
compare() {
  local name="$1" label="$2" prepA="$3" cmdA="$4" prepB="$5" cmdB="$6"
  local ta=() tb=() ra=()
  # Each timed run starts with nothing dirty on the disk (`sync` after the preparation, untimed):
  # otherwise a run that made nothing durable (curl) leaves its writeback for the next run's
  # first fsync to pay (ext4 commits the journal with the dirty data it orders).
  for r in $(seq "$rounds"); do
    eval "$prepA"; sync; read -r t m < <(measure bash -c "$cmdA"); ta+=("$t"); ra+=("$m")
    eval "$prepB"; sync; read -r t m < <(measure bash -c "$cmdB"); tb+=("$t")
  done
  local a b rss
  a="$(printf '%s\n' "${ta[@]}" | median)"; b="$(printf '%s\n' "${tb[@]}" | median)"
  rss="$(printf '%s\n' "${ra[@]}" | sort -n | tail -1)"
  local ratio; ratio="$(awk -v a="$a" -v b="$b" 'BEGIN { if (b > 0) printf "%.2f×", a / b; else print "n/a" }')"
  echo "| $name | ${a} s | ${label} ${b} s | $ratio | $((rss / 1024)) MiB |" | tee -a "$out"
}

start_nginx() {
  # HTTP on $port, HTTPS with HTTP/2 on $port + 1.
  nginx_pid="$(Benchmarks/nginx.sh "$work/books" "$port" "$work/nginx" "$((port + 1))")"
  base="http://127.0.0.1:$port"
  ca="$work/nginx/ca.pem"
}

# race NAME LIST CONCURRENCY [TURNAROUND_LOG]: bookcache, curl --parallel, wget2 and aria2c on the
# URLs of LIST with CONCURRENCY at once, each followed by `sync -f` of what it wrote, alternating
# for $rounds rounds; prints each one's median and bookcache's ratio to the fastest peer. With the
# log its delay proxy writes, also each one's median turnaround (from a response's last bytes to
# the next request on the connection: the time the network waits for the client).
race() {
  local name="$1" list="$2" n="$3" turnarounds="${4:-}"
  { echo "remote-name-all"; sed 's#.*#url = "&"#' "$list"; } >"$list.curlrc"
  local tools=(bookcache curl wget2 aria2c)
  local -A cmd times
  cmd[bookcache]="$bin download --from $list --concurrency $n --cacert $ca --cache-dir $work/lat-c"
  # BOOKCACHE_BIN_BEFORE=PATH races another build of bookcache too (a before/after in the same rounds).
  if [ -n "${BOOKCACHE_BIN_BEFORE:-}" ]; then
    tools+=(before)
    cmd[before]="$BOOKCACHE_BIN_BEFORE download --from $list --concurrency $n --cacert $ca --cache-dir $work/lat-c"
  fi
  cmd[curl]="cd $work/lat-d && curl -s --cacert $ca --parallel --parallel-max $n -K $list.curlrc && sync -f ."
  cmd[wget2]="cd $work/lat-d && wget2 -q --no-robots --max-threads=$n --ca-certificate=$ca -i $list && sync -f ."
  cmd[aria2c]="aria2c -q -j $n -x 1 --ca-certificate=$ca --allow-overwrite=true --auto-file-renaming=false -d $work/lat-d -i $list && sync -f $work/lat-d"
  local r t m tool
  local -A turns
  for r in $(seq "$rounds"); do
    for tool in "${tools[@]}"; do
      discard "$work/lat-c" "$work/lat-d"; mkdir -p "$work/lat-d"; sync
      [ -n "$turnarounds" ] && : >"$turnarounds"
      read -r t m < <(measure bash -c "${cmd[$tool]}")
      times[$tool]+="$t "
      [ -n "$turnarounds" ] && turns[$tool]+="$(median <"$turnarounds") "
    done
  done
  local -A med
  for tool in "${tools[@]}"; do med[$tool]="$(printf '%s\n' ${times[$tool]} | median)"; done
  local fastest="" best=""
  for tool in curl wget2 aria2c; do
    if [ -z "$best" ] || awk -v a="${med[$tool]}" -v b="$best" 'BEGIN { exit !(a < b) }'; then best="${med[$tool]}"; fastest="$tool"; fi
  done
  local ratio; ratio="$(awk -v a="${med[bookcache]}" -v b="$best" 'BEGIN { printf "%.2f×", a / b }')"
  local before=""
  [ -n "${med[before]:-}" ] && before=", bookcache before ${med[before]} s ($(awk -v a="${med[before]}" -v b="$best" 'BEGIN { printf "%.2f×", a / b }'))"
  echo "| $name | ${med[bookcache]} s | curl ${med[curl]} s, wget2 ${med[wget2]} s, aria2c ${med[aria2c]} s (each then sync -f)$before | $ratio of $fastest | |" | tee -a "$out"
  if [ -n "$turnarounds" ]; then
    local line="turnaround per request, median of the rounds' medians (ms):"
    for tool in "${tools[@]}"; do line+=" $tool $(printf '%s\n' ${turns[$tool]} | median),"; done
    echo "${line%,}" | tee -a "$out"
  fi
}

books() { # COUNT SIZE PREFIX
  python3 Benchmarks/make-books.py "$work/books" "$1" "$2" "$3"
}

# A bare libzip CRC pass over the files it is given (Benchmarks/zipcrc.c).
cc -O2 -o "$work/zipcrc" Benchmarks/zipcrc.c -lzip

# The same promise as bookcache's, made by the peer's user with the fastest tools at hand: the
# files made durable (`sync -f`), then each one's SHA-256 (OpenSSL, as bookcache uses) and a
# CRC pass over each ZIP entry (libzip, as bookcache uses), on the two cores at once.
same_promise() { # run in the peer's folder
  echo "sync -f . && { openssl dgst -sha256 *.epub >/dev/null & hash=\$!; $work/zipcrc *.epub && wait \$hash; }"
}

start_nginx

if [ "$what" = all ] || [ "$what" = batch ]; then
  books 500 1048576 m
  seq 0 499 | sed "s#.*#$base/m&.epub#" >"$work/batch-500.txt"
  compare "500 × 1 MiB, concurrency 8" "xargs -P 8 curl" \
    "discard $work/c1 $work/d1; mkdir -p $work/d1" "$bin download --from $work/batch-500.txt --concurrency 8 --cache-dir $work/c1" \
    "discard $work/d1; mkdir -p $work/d1" "cd $work/d1 && xargs -P 8 -n 1 curl -s -O <$work/batch-500.txt"
  { echo "remote-name-all"; sed 's#.*#url = "&"#' "$work/batch-500.txt"; } >"$work/batch-500.curlrc"
  compare "500 × 1 MiB, concurrency 8" "curl --parallel-max 8" \
    "discard $work/c1" "$bin download --from $work/batch-500.txt --concurrency 8 --cache-dir $work/c1" \
    "discard $work/d4; mkdir -p $work/d4" "cd $work/d4 && curl -s --parallel --parallel-max 8 -K $work/batch-500.curlrc"
  # bookcache makes every book durable before it says cached; curl does not. curl followed by
  # `sync -f` of its folder (syncfs: every file it wrote) is the like-for-like baseline.
  compare "500 × 1 MiB, concurrency 8" "curl --parallel-max 8, then sync -f" \
    "discard $work/c1" "$bin download --from $work/batch-500.txt --concurrency 8 --cache-dir $work/c1" \
    "discard $work/d4; mkdir -p $work/d4" "cd $work/d4 && curl -s --parallel --parallel-max 8 -K $work/batch-500.curlrc && sync -f ."
  compare "500 × 1 MiB, concurrency 8" "curl --parallel-max 8, then sync -f, SHA-256 and CRC pass" \
    "discard $work/c1" "$bin download --from $work/batch-500.txt --concurrency 8 --cache-dir $work/c1" \
    "discard $work/d4; mkdir -p $work/d4" "cd $work/d4 && curl -s --parallel --parallel-max 8 -K $work/batch-500.curlrc && $(same_promise)"
  compare "500 × 1 MiB, concurrency 8" "aria2c -j 8" \
    "discard $work/c1" "$bin download --from $work/batch-500.txt --concurrency 8 --cache-dir $work/c1" \
    "discard $work/d2; mkdir -p $work/d2" "aria2c -q -j 8 -x 1 --allow-overwrite=true --auto-file-renaming=false -d $work/d2 -i $work/batch-500.txt"
fi

if [ "$what" = all ] || [ "$what" = small ]; then
  books 2000 65536 s
  seq 0 1999 | sed "s#.*#$base/s&.epub#" >"$work/batch-2000.txt"
  compare "2000 × 64 KiB, concurrency 16" "xargs -P 16 curl" \
    "discard $work/c2" "$bin download --from $work/batch-2000.txt --concurrency 16 --cache-dir $work/c2" \
    "discard $work/d3; mkdir -p $work/d3" "cd $work/d3 && xargs -P 16 -n 1 curl -s -O <$work/batch-2000.txt"
  { echo "remote-name-all"; sed 's#.*#url = "&"#' "$work/batch-2000.txt"; } >"$work/batch-2000.curlrc"
  compare "2000 × 64 KiB, concurrency 16" "curl --parallel-max 16" \
    "discard $work/c2" "$bin download --from $work/batch-2000.txt --concurrency 16 --cache-dir $work/c2" \
    "discard $work/d5; mkdir -p $work/d5" "cd $work/d5 && curl -s --parallel --parallel-max 16 -K $work/batch-2000.curlrc"
  compare "2000 × 64 KiB, concurrency 16" "curl --parallel-max 16, then sync -f" \
    "discard $work/c2" "$bin download --from $work/batch-2000.txt --concurrency 16 --cache-dir $work/c2" \
    "discard $work/d5; mkdir -p $work/d5" "cd $work/d5 && curl -s --parallel --parallel-max 16 -K $work/batch-2000.curlrc && sync -f ."
  compare "2000 × 64 KiB, concurrency 16" "curl --parallel-max 16, then sync -f, SHA-256 and CRC pass" \
    "discard $work/c2" "$bin download --from $work/batch-2000.txt --concurrency 16 --cache-dir $work/c2" \
    "discard $work/d5; mkdir -p $work/d5" "cd $work/d5 && curl -s --parallel --parallel-max 16 -K $work/batch-2000.curlrc && $(same_promise)"
  compare "2000 × 64 KiB, concurrency 16" "aria2c -j 16" \
    "discard $work/c2" "$bin download --from $work/batch-2000.txt --concurrency 16 --cache-dir $work/c2" \
    "discard $work/d6; mkdir -p $work/d6" "aria2c -q -j 16 -x 1 --allow-overwrite=true --auto-file-renaming=false -d $work/d6 -i $work/batch-2000.txt"
fi

if [ "$what" = all ] || [ "$what" = latency ]; then
  # Books from one host 40 ms away: Benchmarks/delay-proxy.py holds every byte back 20 ms each
  # way (this kernel has no netem). HTTPS with HTTP/2 for the small books, HTTP/1.1 for the 1 MiB ones.
  books 1000 65536 s
  books 200 1048576 m
  proxy_pids+=("$(Benchmarks/delay.sh "$((port + 2))" "$((port + 1))" 20)")
  proxy_pids+=("$(Benchmarks/delay.sh "$((port + 3))" "$port" 20 "$work/lat-turnarounds.txt")")
  seq 0 999 | sed "s#.*#https://127.0.0.1:$((port + 2))/s&.epub#" >"$work/lat-small.txt"
  seq 0 199 | sed "s#.*#http://127.0.0.1:$((port + 3))/m&.epub#" >"$work/lat-batch.txt"
  race "1000 × 64 KiB, HTTPS (HTTP/2), 16 at once, 40 ms round trip" "$work/lat-small.txt" 16
  race "200 × 1 MiB, HTTP/1.1, 8 at once, 40 ms round trip" "$work/lat-batch.txt" 8 "$work/lat-turnarounds.txt"
fi

if [ "$what" = all ] || [ "$what" = limit ]; then
  # --limit-rate: 200 MB at 20 MB/s should take 10 s (target: within 5%), as curl's does.
  books 1 200000000 lim
  compare "200 MB with --limit-rate 20MB (target 10 s ± 5%)" "curl --limit-rate 20000000" \
    "rm -rf $work/c4" "$bin download $base/lim0.epub --cache-dir $work/c4 --reserve 0 --limit-rate 20MB" \
    "rm -f $work/lim.out" "curl -s --limit-rate 20000000 -o $work/lim.out $base/lim0.epub"
fi

if [ "$what" = all ] || [ "$what" = large ]; then
  books 1 1073741824 big
  compare "1 GiB EPUB (download, hash, validate)" "curl -o" \
    "rm -rf $work/c3" "$bin download $base/big0.epub --cache-dir $work/c3 --reserve 0" \
    "rm -f $work/big.out" "curl -s -o $work/big.out $base/big0.epub"
  # bookcache makes the book durable before it says cached; curl -o does not. The same file
  # made durable after curl (coreutils' `sync FILE` fsyncs it) is the like-for-like baseline.
  compare "1 GiB EPUB (download, hash, validate)" "curl -o, then sync FILE" \
    "rm -rf $work/c3" "$bin download $base/big0.epub --cache-dir $work/c3 --reserve 0" \
    "rm -f $work/big.out" "curl -s -o $work/big.out $base/big0.epub && sync $work/big.out"
  compare "1 GiB EPUB (download, hash, validate)" "curl -o, then sync FILE, SHA-256 and CRC pass" \
    "rm -rf $work/c3" "$bin download $base/big0.epub --cache-dir $work/c3 --reserve 0" \
    "rm -f $work/big.out" "curl -s -o $work/big.out $base/big0.epub && sync $work/big.out && { openssl dgst -sha256 $work/big.out >/dev/null & hash=\$!; $work/zipcrc $work/big.out && wait \$hash; }"
fi

# single: median seconds and peak RSS of one command, run $rounds times (after a warm-up)
single() {
  local name="$1" cmd="$2" target="$3"
  local ts=() rs=()
  bash -c "$cmd" >/dev/null 2>&1 || true
  for r in $(seq "$rounds"); do read -r t m < <(measure bash -c "$cmd"); ts+=("$t"); rs+=("$m"); done
  local t rss; t="$(printf '%s\n' "${ts[@]}" | median)"; rss="$(printf '%s\n' "${rs[@]}" | sort -n | tail -1)"
  echo "| $name | ${t} s | target ≤ $target | | $((rss / 1024)) MiB |" | tee -a "$out"
}

if [ "$what" = all ] || [ "$what" = index ]; then
  # INDEX_SIZES="1000 10000 100000 1000000" for the whole table (the generator writes the previous
  # version's JSON index, so the first command imports it; that time is printed too; and a sidecar
  # and file per book, so the index is then deleted and the rebuild from sidecars timed).
  books 1 65536 idx
  for n in ${INDEX_SIZES:-10000}; do
    label="$(printf "%'d" "$n") books"
    cache="$work/c-index-$n"
    rm -rf "$cache"
    python3 Benchmarks/make-index.py "$cache" "$n" "$work/books/idx0.epub" --sidecars
    read -r t m < <(measure "$bin" list --cache-dir "$cache")
    echo "| $label: first command (imports the previous index) | ${t} s | | | $((m / 1024)) MiB |" | tee -a "$out"
    rm "$cache/index.sqlite"
    read -r t m < <(measure "$bin" stats --cache-dir "$cache")
    echo "| $label: rebuild from sidecars (index deleted) | ${t} s | target ≤ 60 s at 1M | | $((m / 1024)) MiB |" | tee -a "$out"
    "$bin" config set keep "$((n * 2))" --cache-dir "$cache" >/dev/null
    single "$label: path ID" "$bin path ebook-book0 --cache-dir $cache" "0.030 s at 1M"
    single "$label: no-op download" "$bin download $base/book0.epub --id book0 --cache-dir $cache" "0.030 s at 1M"
    single "$label: new download, keep set" "$bin download $base/idx0.epub --id \"new\$RANDOM\$RANDOM\" --cache-dir $cache" "0.030 s at 1M"
    single "$label: stats" "$bin stats --cache-dir $cache" "0.100 s at 1M"
    single "$label: list --json" "$bin list --json --cache-dir $cache" "3 s at 1M"
    single "$label: list (table)" "$bin list --cache-dir $cache" "3 s and 64 MiB at 1M"
    single "$label: prune --dry-run evicting half" "$bin prune --keep $((n / 2)) --dry-run --cache-dir $cache" "0.5 s at 100,000"
    single "$label: prune --dry-run evicting 1%" "$bin prune --keep $((n - n / 100)) --dry-run --cache-dir $cache" "1 s at 1M"
  done
fi

if [ "$what" = all ] || [ "$what" = service ]; then
  # bookcache serve: accepting 1,000 jobs, memory with 10,000 queued, a batch through the
  # service against the CLI's, GET /books of 100,000 (Benchmarks/service.py).
  books 500 1048576 m
  books 1 65536 idx
  seq 0 499 | sed "s#.*#$base/m&.epub#" >"$work/batch-500.txt"
  python3 Benchmarks/service.py "$bin" "$base" "$work" "$rounds" | tee -a "$out"
fi

if [ "$what" = all ] || [ "$what" = abuse ]; then
  # bookcache serve under abuse: idle connections, dropped and non-reading event streams, with
  # request latency and peak RSS (Benchmarks/abuse.py prints its own table).
  echo | tee -a "$out"
  python3 Benchmarks/abuse.py "$bin" | tee -a "$out"
fi

if [ "$what" = all ] || [ "$what" = verify ]; then
  # Two 200 MB EPUBs: prose chapters deflated like a real ebook's (the CRC pass inflates them),
  # and one stored chapter of random bytes (the CRC pass is nearly free, the worst case for the ratio).
  python3 Benchmarks/make-books.py "$work/books" 1 209715200 vt text
  books 1 209715200 v
  for kind in vt v; do
    rm -rf "$work/c-$kind"
    "$bin" download "$base/${kind}0.epub" --cache-dir "$work/c-$kind" --reserve 0 >/dev/null
  done
  compare "verify of a 200 MB EPUB (deflated chapters)" "bare libzip CRC pass" \
    "true" "$bin verify --cache-dir $work/c-vt" \
    "true" "$work/zipcrc $work/books/vt0.epub"
  compare "verify of a 200 MB EPUB (one stored chapter)" "bare libzip CRC pass" \
    "true" "$bin verify --cache-dir $work/c-v" \
    "true" "$work/zipcrc $work/books/v0.epub"
fi

if [ "$what" = all ] || [ "$what" = start ]; then
  # Process start: hyperfine runs each command 300 times (no shell between) and gives the mean.
  tf="$(mktemp)"
  hyperfine -N --warmup 20 --runs 300 --export-json "$tf" "$bin --version" "curl --version" >/dev/null 2>&1
  read -r a b < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))["results"]; print(r[0]["mean"], r[1]["mean"])' "$tf")
  rm -f "$tf"
  echo "| process start (\`--version\`, mean of 300) | $(awk -v a="$a" 'BEGIN { printf "%.1f ms", a * 1000 }') | curl $(awk -v b="$b" 'BEGIN { printf "%.1f ms", b * 1000 }') | $(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.2f×", a / b }') | |" | tee -a "$out"
fi

if [ "$what" = all ] || [ "$what" = memory ]; then
  # Peak memory of the small batch, private and mapped files apart (Benchmarks/peak-memory.py).
  books 2000 65536 s
  seq 0 1999 | sed "s#.*#$base/s&.epub#" >"$work/batch-2000.txt"
  for r in $(seq "$rounds"); do
    discard "$work/c2"; sync
    echo "| 2000 × 64 KiB, concurrency 16, memory (round $r) | $(python3 Benchmarks/peak-memory.py "$bin" download --from "$work/batch-2000.txt" --concurrency 16 --cache-dir "$work/c2") | | | |" | tee -a "$out"
  done
  # A long manifest: 20,000 lines (the 2,000 books, each under ten ids). What waits in line costs
  # memory too; the batch's own cost should not grow with it.
  python3 -c "
for i in range(20000): print('{\"url\": \"$base/s%d.epub\", \"id\": \"ebook-x%d\"}' % (i % 2000, i))" >"$work/batch-20000.txt"
  discard "$work/c2"; sync
  echo "| 20,000-line manifest of 64 KiB books, concurrency 16, memory | $(python3 Benchmarks/peak-memory.py "$bin" download --from "$work/batch-20000.txt" --concurrency 16 --cache-dir "$work/c2") | | | |" | tee -a "$out"
fi

echo >>"$out"
echo "Written to $out" >&2
