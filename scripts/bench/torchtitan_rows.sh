#!/usr/bin/env bash
# The README's "Eager PyTorch and FSDP, out of sample" section (Accuracy so far): torchtitan's
# published Llama 3.1 runs (benchmarks/llama3_h100_202412_torchtitan.md, H100 with 96 GB HBM2e at
# 2.4 TB/s, 400 Gb/s per GPU) and the two A100 rows of its earlier docs/performance.md, each built
# as the README describes it, run with `clustersim run --json` and printed beside the published
# figures: TPS/GPU (the JSON's tokens_per_s over config.gpus: tokens per second per GPU, as
# torchtitan counts them) and peak memory (memory.peak_bytes: the tensors alive at the peak of the
# largest stage, GiB), at the H100's peaks and at the H100 NVL's. A second section prints the
# figures the notes under the table quote, each with the settings it varies; two of them read
# rank 0's Chrome trace.
#
#   scripts/bench/torchtitan_rows.sh [BINARY]
#
# BINARY defaults to $CLUSTERSIM_BIN, else build/clustersim. About 60 runs, under a second each.
#
# Each row is one of five scenarios written to a temporary folder plus --set overrides. What the
# README leaves open, and the reading taken here (none of these moves a figure it quotes):
# - The network between nodes (Tables 4 and 5, the A100 rows) is given only as a rate per GPU: a
#   rail-optimised, non-blocking two-tier fat-tree of 16-node leaf groups, as
#   workloads/scenarios/llama3-70b-fsdp-1024xh100.yaml (one rail gives the same figures). Table 1
#   is one node (FSDP 8), NVSwitch only.
# - "local batch" is torchtitan's batch per data-parallel rank: global_batch = local batch x dp.
#   Without pipeline parallelism it is one micro-batch (micro_batch = local batch); under PP
#   torchtitan cuts it into pp x stages per rank micro-batches (the README's "8 micro-batches of
#   4", "16 micro-batches of 2").
# - `schedule: {kind: 1f1b}` where there is no pipeline: the key is required, and with pp = 1 it
#   only orders the one micro-batch.
# - Tables 4 and 5 name no `kernels`: they run the default, fused (torch.compile), with the
#   `loss: eager` they name. "Float8" is `precision: fp8, fp8_recipe: tensorwise`.
# - "NVL peak": `gpu.peak_bf16: 835TFLOPS, peak_fp8: 1670TFLOPS` (H100 NVL datasheet, dense), the
#   rest of the row unchanged.
# - The A100 rows: 64 A100 80GB (8 nodes), 8 x 200 Gb/s per node (200 Gb/s per GPU, the README's
#   assumption), FSDP 64, local batch 1, `kernels: eager` with torchtitan's fused AdamW as Table
#   1's eager row (the README names no optimizer there; foreach gives 2,759 for the 8B row).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="${1:-${CLUSTERSIM_BIN:-$root/build/clustersim}}"
case "$bin" in -h|--help) sed -n '2,34p' "$0"; exit 0 ;; esac
[[ -x "$bin" ]] || { echo "torchtitan_rows.sh: no binary at $bin (build first: scripts/build.sh)" >&2; exit 2; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# cluster.gpu as torchtitan's page gives it; NVL adds the H100 NVL's dense peaks.
h100='{preset: h100-sxm, hbm_capacity: 96GB, hbm_bandwidth: 2.4TB/s}'
nvl=(--set cluster.gpu.peak_bf16=835TFLOPS --set cluster.gpu.peak_fp8=1670TFLOPS)

# base FILE GPU NODES NIC MODEL DP TP PP LOCAL_BATCH MICRO_BATCH RECOMPUTE
base() {
  local file="$1" gpu="$2" nodes="$3" nic="$4" model="$5" dp="$6" tp="$7" pp="$8" local_batch="$9"
  local micro="${10}" recompute="${11}" name="${file##*/}"
  {
    echo "name: ${name%.yaml}"
    echo "cluster:"
    echo "  gpu: $gpu"
    echo "  nodes: $nodes"
    echo "  gpus_per_node: 8"
    echo "  scale_up: {kind: nvswitch}"
    if (( nodes > 1 )); then
      echo "  scale_out:"
      echo "    kind: fat-tree"
      echo "    nic_bandwidth: $nic"
      echo "    rails: 8"
      echo "    tiers:"
      if (( nodes <= 16 )); then
        echo "      - {name: leaf, nodes: $nodes}"
        echo "      - {name: spine, leafs: 1}"
      else
        echo "      - {name: leaf, nodes: 16}"
        echo "      - {name: spine, leafs: $((nodes / 16))}"
      fi
    fi
    echo "workload:"
    echo "  kind: training"
    echo "  model: {preset: $model}"
    echo "  training: {seq_len: 8192, global_batch: $((local_batch * dp)), micro_batch: $micro, precision: bf16, recompute: $recompute}"
    echo "  parallelism: {tp: $tp, pp: $pp, dp: $dp, data_parallel: fsdp}"
    echo "  schedule: {kind: 1f1b}"
  } > "$file"
}
t1="$tmp/torchtitan-table1-8b.yaml"     # Table 1: 8B, FSDP 8, local batch 2, selective-op AC
t4="$tmp/torchtitan-table4-70b.yaml"    # Table 4: 70B, FSDP 32 x TP 8, local batch 16, full AC
t5="$tmp/torchtitan-table5-405b.yaml"   # Table 5: 405B, FSDP 8 x TP 8 x PP 8, local batch 32, full AC
a8="$tmp/torchtitan-a100-8b.yaml"       # performance.md: 8B, FSDP 64 on A100, local batch 1
a70="$tmp/torchtitan-a100-70b.yaml"     # performance.md: 70B, FSDP 64 on A100, local batch 1
base "$t1" "$h100" 1 400Gbps llama3-8b 8 1 1 2 2 selective-op
base "$t4" "$h100" 32 400Gbps llama3-70b 32 8 1 16 16 full
base "$t5" "$h100" 64 400Gbps llama3-405b 8 8 8 32 4 full
base "$a8" a100-sxm 8 200Gbps llama3-8b 64 1 1 1 1 selective-op
base "$a70" a100-sxm 8 200Gbps llama3-70b 64 1 1 1 1 full

# The rows' settings on top of their base scenario.
eager=(--set workload.training.kernels=eager --set workload.training.optimizer=fused)
compiled=(--set workload.training.kernels=fused --set workload.training.loss=eager)
float8=(--set workload.training.precision=fp8 --set workload.training.fp8_recipe=tensorwise)
t4_row=("${compiled[@]}" "${float8[@]}" --set workload.parallelism.sequence_parallel_saves=gathered)
asynctp=(--set workload.parallelism.tp_comm_overlap=asynctp)
t5_row=("${t4_row[@]}" "${asynctp[@]}" --set workload.parallelism.layer_split=first-last-one-fewer)
interleaved=(--set workload.schedule.kind=interleaved-1f1b --set workload.schedule.virtual_stages=2
             --set workload.training.micro_batch=2)
oom=(--set workload.memory.allow_oom=true)  # variants that do not fit still report their peak

# run NAME SCENARIO [--set ...]: one run; its JSON lands in $tmp/NAME.json.
run() {
  local name="$1" scenario="$2"; shift 2
  "$bin" run "$scenario" --quiet --reproducible --json "$tmp/$name.json" "$@"
}
# fig EXPR NAME...: a Python expression over the named runs, r[0], r[1], ..., each a dict: tps
# (tokens/s per GPU), gib (peak GiB), step (s), b (the breakdown), s (the largest stage's memory
# parts, bytes); pct(a, b[, digits]) formats a / b - 1 as "+12%", n(x) formats x as "1,234".
fig() {
  local expr="$1"; shift
  python3 - "$expr" "${@/#/$tmp/}" <<'EOF'
import json, sys
def load(path):
    j = json.load(open(path + ".json"))
    return {"tps": j["tokens_per_s"] / j["config"]["gpus"], "gib": j["memory"]["peak_bytes"] / 2**30,
            "step": j["step_time_s"], "b": j["breakdown"],
            "s": max(j["memory"]["stages"], key=lambda s: s["total_bytes"])}
r = [load(p) for p in sys.argv[2:]]
pct = lambda a, b, d=0: f"{a / b - 1:+.{d}%}"
n = lambda x: f"{x:,.0f}"
print(eval(sys.argv[1]))
EOF
}
# row LABEL PUBLISHED_TPS PUBLISHED_GIB SCENARIO NVL [--set ...]: a table row, run at the H100's
# peaks and, with NVL "nvl", at the H100 NVL's; PUBLISHED_GIB "-" where none was published. The
# percentages compare the rounded figures, as the README does.
row() {
  local label="$1" pub_tps="$2" pub_gib="$3" scenario="$4" nvl_run="$5"; shift 5
  run now "$scenario" "$@"
  local now nvl_col="-"
  now=$(fig "f'{n(r[0][\"tps\"])} ({pct(round(r[0][\"tps\"]), $pub_tps)}), {r[0][\"gib\"]:.1f} GiB'" now)
  [[ $pub_gib != - ]] && now="$now ($(fig "pct(round(r[0]['gib'], 1), $pub_gib)" now))"
  if [[ $nvl_run == nvl ]]; then
    run nvl "$scenario" "$@" "${nvl[@]}"
    nvl_col=$(fig "f'{n(r[0][\"tps\"])} ({pct(round(r[0][\"tps\"]), $pub_tps)})'" nvl)
  fi
  local pub
  pub=$(fig "n($pub_tps)" now)
  [[ $pub_gib != - ]] && pub="$pub, $pub_gib GiB"
  echo "| $label | $pub | $now | $nvl_col |"
}

echo "The torchtitan table (TPS/GPU and peak memory; % against the published figure):"
echo
echo "| torchtitan row | published TPS/GPU, memory | clustersim now | now, NVL peak |"
echo "|---|---|---|---|"
row "Table 1: 8B, FSDP 8, local batch 2, selective-op, eager" 5762 82.4 "$t1" nvl "${eager[@]}"
row "same, torch.compile" 6667 77.0 "$t1" nvl "${compiled[@]}"
row "same, torch.compile + Float8" 8532 76.8 "$t1" nvl "${compiled[@]}" "${float8[@]}"
row "Table 4: 70B, FSDP 32 x TP 8, local batch 16, full AC, Float8" 829 71.9 "$t4" nvl "${t4_row[@]}"
row "same, AsyncTP" 876 67.6 "$t4" nvl "${t4_row[@]}" "${asynctp[@]}"
row "Table 5: 405B, FSDP 8 x TP 8 x PP 8, 1F1B, 8 micro-batches of 4" 100 82.5 "$t5" nvl "${t5_row[@]}"
row "same, interleaved 1F1B (v = 2), 16 micro-batches of 2" 128 72.7 "$t5" nvl "${t5_row[@]}" "${interleaved[@]}"
row "A100: Llama 3 8B, FSDP 64, local batch 1, selective-op, eager" 2973 - "$a8" - "${eager[@]}"
row "A100: Llama 3 70B, FSDP 64, local batch 1, full AC, eager" 331 - "$a70" - "${eager[@]}"

# The figures the README's bullets under the table quote, each from the runs named beside it.
echo
echo "The bullets under the table:"
run t1e "$t1" "${eager[@]}"
run t1c "$t1" "${compiled[@]}"
run t1f "$t1" "${compiled[@]}" "${float8[@]}"
run t4 "$t4" "${t4_row[@]}"
run t4a "$t4" "${t4_row[@]}" "${asynctp[@]}"
run t5 "$t5" "${t5_row[@]}"

korthikanti=(--set workload.training.recompute=selective "${oom[@]}")
run t1c_sel "$t1" "${compiled[@]}" "${korthikanti[@]}"
run t1e_sel "$t1" "${eager[@]}" "${korthikanti[@]}"
echo "- Table 1's peak with recompute=selective (Korthikanti's) against selective-op:" \
  "compiled $(fig "f'{r[1][\"gib\"]:.1f} against {r[0][\"gib\"]:.1f} GiB'" t1c t1c_sel)," \
  "eager $(fig "f'{r[1][\"gib\"]:.1f} against {r[0][\"gib\"]:.1f} GiB'" t1e t1e_sel)"

run t1e_vec "$t1" "${eager[@]}" --set cluster.profile.unvectorized_elementwise_rate=0
run t1e_loss "$t1" "${eager[@]}" --set workload.training.loss=fused
run t1e_foreach "$t1" "${eager[@]}" --set workload.training.optimizer=foreach
echo "- Table 1 eager ($(fig "f'{n(r[0][\"tps\"])} TPS/GPU, {r[0][\"gib\"]:.1f} GiB'" t1e)):" \
  "unvectorized_elementwise_rate=0 $(fig "n(r[0]['tps'])" t1e_vec)," \
  "loss=fused $(fig "f'{n(r[0][\"tps\"])}, {r[0][\"gib\"]:.1f} GiB'" t1e_loss)," \
  "optimizer=foreach $(fig "n(r[0]['tps'])" t1e_foreach)"

run t4_loss "$t4" "${t4_row[@]}" --set workload.training.loss=fused
echo "- Table 4's peak with loss=fused against eager: $(fig "f'{r[1][\"gib\"]:.1f} against {r[0][\"gib\"]:.1f} GiB'" t4 t4_loss)"

run t1c_persist "$t1" "${compiled[@]}" --set workload.training.gradients=persistent
run t4_persist "$t4" "${t4_row[@]}" --set workload.training.gradients=persistent
echo "- gradients=persistent against lazy: Table 1 compiled $(fig "f'{r[1][\"gib\"] - r[0][\"gib\"]:+.1f} GiB'" t1c t1c_persist)," \
  "Table 4 $(fig "f'{r[1][\"gib\"] - r[0][\"gib\"]:+.1f} GiB'" t4 t4_persist)"

# A recomputed layer's working set is one layer's activations without recompute: what a run
# without recompute adds from L - 1 layers to L (its peak holds the head's tensors either way).
# The head's loss tensors are the rest of the row's activations beyond its L layers' saved ones.
no_ac=(--set workload.training.recompute=none "${oom[@]}")
run t1c_none "$t1" "${compiled[@]}" "${no_ac[@]}"
run t1c_none1 "$t1" "${compiled[@]}" "${no_ac[@]}" --set workload.model.layers=31
run t1c_31 "$t1" "${compiled[@]}" --set workload.model.layers=31
run t4_none "$t4" "${t4_row[@]}" "${no_ac[@]}"
run t4_none1 "$t4" "${t4_row[@]}" "${no_ac[@]}" --set workload.model.layers=79
run t4_79 "$t4" "${t4_row[@]}" --set workload.model.layers=79
layer='(r[0]["s"]["activations_bytes"] - r[1]["s"]["activations_bytes"]) / 2**30'
head='(r[2]["s"]["activations_bytes"] - L * (r[2]["s"]["activations_bytes"] - r[3]["s"]["activations_bytes"])) / 2**30'
echo "- a recomputed layer's working set (recompute=none, one layer more) and the head's loss tensors:" \
  "Table 1 compiled $(fig "f'{$layer:.1f} and {${head/L/32}:.1f} GiB'" t1c_none t1c_none1 t1c t1c_31)," \
  "Table 4 $(fig "f'{$layer:.1f} and {${head/L/80}:.1f} GiB'" t4_none t4_none1 t4 t4_79)"

echo "- Table 5's largest stage: $(fig "f'{r[0][\"s\"][\"buffers_bytes\"] / 2**30:.1f} GiB of gathered parameters (buffers), {r[0][\"s\"][\"grads_bytes\"] / 2**30:.1f} GiB of fp32 gradient accumulators (grads); bubble {r[0][\"b\"][\"bubble_s\"] / r[0][\"step\"]:.1%} of the step (7/15 = 46.7%)'" t5)"

no_copies=(--set workload.parallelism.fsdp_copies=false)
run t1e_nc "$t1" "${eager[@]}" "${no_copies[@]}"
run t1c_nc "$t1" "${compiled[@]}" "${no_copies[@]}"
run t1f_nc "$t1" "${compiled[@]}" "${float8[@]}" "${no_copies[@]}"
run t4_nc "$t4" "${t4_row[@]}" "${no_copies[@]}"
run t4a_nc "$t4" "${t4_row[@]}" "${asynctp[@]}" "${no_copies[@]}"
run t5_nc "$t5" "${t5_row[@]}" "${no_copies[@]}"
echo "- FSDP2's copies (fsdp_copies=false, then the row): Table 1" \
  "$(fig "', '.join(f'{n(r[i + 3][\"tps\"])} to {n(r[i][\"tps\"])} ({pct(r[i][\"tps\"], r[i + 3][\"tps\"], 1)})' for i in range(3))" t1e t1c t1f t1e_nc t1c_nc t1f_nc);" \
  "compiled step $(fig "f'{r[1][\"step\"]:.3f} to {r[0][\"step\"]:.3f} s (compute {1e3 * (r[0][\"b\"][\"compute_s\"] - r[1][\"b\"][\"compute_s\"]):+.0f} ms, exposed dp comm {1e3 * (r[0][\"b\"][\"exposed_dp_s\"] - r[1][\"b\"][\"exposed_dp_s\"]):+.0f} ms)'" t1c t1c_nc);" \
  "Table 4 $(fig "', '.join(pct(r[i]['tps'], r[i + 2]['tps'], 1) for i in range(2))" t4 t4a t4_nc t4a_nc);" \
  "Table 5 $(fig "pct(r[0]['tps'], r[1]['tps'], 1)" t5 t5_nc)"
# The copy-outs on rank 0's compute stream, from its trace.
"$bin" run "$t1" --quiet "${compiled[@]}" --trace "$tmp/t1c.trace.json" --trace-ranks 0
python3 - "$tmp/t1c.trace.json" <<'EOF'
import json, sys
ev = sorted((e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0),
            key=lambda e: e["ts"])
out, backward = {"forward": 0.0, "backward": 0.0}, False
for e in ev:
    backward = backward or e["name"].startswith("bwd ")
    if e["name"] == "fsdp copy-out":
        out["backward" if backward else "forward"] += e["dur"]
print(f"  Table 1 compiled, rank 0's trace: the copy-outs take {sum(out.values()) / 1e3:.0f} ms of the compute stream, "
      + ", ".join(f"{v / 1e3:.0f} ms in the {k}" for k, v in out.items()))
EOF

delayed=(--set workload.training.fp8_recipe=delayed)
fused_sel=(--set workload.training.kernels=fused "${korthikanti[@]}")
run t1f_d "$t1" "${compiled[@]}" "${float8[@]}" "${delayed[@]}"
run t1c_sel_fused "$t1" "${fused_sel[@]}"
run t1f_sel_fused "$t1" "${fused_sel[@]}" "${float8[@]}"
run t1f_sel_fused_d "$t1" "${fused_sel[@]}" "${float8[@]}" "${delayed[@]}"
run t1f_sel_073 "$t1" "${fused_sel[@]}" "${float8[@]}" --set cluster.profile.fp8_gemm_efficiency=0.73
run t1f_sel_068 "$t1" "${fused_sel[@]}" "${float8[@]}" --set cluster.profile.fp8_gemm_efficiency=0.68
gain="f'{r[1][\"tps\"] / r[0][\"tps\"]:.2f} with the casts, {r[2][\"tps\"] / r[0][\"tps\"]:.2f} without (fp8_recipe=delayed)'"
echo "- Float8's gain on Table 1 (published 1.28): the compiled rows $(fig "$gain" t1c t1f t1f_d);" \
  "with recompute=selective and kernels=fused (a fused loss), as TrainingPrecision.TensorwiseFp8GainIsTorchtitansTable1" \
  "runs it, $(fig "$gain" t1c_sel_fused t1f_sel_fused t1f_sel_fused_d)," \
  "$(fig "f'{r[1][\"tps\"] / r[0][\"tps\"]:.2f} at fp8_gemm_efficiency 0.73, {r[2][\"tps\"] / r[0][\"tps\"]:.2f} at 0.68'" t1c_sel_fused t1f_sel_073 t1f_sel_068)"

f8ag=(--set workload.parallelism.fsdp_float8_all_gather=true)
run t1f_ag "$t1" "${compiled[@]}" "${float8[@]}" "${f8ag[@]}"
run t4_ag "$t4" "${t4_row[@]}" "${f8ag[@]}"
run t5_ag "$t5" "${t5_row[@]}" "${f8ag[@]}"
echo "- fsdp_float8_all_gather=true: Table 1 Float8 $(fig "f'{n(r[0][\"tps\"])} ({pct(round(r[0][\"tps\"]), 8532)})'" t1f_ag)," \
  "Table 4 $(fig "f'{n(r[0][\"tps\"])} ({pct(round(r[0][\"tps\"]), 829)})'" t4_ag)," \
  "Table 5 $(fig "f'{n(r[0][\"tps\"])} ({pct(round(r[0][\"tps\"]), 100)}) at {r[0][\"gib\"]:.1f} GiB'" t5_ag)"

att=(--set cluster.profile.attention_efficiency=0.35 --set cluster.profile.attention_backward_efficiency=0.35)
fitted=(--set "cluster.profile.file=$root/workloads/scenarios/profiles/h100-sxm-pytorch-2.11.yaml")
run att_e "$t1" "${eager[@]}" "${att[@]}"
run att_c "$t1" "${compiled[@]}" "${att[@]}"
run att_f "$t1" "${compiled[@]}" "${float8[@]}" "${att[@]}"
run fitted_e "$t1" "${eager[@]}" "${fitted[@]}"
run fitted_c "$t1" "${compiled[@]}" "${fitted[@]}"
run fitted_f "$t1" "${compiled[@]}" "${float8[@]}" "${fitted[@]}"
three="' / '.join(n(x['tps']) for x in r) + ' (' + ' / '.join(pct(round(x['tps']), p) for x, p in zip(r, (5762, 6667, 8532))) + ')'"
echo "- Table 1 with attention at 35% of the peak: $(fig "$three" att_e att_c att_f);" \
  "with the fitted H100 profile: $(fig "$three" fitted_e fitted_c fitted_f)"

run t4_shard "$t4" "${t4_row[@]}" --set workload.parallelism.sequence_parallel_saves=shard
run t5_shard "$t5" "${t5_row[@]}" --set workload.parallelism.sequence_parallel_saves=shard
echo "- sequence_parallel_saves shard, then gathered: Table 4 $(fig "f'{n(r[1][\"tps\"])} to {n(r[0][\"tps\"])} TPS/GPU'" t4 t4_shard);" \
  "Table 5's largest stage $(fig "f'{r[0][\"gib\"] - r[1][\"gib\"]:+.2f} GiB'" t5 t5_shard)"

run t4_ub "$t4" "${t4_row[@]}" --set workload.parallelism.tp_comm_overlap=userbuffers
echo "- AsyncTP on Table 4: $(fig "f'{n(r[0][\"tps\"])} to {n(r[1][\"tps\"])} ({pct(r[1][\"tps\"], r[0][\"tps\"])}), userbuffers {n(r[2][\"tps\"])} ({pct(r[2][\"tps\"], r[0][\"tps\"])}); step {r[1][\"step\"]:.2f} s, exposed tp comm {r[1][\"b\"][\"exposed_tp_s\"]:.2f} s'" t4 t4a t4_ub)"
# Where that exposed tp comm goes, from rank 0's trace: AsyncTP's copy and sum kernels on the
# compute stream, and the compute stream's idle time before a kernel, by what the kernel waited for.
"$bin" run "$t4" --quiet "${t4_row[@]}" "${asynctp[@]}" --trace "$tmp/t4a.trace.json" --trace-ranks 0
python3 - "$tmp/t4a.trace.json" <<'EOF'
import json, sys
ev = sorted((e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X" and e["tid"] == 0),
            key=lambda e: e["ts"])
kernels = sum(e["dur"] for e in ev if " asynctp " in e["name"])
waits = {"the attention output's reduce-scatters": 0.0, "the other reduce-scatters": 0.0,
         "the QKV all-gathers (last chunk)": 0.0, "anything else": 0.0}
end, prev = ev[0]["ts"], None
for e in ev:
    gap = e["ts"] - end
    if gap > 0:
        if " asynctp reduce" in e["name"]:
            key = "the attention output's reduce-scatters" if "attn_out_proj" in prev["name"] else "the other reduce-scatters"
        elif "qkv_proj (chunk 8 of" in e["name"]:
            key = "the QKV all-gathers (last chunk)"
        else:
            key = "anything else"
        waits[key] += gap
    end, prev = max(end, e["ts"] + e["dur"]), e
print(f"  rank 0's trace: copies and sums {kernels / 1e6:.2f} s of the compute stream; it waits "
      + ", ".join(f"{v / 1e6:.2f} s for {k}" for k, v in waits.items()))
EOF
