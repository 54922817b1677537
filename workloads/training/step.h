// workloads/training/step.h: simulates one training step of a TrainingJob on a cluster and
// summarises it: step time, throughput, MFU (PaLM convention: model FLOPs 6N + 12LHQT per token,
// recompute excluded, over peak dense FLOP/s of the precision), where the time goes, and the peak
// memory of every pipeline stage's ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/cluster_resources.h"
#include "workloads/training/executor.h"
#include "workloads/training/training.h"
#include "workloads/training/training_config.h"

namespace wl {

struct StepResult {
  double step_time_s = 0;
  double tokens_per_step = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOP/s per GPU, in TFLOP/s
  double mfu = 0;
  double peak_flops = 0;
  int64_t micro_batches = 0;
  Breakdown mean;                     // over all ranks
  std::vector<Breakdown> per_stage;   // mean over the ranks of each pipeline stage
  std::vector<StageMemory> memory;    // per pipeline stage
  double capacity_bytes = 0;
  bool fits = true;
  uint64_t events = 0;
  uint64_t ops = 0;
  size_t rank_classes = 0;
  size_t plans = 0;
};

// One line per stage that does not fit, naming the stage, the excess and the largest part.
std::string describe_oom(const std::vector<StageMemory>& memory, double capacity_bytes);

// Golden fingerprint fields of a step (tests/golden/): step time and every breakdown part (mean
// over ranks) in integer ns, the peak memory of each pipeline stage in bytes, fits or oom.
std::string step_fingerprint(const StepResult& r);

// Builds the programs, checks memory (throws sim::UserError when a stage does not fit and
// allow_oom is false), runs the step and summarises it.
StepResult run_training_step(topo::ClusterResources& res, const TrainingSettings& ts,
                             const std::vector<uint32_t>& trace_ranks);

}  // namespace wl
