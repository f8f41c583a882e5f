#!/usr/bin/env bash
# The man pages in docs/man, made from the commands themselves by swift-argument-parser's
# generate-manual plugin (a release build: about 10 minutes the first time on 2 cores).
#
#   scripts/manual.sh            regenerate docs/man/*.1 and docs/man/bookcache.help.json
#   scripts/manual.sh --check    fail when they are stale: the commands' help (English) differs from
#                                the help the pages were made from (CI runs this; it needs only the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
help() { LC_ALL=C LANG=C LANGUAGE= "$1" --experimental-dump-help; }
if [ "${1:-}" = "--check" ]; then
  if ! diff -q <(help .build/debug/bookcache) docs/man/bookcache.help.json >/dev/null; then
    diff <(help .build/debug/bookcache) docs/man/bookcache.help.json | head -20 >&2
    echo "error: the man pages in docs/man are stale (a command's help changed); run scripts/manual.sh and commit them" >&2
    exit 1
  fi
  echo "man pages: up to date"
  exit 0
fi
mkdir -p docs/man
rm -f docs/man/*.1
LC_ALL=C LANG=C LANGUAGE= swift package --allow-writing-to-directory docs/man generate-manual --multi-page \
  --output-directory docs/man --authors "The BookCache developers" --date "$(date -u +%F)"
swift build --product bookcache >&2
help .build/debug/bookcache > docs/man/bookcache.help.json
echo "wrote docs/man: $(ls docs/man/*.1 | wc -l) pages"
