#!/usr/bin/env bash
# Verdicts against readers on a real-world corpus (see Benchmarks/corpus.py). Not a test.
#
#   Benchmarks/corpus.sh [OLD_BOOKCACHE_BINARY...]
#
# Installs the judges (qpdf, poppler, MuPDF, ebooklib, zip, unzip) when missing, builds
# bookcache in release mode, assembles the corpus once into $CORPUS_DIR (default
# /tmp/bookcache-corpus, not committed), labels it, and prints the confusion matrix for each
# binary given and then this build, with validation time next to unzip -t and qpdf --check.
set -euo pipefail
cd "$(dirname "$0")/.."
need=()
command -v qpdf >/dev/null || need+=(qpdf)
command -v pdftoppm >/dev/null || need+=(poppler-utils)
command -v mutool >/dev/null || need+=(mupdf-tools)
command -v zip >/dev/null || need+=(zip)
command -v unzip >/dev/null || need+=(unzip)
/usr/bin/python3 -c "import ebooklib" 2>/dev/null || need+=(python3-ebooklib)
scripts/apt-install.sh ${need[@]+"${need[@]}"}
scripts/setup.sh
swift build -c release --product bookcache >&2
bin="$(swift build -c release --show-bin-path)/bookcache"
dir="${CORPUS_DIR:-/tmp/bookcache-corpus}"
[ -f "$dir/origin.json" ] || /usr/bin/python3 Benchmarks/corpus.py build "$dir"
[ -f "$dir/truth.json" ] || /usr/bin/python3 Benchmarks/corpus.py label "$dir"
/usr/bin/python3 Benchmarks/corpus.py score "$dir" "$@" "$bin"
