#!/usr/bin/env bash
# Installs the system packages BookCache needs (Debian/Ubuntu), only when they are missing.
set -euo pipefail
missing=()
for pkg in libzip-dev libcurl4-openssl-dev libssl-dev libqpdf-dev pkg-config; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
command -v swift >/dev/null || { echo "error: swift is not on PATH (Swift 6.1 or newer is needed)" >&2; exit 1; }
