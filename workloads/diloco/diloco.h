// workloads/diloco/diloco.h: DiLoCo across islands (Douillard et al., arXiv 2311.08105) and its
// streaming variant (Streaming DiLoCo, Douillard et al., arXiv 2501.18512), simulated on the engine.
//
// M identical islands (data centres) each run H inner steps of their own training job, then
// all-reduce the pseudo-gradient of the full model (N parameters x bytes of the outer precision)
// across a wide-area network, then start the next outer round. Streaming DiLoCo cuts the model into
// F fragments whose all-reduces are staggered within the round and overlap compute; a fragment
// sent after inner step c must have arrived before step c + tau + 1 begins (tau = overlap_steps).
//
// The outer rounds are a JobProgram run by the one executor (workloads/program/) on a topology whose
// only tier is the WAN (build_wan_topology): rank i is island i, placed on its gateway accelerator;
// its "compute" stream holds one delay per inner step (the island's simulated step time) and its
// sync streams one all-reduce of sync_bytes / F per fragment sync, on an explicit communicator of
// all islands with the configured algorithm, lowered by lower_collective and run as flows by the
// CollectiveRuntime, sharing the WAN links max-min fairly with every other sync in flight:
//   ring: one pipelined ring (2(M-1)/M x bytes through every gateway's up and down link), 2(M-1)
//         latency steps. Alone on an idle WAN it takes exactly 2(M-1) (latency + bytes / (M x
//         bandwidth)), the bandwidth-optimal ring.
//   tree: NCCL's double binary tree (two in-order binary trees, half the bytes each, reduce and
//         broadcast pipelined), 2 ceil(log2 M) latency steps.
// A latency step costs the route latency (the configured one-way latency) and no software
// overhead: the runtime's step_overhead is 0 here, as the WAN latency stands for the whole step.
// Dependencies carry the semantics: a fragment's sync waits for the inner step it is sent after
// (the last island to get there starts it); inner step c + tau + 1 waits for the sync sent after
// step c; the island's end (a marker after its last step) waits for the syncs due by then, while
// syncs due later are still in flight at the end. Two syncs may overlap (a fragment sent while
// the previous one, due the same step, is still running), never three, so syncs alternate between
// two streams ("sync" and "sync.next") and never wait on each other.
// Assumptions, stated in the output: intra-island gathering of the shards to the island's gateway
// is hidden (overlapped with the last inner step); the outer optimizer step is free; islands are
// identical, so one simulated training step of one island gives every island's inner step time.
//
// Units: seconds (double) in results, bytes, bytes/s; sim::Time (ns) inside the simulation.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "sim/time.h"
#include "topology/catalog.h"
#include "topology/topology.h"
#include "workloads/program/program.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"

