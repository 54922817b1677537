// workloads/program/program.h: the one program IR every workload produces and one executor runs.
//
// A Program is the list of ops one rank runs, with dependencies. Ranks that run the same ops share
// one Program (a *template*, or rank class): memory grows with templates x ops plus ranks, not
// ranks x ops. Per-rank differences (which ranks form a communicator's group, a relative peer) are
// resolved by the executor when an op runs.
//
// Streams are named by the producer, any number per program. A stream runs its ops one at a time
// in program order. An op starts when it is the head of its stream and every op it depends on (on
// any stream of the same rank) has finished. An op on no stream (kNoStream) is dependency-only: it
// starts as soon as its dependencies are done and is never serialised behind other ops; it must
// take no time (a marker or a memory op: a join point, as Chakra's dependency-only nodes).
// Kinds:
//   kernel      `flops` and HBM `bytes` of op class `op_class`, or (with `index` > 0) the cost terms
//               Program::cost_terms(index), costed by the executor from the hardware profile
//               (KernelCoster), not by the producer;
//   timed       a kernel already costed: `seconds` alone on an idle GPU, loading the SM pool with
//               sm_load and HBM with hbm_load (fractions, topology/cluster_resources.h); a measured
//               kernel is a timed op;
//   delay       pure time (`seconds`), no resources;
//   collective  `coll` of `bytes` on communicator `comm`; starts when its last member arrives;
//               members' k-th collectives on one communicator match, and must agree on op and bytes;
//               all-to-all-v (coll kAllToAll with `index` > 0): each member sends its own per-peer
//               sizes, Program::peer_sizes(index), one entry per member of the group, in its order;
//   send        `bytes` to `peer` with `tag`; recv: finishes once the matching send has arrived.
//               Messages match by (source, destination, tag), first in first out; any number may be
//               outstanding. A peer is an absolute rank, or an offset along a layout axis;
//   memory      `bytes` allocated (> 0) or freed (< 0) on the rank, for peak tracking;
//   marker      zero time; an instant in the trace.
// Every op carries `external_id` (a Chakra node id, a Kineto correlation id; 0: none), shown on its
// trace span, and a `category` from the producer's list (JobProgram::categories) that the step
// breakdown charges its time to.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "sim/observer.h"
#include "sim/time.h"
#include "workloads/collectives/collective.h"
#include "workloads/program/layout.h"

