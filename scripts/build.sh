#!/usr/bin/env bash
# Configures and builds clustersim (Release) into build/. Extra arguments go to cmake --build.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CLUSTERSIM_BUILD_DIR:-$root/build}"
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j "$(nproc)" "$@"