namespace wl {

enum class OuterAlgorithm { kRing, kTree };

struct OuterSyncConfig {
  std::string precision = "bf16";         // pseudo-gradient element type: fp32 | bf16 | fp8
  double bytes_per_param = 2.0;           // 4 / 2 / 1
  double bandwidth_Bps = 50e9;            // inter-island link, per island, per direction
  sim::Time latency = sim::Time::zero();  // one-way, paid once per algorithm step
  OuterAlgorithm algorithm = OuterAlgorithm::kRing;
  int64_t fragments = 1;      // Streaming DiLoCo fragments F (1 = plain DiLoCo)
  int64_t overlap_steps = 0;  // tau: inner steps a fragment's sync may overlap (0 = blocking)
  bool streaming = false;     // the `streaming` block was given
};

struct DilocoConfig {
  int64_t islands = 2;      // M
  int64_t inner_steps = 1;  // H
  int64_t outer_steps = 1;  // rounds simulated
  OuterSyncConfig sync;
};

// What one timeline run measured. Per-island vectors have `islands` entries.
struct DilocoTimeline {
  std::vector<double> compute_s;       // time spent in inner steps
  std::vector<double> wait_s;          // time blocked on outer syncs (incl. waiting for slower islands)
  std::vector<double> elapsed_s;       // until the island may begin the first step after the last round
  std::vector<double> utilization;     // compute_s / elapsed_s
  double total_time_s = 0;             // max of elapsed_s
  double drain_time_s = 0;             // when the last sync finished (>= total when streaming overlaps)
  double wait_share = 0;               // mean over islands of wait_s / elapsed_s
  double outer_sync_time_s = 0;        // mean per round of the summed fragment sync durations
  double fragment_sync_time_s = 0;     // mean duration of one fragment's sync (last arrival to done)
  int64_t syncs = 0;                   // fragment all-reduces simulated
  int64_t syncs_in_flight_at_end = 0;  // not needed before total_time_s (streaming overlap)
  std::vector<double> wan_up_bytes;    // bytes each island sent over its up link, all syncs
  std::vector<double> wan_down_bytes;  // bytes each island received
  uint64_t events = 0;
};

// The inter-island network as a Topology, built by topo::build_edge_list: vertices 0..M-1 are the
// islands' gateway accelerators ("gpu<i>", one node each), vertex M the WAN switch "wan". Gateway
// i has an up link i -> wan and a down link wan -> i of `bandwidth_Bps` each; the one-way latency
// is split over them (up ceil(latency / 2), down floor(latency / 2) in ns), so every
// gateway-to-gateway route has exactly `latency`. The links are LinkKind::kCustom, whose
// efficiency is 1 in every HardwareProfile (topology/cluster_resources.cc): they carry the
// configured bandwidth exactly.
topo::Topology build_wan_topology(int64_t islands, double bandwidth_Bps, sim::Time latency);

// The outer rounds as a JobProgram (see the top of this file): rank i = island i on GPU i of
// build_wan_topology; streams "compute", "sync", "sync.next"; categories compute, idle and
// "outer sync" (what the compute stream waited on); communicator 0 "wan" of all islands with the
// configured algorithm; sync k (round k / F, fragment k % F) has external_id k + 1. Ranks with the
// same step time share a template.
JobProgram diloco_outer_program(const DilocoConfig& config, std::span<const double> step_time_s, double sync_bytes);

// Simulates `config.outer_steps` rounds on a fresh sim::Simulation: diloco_outer_program run by a
// ProgramExecutor on build_wan_topology's resources (`gateway` is the islands' accelerator; it
// runs no kernels). `step_time_s` holds each island's inner step time (size islands); `sync_bytes`
// is the full model's pseudo-gradient. Fragment f of round r is sent after inner step
// r*H + floor((f+1)*H/F) (so F = 1 sends at the end of the round) and carries sync_bytes / F.
// Timeline fields come from the executor: compute_s and wait_s are the rank's "compute" and
// "outer sync" category seconds, elapsed_s the end of its compute stream, a sync's duration runs
// from its last member's arrival to its end (op spans), WAN bytes are its plan's bytes on each
// gateway's links for every sync the executor finished.
DilocoTimeline simulate_diloco_timeline(const DilocoConfig& config, std::span<const double> step_time_s,
                                        double sync_bytes, uint64_t seed = 1, const topo::GpuSpec& gateway = {});

// 2(M-1) (latency + bytes / (M x bandwidth)): the ring all-reduce of `bytes` across M islands on
// an idle WAN.
double ring_sync_seconds(int64_t islands, double bytes, double bandwidth_Bps, double latency_s);
// Appendix A of arXiv 2503.09799: an all-reduce of N parameters over R nodes takes at least
// 2N/W (1 - 1/R) + eps. Applied to our ring across islands: R = M nodes (the islands), W the
// per-island WAN bandwidth, N counted in bytes, eps = the latency term 2(M-1) x latency.
double appendix_a_allreduce_bound_seconds(int64_t nodes, double bytes, double bandwidth_Bps, double eps_s);
// Non-streaming, blocking DiLoCo: the per-island bandwidth at which H x T / (H x T + sync) reaches
// `utilization` (inverse of the ring closed form); infinite when latency alone is too much.
double ring_bandwidth_for_utilization(int64_t islands, int64_t inner_steps, double step_time_s, double bytes,
                                      double latency_s, double utilization);

struct DilocoSettings {
  TrainingSettings island;  // one island's training job (uses every GPU of the island cluster)
  DilocoConfig config;
};

// Binds `workload: {kind: diloco, ...}` (see diloco_config.cc for the keys). `gpus` is one island's
// GPU count. Throws sim::ConfigError with file:line:col and key.
DilocoSettings bind_diloco(const sim::ConfigNode& workload, const topo::GpuSpec& gpu, uint32_t gpus,
                           uint64_t memory_limit, SpareNodes spares = {});

struct DilocoResult {
  StepResult step;         // one island's inner step, simulated on the island cluster
  double params = 0;       // N, count_params(model).total
  double sync_bytes = 0;   // N x bytes_per_param
  double idle_sync_s = 0;  // ring closed form for the full model on an idle WAN (ring only)
  double appendix_a_bound_s = 0;
  DilocoTimeline diloco;
  DilocoTimeline data_parallel;  // H = 1, one fragment, blocking: gradient all-reduce every step
  int64_t data_parallel_steps = 0;
  double tokens_per_s = 0;  // all islands
  double data_parallel_tokens_per_s = 0;
};

// Runs one training step of one island on `res` (the island cluster), then the DiLoCo timeline and
// its data-parallel reference on their own simulations.
DilocoResult run_diloco(topo::ClusterResources& res, const DilocoSettings& settings);
// The outer rounds and the data-parallel reference, given the island's simulated inner step.
DilocoResult diloco_after_island_step(const DilocoSettings& settings, StepResult island_step, uint64_t seed);

// A readable multi-line summary (no trailing newline needed by callers).
std::string format_diloco_summary(const DilocoSettings& settings, const DilocoResult& result);

}  // namespace wl
