#!/usr/bin/env bash
# The same sweep on one process and under `mpirun -n 2` (rank 0 hands out the points, rank 1 runs
# them): the CSV and JSON must be byte for byte the same; likewise a campaign's trials under
# `mpirun -n 3`. Usage: mpi_sweep_test.sh CLUSTERSIM MPIRUN
set -euo pipefail
bin="$1"
mpirun="$2"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"
args=(sweep --axis workload.parallelism.tp=1,2,4,8 --axis workload.parallelism.pp=1,2,4,8
      --set workload.parallelism.dp=auto --set cluster.nodes=2 -q)
"$bin" "${args[@]}" --csv one.csv --json one.json
flags=(-n 2 --oversubscribe)
[ "$(id -u)" -eq 0 ] && flags+=(--allow-run-as-root)
# Containers often lack the shared-memory transport's extras; plain TCP and self are enough here.
OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
  "$mpirun" "${flags[@]}" "$bin" "${args[@]}" --csv two.csv --json two.json
cmp one.csv two.csv
cmp one.json two.json
# 16 points, one row each; layouts that cannot fill the 16 GPUs are rows with their error.
[ "$(wc -l < two.csv)" -eq 17 ] || { echo "expected 16 rows and a header"; cat two.csv; exit 1; }
grep -q ',error,' two.csv || { echo "expected refused points as rows"; exit 1; }
# A campaign's trials spread the same way: the same JSON on one process and on 3 ranks (with the
# checkpoint-interval sweep, 13 more campaigns).
faults=(faults "$(dirname "$(readlink -f "$0")")/../../workloads/scenarios/diloco-4dc-54d-faults.yaml" --trials 100
        --set workload.checkpoint.sweep=auto -q)
"$bin" "${faults[@]}" --json f1.json
OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
  "$mpirun" -n 3 "${flags[@]:2}" "$bin" "${faults[@]}" --json f3.json
cmp f1.json f3.json
# Other commands are refused under mpirun, on every rank, with exit 2.
set +e
OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo \
  "$mpirun" "${flags[@]}" "$bin" run -q > run.out 2> run.err
set -e
grep -q "under mpirun only \`clustersim sweep\` and \`clustersim faults\` run" run.err || { echo "run under mpirun was not refused"; cat run.err; exit 1; }
echo "mpi sweep: identical rows on 1 and 2 ranks; faults: identical campaigns on 1 and 3 ranks"
