// workloads/training/step.h: simulates one training step of a TrainingJob on a cluster and
// summarises it: step time, throughput, MFU (PaLM convention: model FLOPs 6N + 12LHQT per token,
// recompute excluded, over peak dense FLOP/s of the precision), where the time goes, and the peak
// memory of every pipeline stage's ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <array>
#include <memory>

#include "topology/cluster_resources.h"
#include "topology/failure_events.h"
#include "workloads/program/executor.h"
#include "workloads/program/failure_injector.h"
#include "workloads/training/training.h"
#include "workloads/training/training_config.h"

namespace wl {

// Parts of one rank's step time, in seconds (from the executor's training categories).
struct Breakdown {
  double compute = 0, optimizer = 0, bubble = 0;
  std::array<double, kNumDims> exposed{};  // indexed by Dim (kPp: exposed pipeline transfers)
  double host = 0;  // the GPU waiting for the host to launch kernels (JobProgram::host_overhead)
  double total() const;
};

// The parts of a step in report order: the summary's label, the JSON key (snake_case, unit in the
// name) and the seconds (DP and outer DP together).
struct BreakdownPart {
  const char* label;
  const char* key;
  double seconds;
};
std::vector<BreakdownPart> breakdown_parts(const Breakdown& b);

// How a simulated step ended: every rank finished; or it could not finish (a dead rank, a hang):
// `report` names what waits on what; or the program was malformed (`report` says how); or a
// failure hung it and the watchdog aborted the job (`report` says which op timed out, the first
// failure and what waited on whom).
enum class StepOutcome { kCompleted, kStuck, kError, kAborted };

struct StepResult {
  StepOutcome outcome = StepOutcome::kCompleted;
  std::string report;  // why the step did not complete (empty when it did)
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
  double capacity_bytes = 0;         // what the framework gets: device memory minus reserved
  double device_bytes = 0;           // the device's memory (catalog)
  double reserved_bytes = 0;         // CUDA context + NCCL buffers (hardware profile)
  int communicators = 0;             // NCCL communicators per rank (parallel dimensions > 1)
  bool fits = true;
  uint64_t events = 0;
  uint64_t ops = 0;
  uint64_t ops_total = 0;
  // Failures (times from the step's start, in seconds; negative: none). The work lost is the
  // step up to the abort on every GPU of the job: a synchronous step keeps nothing of it.
  std::string failure;  // the first failure ("node 7 (GPUs 56-63) died")
  double failed_at_s = -1, aborted_at_s = -1;
  double watchdog_s = 0;
  size_t rank_classes = 0;
  size_t plans = 0;
  // The fidelity that ran ("expanded" or "symmetric"), why it is not the one asked for (empty when
  // it is), and how many ranks were simulated individually.
  std::string fidelity = "expanded";
  std::string fidelity_note;
  // What a planner should know about the layout on this cluster (e.g. tensor parallelism across
  // nodes), one sentence each; the summary prints them as notes.
  std::vector<std::string> notes;
  uint32_t ranks_simulated = 0;
  uint32_t fabric_links_folded = 0;  // symmetric mode: ProgramExecutor::fabric_links_folded
};

// Why the step does not fit: the stage over by the most (its need, the excess and its largest
// part), the other stages over too in one clause, and what would shrink that part; "" when all fit.
std::string describe_oom(const std::vector<StageMemory>& memory, double capacity_bytes);

// Golden fingerprint fields of a step (tests/golden/): step time and every breakdown part (mean
// over ranks) in integer ns, the peak memory of each pipeline stage in bytes, fits or oom.
std::string step_fingerprint(const StepResult& r);

// Called once the executor exists and before the step runs (e.g. to schedule failures).
class StepHook {
 public:
  virtual ~StepHook() = default;
  virtual void before_run(ProgramExecutor& exec) = 0;
};

// Where the step runs and what fails during it.
struct StepOptions {
  std::vector<uint32_t> gpu_of_rank;         // placement (a spare in a dead node's place); empty: rank r on GPU r
  std::vector<uint32_t> failed_gpus;         // dead before the step starts (a degraded cluster)
  std::vector<uint32_t> failed_links;        // down before the step starts
  std::vector<topo::FailureEvent> failures;  // during the step, at their times from its start
  sim::Time watchdog = sim::Time::sec(600);  // ExecutorOptions::watchdog
};

// One training step on a cluster, in three parts: the first constructor prepares it from the
// cluster's description alone (builds the programs, checks memory: throws sim::UserError when a
// stage does not fit and allow_oom is false; decides the fidelity: throws sim::ConfigError when
// symmetric mode is asked for and does not hold), so that the resources can be built for the GPUs
// it models (modelled_gpus); attach() builds its executor on the resources; around the
// simulation's run, start() issues the first ops and finish() summarises what the run reached.
class TrainingStep {
 public:
  TrainingStep(const topo::Topology& topo, const topo::GpuSpec& gpu, const topo::HardwareProfile& profile,
               const TrainingSettings& ts, const std::vector<uint32_t>& trace_ranks, StepOptions options = {});
  // Prepares the step on res's cluster and attaches it to res.
  TrainingStep(topo::ClusterResources& res, const TrainingSettings& ts, const std::vector<uint32_t>& trace_ranks,
               StepOptions options = {});
  ~TrainingStep();
  TrainingStep(const TrainingStep&) = delete;  // the executor refers to the step's program
  TrainingStep& operator=(const TrainingStep&) = delete;
  // The GPUs the step models individually, 1 per GPU of the cluster (symmetric mode: data-parallel
  // replica 0's); empty: every GPU (topo::ClusterResources' `modelled`).
  std::vector<uint8_t> modelled_gpus() const;
  // Builds the step's executor on `res` (the cluster it was prepared for), which must model every
  // GPU of modelled_gpus(). Once, before start().
  void attach(topo::ClusterResources& res);
  void start();
  StepResult finish(const sim::RunResult& run);
  ProgramExecutor& executor() { return *exec_; }
  // The step's programs and the kernel coster they run with (for exporters: traces/chakra).
  const JobProgram& program() const { return jp_; }
  const KernelCoster& coster() const { return *coster_; }
  // Why symmetric mode would not reproduce the expanded run of this step (the first condition
  // that fails), or empty when the data-parallel replicas are provably identical.
  std::string symmetric_problem(const std::vector<uint32_t>& trace_ranks) const;

