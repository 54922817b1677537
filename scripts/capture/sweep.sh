#!/usr/bin/env bash
# scripts/capture/sweep.sh OUTDIR: capture a few Llama-style shapes on one GPU (one subfolder each),
# then, when 8 GPUs are visible, an 8-way tensor-parallel and an 8-way data-parallel run.
# Every capture: bf16, 3 unrecorded warmup steps, 1 profiled step, gzipped (well under 5 MB per rank).
# A capture that fails or runs past CAPTURE_TIMEOUT seconds (default 240) is reported and the sweep
# goes on; the exit status is 1 if any failed.
# Environment: PYTHON (default python3), TORCHRUN (default torchrun), EXTRA (more capture.py options),
# ONLY (a regular expression: capture only the names it matches).
set -uo pipefail

if [[ $# -ne 1 || $1 == -h || $1 == --help ]]; then
  echo "usage: $0 OUTDIR   (captures into OUTDIR/<name>/; see scripts/capture/README.md)" >&2
  exit 2
fi
out=$1
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${PYTHON:-python3}
torchrun=${TORCHRUN:-torchrun}
limit=${CAPTURE_TIMEOUT:-240}
read -r -a extra <<< "${EXTRA:-}"
common=(--warmup 3 --steps 1 --dtype bf16 --gzip "${extra[@]}")
mkdir -p "$out"
done_dirs=()
failed=()

run_capture() {  # name, then the command
  local name=$1; shift
  [[ -n ${ONLY:-} && ! $name =~ $ONLY ]] && return 0
  echo "== $name: ${*:2}"
  local t0=$SECONDS
  timeout "$limit" "$@" --out "$out/$name"
  local rc=$?
  if (( rc == 0 )); then
    done_dirs+=("$out/$name")
    echo "== $name: done in $((SECONDS - t0)) s"
  else
    failed+=("$name")
    echo "== $name: FAILED (status $rc$( ((rc == 124)) && echo ": over ${limit} s"), after $((SECONDS - t0)) s)"
  fi
}
capture1() {  # name, then capture.py options: one process, GPU 0
  local name=$1; shift
  CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} run_capture "$name" "$py" "$here/capture.py" "${common[@]}" "$@"
}
captureN() {  # name, process count, then capture.py options
  local name=$1 n=$2; shift 2
  run_capture "$name" "$torchrun" --standalone --nproc-per-node "$n" "$here/capture.py" "${common[@]}" "$@"
}

# One GPU, seq 2048 unless named: widths 1024 to 8192. h3072 is Llama 3.2 3B's layer shape, h4096
# Llama 3 8B's and h8192 Llama 3 70B's (hidden, heads, KV heads, FFN, vocabulary from their
# config.json files on Hugging Face).
l8b=(--hidden 4096 --heads 32 --kv-heads 8 --ffn 14336 --vocab 128256)
capture1 h1024-l4-b4 --seq 2048 --hidden 1024 --heads 16 --layers 4 --batch 4
capture1 h2048-l4-b2 --seq 2048 --hidden 2048 --heads 16 --layers 4 --batch 2
capture1 h3072-l2-b2 --seq 2048 --hidden 3072 --heads 24 --kv-heads 8 --ffn 8192 --vocab 128256 --layers 2 --batch 2
capture1 h4096-l2-b1 --seq 2048 "${l8b[@]}" --layers 2 --batch 1
capture1 h4096-l2-b1-s8192 --seq 8192 "${l8b[@]}" --layers 2 --batch 1
capture1 h8192-l2-b1 --seq 2048 --hidden 8192 --heads 64 --kv-heads 8 --ffn 28672 --vocab 128256 --layers 2 --batch 1
capture1 h4096-l2-b1-compiled --seq 2048 "${l8b[@]}" --layers 2 --batch 1 --compile
# torchtitan's own model code (--code torchtitan), eager and compiled: what `kernels: eager` describes.
capture1 tt-h4096-l2-b1-s8192 --seq 8192 "${l8b[@]}" --layers 2 --batch 1 --code torchtitan
capture1 tt-h4096-l2-b1-s8192-compiled --seq 8192 "${l8b[@]}" --layers 2 --batch 1 --code torchtitan --compile
capture1 tt-h4096-l2-b1-s8192-nnnorm --seq 8192 "${l8b[@]}" --layers 2 --batch 1 --code torchtitan --norm nn
# ... with torchtitan's activation checkpointing: op-level selective (its 8B config's default) and full.
capture1 tt-h4096-l2-b1-s8192-sacop --seq 8192 "${l8b[@]}" --layers 2 --batch 1 --code torchtitan --ac selective-op
capture1 tt-h4096-l2-b1-s8192-fullac --seq 8192 "${l8b[@]}" --layers 2 --batch 1 --code torchtitan --ac full

gpus=$("$py" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if (( gpus >= 8 )); then
  # Both runs use one communicator of all 8 ranks, which is what `clustersim replay` matches.
  captureN tp8-h4096-l2 8 --seq 2048 --tp 8 "${l8b[@]}" --layers 2 --batch 1
  captureN dp8-h2048-l2 8 --seq 2048 --tp 1 --hidden 2048 --heads 16 --layers 2 --batch 1
else
  echo "== $gpus GPU(s) visible: skipping the 8-GPU tp8/dp8 captures"
fi

echo
echo "Results:"
for d in "${done_dirs[@]}"; do
  echo "  $d: $(cd "$d" && echo *) ($(du -sh "$d" | cut -f1))"
done
if (( ${#failed[@]} )); then
  echo "Failed: ${failed[*]}"
  exit 1
fi
echo "Replay one, e.g.:  build/clustersim replay $out/h2048-l4-b2/rank0.trace.json.gz"
echo "Calibrate:         build/clustersim calibrate $out/h*/rank0.trace.json.gz --cluster SCENARIO -o profile.yaml"
