#!/usr/bin/env bash
# Builds bookcache for use (release, the Swift runtime and Foundation linked in: it starts in half
# the time) and installs it with its resources (translations, the web page) into PREFIX/bin.
#
#   scripts/install.sh [PREFIX]     (default: ~/.local)
set -euo pipefail
cd "$(dirname "$0")/.."
prefix="${1:-$HOME/.local}"
scripts/setup.sh
swift build -c release --product bookcache --static-swift-stdlib
bin="$(swift build -c release --static-swift-stdlib --show-bin-path)"
mkdir -p "$prefix/bin"
install -m 0755 "$bin/bookcache" "$prefix/bin/bookcache"
# Bundle.module looks for the resource bundles beside the executable: one per target with resources.
for target in BookCache BookCacheHTTP bookcache-cli; do
  bundle="BookCache_$target.resources"
  rm -rf "${prefix:?}/bin/$bundle"
  cp -R "$bin/$bundle" "$prefix/bin/"
done
echo "installed $prefix/bin/bookcache ($("$prefix/bin/bookcache" --version))"