namespace wl {

enum class OpKind : uint8_t { kKernel, kTimed, kDelay, kCollective, kSend, kRecv, kMemory, kMarker };
std::string_view op_kind_name(OpKind k);

// Op classes of kernel ops, as the hardware profile distinguishes them (op.op_class).
enum class KernelClass : uint8_t { kGemm, kAttention, kVector, kMemory };
// Op classes of collective ops (op.op_class): what moves the bytes. NCCL's kernels hold SMs of
// every member while they run (the hardware profile's comm_sms); copy engines hold none (PyTorch
// AsyncTP's peer-to-peer copies through symmetric memory); both take the HBM share.
enum class CollectiveEngine : uint8_t { kSmKernels, kCopyEngines };

// One part of a kernel's cost, for kernels that fuse several model ops (a training segment): FLOPs
// of one class, in up to two parts each slowed by its own factor (a GEMM's wave quantization, the
// fraction of SMs busy over its waves; a fused attention kernel's direction and sequence length,
// topo::attention_rate_factor; 1 elsewhere), and HBM bytes. A KernelCoster turns each term into
// its roofline time and sums them.
struct CostTerm {
  KernelClass cls = KernelClass::kVector;
  double flops[2] = {0, 0};
  double wave[2] = {1, 1};
  double bytes = 0;
  // GPU kernels the term stands for (an unfused op is several): each pays the profile's per-kernel
  // latency and gap, and the host launches each (equal shares of the term's time). 0: the term
  // launches nothing (no FLOPs, no bytes).
  uint32_t kernels = 1;
  // Of `bytes`, those moved by unvectorized elementwise kernels, and their elements: these run at
  // the profile's unvectorized_elementwise_rate where it is set (wl::OpCost::Unvectorized).
  double unvec_elems = 0, unvec_bytes = 0;
  // PyTorch's foreach (multi_tensor_apply) kernels: the profile's foreach_efficiency of the HBM.
  bool foreach = false;
};

// One memory-bound kernel moving `bytes` through HBM (an optimizer pass, a framework's copy).
inline CostTerm memory_term(double bytes) {
  CostTerm t;
  t.cls = KernelClass::kMemory;
  t.bytes = bytes;
  return t;
}

// Wave quantization of a GEMM (NVIDIA Deep Learning Performance Guide, "Matrix Multiplication
// Background": tile and wave quantization): the output is cut into tiles, one thread block per
// tile, and the tiles run in waves of one per SM; the last wave's idle SMs are lost. With 128 x 256
// tiles (the large-GEMM tile of cuBLAS on Ampere/Hopper) a 2048 x 2304 output is 16 x 9 = 144
// tiles = 2 waves on 108 SMs at 144 / 216 = 67% occupancy. The factor is 1 for GPUs without an SM
// count (TPUs) and close to 1 for wide layers; narrow models lose the most, as Megatron's Table 1
// shows for its smallest rows.
double gemm_wave_factor(double rows, double cols, uint32_t sms);

inline constexpr uint16_t kNoStream = 0xFFFF;
inline constexpr uint8_t kAbsolutePeer = 0xFF;  // Op::peer_axis: `peer` is a rank, not an offset

struct Op {  // 112 bytes; fields ordered for packing
  OpKind kind = OpKind::kTimed;
  CollectiveOp coll = CollectiveOp::kAllReduce;
  uint8_t op_class = 0;               // kernel: a KernelClass, for the KernelCoster; collective: a
                                      // CollectiveEngine
  uint8_t peer_axis = kAbsolutePeer;  // send/recv: a Dim when `peer` is an offset along it
  uint16_t stream = 0;
  uint16_t category = 0;
  uint32_t comm = 0;                  // collective: index into JobProgram::comms
  int32_t peer = 0;                   // send/recv: absolute rank, or offset along peer_axis
  uint32_t tag = 0;                   // send/recv
  uint32_t index = 0;                 // recv: its receive slot (set by finalize); all-to-all-v: its
                                      // per-peer sizes (peer_sizes); kernel: its cost terms; 0: none
  uint32_t name = 0;                  // index into the program's names
  uint32_t deps_begin = 0;
  uint32_t deps_count = 0;
  uint32_t pos = 0;                   // position within its stream, or among dependency-only ops
  int32_t micro_batch = -1;           // for the trace
  int32_t layer = -1;
  // Set by finalize: the streams whose head may become ready when this op completes (bit s: stream
  // s), its own stream and the streams of the ops that depend on it; all bits when the program has
  // more than 64 streams. The executor checks only these streams after the completion.
  uint64_t wakes = 0;
  double seconds = 0.0;               // timed: alone on an idle GPU; delay: the duration; collective:
                                      // > 0 takes this time once its last member arrived (a measured
                                      // collective replayed as measured), no network
  double sm_load = 0.0;
  double hbm_load = 0.0;
  double flops = 0.0;                 // kernel
  double bytes = 0.0;                 // kernel: HBM bytes; collective, send: payload; memory: +alloc/-free
  double model_flops = 0.0;           // FLOPs this op contributes to MFU (no recompute)
  uint64_t external_id = 0;
};

// A dependency as the executor checks it: done once its stream's cursor is past `pos` (or, for a
// dependency-only op, once its done bit is set). Kept beside the op list so checks touch 12 bytes.
struct DepRef {
  uint32_t op;
  uint32_t pos;
  uint16_t stream;
};

class Program {
 public:
  Program() { names_.intern(""); }  // name id 0 is the empty name: ops need not be named
  // Declares a stream; ids are dense, in declaration order (the trace's thread ids).
  uint16_t add_stream(std::string_view name);
  uint16_t num_streams() const { return static_cast<uint16_t>(stream_names_.size()); }
  const std::string& stream_name(uint16_t s) const { return stream_names_[s]; }

  // Appends an op; returns its index. `deps` are indices of earlier ops.
  uint32_t add(Op op, std::initializer_list<uint32_t> deps = {});
  uint32_t add(Op op, const std::vector<uint32_t>& deps);
  void add_dep(uint32_t op, uint32_t dep);  // only before finalize, for the most recent op
  uint32_t intern(std::string_view name) { return names_.intern(name); }
  // Stores per-peer byte counts for an all-to-all-v op; returns its `index` (>= 1).
  uint32_t add_peer_sizes(std::vector<double> bytes_to_each_member);
  const std::vector<double>& peer_sizes(uint32_t index) const { return peer_sizes_[index - 1]; }
  // Stores the cost terms of a fused kernel op; returns its `index` (>= 1).
  uint32_t add_cost_terms(std::vector<CostTerm> terms);
  const std::vector<CostTerm>& cost_terms(uint32_t index) const { return cost_terms_[index - 1]; }
  uint32_t num_cost_term_lists() const { return static_cast<uint32_t>(cost_terms_.size()); }
  // Computes stream positions and the receive index; call once when done. Throws sim::UserError
  // for an op on an undeclared stream.
  void finalize();

  const std::vector<Op>& ops() const { return ops_; }
  const Op& op(uint32_t i) const { return ops_[i]; }
  // The op's dependencies (stream and position valid after finalize).
  const DepRef* dep_refs(const Op& o) const { return deps_.data() + o.deps_begin; }
  const std::vector<uint32_t>& stream_ops(uint16_t s) const { return stream_ops_[s]; }
  const std::vector<uint32_t>& free_ops() const { return free_ops_; }  // dependency-only, in order
  const std::string& name(uint32_t id) const { return names_.name(id); }

