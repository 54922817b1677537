#!/usr/bin/env bash
# Configures and builds clustersim (Release) into build/. Extra arguments go to cmake --build.
#
# The build is profile-guided (GCC): the first time, an instrumented clustersim is built and run on
# a training set (the Llama 3 405B step on 4,096 GPUs expanded and on 16,384 symmetric, and the
# default scenario; about 10 s), then everything is compiled with the counts it wrote to
# build/pgo, and clustersim is linked with link-time optimisation. The 405B step then runs with
# about 15% fewer instructions (cachegrind, 4,096 GPUs) and the same outputs. Later builds reuse the
# counts; `rm -rf build/pgo` trains again (do so after large changes to the hot paths).
# CLUSTERSIM_PGO=off builds without it (any compiler); the choice is not remembered: the next
# build without it is profile-guided again (and recompiles everything).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${CLUSTERSIM_BUILD_DIR:-$root/build}"
pgo="${CLUSTERSIM_PGO:-on}"
case "$pgo" in
  on | off) ;;
  *) echo "build.sh: CLUSTERSIM_PGO is '$pgo': use on or off" >&2; exit 2 ;;
esac
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
if [ "$pgo" = on ] && [ ! -f "$build/pgo/trained" ]; then
  echo "build.sh: profile-guided build, stage 1 of 2: an instrumented clustersim and its training runs" >&2
  rm -rf "$build/pgo"
  cmake -S "$root" -B "$build" -DCLUSTERSIM_PGO=GENERATE -DCLUSTERSIM_PGO_DIR="$build/pgo" -DCLUSTERSIM_LTO=OFF >/dev/null
  cmake --build "$build" -j "$(nproc)" --target clustersim "$@"
  scenario="$root/workloads/scenarios/llama3-405b-16k-h100.yaml"
  # 4,096 GPUs: 512 nodes in 2 pods of the scenario's 384-node pods, DP 32, 16 sequences per replica.
  "$build/clustersim" run "$scenario" --quiet --set cluster.nodes=512 --set "cluster.scale_out.tiers[2].pods=2" \
    --set workload.parallelism.dp=32 --set workload.training.global_batch=512 --set workload.fidelity=expanded >/dev/null
  "$build/clustersim" run "$scenario" --quiet --set workload.fidelity=symmetric >/dev/null
  "$build/clustersim" run --quiet >/dev/null
  if ! compgen -G "$build/pgo/*.gcda" >/dev/null; then
    echo "build.sh: the training runs wrote no profile counts into $build/pgo; build with CLUSTERSIM_PGO=off" >&2
    exit 1
  fi
  # The commit trained on, so that later builds can say when the counts have aged.
  git -C "$root" rev-parse HEAD >"$build/pgo/trained" 2>/dev/null || true
  echo "build.sh: profile-guided build, stage 2 of 2: compiling with the training counts" >&2
elif [ "$pgo" = on ]; then
  trained="$(cat "$build/pgo/trained")"
  changed=0  # git diff --quiet: 1 when the sources differ, other codes when it cannot tell
  [ -n "$trained" ] && { git -C "$root" diff --quiet "$trained" -- sim topology workloads 2>/dev/null || changed=$?; }
  if [ "$changed" = 1 ]; then
    echo "build.sh: note: the profile was trained at ${trained:0:12}; sim/, topology/ or workloads/ changed since" \
      "(rm -rf $build/pgo to train again)" >&2
  fi
fi
if [ "$pgo" = on ]; then
  cmake -S "$root" -B "$build" -DCLUSTERSIM_PGO=USE -DCLUSTERSIM_PGO_DIR="$build/pgo" -DCLUSTERSIM_LTO=ON >/dev/null
else
  cmake -S "$root" -B "$build" -DCLUSTERSIM_PGO=OFF -DCLUSTERSIM_LTO=OFF >/dev/null
fi
cmake --build "$build" -j "$(nproc)" "$@"
