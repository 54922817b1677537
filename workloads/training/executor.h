// workloads/training/executor.h: runs rank programs on the cluster's resources.
//
// Every rank runs the Program of its class. The executor keeps, per rank, only a cursor and a
// finished count per stream, the arrival bits of pipeline messages and a few accumulators; op
// state is never copied per rank. Compute ops become kernels on the rank's GPU, collectives start
// when the last member of the group arrives (one plan per distinct collective, lowered once on a
// canonical group and reused by every group of that dimension), sends become one-hop transfers.
//
// Breakdown: a rank's step time splits into its compute-stream busy time (compute, optimizer)
// and the gaps in between, each charged to what the next compute op was waiting for: a TP/CP/DP
// collective (exposed communication), a pipeline message still in flight (exposed pp), a pipeline
// message whose sender had not even started sending (bubble); time after a rank's last op until
// the step ends is bubble too. Per rank the parts add up to the step time exactly.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "sim/fluid.h"
#include "sim/simulation.h"
#include "topology/cluster_resources.h"
#include "workloads/collectives/runtime.h"
#include "workloads/training/layout.h"
#include "workloads/training/program.h"

namespace wl {

// Parts of one rank's step time, in seconds.
struct Breakdown {
  double compute = 0, optimizer = 0, bubble = 0;
  std::array<double, kNumDims> exposed{};  // indexed by Dim (kPp: exposed pipeline transfers)
  double total() const;
};

struct ExecutorOptions {
  std::vector<uint32_t> trace_ranks;  // ranks whose ops become trace spans (empty: none)
  // Collective algorithm per dimension (kAuto: chosen per size and group shape).
  std::array<Algorithm, kNumDims> algorithm{Algorithm::kAuto, Algorithm::kAuto, Algorithm::kAuto, Algorithm::kAuto,
                                            Algorithm::kAuto};
  // Prefix for errors of a dimension's algorithm (where the scenario gave it), or empty.
  std::array<std::string, kNumDims> algorithm_at;
};

class TrainingExecutor : public sim::ActivityOwner, public CollectiveListener, public sim::PendingWork {
 public:
  TrainingExecutor(topo::ClusterResources& res, CollectiveRuntime& runtime, const Layout& layout,
                   const std::vector<Program>& classes, std::vector<uint16_t> class_of_rank, const ClusterShape& shape,
                   const CostHints& hints, const ExecutorOptions& opt);

  // Issues every rank's first ops at the current time; then run the simulation.
  void start();
  bool finished() const { return ranks_done_ == layout_.world(); }
  sim::Time step_end() const { return step_end_; }
  sim::Time step_start() const { return step_start_; }
  // Per-rank breakdown, valid after the run (the tail idle time is charged to bubble).
  Breakdown breakdown(uint32_t rank) const;
  uint64_t ops_executed() const { return ops_executed_; }
  size_t plans_lowered() const { return plans_.size(); }

  void on_activity_done(sim::ActivityId, uint64_t tag) override;
  void on_collective_done(uint64_t tag) override;
  size_t pending_count() const override;
  void describe_pending(std::string& out, size_t max_lines) const override;

 private:
  struct RankState {
    std::array<uint32_t, kNumStreams> next{};  // position of the head op per stream
    std::array<sim::Time, kNumStreams> started{};
    std::array<sim::Time, kNumStreams> last_done{};
    uint8_t busy = 0;                             // bit per stream
    sim::Time compute_free_since;
    sim::Time end;
    sim::Time last_recv_send_start;  // when the sender started the most recently received message
    double compute_s = 0, optimizer_s = 0, bubble_s = 0;
    std::array<double, kNumDims> exposed_s{};
  };
  struct GroupState {
    uint32_t arrived = 0;
    uint32_t any_member = 0;  // a member of the collective in flight (to list the group)
  };

  const Program& program_of(uint32_t rank) const { return classes_[class_of_[rank]]; }
  bool deps_done(uint32_t rank, const Program& p, const Op& op) const;
  void pump(uint32_t rank);  // issue every ready head op of the rank
  void issue(uint32_t rank, const Program& p, uint32_t op_index);
  void complete(uint32_t rank, Stream s);
  void charge_compute_gap(uint32_t rank, const Program& p, const Op& op);
  const CollectivePlan& plan_for(Dim d, CollectiveOp op, double bytes, uint32_t any_member);
  void check_algorithms(const std::array<std::string, kNumDims>& algorithm_at) const;
  uint64_t slot(uint32_t rank, int8_t peer, uint32_t message) const;
  bool arrived(uint32_t rank, int8_t peer, uint32_t message) const;
  void emit_span(uint32_t rank, const Op& op, sim::Time start, sim::Time end);
  static Stream stream_of_dim(Dim d);

  topo::ClusterResources& res_;
  sim::Simulation& sim_;
  CollectiveRuntime& runtime_;
  const Layout& layout_;
  const std::vector<Program>& classes_;
  std::vector<uint16_t> class_of_;
  ClusterShape shape_;
  CostHints hints_;
  std::array<Algorithm, kNumDims> algorithm_;
  std::vector<RankState> ranks_;
  std::array<std::vector<GroupState>, kNumDims> groups_;
  // Pipeline messages: per rank, one slot per message from prev, then from next, holding the time
  // its sender started sending once it has arrived (infinite until then).
  std::vector<sim::Time> arrival_send_start_;
  std::vector<uint64_t> arrival_offset_;  // per rank: first slot
  std::vector<sim::Time> send_start_;     // per rank: start of its in-flight send
  std::map<std::tuple<uint8_t, uint8_t, double>, std::unique_ptr<CollectivePlan>> plans_;
  std::vector<uint32_t> scratch_members_;
  std::vector<std::vector<uint32_t>> member_buffers_;
  size_t completion_depth_ = 0;
  std::vector<uint32_t> pump_queue_;
  bool pumping_ = false;
  uint32_t ranks_done_ = 0;
  uint64_t ops_executed_ = 0;
  sim::Time step_start_, step_end_;
  // trace
  std::vector<uint8_t> traced_;
  std::vector<std::vector<uint32_t>> bus_names_;  // per class: program name id -> bus name id
  uint32_t key_mb_ = sim::kNoName, key_layer_ = sim::kNoName, key_bytes_ = sim::kNoName;
};

}  // namespace wl
