#!/usr/bin/env bash
# Layering check: sim <- topology <- workloads <- traces <- app (sim/app/, the `clustersim` command).
# Usage: scripts/check_layers.sh [ROOT]   (ROOT defaults to the repository root)
#
# Scans every .h/.cc under ROOT/{sim,topology,workloads,traces} (tests/ is not checked).
#  * Project includes are the quoted ones whose first path component is sim, topology, workloads
#    or traces ("sim/app/..." counts as the app layer). A file may include its own layer and the
#    ones beneath it; sim/app/ may include anything.
#  * Third-party headers: <yaml-cpp/...> only in sim/config.cc, <boost/...> only under topology/,
#    <google/protobuf/...> only under traces/.
# Each violation is printed to stderr as `path:line: <layer> may not include "<header>" (<reason>)`
# (path relative to ROOT); exit status 1 if there is any, 0 otherwise (one summary line on stdout),
# 2 on a usage error. Only `#include` lines are read: an include inside a /* */ comment is checked too.
set -euo pipefail

if [ $# -gt 1 ]; then
  echo "usage: $0 [ROOT]" >&2
  exit 2
fi
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
if [ ! -d "$root" ]; then
  echo "check_layers: $root: no such directory" >&2
  exit 2
fi
cd "$root"

dirs=()
for d in sim topology workloads traces; do
  if [ -d "$d" ]; then dirs+=("$d"); fi
done
files=()
if [ ${#dirs[@]} -gt 0 ]; then
  mapfile -d '' -t files < <(find "${dirs[@]}" -type f \( -name '*.h' -o -name '*.cc' \) -print0 | sort -z)
fi
if [ ${#files[@]} -eq 0 ]; then
  echo "check_layers: no .h/.cc files under $root/{sim,topology,workloads,traces}"
  exit 0
fi

violations="$(awk '
  function layer_of(p) {
    if (p ~ /^sim\/app\//) return "app"
    sub(/\/.*/, "", p)
    return p
  }
  BEGIN {
    rank["sim"] = 0; rank["topology"] = 1; rank["workloads"] = 2; rank["traces"] = 3; rank["app"] = 4
    below["sim"] = "sim/"; below["topology"] = "sim/, topology/"
    below["workloads"] = "sim/, topology/, workloads/"
    below["traces"] = "sim/, topology/, workloads/, traces/"
  }
  FNR == 1 { layer = layer_of(FILENAME) }
  /^[ \t]*#[ \t]*include[ \t]*"/ {
    h = $0
    sub(/^[ \t]*#[ \t]*include[ \t]*"/, "", h)
    sub(/".*/, "", h)
    top = h
    sub(/\/.*/, "", top)
    if (!(top in rank) || h == top) next
    hl = layer_of(h)
    if (rank[hl] > rank[layer])
      printf "%s:%d: %s may not include \"%s\" (%s is above %s; %s may include only %s)\n",
             FILENAME, FNR, layer, h, hl, layer, layer, below[layer]
    next
  }
  /^[ \t]*#[ \t]*include[ \t]*</ {
    h = $0
    sub(/^[ \t]*#[ \t]*include[ \t]*</, "", h)
    sub(/>.*/, "", h)
    if (h ~ /^yaml-cpp\// && FILENAME != "sim/config.cc")
      printf "%s:%d: %s may not include \"%s\" (yaml-cpp is allowed only in sim/config.cc)\n",
             FILENAME, FNR, layer, h
    else if (h ~ /^boost\// && FILENAME !~ /^topology\//)
      printf "%s:%d: %s may not include \"%s\" (Boost is allowed only under topology/)\n",
             FILENAME, FNR, layer, h
    else if (h ~ /^google\/protobuf\// && FILENAME !~ /^traces\//)
      printf "%s:%d: %s may not include \"%s\" (protobuf is allowed only under traces/)\n",
             FILENAME, FNR, layer, h
  }
' "${files[@]}")"

if [ -n "$violations" ]; then
  printf '%s\n' "$violations" >&2
  echo "check_layers: $(printf '%s\n' "$violations" | wc -l) violation(s) in ${#files[@]} files under $root" >&2
  exit 1
fi
echo "check_layers: ${#files[@]} files under $root, no layering violations"
