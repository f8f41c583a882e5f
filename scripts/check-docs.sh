#!/usr/bin/env bash
# Builds the BookCache documentation with DocC and fails on any warning (a broken link, a
# reference to a symbol that is gone). Uses a scratch folder of its own (.build/docs), so the
# main build is not rebuilt with the symbol-graph flags; it starts empty each time, since the
# compiler writes symbol graphs only for what it compiles (about 40 s on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
graphs=.build/docs/symbol-graphs
rm -rf .build/docs
mkdir -p "$graphs"
swift build --scratch-path .build/docs --target BookCache \
  -Xswiftc -emit-symbol-graph -Xswiftc -emit-symbol-graph-dir -Xswiftc "$PWD/$graphs" >/dev/null
log="$(docc convert Sources/BookCache/BookCache.docc --additional-symbol-graph-dir "$graphs" \
  --output-path .build/docs/out --fallback-display-name BookCache \
  --fallback-bundle-identifier org.bookcache.BookCache --analyze 2>&1)"
if grep -q "warning:\|error:" <<<"$log"; then
  echo "$log" >&2
  echo "error: the DocC documentation has warnings (above)" >&2
  exit 1
fi
echo "DocC: no warnings"