 private:
  // Where the replicas' copies would see another fabric than replica 0 (see step.cc), why; else "".
  std::string fabric_asymmetry() const;
  const topo::Topology& topo_;
  topo::GpuSpec gpu_;
  topo::ClusterResources* res_ = nullptr;  // attach()
  bool symmetric_ = false;                 // the fidelity decided
  std::vector<uint32_t> trace_ranks_;
  const TrainingSettings& ts_;
  TrainingJob job_;
  TrainingPlan plan_;
  JobProgram jp_;
  StepResult result_;
  double model_flops_per_step_ = 0;
  std::unique_ptr<CollectiveRuntime> runtime_;
  std::unique_ptr<ProfileKernelCoster> coster_;
  std::unique_ptr<ProgramExecutor> exec_;
  StepOptions options_;
  std::unique_ptr<FailureInjector> injector_;
};

// Builds the programs, checks memory (throws sim::UserError when a stage does not fit and
// allow_oom is false), runs the step and summarises it. A step that cannot finish is an outcome
// (kStuck, kError with its report), not an exception; the times are then those reached.
StepResult run_training_step(topo::ClusterResources& res, const TrainingSettings& ts,
                             const std::vector<uint32_t>& trace_ranks, StepHook* hook = nullptr,
                             StepOptions options = {});

}  // namespace wl