  // Receives: each recv op has a slot (dense, per program); messages match by (peer, tag) in
  // program order among the recvs with the same (peer, tag).
  uint32_t num_recvs() const { return static_cast<uint32_t>(recv_op_of_slot_.size()); }
  // The recv slots waiting for (peer ref, tag), in program order; null when none.
  const std::vector<uint32_t>* recv_slots(uint8_t peer_axis, int32_t peer, uint32_t tag) const;
  // Distinct relative peer refs (axis, offset) of this program's recvs.
  const std::vector<std::pair<uint8_t, int32_t>>& relative_recv_peers() const { return relative_peers_; }
  bool has_absolute_recvs() const { return has_absolute_recvs_; }
  uint32_t recv_op_of_slot(uint32_t slot) const { return recv_op_of_slot_[slot]; }

 private:
  // axis (8 bits) | peer (24 bits, two's complement: ranks and offsets below 2^23) | tag (32 bits)
  static uint64_t recv_key(uint8_t axis, int32_t peer, uint32_t tag) {
    return (uint64_t{axis} << 56) | ((uint64_t{static_cast<uint32_t>(peer)} & 0xFFFFFFu) << 32) | tag;
  }
  std::vector<Op> ops_;
  std::vector<DepRef> deps_;
  std::vector<std::string> stream_names_;
  std::vector<std::vector<uint32_t>> stream_ops_;
  std::vector<uint32_t> free_ops_;
  sim::NameTable names_;
  std::vector<std::vector<double>> peer_sizes_;
  std::vector<std::vector<CostTerm>> cost_terms_;
  std::vector<uint32_t> recv_op_of_slot_;
  std::unordered_map<uint64_t, std::vector<uint32_t>> recv_lists_;
  std::vector<std::pair<uint8_t, int32_t>> relative_peers_;
  bool has_absolute_recvs_ = false;
  bool finalized_ = false;
};

// A communicator: either explicit member ranks (traces; the order is the ranks' order in the
// collective, member 0 the root), or generated: the group of the issuing rank along a layout axis
// (resolved when the op runs, so a generated job keeps no member lists).
struct Communicator {
  std::string name;
  bool generated = false;
  Dim axis = Dim::kTp;            // generated
  Dim also = Dim::kCount;         // generated over two axes (DP x CP); kCount: axis alone
  std::vector<uint32_t> members;  // explicit
  Algorithm algorithm = Algorithm::kAuto;
  std::string algorithm_at;  // where the scenario chose the algorithm, for errors; or empty
};

// Everything one job runs: templates, which rank runs which, where each rank runs, communicators,
// and the producer's breakdown categories.
struct JobProgram {
  std::vector<Program> templates;
  std::vector<uint32_t> template_of_rank;
  std::vector<uint32_t> gpu_of_rank;     // placement; empty: rank r on GPU r
  std::vector<sim::Time> start_offset;   // per rank, after the executor's start; empty: all 0
  std::vector<Communicator> comms;
  Layout layout{{1, 1, 1, 1, 1}, Layout::default_order()};  // for generated comms and relative peers
  // Breakdown categories (op.category indexes them). The executor charges the busy time of each
  // rank's stream 0 to its ops' categories and every gap on it to what the next op waited for: the
  // category of the dependency that finished last, `idle_category` when that was a stream-0 op or
  // nothing, and for a recv, idle until the sender started sending and the recv's category after.
  std::vector<std::string> categories{"compute", "idle"};
  uint16_t idle_category = 1;
  // The host's dispatch of the ops (eager PyTorch: Python, the dispatcher, cudaLaunchKernel): each
  // GPU kernel (every cost term of a fused op), collective, send and recv costs the rank's host
  // `host_overhead` of CPU time, in program order from the rank's start, and cannot start on the
  // GPU before the host has launched it. The host never waits for the GPU (no synchronisation
  // inside a step), so it runs ahead of long kernels and only shows where kernels are shorter than
  // their launches. A fused op of kernels d_1..d_k whose first launch begins at host time H ends no
  // earlier than H + max_j(j x host_overhead + d_j + ... + d_k); it starts no earlier than that
  // less its time alone, which gives the same end on an idle GPU (the wait is placed before the op
  // rather than between its kernels). Zero: the host is never the bottleneck (replayed traces keep
  // their measured gaps). Time stream 0 waits for the host is charged to `host_category`.
  sim::Time host_overhead = sim::Time::zero();
  uint16_t host_category = 0;
  // Trace label of a rank (called once per traced rank at start); empty: "rank N".
  std::function<std::string(uint32_t)> rank_label;

  uint32_t world() const { return static_cast<uint32_t>(template_of_rank.size()); }
  uint32_t gpu_of(uint32_t rank) const { return gpu_of_rank.empty() ? rank : gpu_of_rank[rank]; }
  uint16_t add_category(std::string_view name);
  uint32_t add_comm(Communicator c);
};

}  // namespace wl
