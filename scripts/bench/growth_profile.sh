#!/usr/bin/env bash
# Where the cost per event grows with the cluster: profiles the Llama 3 405B step of
# workloads/scenarios/llama3-405b-16k-h100.yaml expanded at two sizes (as scaling.sh grows it:
# DP = GPUs / 128, pods of 3,072 GPUs) with one binary, each run alone on one core under
# `perf record -e cpu-clock`, and lists the instructions (function + offset) whose samples grew
# most beyond the events' growth: samples at the larger size less (events ratio) x samples at the
# smaller, as a share of all such extra samples. The same binary at both sizes makes the offsets
# comparable (addresses are not: the program is position-independent).
#
#   scripts/bench/growth_profile.sh [--top N] [SMALL LARGE]      (default 16384 131072, top 30)
#
# Needs perf (Debian: apt-get install linux-perf) and permission to sample (perf_event_paranoid
# <= 1, or root). A 131,072-GPU run takes a minute and a half or more. Read a site with
# `perf annotate -i DIR/LARGE.data --stdio -s SYMBOL`; DIR is printed at the end and kept.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/scripts/bench/llama3_405b.sh"
bin="${CLUSTERSIM_BIN:-$root/build/clustersim}"
top=30
sizes=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --top) top="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[[ $top =~ ^[1-9][0-9]*$ ]] || { echo "growth_profile.sh: --top needs a whole number >= 1, got '$top'" >&2; exit 2; }
[[ ${#sizes[@]} -eq 0 ]] && sizes=(16384 131072)
[[ ${#sizes[@]} -eq 2 ]] || { echo "growth_profile.sh: give two sizes (SMALL LARGE) or none" >&2; exit 2; }
for g in "${sizes[@]}"; do l405b_check_size growth_profile.sh "$g"; done
(( sizes[0] < sizes[1] )) || { echo "growth_profile.sh: SMALL (${sizes[0]}) must be below LARGE (${sizes[1]})" >&2; exit 2; }
command -v perf >/dev/null || { echo "growth_profile.sh: perf not found (Debian: apt-get install linux-perf)" >&2; exit 2; }
[[ -x "$bin" ]] || { echo "growth_profile.sh: build first (scripts/build.sh)" >&2; exit 2; }
out="$(mktemp -d)"
for g in "${sizes[@]}"; do
  l405b_args "$g" expanded
  echo "growth_profile.sh: profiling $g GPUs" >&2
  perf record -q -e cpu-clock -F 999 -o "$out/$g.data" taskset -c 1 "$bin" "${l405b_args_out[@]}" --json "$out/$g.json" \
    >/dev/null
  perf script -i "$out/$g.data" -F ip,sym,symoff 2>/dev/null | awk '{$1 = ""; sub(/^ +/, ""); n[$0]++} END {for (k in n) print n[k] "\t" k}' \
    >"$out/$g.sites"
done
python3 - "$out" "${sizes[0]}" "${sizes[1]}" "$top" <<'EOF'
import json, sys
out, small, large, top = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
def sites(g):
    d = {}
    for line in open(f"{out}/{g}.sites"):
        n, k = line.rstrip("\n").split("\t", 1)
        d[k] = d.get(k, 0) + int(n)
    return d
a, b = sites(small), sites(large)
ea = json.load(open(f"{out}/{small}.json"))["run"]["events"]
eb = json.load(open(f"{out}/{large}.json"))["run"]["events"]
r = eb / ea
ta, tb = sum(a.values()), sum(b.values())
extra = tb - r * ta
print(f"{small} -> {large} GPUs: {ea:,} -> {eb:,} events ({r:.2f}x), {ta:,} -> {tb:,} samples ({tb / ta:.2f}x); "
      f"extra samples beyond the events' growth: {extra:,.0f} ({100 * extra / tb:.1f}% of the larger run)")
if extra <= 0:
    print("the samples grew no faster than the events: nothing to attribute")
    sys.exit(0)
rows = sorted(((b.get(k, 0) - r * a.get(k, 0), k, a.get(k, 0), b.get(k, 0)) for k in set(a) | set(b)), reverse=True)
print(f"\n{'extra':>8} {'share':>6}  {'samples':>15}  site")
for x, k, na, nb in rows[:top]:
    print(f"{x:8.0f} {100 * x / extra:5.1f}%  {na:6d} -> {nb:6d}  {k}")
funcs_a, funcs_b = {}, {}
for d, f in ((a, funcs_a), (b, funcs_b)):
    for k, n in d.items():
        name = k.rsplit("+0x", 1)[0]
        f[name] = f.get(name, 0) + n
rows = sorted(((funcs_b.get(k, 0) - r * funcs_a.get(k, 0), k, funcs_a.get(k, 0), funcs_b.get(k, 0))
               for k in set(funcs_a) | set(funcs_b)), reverse=True)
print(f"\nby function:\n{'extra':>8} {'share':>6}  {'samples':>15}  function")
for x, k, na, nb in rows[:min(top, 15)]:
    print(f"{x:8.0f} {100 * x / extra:5.1f}%  {na:6d} -> {nb:6d}  {k}")
EOF
echo "growth_profile.sh: profiles kept in $out" >&2
