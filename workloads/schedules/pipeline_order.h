// workloads/schedules/pipeline_order.h: the per-rank ORDER of pipeline-parallel work in one
// training step, for GPipe, 1F1B (PipeDream-Flush), Megatron's interleaved 1F1B and the
// zero-bubble ZB-H1 schedule, as pure functions, plus a tiny reference timing model (a list
// scheduler with zero communication cost) that computes the step time of those orders.
//
// Invariants of pipeline_order(params, stage):
//  - Every (pass, micro_batch, chunk) the schedule needs appears exactly once: F and one
//    backward (kBackward) per (micro-batch, chunk), or for ZB-H1 F, B (kBackwardInput) and
//    W (kBackwardWeight).
//  - On one rank, forwards of one chunk come in increasing micro-batch order, and so do its
//    backwards (GPipe's reverse backward order excepted, see below); a W always follows its B.
//  - Executed by every rank in order, with the dependencies of simulate_pipeline_makespan(),
//    the orders never deadlock (the timing model checks this and throws if they would).
//  - Peak number of forwards whose backward has not run (activation stashes) on rank s:
//    GPipe m; 1F1B and ZB-H1 min(p - s, m); interleaved min(W_s + 1, m*v) chunk-forwards, with
//    W_s the warm-up count below (about (1 + (p-1)/(p*v)) micro-batches' worth of activations on
//    rank 0, Korthikanti et al. 2022).
//
// Model chunks (virtual stages) follow Megatron-LM: rank s holds global chunks s, s+p, s+2p, ...
// so global chunk g = chunk * p + stage, and F flows g -> g+1, backward g -> g-1.
// Only sim/error.h is used: impossible parameters throw sim::ConfigError naming them.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/enum_names.h"

namespace wl {

enum class PipelineSchedule {
  kGPipe,            // all forwards, then all backwards (Huang et al. 2019)
  kOneFOneB,         // PipeDream-Flush / Megatron non-interleaved (Narayanan et al. SC'21 §2.2.1)
  kInterleaved1F1B,  // Megatron interleaved, v chunks per rank (Narayanan et al. SC'21 §2.2.2)
  kZeroBubbleH1,     // ZB-H1, backward split into B and W (Qi et al., ICLR 2024, arXiv 2401.10241)
};
// The scenario's spellings (schedule.kind), for parsing and printing.
inline constexpr sim::EnumNames<PipelineSchedule, 4> kPipelineScheduleNames{{{
    {PipelineSchedule::kGPipe, "gpipe"},
    {PipelineSchedule::kOneFOneB, "1f1b"},
    {PipelineSchedule::kInterleaved1F1B, "interleaved-1f1b"},
    {PipelineSchedule::kZeroBubbleH1, "zb-h1"},
}}};

enum class PassKind : uint8_t {
  kForward,
  kBackward,        // full backward: input gradient and weight gradient together
  kBackwardInput,   // B: gradient w.r.t. the stage input (on the critical path)
  kBackwardWeight,  // W: gradient w.r.t. the weights (needs only the local B; can be deferred)
};

struct PipelineWork {
  PassKind pass = PassKind::kForward;
  int32_t micro_batch = 0;
  int32_t chunk = 0;  // virtual stage index on this rank, 0..v-1
  bool operator==(const PipelineWork&) const = default;
};

struct PipelineParams {
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int32_t stages = 1;          // p, pipeline ranks
  int32_t micro_batches = 1;   // m, per step
  int32_t virtual_stages = 1;  // v, model chunks per rank (interleaved only)
};

// Throws sim::ConfigError, naming the values, unless p >= 1, m >= 1, v >= 1, v > 1 only with
// kInterleaved1F1B, and for kInterleaved1F1B m % p == 0 (Megatron's requirement: micro-batches
// go through each chunk in groups of p).
void validate_pipeline(const PipelineParams& params);

// The ordered list of work items that pipeline rank `stage` (0..p-1) executes in one step.
//  GPipe: F 0..m-1, then backward m-1..0 (LIFO, as drawn in the GPipe paper, Fig. 2c; any
//    order gives the same bubble).
//  1F1B: min(p-s-1, m) warm-up forwards, then (F, B) pairs, then the cool-down backwards.
//  Interleaved: Megatron's order over m*v "virtual micro-batches" k; see pipeline_order.cc.
//  ZB-H1: 1F1B's F/B order with B = kBackwardInput, and rank s keeping s W's pending (the W of
//    the oldest pending micro-batch follows a B as soon as more than s are pending); the rest
//    is flushed at the end, filling the cool-down bubbles. See pipeline_order.cc.
// Throws sim::ConfigError for invalid params or a stage outside 0..p-1.
std::vector<PipelineWork> pipeline_order(const PipelineParams& params, int32_t stage);

// Global model-chunk index of (stage, chunk): chunk * p + stage.
int32_t global_chunk(const PipelineParams& params, int32_t stage, int32_t chunk);

// A pass's change to the chunk activation stashes alive on its rank: a forward adds one, kBackward
// or kBackwardInput frees one, kBackwardWeight neither.
inline int32_t in_flight_change(PassKind k) {
  return k == PassKind::kForward ? 1 : k == PassKind::kBackward || k == PassKind::kBackwardInput ? -1 : 0;
}

// Peak over the order of the stashes alive at once (the sum of in_flight_change so far), of
// every chunk or of local chunk `chunk` alone.
inline constexpr int32_t kEveryChunk = -1;
int32_t peak_in_flight(const std::vector<PipelineWork>& order, int32_t chunk = kEveryChunk);

// Reference timing model: every rank runs its order sequentially, starting each item as soon
// as the rank is free and the item's dependencies are done (zero communication cost):
//  - F (mb, g) needs F (mb, g-1);
//  - a backward (kBackward or kBackwardInput) of (mb, g) needs the backward of (mb, g+1), and
//    F (mb, g) (which, for the last global chunk, is the loss);
//  - W (mb, g) needs B (mb, g) (same rank).
// Item costs: F t_f / v, kBackward t_b / v, kBackwardInput (1 - t_w_fraction) * t_b / v,
// kBackwardWeight t_w_fraction * t_b / v. Returns the makespan (step time); per_stage_busy,
// when given, receives each rank's summed busy time. Throws sim::ConfigError for invalid
// params, negative times, a fraction outside [0, 1], or a deadlock (naming the stuck rank and
// item).
double simulate_pipeline_makespan(const PipelineParams& params, double t_f, double t_b,
                                  double t_w_fraction,
                                  std::vector<double>* per_stage_busy = nullptr);

// The same model on explicit orders (orders[s] for rank s), so that a hand-made or modified
// order can be checked. Besides deadlocks it rejects items out of range and duplicated items,
// and orders that leave work undone (a forward or backward missing).
double simulate_pipeline_orders(const PipelineParams& params,
                                const std::vector<std::vector<PipelineWork>>& orders, double t_f,
                                double t_b, double t_w_fraction,
                                std::vector<double>* per_stage_busy = nullptr);

}  // namespace wl
