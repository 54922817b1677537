#!/usr/bin/env bash
# Regenerates the golden fingerprints in tests/golden/ from the current build:
#   scenarios.txt  one line per example scenario (workloads/scenarios/*.yaml) and the built-in default
#   validate.txt   one line per `clustersim validate` row
# A line holds the events, every simulated time in integer ns (step time and each breakdown part,
# or each collective's time), peak memory per pipeline stage and a hash of the first 10,000 trace
# records. Review the diff: a commit that changes a fingerprint says why (a bug fixed, a model change).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CLUSTERSIM_BUILD_DIR:-$root/build}"
"$root/scripts/build.sh" --target clustersim >/dev/null
bin="$build/clustersim"
golden="$root/tests/golden"
mkdir -p "$golden"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" run --quiet --fingerprint "$tmp/scenarios.txt"
for f in $(cd "$root/workloads/scenarios" && ls *.yaml | LC_ALL=C sort); do
  case "$f" in
    *131k*) "$bin" run "$root/workloads/scenarios/$f" --quiet --check --fingerprint "$tmp/scenarios.txt" ;;  # minutes each: schema only
    *) "$bin" run --quiet --fingerprint "$tmp/scenarios.txt" "$root/workloads/scenarios/$f" ;;
  esac
done
# validate exits 1 when a row is outside its tolerance; the fingerprints are still written.
"$bin" validate --threads "$(nproc)" --fingerprint "$tmp/validate.txt" >/dev/null 2>&1 || true
mv "$tmp/scenarios.txt" "$golden/scenarios.txt"
mv "$tmp/validate.txt" "$golden/validate.txt"
git -C "$root" --no-pager diff --stat -- tests/golden || true
