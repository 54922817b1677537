// workloads/training/program.h: the per-rank op graph (the IR every schedule produces).
//
// A Program is the list of ops one rank runs in one training step, with dependencies. Ranks that
// run the same ops (all TP and DP peers of a pipeline stage) share one Program: a *rank class*.
// Per-rank differences (which GPUs form its groups, its pipeline neighbours) are resolved by the
// executor when an op runs, so memory grows with classes x ops plus ranks, not ranks x ops.
//
// Every op sits on one stream; a stream runs its ops one at a time in program order. An op starts
// when it is the head of its stream and every op it depends on (on any stream of the same rank)
// has finished. Kinds:
//   compute     a kernel: `seconds` alone on an idle GPU, loading the SM pool with sm_load and
//               HBM with hbm_load (fractions, see topology/cluster_resources.h);
//   collective  `coll` over the rank's group along `dim`; starts when its last member arrives;
//   send        `bytes` to the pipeline neighbour `peer` (+1 next, -1 previous) as message `message`;
//   recv        finishes once message `message` from `peer` has arrived.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/observer.h"
#include "workloads/collectives/collective.h"

namespace wl {

enum class Stream : uint8_t { kCompute, kTp, kCp, kPpSend, kPpRecv, kDp, kDpOuter, kCount };
inline constexpr size_t kNumStreams = static_cast<size_t>(Stream::kCount);
std::string_view stream_name(Stream s);

// Parallel dimensions a collective can run along. kDpOuter is the replicate group of HSDP (or the
// cross-island group of DiLoCo).
enum class Dim : uint8_t { kTp, kCp, kPp, kDp, kDpOuter, kCount };
inline constexpr size_t kNumDims = static_cast<size_t>(Dim::kCount);
std::string_view dim_name(Dim d);

enum class OpKind : uint8_t { kCompute, kCollective, kSend, kRecv };

// What an op's time counts as in the step breakdown.
enum class Category : uint8_t { kCompute, kTp, kCp, kPp, kDp, kOptimizer, kCount };
inline constexpr size_t kNumCategories = static_cast<size_t>(Category::kCount);
std::string_view category_name(Category c);

struct Op {
  OpKind kind = OpKind::kCompute;
  Stream stream = Stream::kCompute;
  Category category = Category::kCompute;
  Dim dim = Dim::kTp;
  CollectiveOp coll = CollectiveOp::kAllReduce;
  int8_t peer = 0;
  uint32_t message = 0;
  double seconds = 0.0;
  double sm_load = 0.0;
  double hbm_load = 0.0;
  double bytes = 0.0;
  double model_flops = 0.0;  // FLOPs this op contributes to MFU (no recompute)
  uint32_t name = 0;         // index into Program::names
  uint32_t deps_begin = 0;
  uint32_t deps_count = 0;
  uint32_t pos = 0;          // position within its stream (set by finalize)
  int32_t micro_batch = -1;  // for the trace
  int32_t layer = -1;
};

class Program {
 public:
  // Appends an op; returns its index. `deps` are indices of earlier ops.
  uint32_t add(Op op, std::initializer_list<uint32_t> deps = {});
  uint32_t add(Op op, const std::vector<uint32_t>& deps);
  void add_dep(uint32_t op, uint32_t dep);  // only before finalize, for the most recent op
  uint32_t intern(std::string_view name) { return names_.intern(name); }
  // Computes stream positions and checks dependencies point backwards; call once when done.
  void finalize();

  const std::vector<Op>& ops() const { return ops_; }
  const Op& op(uint32_t i) const { return ops_[i]; }
  const uint32_t* deps(const Op& o) const { return deps_.data() + o.deps_begin; }
  const std::vector<uint32_t>& stream_ops(Stream s) const { return stream_ops_[static_cast<size_t>(s)]; }
  const std::string& name(uint32_t id) const { return names_.name(id); }
  uint32_t num_messages(int8_t peer) const { return peer > 0 ? messages_next_ : messages_prev_; }
  void set_num_messages(uint32_t from_prev, uint32_t from_next) {
    messages_prev_ = from_prev;
    messages_next_ = from_next;
  }

 private:
  std::vector<Op> ops_;
  std::vector<uint32_t> deps_;
  std::array<std::vector<uint32_t>, kNumStreams> stream_ops_;
  sim::NameTable names_;
  uint32_t messages_prev_ = 0, messages_next_ = 0;
  bool finalized_ = false;
};

}  // namespace wl
