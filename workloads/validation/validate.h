// workloads/validation/validate.h: predicted vs published training throughput.
//
// For every PublishedRow, row_scenario_yaml() writes the scenario of the training job and the
// cluster the paper describes (one rule per source, no per-row tuning: the only per-row inputs
// are the printed columns), run_validation() binds and runs each like a scenario file, one step
// in its own sim::Simulation on the shared runner (sim/parallel.h), and
// compares the throughput with the published figure in the source's own FLOP convention:
//   Megatron SC'21: Eq. 3 FLOPs per iteration (counts the recompute forward) / (GPUs x step time);
//   Llama 3:        PaLM model FLOPs 6N + 12LHQT per token (StepResult::tflops_per_gpu).
// Rows are independent, so they run on worker threads; results are stored by row index, so the
// output does not depend on the thread count or on timing.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"
#include "workloads/validation/published.h"

namespace wl {

// A row counts as reproduced when |predicted / published - 1| <= this.
inline constexpr double kValidationTolerance = 0.15;

// Everything one simulated row needs, built from the row alone.
struct RowSetup {
  TrainingSettings training;
  topo::ClusterSpec cluster;
  topo::HardwareProfile profile;  // the catalog defaults of the accelerator
  std::string description;  // the choices the paper leaves open, for people
  // DDP all-reduces the gradient buffer itself after the backward (one bucket = every gradient):
  // no separate bucket memory.
  bool in_place_gradient_all_reduce = false;
};
// The row as a scenario (YAML): the cluster the paper describes and the training job, one rule per
// source. `clustersim validate` binds and runs it like any scenario file. `description` gets the
// choices the paper leaves open; `in_place_gradients` whether the DDP all-reduce works in place.
std::string row_scenario_yaml(const PublishedRow& row, std::string* description = nullptr,
                              bool* in_place_gradients = nullptr);
// The row's scenario bound (cluster spec, profile, training settings). Throws sim::ConfigError
// when the row is inconsistent (e.g. layers cannot be split).
RowSetup make_row_setup(const PublishedRow& row);

// One line per source describing the shared setup (hardware, schedule, assumptions).
std::string describe_source_setup(PublishedSource source);

struct RowResult {
  PublishedRow row;
  std::string setup;  // RowSetup::description
  int64_t virtual_stages = 1;
  int64_t micro_batches = 0;
  double step_time_s = 0;
  double predicted_tflops_per_gpu = 0;  // in the source's FLOP convention
  double predicted_mfu = 0;             // predicted TF/GPU over the BF16 dense peak
  double relative_error = 0;            // predicted / published - 1
  bool within_tolerance = false;
  StepResult step;               // the full step summary (breakdown, memory)
  double peak_memory_bytes = 0;  // largest per-rank peak over the pipeline stages
  bool fits() const { return peak_memory_bytes <= step.capacity_bytes; }
  uint64_t events = 0;
  std::string trace_fingerprint;  // "<records>:<hash>" of the first 16 ranks' trace, when asked for
  double wall_s = 0;    // wall time of this row's simulation
  std::string failure;  // non-empty when the row could not be simulated
};

// The row's golden fingerprint line (tests/golden/validate.txt): "validate:<id> events=... <step
// fingerprint> trace=<records>:<hash>", or "validate:<id> failed: <why>".
std::string row_fingerprint(const RowResult& r);

// Iteration FLOPs the source counts for one step of `row` (Eq. 3 for Megatron; PaLM model FLOPs
// x tokens for Llama 3).
double published_convention_flops_per_step(const PublishedRow& row);

// Simulates every row (threads >= 1 workers; 0 is taken as 1). Results in the order of `rows`.
// With `fingerprint`, the first 16 ranks are traced into a sim::FingerprintObserver (golden tests).
// `done`, when given, is told after each row (from the worker threads; it must be thread-safe).
std::vector<RowResult> run_validation(const std::vector<PublishedRow>& rows, int threads, bool fingerprint = false,
                                      const std::function<void(size_t done, size_t total)>& done = {});

}  // namespace wl
