#!/usr/bin/env bash
# Starts Benchmarks/delay-proxy.py on 127.0.0.1:LISTEN_PORT in front of UPSTREAM_PORT, holding every
# byte DELAY_MS each way, and prints its pid once it listens (as nginx.sh prints nginx's).
# Usage: Benchmarks/delay.sh LISTEN_PORT UPSTREAM_PORT DELAY_MS [TURNAROUND_LOG]
set -euo pipefail
cd "$(dirname "$0")/.."
fifo="$(mktemp -u)"
mkfifo "$fifo"
python3 Benchmarks/delay-proxy.py "$@" >"$fifo" &
pid=$!
read -r _ <"$fifo"
rm -f "$fifo"
echo "$pid"
