// workloads/training/training_config.h: binds `workload: {kind: training}` of a scenario.
//
//   workload:
//     kind: training
//     model: {preset: llama3-8b}            # or every field: layers, hidden, ffn_hidden, heads,
//                                           # kv_heads, head_dim, vocab, mlp, norm, ...
//     training: {seq_len: 8192, global_batch: 64, micro_batch: 1, precision: bf16,
//                recompute: none, flash_attention: true}
//     parallelism: {tp: 8, cp: 1, pp: 4, dp: 2, dp_outer: 1, order: [tp, cp, pp, dp, dp_outer],
//                   sequence_parallel: true, data_parallel: ddp, fsdp_prefetch: 1,
//                   bucket: 25MiB, layer_split: even}
//     schedule: {kind: 1f1b, virtual_stages: 1}   # gpipe | 1f1b | interleaved-1f1b | zb-h1
//     collectives: {tp: auto, cp: auto, dp: auto, dp_outer: auto}
//     memory: {allow_oom: false}
#pragma once

#include <array>
#include <string>

#include "sim/config.h"
#include "topology/catalog.h"
#include "workloads/training/training.h"

namespace wl {

// How the step is simulated (workload.fidelity): every rank (expanded); one data-parallel replica
// standing for all of them (symmetric: refused, naming the condition, where the replicas are not
// provably identical); symmetric where it holds and expanded otherwise, saying why (auto).
enum class Fidelity : uint8_t { kExpanded, kSymmetric, kAuto };

struct TrainingSettings {
  TrainingJob job;
  bool allow_oom = false;
  Fidelity fidelity = Fidelity::kExpanded;
  std::string fidelity_at;  // "file:line:col: workload.fidelity" when given, for refusals
  // Where each dimension's collective algorithm was given ("file:line:col: workload.collectives.dp"),
  // empty when it was not: an algorithm that cannot run there is reported at that place.
  std::array<std::string, kNumDims> algorithm_at;
};

// The cluster's hot spare nodes (cluster.spare_nodes), which the job's GPUs leave out: errors about
// the layout say where the job's GPU count comes from.
struct SpareNodes {
  uint32_t nodes = 0;
  uint32_t gpus_per_node = 0;
};

ModelSpec bind_model(const sim::ConfigNode& model);
// `gpus` is the job's GPU count (the cluster's, less `spares`): the layout must use every GPU.
// `memory_limit` (bytes, 0: none) refuses a step whose programs alone would need more
// (BindContext::memory_limit).
TrainingSettings bind_training(const sim::ConfigNode& workload, const topo::GpuSpec& gpu, uint32_t gpus,
                               uint64_t memory_limit, SpareNodes spares = {});

}  // namespace wl
