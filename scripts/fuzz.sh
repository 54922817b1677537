#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/fuzz_*.cc) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer in build-fuzz/, and runs each for a bounded time.
#   scripts/fuzz.sh                 each target for 20 s (the test suite's smoke run)
#   scripts/fuzz.sh --seconds 3600  each target for an hour
#   scripts/fuzz.sh --runs 1000000  each target for a million inputs
#   scripts/fuzz.sh --target fuzz_units --seconds 600
# Corpora live in build-fuzz/corpus/<target> (seeded from workloads/scenarios/ and
# tests/fuzz/regressions/; the unit parser from a list of quantities). A crash, a sanitizer report, a
# leak or a timeout stops the run and writes the input as build-fuzz/artifacts/<target>-crash-* (or
# -leak-, -timeout-, -oom-): copy it into tests/fuzz/regressions/ once fixed (the test suite runs
# every file there through clustersim). Exit status 1 when a target found one.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${CLUSTERSIM_FUZZ_BUILD:-$root/build-fuzz}"
seconds=20
runs=""
only=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --target) only="$2"; shift 2 ;;
    *) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ not found (scripts/setup.sh installs it)" >&2
  exit 2
fi
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCLUSTERSIM_FUZZ=ON -DCLUSTERSIM_BENCHMARKS=OFF -DCLUSTERSIM_MPI=OFF >/dev/null
targets=(fuzz_scenario fuzz_setup fuzz_set fuzz_units fuzz_traces)
[ -n "$only" ] && targets=("$only")
cmake --build "$build" --target "${targets[@]}" -- -j"$(nproc)" >/dev/null
mkdir -p "$build/corpus"
for t in "${targets[@]}"; do
  corpus="$build/corpus/$t"
  mkdir -p "$corpus"
  case "$t" in
    fuzz_scenario | fuzz_setup)
      # The example scenarios of at most a few thousand GPUs (binding a 131k-GPU cluster takes a
      # second, which would starve the fuzzer), and the regressions.
      for f in "$root"/workloads/scenarios/*.yaml "$root"/tests/fuzz/regressions/crash-* "$root"/tests/fuzz/regressions/timeout-*; do
        case "$f" in *8k*|*16k*|*131k*) continue ;; esac
        cp -n "$f" "$corpus"/ 2>/dev/null || true
      done ;;
    fuzz_set)
      i=0
      for s in cluster.nodes=4 workload.parallelism.tp=2 workload.training.seq_len=1024 \
               cluster.scale_out.nic_bandwidth=200Gbps 'cluster.scale_out.tiers[0].nodes=4' \
               workload.training.precision=fp8 cluster.profile.host_overhead=5us; do
        printf '%s' "$s" > "$corpus/seed-$i"; i=$((i + 1))
      done ;;
    fuzz_traces)
      # A selector byte (0: Kineto, 1: Chakra, 2: execution trace), then a small file of that kind.
      { printf '\000'; printf '%s' '{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 7, "tid": 7, "ts": 1, "dur": 9, "args": {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}}, {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, "ts": 2, "dur": 1, "args": {"correlation": 5}}, {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x32_nt", "pid": 0, "tid": 7, "ts": 4, "dur": 3, "args": {"stream": 7, "correlation": 5}}, {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float", "pid": 0, "tid": 8, "ts": 8, "dur": 2, "args": {"stream": 8, "In msg nelems": 4, "Out msg nelems": 4, "dtype": "Float"}}]}'; } > "$corpus/seed-kineto"
      { printf '\001'; cat "$root/tests/data/astra-sim-all-reduce-8npus-1mb/all_reduce.1.et"; } > "$corpus/seed-chakra"
      { printf '\002'; printf '%s' '{"schema": "1.0.1", "pid": 7, "nodes": [{"name": "nccl:all_reduce", "id": 3, "inputs": [[1, 2, 0, 4, 4, "cuda:0"]]}, {"name": "nccl:all_to_all", "id": 4, "inputs": [[1, 2, 0, 8, 2, "cuda:0"]]}]}'; } > "$corpus/seed-et"
      for f in "$root"/tests/fuzz/trace-regressions/crash-* "$root"/tests/fuzz/trace-regressions/timeout-*; do
        [ -e "$f" ] && cp -n "$f" "$corpus"/
      done ;;
    fuzz_units)
      i=0
      for s in 400Gbps 50GB/s 1.5GiB/s 80GiB 1e9 989TFLOPS 3.8e25FLOP 1.5us 10ms 2h 54d 0.5ns; do
        printf '%s' "$s" > "$corpus/seed-$i"; i=$((i + 1))
      done ;;
  esac
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  echo "== $t (corpus $(ls "$corpus" | wc -l) inputs)"
  artifacts="$build/artifacts"
  mkdir -p "$artifacts"
  rm -f "$artifacts/$t"-*
  ASAN_OPTIONS=detect_leaks=1 "$build/fuzz/$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=8192 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$t-" "$corpus" > "$build/$t.log" 2>&1 || true
  grep -E "^(stat::number_of_executed_units|stat::peak_rss|SUMMARY)|Done [0-9]+ runs|==[0-9]+==ERROR" "$build/$t.log" || true
  if compgen -G "$artifacts/$t-*" >/dev/null; then
    echo "fuzz.sh: $t found a failing input (log: $build/$t.log):" >&2
    ls "$artifacts/$t"-* >&2
    failed=1
  fi
done
exit "${failed:-0}"
