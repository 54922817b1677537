// traces/kineto/kineto.h: PyTorch profiler (Kineto) traces, one Chrome-trace JSON file per rank
// (plain or .gz), read into GPU activities and turned into the program IR for replay.
//
// Read: every GPU activity (events of category kernel, gpu_memcpy, gpu_memset) with its start and
// duration (microseconds in the file, integer or fractional; ns here), its stream (args.stream,
// else the event's tid) and, for NCCL kernels (ncclKernel_* / ncclDevKernel_*), the collective
// named in the kernel (AllReduce, AllGather, ReduceScatter, Broadcast, Reduce, SendRecv); the
// rank and world size from `distributedInfo`. Ranks of one job share one clock (Kineto's
// timestamps are the host's wall clock in microseconds), which is how the samples align.
//
// Replay (replay_program): each rank runs one stream per GPU stream; on each stream, every
// activity follows the previous one after the idle gap measured before it (a delay: launch
// latency, waiting on the host), or, when it evidently waited for another stream (see
// ReplayOptions), after that stream's activity plus the measured lag; then it takes its measured
// duration (a timed op that loads nothing, so overlapping streams keep their measured durations).
// Collectives take their measured time (below), or, given their sizes from the execution
// traces, are simulated on the cluster the caller runs the program on.
// Collectives are matched per process group (match_collectives): the k-th NCCL kernel of every
// member of a group is the group's k-th collective, the group as the kernel records it (newer
// PyTorch: "Process Group Name" and "Process Group Ranks"), else one group of all ranks. A
// collective starts when its last member gets there and lasts what it lasted on that member, the
// rank that waited least (the others' kernels include their wait for it). Members that ran
// different numbers of a group's collectives are refused. One trace alone (one rank of a larger
// job) replays with its collectives as measured timed ops: there is nobody to wait for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/collectives/collective.h"
#include "sim/observer.h"
#include "traces/pytorch_et/execution_trace.h"
#include "workloads/program/program.h"

namespace sim {
class Log;
}
namespace wl {
struct OpTimes;  // workloads/program/executor.h
}

