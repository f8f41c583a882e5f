#!/usr/bin/env bash
# Installs the system packages BookCache needs (Debian/Ubuntu), only when they are missing.
set -euo pipefail
missing=()
for pkg in libzip-dev libdeflate-dev libcurl4-openssl-dev libssl-dev libqpdf-dev libsqlite3-dev pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
"$(dirname "$0")/apt-install.sh" ${missing[@]+"${missing[@]}"}
command -v swift >/dev/null || { echo "error: swift is not on PATH (Swift 6.1 or newer is needed)" >&2; exit 1; }
