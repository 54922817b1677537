#!/usr/bin/env bash
# Sets up, builds and runs every test (ctest, default labels; benchmarks are not tests).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh"
cd "${CLUSTERSIM_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" "$@"
