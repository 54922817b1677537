#!/usr/bin/env bash
# The README's scaling table: the Llama 3 405B step of workloads/scenarios/llama3-405b-16k-h100.yaml
# (TP8 PP16, interleaved 1F1B, 16 sequences per DP group) grown with the cluster (DP = GPUs / 128,
# pods of 3,072 GPUs), simulated expanded (every rank) and symmetric (one data-parallel replica),
# each run alone on one core: GPUs, events, user CPU seconds, events per CPU second, max RSS.
#
#   scripts/bench/scaling.sh [--expanded-max GPUS] [--repeat N] [SIZES...]
#
# SIZES are GPU counts (multiples of 128; default 1024 2048 4096 8192 16384 131072). Expanded runs
# above --expanded-max (default 16384) are skipped: at 131,072 GPUs one takes minutes. --repeat N
# runs every point N times, in rounds (one run of each point per round, so that every point samples
# the same minutes of a shared VM, whose speed drifts by tens of percent), and reports the median
# user CPU with the least and the most, and the largest max RSS. With two or more expanded sizes it
# then gives how the CPU grows from the smallest to the largest (and from the next largest to the
# largest), per round and for the medians, as a ratio and as an exponent of the GPU count (N^e).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
source "$root/scripts/bench/llama3_405b.sh"
bin="${CLUSTERSIM_BIN:-$root/build/clustersim}"  # CLUSTERSIM_BIN: another build, for paired runs
expanded_max=16384
repeat=1
sizes=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expanded-max) expanded_max="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    --repeat) repeat="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "scaling.sh: --repeat needs a whole number >= 1, got '$repeat'" >&2; exit 2; }
[[ $expanded_max =~ ^[0-9]+$ ]] || { echo "scaling.sh: --expanded-max needs a GPU count, got '$expanded_max'" >&2; exit 2; }
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1024 2048 4096 8192 16384 131072)
[[ -x "$bin" ]] || { echo "scaling.sh: build first (scripts/build.sh)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

points=()
for gpus in "${sizes[@]}"; do
  l405b_check_size scaling.sh "$gpus"
  for fidelity in expanded symmetric; do
    if [[ $fidelity == expanded ]] && (( gpus > expanded_max )); then continue; fi
    points+=("$gpus/$fidelity")
  done
done

# One line per run in $tmp/runs: GPUs, fidelity, round, user CPU s, max RSS KB, events, step time.
for ((k = 0; k < repeat; ++k)); do
  for point in "${points[@]}"; do
    gpus=${point%/*}; fidelity=${point#*/}
    l405b_args "$gpus" "$fidelity"
    /usr/bin/time -f "%U %M" -o "$tmp/time" "$bin" "${l405b_args_out[@]}" --json "$tmp/out.json" > /dev/null
    read -r cpu rss_kb < "$tmp/time"
    facts=$(python3 -c 'import json, sys; j = json.load(open(sys.argv[1])); print(j["run"]["events"], j["step_time_s"])' \
      "$tmp/out.json")
    echo "$gpus $fidelity $k $cpu $rss_kb $facts" >> "$tmp/runs"
  done
done

python3 - "$tmp/runs" <<'PY'
import math, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    gpus, fidelity, k, cpu, rss, events, step = line.split()
    runs.setdefault((int(gpus), fidelity), []).append((int(k), float(cpu), int(rss), int(events), float(step)))
print("| GPUs | fidelity | events | CPU s (median) | CPU s (least-most) | events/s | max RSS | step time |")
print("|---:|---|---:|---:|---:|---:|---:|---:|")
for (gpus, fidelity), rs in runs.items():
    cpus = [r[1] for r in rs]
    med = statistics.median(cpus)
    events = rs[0][3]
    rate = f"{events / med / 1e6:.2f} M" if med > 0 else "n/a"
    print(f"| {gpus:,} | {fidelity} | {events / 1e6:.2f} M | {med:.2f} | {min(cpus):.2f}-{max(cpus):.2f} | {rate} | "
          f"{max(r[2] for r in rs) / 1024:.0f} MB | {rs[0][4]:.4f} s |")
expanded = sorted(g for (g, f) in runs if f == "expanded")
# From the smallest expanded size to the largest, and from the next largest to the largest.
pairs = [(expanded[0], expanded[-1])] if len(expanded) >= 2 else []
if len(expanded) >= 3:
    pairs.append((expanded[-2], expanded[-1]))
for lo, hi in pairs:
    a, b = runs[(lo, "expanded")], runs[(hi, "expanded")]
    def growth(x, y):
        if x <= 0 or y <= 0:
            return "n/a (a run took no measurable CPU)"
        return f"{y / x:.2f}x (N^{math.log(y / x) / math.log(hi / lo):.2f})"
    print(f"\nExpanded, {lo:,} -> {hi:,} GPUs ({hi / lo:g}x the GPUs, {b[0][3] / a[0][3]:.2f}x the events):")
    for (k, x, *_), (_, y, *_) in zip(a, b):
        print(f"  round {k + 1}: {x:.2f} s -> {y:.2f} s, {growth(x, y)}")
    print(f"  medians: {growth(statistics.median(r[1] for r in a), statistics.median(r[1] for r in b))}")
PY