namespace traces {

struct GpuActivity {
  enum class Kind : uint8_t { kKernel, kMemcpy, kMemset, kCollective };
  std::string name;
  int64_t start_ns = 0, dur_ns = 0;
  uint32_t stream = 0;
  Kind kind = Kind::kKernel;
  wl::CollectiveOp coll = wl::CollectiveOp::kAllReduce;  // kCollective
  // kCollective, when the trace records it (newer PyTorch: "In msg nelems", "Out msg nelems",
  // "dtype" in the kernel's args): the size as nccl-tests counts it (all-gather: its output,
  // otherwise its input); kMemcpy, kMemset: args.bytes; -1 when not recorded.
  double bytes = -1;
  // With KinetoReadOptions::ops: the CPU op (KinetoRank::ops) that launched it, -1 when unknown.
  int32_t launched_by = -1;
  // With KinetoReadOptions::ops: when the runtime call that launched it started, on which host
  // thread (-1: no runtime call found).
  int64_t launch_ns = -1, launch_tid = -1;
  // kCollective: its process group (KinetoRank::groups) where the kernel records it (newer
  // PyTorch: "Process Group Name", "Process Group Ranks"); -1 when not recorded.
  int32_t group = -1;
  // kCollective: its name says which collective it runs (ncclKernel_AllReduce_...); false for an
  // NCCL kernel of another kind, taken as an all-reduce.
  bool kind_known = false;
  // The profiler step (KinetoRank::steps) whose span holds the runtime call that launched it;
  // -1 when the trace has no steps or no such call.
  int32_t step = -1;
};

// A profiler step: the host's "ProfilerStep#N" annotation (torch.profiler's schedule writes one
// per step it records), on the host's clock.
struct ProfilerStep {
  int64_t number = 0;  // N
  int64_t start_ns = 0, end_ns = 0;
};

struct ProcessGroup {
  std::string name;            // "Process Group Name"
  std::vector<uint32_t> ranks;  // "Process Group Ranks": global ranks
};

// A CPU op that records its inputs' shapes (profiler record_shapes=True): "Input Dims" (one list
// per input; an input that is not a tensor has none) and "Input type" ("float", "c10::BFloat16").
struct CpuOp {
  std::string name;
  int64_t start_ns = 0, end_ns = 0, tid = 0;
  std::vector<std::vector<int64_t>> dims;
  std::vector<std::string> types;
};

struct KinetoRank {
  std::string file;
  int64_t rank = -1, world = 0;       // distributedInfo; -1 / 0 when absent
  std::vector<GpuActivity> activity;  // by start time
  std::vector<CpuOp> ops;             // with KinetoReadOptions::ops
  std::vector<ProcessGroup> groups;   // the process groups its NCCL kernels name
  std::vector<ProfilerStep> steps;    // by start time
  std::string device;                 // deviceProperties[0].name ("NVIDIA H100 80GB HBM3"); "" when absent
  int64_t host_pid = -1;              // the pid of its first host event (CPU op, runtime call); -1: none
  int64_t first_ns() const { return activity.empty() ? 0 : activity.front().start_ns; }
  int64_t last_end_ns() const;        // the end of the last GPU activity to finish
};

struct KinetoReadOptions {
  // Keep the CPU ops that record shapes and link each GPU activity to the innermost such op
  // around the runtime call that launched it (the call's args.correlation is the activity's; the
  // call runs inside the op on the op's thread). For calibration; replay does not need them.
  // (Every activity's launch time and step are found either way.)
  bool ops = false;
  sim::Log* log = nullptr;  // diagnostics: what was read (sim/log.h); null: none
};

// Throws sim::UserError naming the file (and the event) for anything it cannot read.
KinetoRank read_kineto(const std::string& path, const KinetoReadOptions& opt = {});

// A measured kernel's class, from its name alone (no shapes needed): GEMM on tensor cores (cuBLAS
// / CUTLASS names: "gemm", "xmma", "cutlass", "cublas"; FBGEMM's "fbgemm" is not one), GEMM in plain FP32 (those names with
// "sgemm" or "<float"), attention ("flash", "fmha", "attention"), else memory-bound (elementwise,
// reductions, copies: the bulk of the rest in training traces). Memcpys and memsets are memory-bound.
// PyTorch's unvectorized elementwise kernels (the generic "elementwise_kernel" for broadcast or
// strided operands, "unrolled_elementwise_kernel" for casting copies; not
// "vectorized_elementwise_kernel") are a class of their own: they run at an element rate, not at
// the HBM's (topo::HardwareProfile::unvectorized_elementwise_rate).
// PyTorch's foreach kernels (multi_tensor_apply: the eager optimizer) too: they reach their own
// fraction of the HBM bandwidth (topo::HardwareProfile::foreach_efficiency).
enum class MeasuredClass : uint8_t {
  kTensorGemm, kFp32Gemm, kAttention, kAttentionBackward, kMemoryBound, kUnvectorized, kForeach
};
inline constexpr size_t kMeasuredClasses = 7;
// Whether a kernel name is one of PyTorch's unvectorized elementwise kernels.
bool is_unvectorized_elementwise(const std::string& name);
const char* measured_class_name(MeasuredClass c);
MeasuredClass kernel_class_by_name(const std::string& name);

// What-if on another GPU: a measured kernel of class c that took t takes
// dst_latency[c] + (t - src_latency[c]) x ratio[c] (at least dst_latency[c]), ratio[c] being the
// source's rate over the target's (peak x efficiency, or HBM bandwidth x memory efficiency).
struct KernelScaling {
  bool on = false;
  double ratio[kMeasuredClasses] = {1, 1, 1, 1, 1, 1, 1};
  double src_latency_s[kMeasuredClasses] = {};
  double dst_latency_s[kMeasuredClasses] = {};
  double apply(MeasuredClass c, double t) const {
    const auto i = static_cast<size_t>(c);
    const double busy = t > src_latency_s[i] ? t - src_latency_s[i] : 0.0;
    return dst_latency_s[i] + busy * ratio[i];
  }
};

// The collectives of a job's ranks matched into instances: the k-th NCCL kernel of every member
// of a process group is the k-th collective of that group (kernels that name no group: of one
// group of every rank). Throws sim::UserError when members ran different numbers, a group holds a
// rank outside the job, or one name stands for different rank lists.
struct CollectiveInstance {
  uint32_t group = 0;                       // index into MatchedCollectives::groups
  std::vector<const GpuActivity*> members;  // one per member rank, in the group's rank order
};
struct MatchedCollectives {
  std::vector<ProcessGroup> groups;  // groups[0]: every rank ("world")
  std::vector<CollectiveInstance> instances;
  // Per rank, per collective kernel in the order it ran: (instance, member index).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> of_rank;
};
MatchedCollectives match_collectives(const std::vector<KinetoRank>& ranks);

struct ReplayProgram {
  wl::JobProgram job;
  int64_t t0_ns = 0;                 // the earliest activity of any rank: simulated time 0
  std::vector<double> measured_s;    // per rank: first activity start to last activity end
  std::vector<double> offset_s;      // per rank: its first activity's start after t0
  std::vector<double> exposed_comm_s;  // per rank, measured: time a collective ran while no other GPU work did
  size_t collectives = 0;            // per rank
  std::vector<std::vector<uint32_t>> op_of_activity;  // per rank, per KinetoRank::activity: its op
  // Over all ranks, by MeasuredClass: measured GPU activities (not collectives), their measured
  // and replayed seconds (they differ with ReplayOptions::scaling).
  size_t class_count[kMeasuredClasses] = {};
  double class_measured_s[kMeasuredClasses] = {}, class_replayed_s[kMeasuredClasses] = {};
};

struct ReplayOptions {
  // Per rank, its collectives' kinds and sizes (from its execution trace, in issue order): given,
  // collectives are simulated on the cluster instead of taking their measured time.
  std::vector<std::vector<EtCollective>> collective_sizes;
  // Simulate the collectives with the sizes the profiler trace itself records (GpuActivity::bytes).
  bool simulate_recorded = false;
  // Inferred cross-stream synchronisation: an activity that idled more than sync_idle_ns on its
  // stream and started within sync_lag_ns after another stream's activity ended waited for it.
  int64_t sync_idle_ns = 5'000, sync_lag_ns = 50'000;
  // Kernels, memcpys and memsets scaled to another GPU (off: measured durations).
  KernelScaling scaling;
};

// Reads the execution traces given with the profiler traces (--et), one per rank in the same order,
// and checks that each is its rank's: both come from the training process, so their pids agree
// (where both record one), and its collectives are the kinds its NCCL kernels ran, one for one
// (where the counts agree and a kernel's name says its kind: all_to_all runs as SendRecv kernels).
// Throws sim::UserError naming both files otherwise (a list given in another order is the usual
// slip). Returns each rank's collectives.
std::vector<std::vector<EtCollective>> read_paired_execution_traces(const std::vector<KinetoRank>& ranks,
                                                                    const std::vector<std::string>& et_files);

// `ranks` in rank order (ranks[i].rank == i when recorded). Throws sim::UserError when the ranks
// cannot be matched (different numbers of NCCL kernels, a missing or repeated rank).
ReplayProgram replay_program(const std::vector<KinetoRank>& ranks, const ReplayOptions& opt = {});

// Per profiler step of a rank (KinetoRank::steps) that launched GPU activities, in step order:
// how long it took on the GPU, measured and replayed. A step runs from its first activity's start
// to the next such step's first activity's start; the last one to the end of its last activity.
// `op_times` are the replayed rank's (ExecutorOptions::record_op_times), `op_of_activity` its
// ReplayProgram::op_of_activity. Empty when no activity is known to belong to a step.
struct StepTime {
  int64_t number = 0;  // ProfilerStep#N
  size_t activities = 0;
  double measured_s = 0, replayed_s = 0;
  // Where it starts and ends: measured on the trace's clock, replayed in simulated time.
  int64_t measured_start_ns = 0, measured_end_ns = 0;
  sim::Time replayed_start, replayed_end;
};
std::vector<StepTime> step_times(const KinetoRank& rank, const std::vector<uint32_t>& op_of_activity,
                                 const std::vector<wl::OpTimes>& op_times);

// A rank's steps in a few numbers, for traces of many steps (a table of every step would run to
// thousands of lines): how many, the mean, least and most measured and replayed times, and the
// step whose replay is furthest from its measurement (relative; the first of equals).
struct StepSummary {
  size_t steps = 0;
  double measured_mean_s = 0, measured_least_s = 0, measured_most_s = 0;
  double replayed_mean_s = 0, replayed_least_s = 0, replayed_most_s = 0;
  int64_t worst_step = 0;
  double worst_error = 0;  // replayed / measured - 1 of that step (0 where nothing was measured)
};
StepSummary summarize_steps(const std::vector<StepTime>& steps);

// The steps as spans ("ProfilerStep#N") on a thread of their own, kStepsThread, named "profiler
// steps": in process `replayed_process` at their replayed times and, unless it is negative, in
// `measured_process` at their measured times less t0_ns (as emit_measured draws them).
inline constexpr uint32_t kStepsThread = 1u << 20;  // after any stream's thread
void emit_steps(const std::vector<StepTime>& steps, int64_t t0_ns, uint32_t replayed_process,
                int64_t measured_process, sim::ObserverBus& bus);

// The measured activities as trace spans beside the replay: process `first_process + r` ("rank r
// measured"), one thread per GPU stream (numbered as replay_program numbers them), times from t0.
void emit_measured(const std::vector<KinetoRank>& ranks, int64_t t0_ns, uint32_t first_process, sim::ObserverBus& bus);

}  // namespace traces
