#!/usr/bin/env bash
# Sets up, builds, and runs every test (the CLI tests run the built bookcache binary).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
swift build
swift test "$@"
