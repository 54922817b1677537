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
# runs each point N times and reports the least user CPU (a shared VM's speed drifts by tens of
# percent from minute to minute; the least is the run least disturbed) and the largest max RSS.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${CLUSTERSIM_BIN:-$root/build/clustersim}"  # CLUSTERSIM_BIN: another build, for paired runs
expanded_max=16384
repeat=1
sizes=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --expanded-max) expanded_max="$2"; shift 2 ;;
    --repeat) repeat="${2:-}"; shift $(( $# > 1 ? 2 : 1 )) ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) sizes+=("$1"); shift ;;
  esac
done
[[ $repeat =~ ^[1-9][0-9]*$ ]] || { echo "scaling.sh: --repeat needs a whole number >= 1, got '$repeat'" >&2; exit 2; }
[[ ${#sizes[@]} -gt 0 ]] || sizes=(1024 2048 4096 8192 16384 131072)
[[ -x "$bin" ]] || { echo "scaling.sh: build first (scripts/build.sh)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "| GPUs | fidelity | events | CPU s | events/s | max RSS | step time |"
echo "|---:|---|---:|---:|---:|---:|---:|"
for gpus in "${sizes[@]}"; do
  if (( gpus % 128 != 0 )); then echo "scaling.sh: $gpus is not a multiple of 128 (TP8 x PP16)" >&2; exit 2; fi
  nodes=$((gpus / 8)); dp=$((gpus / 128)); pods=$(( (nodes + 383) / 384 ))
  for fidelity in expanded symmetric; do
    if [[ $fidelity == expanded ]] && (( gpus > expanded_max )); then continue; fi
    cpu=""; rss_kb=0
    for ((k = 0; k < repeat; ++k)); do
      /usr/bin/time -f "%U %M" -o "$tmp/time" "$bin" run "$root/workloads/scenarios/llama3-405b-16k-h100.yaml" --quiet \
        --json "$tmp/out.json" --set "cluster.nodes=$nodes" --set "cluster.scale_out.tiers[2].pods=$pods" \
        --set "workload.parallelism.dp=$dp" --set "workload.training.global_batch=$((16 * dp))" \
        --set "workload.fidelity=$fidelity"
      read -r c r < "$tmp/time"
      if [[ -z $cpu ]] || awk "BEGIN{exit !($c < $cpu)}"; then cpu=$c; fi
      (( r > rss_kb )) && rss_kb=$r
    done
    python3 - "$tmp/out.json" "$gpus" "$fidelity" "$cpu" "$rss_kb" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
gpus, fidelity, cpu, rss = int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
events = j["run"]["events"]
rate = events / cpu if cpu > 0 else float("nan")
print(f"| {gpus:,} | {fidelity} | {events/1e6:.2f} M | {cpu:.2f} | {rate/1e6:.2f} M | {rss/1024:.0f} MB | {j['step_time_s']:.4f} s |")
EOF
  done
done
