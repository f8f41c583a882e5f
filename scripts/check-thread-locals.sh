#!/usr/bin/env bash
# Looks through an optimized x86_64 build of bookcache for a compiler hazard (see DownloadSlot's
# `withState`): an `async` function that makes the `gettid` system call of an inlined `Mutex`
# lock without reading the thread pointer first in the same function — the thread-local that caches
# the thread's id was addressed before a suspension, so after one on another thread the lock writes
# the wrong thread's id and its unlock kills the process. Prints the functions of our own modules
# that do so and exits 1 when there is one.
#
#   scripts/check-thread-locals.sh BINARY
set -euo pipefail
binary="$1"
[ "$(uname -m)" = x86_64 ] || { echo "check-thread-locals: x86_64 only; skipped" >&2; exit 0; }
command -v objdump >/dev/null || scripts/apt-install.sh binutils
found="$(objdump -d --no-show-raw-insn "$binary" | awk '
  /^[0-9a-f]+ <.*>:$/ { name = $2; pointer = 0; seen = 0; next }
  /%fs:0x0|__tls_get_addr/ { pointer = 1 }
  /mov +\$0xba,%edi/ { if (!pointer && !seen) { print name; seen = 1 } }
' | grep -E '^<\$s(9BookCache|13DownloadQueue|13bookcache_cli|13BookCacheHTTP)' || true)"
if [ -n "$found" ]; then
  echo "check-thread-locals: these functions lock a Mutex with a thread id addressed before a suspension:" >&2
  echo "$found" >&2
  exit 1
fi
echo "check-thread-locals: no function of ours locks with a thread id addressed before a suspension" >&2
