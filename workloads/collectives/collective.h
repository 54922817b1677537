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
// Protocols (NCCL's LL, LL128 and Simple; NCCL src/device/prims_*.h, src/graph/tuning.cc) change
// what a step costs, not the pattern: LL sends each 4-byte word with a 4-byte flag in one 8-byte
// store (half the wire bytes are payload, tiny per-step latency), LL128 sends 120 payload bytes per
// 128-byte line, Simple moves plain chunks behind a fence and a flag (all payload, the longest
// step). A collective pays its protocol's launch latency once, and per latency step the protocol's
// software step latency plus the route latency; its bytes go on the wire divided by the payload
// fraction; LL is also capped at a bus bandwidth (its flag polling, not the links, limits it).
// The runtime applies them from CommCosts (RuntimeOptions), auto's estimate from CostHints.
//
// NVLS (NVLink SHARP, Hopper and later NVSwitch systems) reduces inside the switch: for an
// all-reduce on one node each GPU sends its whole buffer once into the switch (multimem.ld_reduce
// reads every GPU's copy of a shard and returns the sum) and multicasts its reduced shard once
// (multimem.st): S + S/n out of and S/n + S into every GPU port, against 2S(n-1)/n for a ring.
// On a non-blocking switch that is the port load of one ring transfer of S(n+1)/n bytes, which is
// how it is lowered; its rate is capped at nvls_efficiency x the port bandwidth. NVLS-tree (NCCL's
// NVLSTree, the multi-node all-reduce of NVLS systems) does that inside every node while the GPUs
// of each rail all-reduce their S/G shard across nodes on double binary trees (their NICs), all
// pipelined: one phase whose in-switch transfers and trees run at once.
//
// Pipeline fill (NVLS and NVLS-tree). NCCL's NVLS kernels (src/device/all_reduce.h) move a buffer
// in loops: each channel takes one chunk per head GPU, and warp groups hand each chunk on through
// buffers: scatter into the switch, reduce in it, gather out; NVLS-tree adds the network tree's
// levels up and down between reduce and gather. A fluid transfer moves every byte at the
// bottleneck's pace from the start; the pipeline instead needs the first loop to pass every stage
// before the last loop can leave the slowest one, so a phase also waits its fill: the sum of the
// stages' times for one loop less the slowest stage's. Each switch stage moves a loop through
// every GPU's port at NVLS's rate; each network level moves a loop's S/G-shard share through a
// NIC (twice that where a node is inside a tree of more than two nodes, as NCCL's model halves
// NVLSTree's inter-node bandwidth there). A loop is channels x heads x chunk bytes, the chunk
// shrinking for smaller buffers as NCCL's calcCollChunking shrinks it (nvls_loop_bytes).
//
// Pipeline fill (tree). NCCL's tree all-reduce (src/device/all_reduce.h, runTreeSplit) cuts each
// channel's share into chunks that climb the channel's tree (the chain inside each node, then the
// network tree) to the root and come back down, each GPU forwarding a chunk as soon as it has
// it. The last chunk leaves the slowest edge one chunk time after the one before it, but the first
// must first cross every edge of the deepest path, so a tree phase waits the sum of one chunk's
// times over that path's edges, up and down, less the slowest edge's. The chunk is NCCL's
// (tree_chunk_bytes): Simple's 512 KiB step makes trees slow at mid sizes, as NCCL's own model
// admits with its tree correction factors (src/graph/tuning.cc treeCorrectionFactor, down to 0.4).
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
enum class Algorithm : uint8_t { kAuto, kRing, kTree, kHalvingDoubling, kHierarchical, kTorus, kDirect, kNvls, kNvlsTree };
enum class Protocol : uint8_t { kAuto, kLL, kLL128, kSimple };

std::string_view op_name(CollectiveOp op);          // "all-reduce", ...
std::string_view algorithm_name(Algorithm a);       // "ring", "tree", "halving-doubling", ...
// Parse the names above; throw sim::ConfigError listing the accepted names.
CollectiveOp parse_op(std::string_view s);
Algorithm parse_algorithm(std::string_view s);
std::string_view protocol_name(Protocol p);  // "auto", "LL", "LL128", "Simple" (NCCL's spelling)
Protocol parse_protocol(std::string_view s);  // case-insensitive
// nccl-tests bus bandwidth factor: all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all
// (n-1)/n; broadcast, reduce, send/recv 1.
double bus_factor(CollectiveOp op, uint32_t n);

