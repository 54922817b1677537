#!/usr/bin/env bash
# scripts/capture/sweep.sh OUTDIR: capture a few Llama-style shapes on one GPU (one subfolder each),
# then, when 8 GPUs are visible, an 8-way tensor-parallel and an 8-way data-parallel run.
# Every capture: seq 2048, 3 unrecorded warmup steps, 1 profiled step, gzipped (a few MB per rank).
# Environment: PYTHON (default python3), TORCHRUN (default torchrun), EXTRA (more capture.py options).
set -euo pipefail

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  echo "usage: $0 OUTDIR   (captures into OUTDIR/<name>/; see scripts/capture/README.md)" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${PYTHON:-python3}
torchrun=${TORCHRUN:-torchrun}
read -r -a extra <<< "${EXTRA:-}"
common=(--seq 2048 --warmup 3 --steps 1 --dtype bf16 --gzip "${extra[@]}")
mkdir -p "$out"
done_dirs=()

capture1() {  # name, then capture.py options: one process, GPU 0
  local name=$1; shift
  echo "== $name: $*"
  CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} "$py" "$here/capture.py" "${common[@]}" "$@" --out "$out/$name"
  done_dirs+=("$out/$name")
}

captureN() {  # name, process count, then capture.py options
  local name=$1 n=$2; shift 2
  echo "== $name ($n processes): $*"
  "$torchrun" --standalone --nproc-per-node "$n" "$here/capture.py" "${common[@]}" "$@" --out "$out/$name"
  done_dirs+=("$out/$name")
}

# One GPU: hidden 1024 / 2048 / 4096 (the last one Llama 3 8B's layer shape).
capture1 h1024-l4-b4 --hidden 1024 --heads 16 --layers 4 --batch 4
capture1 h2048-l4-b2 --hidden 2048 --heads 16 --layers 4 --batch 2
capture1 h4096-l2-b1 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --layers 2 --batch 1

gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if (( gpus >= 8 )); then
  # Both runs use one communicator of all 8 ranks, which is what `clustersim replay` matches.
  captureN tp8-h4096-l2 8 --tp 8 --hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --layers 2 --batch 1
  captureN dp8-h2048-l2 8 --tp 1 --hidden 2048 --heads 16 --layers 2 --batch 1
else
  echo "== $gpus GPU(s) visible: skipping the 8-GPU tp8/dp8 captures"
fi

echo
echo "Results:"
for d in "${done_dirs[@]}"; do
  echo "  $d: $(cd "$d" && echo *) ($(du -sh "$d" | cut -f1))"
done
echo "Replay one, e.g.:  build/clustersim replay $out/h2048-l4-b2/rank0.trace.json.gz"
echo "Calibrate:         build/clustersim calibrate $out/h*/rank0.trace.json.gz --cluster SCENARIO -o profile.yaml"
