#!/usr/bin/env bash
# Installs Debian packages (with sudo when not root): scripts/apt-install.sh PACKAGE...
# Does nothing without arguments, so callers pass only what is missing.
set -euo pipefail
[ $# -gt 0 ] || exit 0
echo "installing: $*" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null