// What lowering needs to know about the machine, independent of the engine.
struct ClusterShape {
  uint32_t gpus_per_node = 1;
  uint32_t nics_per_node = 1;  // parallel inter-node channels a node can drive (rails)
  bool torus = false;
  std::vector<uint32_t> torus_dims;  // x, y, z sizes of a pod when torus; GPU id = x + X*(y + Y*z)
  // Tori joined by a data-centre network: GPU id = local + pod * X*Y*Z. The torus algorithm treats
  // the pod as one more grid dimension, whose rings run over the DCN.
  uint32_t torus_pods = 1;
  // Chips in one pod (the product of torus_dims); 0 unless a torus with several pods.
  uint64_t chips_per_pod() const {
    if (!torus || torus_pods <= 1) return 0;
    uint64_t n = 1;
    for (uint32_t d : torus_dims) n *= d;
    return n;
  }
  bool nvls = false;  // the nodes' NVSwitch reduces in the switch (NVLink SHARP) and NCCL may use it
};

// What one protocol costs (see the top of this file). Durations in seconds.
struct ProtocolCost {
  bool enabled = true;
  double launch_s = 0.0;       // once per collective (kernel launch, set-up)
  double step_s = 0.0;         // software latency per algorithm step, on top of the route latency
  double payload = 1.0;        // payload fraction of the bytes on the wire
  double max_busbw_Bps = 0.0;  // cap on the collective's bus bandwidth; 0: none
  // Channels: NCCL spreads a collective over up to CommCosts::channels channels, but gives a
  // small one fewer: it drops channels while bytes < channels x threads x threshold (NCCL
  // src/enqueue.cc; thresholds as `NCCL INFO threadThresholds` prints them). channel_bytes is
  // threads x threshold, and for LL it is multiplied by the rank count (NCCL scales the ring LL
  // threshold by nRanks). 0: every channel always.
  double channel_bytes = 0.0;
  bool channel_bytes_per_rank = false;
};

// The communication runtime's costs per protocol and for NVLS. The default is neutral: Simple
// only, no launch latency, the step latency the caller sets (tests of patterns use it); a
// cluster's come from its hardware profile (comm_costs_for in cluster_shape.h).
struct CommCosts {
  ProtocolCost ll{false, 0.0, 0.0, 0.5, 0.0};
  ProtocolCost ll128{false, 0.0, 0.0, 120.0 / 128.0, 0.0};
  ProtocolCost simple{};
  double nvls_efficiency = 0.0;  // NVLS port rate as a fraction of the scale-up bandwidth; 0: off
  double nvls_launch_s = 0.0;    // NVLS latency per collective
  uint32_t nvls_channels = 16;   // NVLS's channels (NCCL_NVLS_NCHANNELS)
  double nvls_chunk_bytes = 131072.0;  // NVLS's largest chunk (NCCL_NVLS_CHUNKSIZE)
  uint32_t channels = 1;         // NCCL's ring/tree channels ("coll channels" in NCCL's INFO log)
  const ProtocolCost& of(Protocol p) const { return p == Protocol::kLL ? ll : p == Protocol::kLL128 ? ll128 : simple; }
  // The fraction of the channels a collective of `bytes` (nccl-tests size) on `ranks` ranks runs
  // with under protocol p: its rate is that fraction of the links' (never below one channel).
  double channel_fraction(Protocol p, double bytes, uint32_t ranks) const;
};

struct Transfer {
  std::vector<std::pair<uint32_t, uint32_t>> hops;  // (src GPU, dst GPU), global GPU ids
  double bytes = 0.0;
  uint32_t latency_steps = 1;
  bool in_switch = false;  // NVLS traffic: capped at nvls_efficiency x the scale-up port
};

struct Phase {
  std::vector<Transfer> transfers;
  // Pipeline fill (NVLS, NVLS-tree, tree; see the top of this file): every transfer of the phase
  // waits it on top of its latency steps. 0 for the other algorithms.
  double fill_s = 0.0;
};

