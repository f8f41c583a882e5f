#!/usr/bin/env bash
# The shelf as fast as the servers users compare it with: wrk (64 connections, 2 threads) against
# `bookcache serve`, calibre-server (Debian's calibre) and nginx, on the same 1 MiB book, and on the
# newest-books feed (bookcache's /opds/new against calibre-server's Newest). Alternating rounds;
# medians of requests/s and of p99 latency, and the ratios. Not a test.
#
#   Benchmarks/serving.sh [ROUNDS]          (BOOKCACHE=path/to/bookcache to skip the release build;
#                                            DURATION=10s, CONNECTIONS=64)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds="${1:-3}"; duration="${DURATION:-10s}"; connections="${CONNECTIONS:-64}"
need=()
command -v wrk >/dev/null || need+=(wrk)
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || need+=(nginx-light)
command -v calibre-server >/dev/null || need+=(calibre)
scripts/apt-install.sh ${need[@]+"${need[@]}"}
if [ -z "${BOOKCACHE:-}" ]; then
  swift build -c release --product bookcache --static-swift-stdlib >&2
  BOOKCACHE="$(swift build -c release --static-swift-stdlib --show-bin-path)/bookcache"
fi
work="${BENCH_DIR:-/tmp/bookcache-bench}/serving"
rm -rf "$work"; mkdir -p "$work/books" "$work/library"
python3 Benchmarks/make-books.py "$work/books" 1 1048576 served text >/dev/null

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT
nginx_port="${BENCH_PORT:-18470}"; calibre_port=$((nginx_port + 1))
pids+=("$(Benchmarks/nginx.sh "$work/books" "$nginx_port" "$work/nginx")")
"$BOOKCACHE" download "http://127.0.0.1:$nginx_port/served0.epub" --id served --cache-dir "$work/cache" -q
"$BOOKCACHE" serve --listen 127.0.0.1:0 --cache-dir "$work/cache" >"$work/serve.log" 2>&1 &
pids+=("$!")
calibredb add --library-path "$work/library" "$work/books/served0.epub" >/dev/null 2>&1
calibre-server --port "$calibre_port" --listen-on 127.0.0.1 "$work/library" >"$work/calibre.log" 2>&1 &
pids+=("$!")
for _ in $(seq 200); do
  grep -qo 'http://127\.0\.0\.1:[0-9]*' "$work/serve.log" 2>/dev/null && curl -sf -o /dev/null "http://127.0.0.1:$calibre_port/" && break
  sleep 0.1
done
base="$(grep -o 'http://127\.0\.0\.1:[0-9]*' "$work/serve.log" | head -1)"
token="$(cat "$work/cache/service.token")"
bearer="Authorization: Bearer $token"

run() { # NAME URL [HEADER] -> "REQUESTS_PER_SECOND P99_MS"
  local out
  out="$(wrk -t2 -c"$connections" -d"$duration" --latency ${3:+-H "$3"} "$2")"
  local rps p99
  rps="$(awk '/Requests\/sec/ { print $2 }' <<<"$out")"
  p99="$(awk '$1 == "99%" { v = $2; if (v ~ /us$/) { sub(/us$/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms$/, "", v) } else if (v ~ /s$/) { sub(/s$/, "", v); v *= 1000 } print v }' <<<"$out")"
  # A route that answers errors is no benchmark: every answer must be a success
  if grep -q "Non-2xx" <<<"$out"; then echo "error: $1 answered errors: $out" >&2; exit 1; fi
  echo "$rps $p99"
}
median() { sort -n | awk '{ a[NR] = $1 } END { if (NR % 2) print a[(NR + 1) / 2]; else printf "%.1f\n", (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

declare -A rps p99
targets=(
  "file bookcache|$base/api/v1/books/ebook-served/file|$bearer"
  "file calibre-server|http://127.0.0.1:$calibre_port/get/EPUB/1/library|"
  "file nginx|http://127.0.0.1:$nginx_port/served0.epub|"
  "feed bookcache|$base/opds/new|$bearer"
  "feed calibre-server|http://127.0.0.1:$calibre_port/opds/navcatalog/4f6e6577657374?library_id=library|"
)
for round in $(seq "$rounds"); do
  # Alternate the order, so no server always runs first (or second) in a round
  order=("${targets[@]}")
  (( round % 2 )) || mapfile -t order < <(printf '%s\n' "${targets[@]}" | tac)
  for target in "${order[@]}"; do
    IFS='|' read -r name url header <<<"$target"
    read -r r p < <(run "$name" "$url" "$header")
    rps[$name]+="$r "; p99[$name]+="$p "
    echo "round $round: $name $r requests/s, p99 $p ms" >&2
  done
done
m() { printf '%s\n' ${1} | median; }
fb="$(m "${rps[file bookcache]}")"; fc="$(m "${rps[file calibre-server]}")"; fn="$(m "${rps[file nginx]}")"
db="$(m "${rps[feed bookcache]}")"; dc="$(m "${rps[feed calibre-server]}")"
echo "wrk, $connections connections, $duration, medians of $rounds alternating rounds (requests/s, p99):"
echo "| case | bookcache | calibre-server | nginx | bookcache / calibre-server | bookcache / nginx |"
echo "| --- | --- | --- | --- | --- | --- |"
printf '| 1 MiB book | %s (%s ms) | %s (%s ms) | %s (%s ms) | %.2fx | %.2fx |\n' \
  "$fb" "$(m "${p99[file bookcache]}")" "$fc" "$(m "${p99[file calibre-server]}")" "$fn" "$(m "${p99[file nginx]}")" \
  "$(awk -v a="$fb" -v b="$fc" 'BEGIN { print a / b }')" "$(awk -v a="$fb" -v b="$fn" 'BEGIN { print a / b }')"
printf '| newest feed | %s (%s ms) | %s (%s ms) | – | %.2fx | – |\n' \
  "$db" "$(m "${p99[feed bookcache]}")" "$dc" "$(m "${p99[feed calibre-server]}")" "$(awk -v a="$db" -v b="$dc" 'BEGIN { print a / b }')"
