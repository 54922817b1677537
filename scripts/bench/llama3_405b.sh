# Sourced by scaling.sh and growth_profile.sh: the Llama 3 405B step of
# workloads/scenarios/llama3-405b-16k-h100.yaml (TP8 PP16, 16 sequences per DP group) grown with
# the cluster: DP = GPUs / 128, nodes of 8 GPUs, pods of 384 nodes (3,072 GPUs).
l405b_scenario="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/workloads/scenarios/llama3-405b-16k-h100.yaml"

# l405b_check_size SCRIPT GPUS: exits 2, naming SCRIPT, unless GPUS is a positive multiple of 128.
l405b_check_size() {
  if ! [[ $2 =~ ^[0-9]+$ ]] || (( $2 == 0 || $2 % 128 != 0 )); then
    echo "$1: size '$2' is not a GPU count that is a multiple of 128 (TP8 x PP16)" >&2; exit 2
  fi
}

# l405b_args GPUS FIDELITY: sets l405b_args_out to the `clustersim run` arguments of that step.
l405b_args() {
  local gpus=$1 nodes=$(($1 / 8)) dp=$(($1 / 128))
  local pods=$(( (nodes + 383) / 384 ))
  l405b_args_out=(run "$l405b_scenario" --quiet --set "cluster.nodes=$nodes" --set "cluster.scale_out.tiers[2].pods=$pods"
    --set "workload.parallelism.dp=$dp" --set "workload.training.global_batch=$((16 * dp))"
    --set "workload.fidelity=$2")
}
