#!/usr/bin/env bash
# Sets up, builds and runs the default scenario. Arguments go to `clustersim run`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" --target clustersim >/dev/null
exec "${CLUSTERSIM_BUILD_DIR:-$root/build}/clustersim" run "$@"
