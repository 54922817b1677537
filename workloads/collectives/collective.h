// workloads/collectives/collective.h: collective operations lowered to phases of transfers.
//
// A collective on a group of GPUs (op, bytes, algorithm) becomes a CollectivePlan: phases run one
// after the other; the transfers of a phase run concurrently; a phase ends when its last transfer
// ends. A Transfer is ONE fluid activity: `bytes` moved at one common rate across every hop in
// `hops` at once, which is how a pipelined ring (or tree) behaves: the chunks stream through all
// ring edges together and the slowest edge sets the pace. A direct exchange (all-to-all,
// send/recv) is one transfer per (src, dst) pair. Before its bytes move, a transfer waits
// `latency_steps` x (per-step software latency + the largest path latency among its hops): a ring
// all-reduce pays 2(n-1) steps, a tree 2*depth, a direct exchange 1.
//
// Sizes follow nccl-tests: `bytes` is the per-rank buffer of all-reduce/broadcast/reduce, the total
// (n x per-rank chunk) of all-gather output and reduce-scatter input, and the total a rank sends
// in all-to-all. algbw = bytes / time; busbw = algbw x bus_factor(op, n) (nccl-tests PERFORMANCE.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace wl {

enum class CollectiveOp : uint8_t { kAllReduce, kReduceScatter, kAllGather, kBroadcast, kReduce, kAllToAll, kSendRecv };
enum class Algorithm : uint8_t { kAuto, kRing, kTree, kHalvingDoubling, kHierarchical, kTorus, kDirect };

std::string_view op_name(CollectiveOp op);          // "all-reduce", ...
std::string_view algorithm_name(Algorithm a);       // "ring", "tree", "halving-doubling", ...
// Parse the names above; throw sim::ConfigError listing the accepted names.
CollectiveOp parse_op(std::string_view s);
Algorithm parse_algorithm(std::string_view s);
// nccl-tests bus bandwidth factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
// (n-1)/n; broadcast, reduce, send/recv 1.
double bus_factor(CollectiveOp op, uint32_t n);

// What lowering needs to know about the machine, independent of the engine.
struct ClusterShape {
  uint32_t gpus_per_node = 1;
  uint32_t nics_per_node = 1;  // parallel inter-node channels a node can drive (rails)
  bool torus = false;
  std::vector<uint32_t> torus_dims;  // x, y, z sizes when torus; GPU id = x + X*(y + Y*z)
};

struct Transfer {
  std::vector<std::pair<uint32_t, uint32_t>> hops;  // (src GPU, dst GPU), global GPU ids
  double bytes = 0.0;
  uint32_t latency_steps = 1;
};

struct Phase {
  std::vector<Transfer> transfers;
};

struct CollectivePlan {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;  // the one actually used (never kAuto)
  std::string note;                        // why auto chose it, or empty
  std::vector<Phase> phases;
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kAuto;
  std::vector<uint32_t> group;  // global GPU ids; group[0] is the root of broadcast/reduce
  double bytes = 0.0;
  // send/recv only: group = {src, dst}.
};

// Link-speed hints for kAuto's alpha-beta estimate (bytes/s and seconds per step).
struct CostHints {
  double intra_node_Bps = 450e9;
  double inter_node_Bps = 50e9;
  double intra_step_s = 2e-6;
  double inter_step_s = 6e-6;
};

// Lowers a request. Throws sim::ConfigError for impossible requests (empty group, duplicate GPU,
// an algorithm that does not apply to this op or group shape, e.g. halving-doubling on 12 ranks),
// naming the op, algorithm and group size.
CollectivePlan lower_collective(const CollectiveRequest& req, const ClusterShape& shape,
                                const CostHints& hints = {});

// What lower_collective would throw for this request, without building a plan; empty when it
// can be lowered (scenario binding uses it to point at the offending YAML node).
std::string collective_problem(const CollectiveRequest& req, const ClusterShape& shape);

// Alpha-beta estimate of a plan's time in seconds under the hints (used by kAuto and tests).
double estimate_seconds(const CollectivePlan& plan, const ClusterShape& shape, const CostHints& hints);

}  // namespace wl
