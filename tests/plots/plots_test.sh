#!/usr/bin/env bash
# Every plot script in scripts/ draws a PNG from a small input the simulator makes here: a 2 x 2
# sweep (heatmap and line plot), two training runs (step breakdown), a short fault campaign
# (campaign plot). Usage: plots_test.sh SOURCE_DIR CLUSTERSIM_BINARY
set -euo pipefail
src="$1"
bin="$2"
# The Debian interpreter carries python3-matplotlib (scripts/setup.sh); a python3 earlier on PATH
# (a pyenv, a venv) may not.
py=python3
if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then py=/usr/bin/python3; fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
"$bin" sweep --axis workload.parallelism.tp=4,8 --axis workload.parallelism.pp=2,4 \
  --set workload.parallelism.dp=auto --csv sweep.csv -q
"$bin" run --json run1.json -q
"$bin" run --set workload.parallelism.tp=4 --set workload.parallelism.pp=2 --set workload.parallelism.dp=auto \
  --json run2.json -q
"$bin" faults "$src/workloads/scenarios/diloco-4dc-54d-faults.yaml" --trials 4 --set workload.checkpoint.sweep=auto \
  --json faults.json -q
"$py" "$src/scripts/plot_sweep.py" sweep.csv -o heatmap.png
"$py" "$src/scripts/plot_sweep.py" sweep.csv --line --metric tokens_per_s -o line.png
"$py" "$src/scripts/plot_step.py" run1.json run2.json -o step.png
"$py" "$src/scripts/plot_campaign.py" faults.json -o campaign.png
for f in heatmap.png line.png step.png campaign.png; do
  # A PNG starts with its 8-byte signature; a few KB at least for axes and text.
  if [ "$(head -c 8 "$f" | od -An -tx1 | tr -d ' \n')" != "89504e470d0a1a0a" ]; then echo "$f is not a PNG"; exit 1; fi
  if [ "$(stat -c %s "$f")" -lt 5000 ]; then echo "$f is too small to hold a plot"; exit 1; fi
done
echo "plots: heatmap.png line.png step.png campaign.png written"
