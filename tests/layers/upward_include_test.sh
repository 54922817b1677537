#!/usr/bin/env bash
# Shows that scripts/check_layers.sh catches what it should: on temporary trees it must fail
# (exit 1, naming the offending files and only those) on upward project includes and on yaml-cpp
# in a sim/ header, and pass (exit 0) on a clean tree.
# Usage: tests/layers/upward_include_test.sh   (run by ctest as `layers_detects_upward_include`)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
check="$here/../../scripts/check_layers.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
# run_check TREE: runs the check on TREE; sets $status and $out (stdout and stderr together).
run_check() {
  status=0
  out="$(bash "$check" "$1" 2>&1)" || status=$?
}
# write FILE LINE...: creates FILE with one line per argument.
write() {
  local f="$1"
  shift
  mkdir -p "$(dirname "$f")"
  printf '%s\n' "$@" >"$f"
}

# 1. Upward includes: sim -> workloads and topology -> traces; workloads -> topology is fine.
bad="$tmp/bad"
write "$bad/sim/foo.h" '#pragma once' '#include <vector>' '#include "sim/time.h"' \
  '#include "workloads/training/step.h"'
write "$bad/topology/bar.cc" '#include "topology/bar.h"' '#include "sim/error.h"' \
  '#include "traces/chrome/chrome_trace.h"'
write "$bad/workloads/ok.cc" '#include "workloads/ok.h"' '#include "topology/topology.h"' \
  '#include "sim/error.h"'
run_check "$bad"
[ "$status" -eq 1 ] || fail "upward includes: exit status $status, expected 1"
grep -q '^sim/foo\.h:4: .*"workloads/training/step\.h"' <<<"$out" ||
  fail "upward includes: sim/foo.h:4 (workloads/training/step.h) not reported"
grep -q '^topology/bar\.cc:3: .*"traces/chrome/chrome_trace\.h"' <<<"$out" ||
  fail "upward includes: topology/bar.cc:3 (traces/chrome/chrome_trace.h) not reported"
if grep -q '^workloads/ok\.cc' <<<"$out"; then fail "upward includes: clean workloads/ok.cc was reported"; fi
[ "$failures" -eq 0 ] || printf 'check output was:\n%s\n' "$out" >&2

# 2. A clean tree (every layer, sim/app including everything, third-party headers where allowed).
clean="$tmp/clean"
write "$clean/sim/time.h" '#pragma once' '#include <cstdint>'
write "$clean/sim/config.cc" '#include "sim/config.h"' '#include <yaml-cpp/yaml.h>'
write "$clean/topology/topology.cc" '#include "topology/topology.h"' '#include "sim/time.h"' \
  '#include <boost/graph/adjacency_list.hpp>'
write "$clean/workloads/ok.cc" '#include "topology/topology.h"' '#include "workloads/ok.h"'
write "$clean/traces/chrome/t.cc" '#include "workloads/ok.h"' '#include <google/protobuf/message.h>'
write "$clean/sim/app/main.cc" '#include "traces/chrome/t.h"' '#include "sim/app/commands.h"'
before=$failures
run_check "$clean"
[ "$status" -eq 0 ] || fail "clean tree: exit status $status, expected 0"
[ "$failures" -eq "$before" ] || printf 'check output was:\n%s\n' "$out" >&2

# 3. yaml-cpp included from a sim/ header (it may appear only in sim/config.cc).
yaml="$tmp/yaml"
write "$yaml/sim/config.h" '#pragma once' '#include <yaml-cpp/yaml.h>'
write "$yaml/sim/config.cc" '#include "sim/config.h"' '#include <yaml-cpp/yaml.h>'
before=$failures
run_check "$yaml"
[ "$status" -eq 1 ] || fail "yaml-cpp in sim header: exit status $status, expected 1"
grep -q '^sim/config\.h:2: .*yaml-cpp/yaml\.h' <<<"$out" ||
  fail "yaml-cpp in sim header: sim/config.h:2 not reported"
if grep -q '^sim/config\.cc' <<<"$out"; then fail "yaml-cpp in sim header: sim/config.cc was reported"; fi
[ "$failures" -eq "$before" ] || printf 'check output was:\n%s\n' "$out" >&2

if [ "$failures" -ne 0 ]; then
  echo "upward_include_test: $failures assertion(s) failed" >&2
  exit 1
fi
echo "upward_include_test: all assertions passed"