struct CollectivePlan {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;  // the one actually used (never kAuto)
  Protocol protocol = Protocol::kSimple;   // the one actually used (never kAuto)
  double bytes = 0.0;                      // the request's size (nccl-tests convention)
  uint32_t ranks = 0;                      // the request's group size
  std::string note;                        // why auto chose it, or empty
  std::vector<Phase> phases;
  // Nonzero: the plan's owner keeps it, unchanged, as long as the CollectiveRuntime that runs it,
  // and gives no other plan of that runtime this id; the runtime then keeps what it derives from
  // the plan's transfers (their routes) under the id. 0: derived again at every start (a plan made
  // for one collective and freed after it: a later plan may take its address).
  uint64_t keep_id = 0;
};

struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kAuto;
  std::vector<uint32_t> group;  // global GPU ids; group[0] is the root of broadcast/reduce
  double bytes = 0.0;
  // send/recv only: group = {src, dst}.
  Protocol protocol = Protocol::kAuto;
};

// Link-speed hints for kAuto's alpha-beta estimate (bytes/s and seconds per step).
// intra/inter_step_s are the route latency of one step plus Simple's step latency; the other
// protocols swap Simple's step latency for theirs.
struct CostHints {
  double intra_node_Bps = 450e9;
  double inter_node_Bps = 50e9;
  double intra_step_s = 2e-6;
  double inter_step_s = 6e-6;
  double scale_up_Bps = 0.0;  // raw scale-up port bandwidth (NVLS's cap is a fraction of it)
  // Tori joined by a data-centre network: a hop between pods leaves through the chip's DCN link
  // (one per direction, shared by every hop of a phase that uses it).
  double dcn_Bps = 0.0;
  double dcn_step_s = 0.0;
  CommCosts costs;
};

// Lowers a request: the algorithm (kAuto: the fastest estimate among those NCCL would consider)
// and the protocol (kAuto: the fastest enabled one for that algorithm; NVLS and direct exchanges
// run Simple). Throws sim::ConfigError for impossible requests (empty group, duplicate GPU,
// an algorithm that does not apply to this op or group shape, e.g. halving-doubling on 12 ranks),
// naming the op, algorithm and group size.
CollectivePlan lower_collective(const CollectiveRequest& req, const ClusterShape& shape,
                                const CostHints& hints = {});

// What lower_collective would throw for this request, without building a plan; empty when it
// can be lowered (scenario binding uses it to point at the offending YAML node).
std::string collective_problem(const CollectiveRequest& req, const ClusterShape& shape);

// The bytes one loop of NCCL's NVLS (a = kNvls) or NVLSTree (kNvlsTree) all-reduce pipeline moves
// for a buffer of `bytes`: channels x heads x chunk, the chunk as NCCL v2.26.2-1's
// calcCollChunking (src/enqueue.cc) picks it (the same rules from v2.23.4 to v2.29.2): NVLS at
// most Simple's 512 KiB step, then 64 KiB below 64 loops of that chunk, 32 KiB below 8 loops,
// 16 KiB below 2; NVLSTree at most 64 KiB from 4 nodes, then 256 / 128 / 64 / 32 KiB below
// 32 / 16 / 4 / 1 loops. `heads` is the group's GPUs per node.
double nvls_loop_bytes(Algorithm a, double bytes, uint32_t nodes, uint32_t heads, const CommCosts& costs);

// The chunk NCCL's tree all-reduce pipelines under protocol p for a buffer of `bytes` on
// `channels` channels, `nodes` nodes of `per_node` GPUs (NCCL v2.26.2-1 src/enqueue.cc
// calcCollChunking with the buffer sizes of src/init.cc and src/include/device.h): Simple one
// 512 KiB step, LL 32 KiB of data, LL128 576,000 bytes of data halved for small buffers and
// rounded down to its 1,920-byte grain.
double tree_chunk_bytes(Protocol p, double bytes, uint32_t channels, uint32_t nodes, uint32_t per_node);

// Alpha-beta estimate of a plan's time in seconds under the hints, with the plan's protocol (used
// by kAuto and tests).
double estimate_seconds(const CollectivePlan& plan, const ClusterShape& shape, const CostHints& hints);

}  // namespace wl
