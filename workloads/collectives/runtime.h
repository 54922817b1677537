// workloads/collectives/runtime.h: runs CollectivePlans on the cluster's resources.
//
// A plan's phases run in order. Each transfer of a phase first waits its latency,
// latency_steps x (the protocol's step latency + the largest route latency among its hops), plus
// the protocol's launch latency in the first phase, then becomes one fluid activity of
// bytes / payload fraction work that loads every link of every hop's route (a link crossed by k
// hops carries weight k), its rate capped where the protocol (LL) or NVLS caps it. The phase ends when all its transfers end; the collective ends with its
// last phase and tells its listener. While a collective runs, every member GPU holds its
// communication SMs (ClusterResources::comm_begin/comm_end).
// Flow hash (ECMP). Each hop's route gets a flow hash that stands for the 5-tuple an ECMP switch
// hashes to pick among equal-cost next hops (hash-threshold ECMP, RFC 2992 "Analysis of an
// Equal-Cost Multi-Path Algorithm": a function of the packet's flow fields, so one flow keeps
// one path and different flows spread). With RoCE v2 the entropy is the UDP source port of the
// connection's queue pair (IBTA Annex A17, RoCEv2), fixed when the connection is made, and NCCL
// opens one connection per (communicator, channel, peer). So the hash is a function of
//   salt     = sim.random().stream_seed("ecmp"): the job's port numbers, new with each seed;
//   comm     = the collective's member list in order (the communicator);
//   channel  = the transfer's index within its phase (the lowerings emit one transfer per channel);
//   src, dst = the hop's GPUs;
// flow_hash = splitmix64(splitmix64(splitmix64(salt ^ comm) ^ channel) ^ (src << 32 | dst)),
// comm a splitmix64 fold of the members. Flows between one pair in different channels or
// communicators may take different paths; the same connection takes the same path every time it
// is used (every phase, every iteration), as a real job's does; another seed draws new paths.
// Only routes with equal choices read the hash (fat-tree uplinks with uplink_policy flow-hash,
// edge-list ECMP ties); D-mod-K, NVSwitch and torus routes are the same for any seed.
// Cost: one fold over the members per collective start (as comm_begin already is), three
// splitmix64 per hop; nothing allocated.
// The runtime allocates only while its pools grow to the peak number of collectives in flight;
// plans are not copied: the caller keeps each plan alive until its collective is done (plans are
// cached per distinct collective by the workload layer, and marked kept: CollectivePlan::keep_id).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/event_handler.h"
#include "sim/fluid.h"
#include "topology/cluster_resources.h"
#include "workloads/collectives/collective.h"

namespace wl {

// Symmetric mode (ExecutorOptions::symmetric_dp): a transfer stands for itself and its copies in
// the other data-parallel replicas, whose hops are its own shifted by each GPU offset. The fabric
// links of the copies' routes are added to the transfer's uses, a link crossed by k copies with
// weight k, so that one activity at the per-copy rate loads every link as the copies together
// would: max-min fair rates of flows identical by symmetry are equal, so this is the expanded
// solution. A GPU's scale-up and NIC links are left out: replicas hold whole nodes, and every
// collective spanning replicas loads each member's NIC links alike (a ring: one hop out and one in
// per member and transfer), which the producer checks; so a copy's private links carry what the
// representative's carry, and the representative's, in the same transfers, bind no later.
// Communication SMs are held only on simulated GPUs.
// The copies' uses of a transfer are the same every time the same group sends the same plan's
// transfer (a pipeline stage's send in every micro-batch): they are computed once and kept with
// the transfer's own (CollectiveRuntime's ShapeSlot).
// Fabric links may be left out the same way (`duplicate_link`, set by the producer where it holds;
// ProgramExecutor::find_duplicate_links): a link whose lower end spans nodes of replica j >= 1 only,
// with its image in replica 0 (the same nodes less replica j's offset) of the same capacity, and
// routes up to it without a choice. Then a transfer standing for copies crosses it with copy j
// exactly as it crosses the image itself, and no other copy crosses either; a transfer spanning
// replicas with one member in each crosses it once per hop sent (up) or received (down) by its
// member there, as often as its member in replica 0 crosses the image (the producer checks that
// mirrored members send and receive alike). Both links then carry the same activities with the
// same weights and capacity: duplicate constraints, and max-min fair rates do not change when one
// is dropped. So copies load only links shared between replicas, whatever the replica count.
struct ReplicaCopies {
  std::vector<uint32_t> gpu_offsets;   // one per other replica; empty: no copies (a group spanning replicas)
  bool node_aligned = false;           // every offset is a whole number of nodes
  const std::vector<uint8_t>* simulated_gpu = nullptr;  // per GPU id: 1 when a simulated rank runs there
  const std::vector<uint8_t>* duplicate_link = nullptr;  // per link: 1 when it duplicates replica 0's
  bool simulated(uint32_t gpu) const { return simulated_gpu == nullptr || (*simulated_gpu)[gpu] != 0; }
  bool duplicate(uint32_t link) const { return duplicate_link != nullptr && (*duplicate_link)[link] != 0; }
};

class CollectiveListener {
 public:
  virtual ~CollectiveListener() = default;
  virtual void on_collective_done(uint64_t tag) = 0;
};

struct RuntimeOptions {
  // Software latency per algorithm step of the Simple protocol, added to the route latency of the
  // step: the hardware profile's step_overhead (topology/hardware_profile.h).
  sim::Time step_overhead = sim::Time::ns(1000);
  // Launch latencies, the LL/LL128 step latencies, payload fractions, LL's cap and NVLS (the
  // default is neutral: see CommCosts); costs.simple.step_s is not read (step_overhead is).
  CommCosts costs;
  double scale_up_Bps = 0.0;  // raw scale-up port bandwidth, for NVLS's cap
};

class CollectiveRuntime : public sim::EventHandler, public sim::ActivityOwner {
 public:
  CollectiveRuntime(topo::ClusterResources& res, const RuntimeOptions& opt);

  // Starts `plan` now on the GPUs in `members` (they hold comm SMs until it ends, unless
  // `holds_sms` is false: copies by the copy engines). With `relative_hops`, the plan's hop
  // endpoints are positions in `members` rather than GPU ids, so one plan lowered on a canonical
  // group serves every group of the same shape.
  // With `copies` (symmetric mode, see ReplicaCopies), the collective also stands for its copies.
  void start(const CollectivePlan& plan, std::span<const uint32_t> members, CollectiveListener* listener,
             uint64_t tag, bool relative_hops = false, const ReplicaCopies* copies = nullptr,
             bool holds_sms = true);
  size_t in_flight() const { return live_; }
  // Transfers whose uses are kept (see ShapeSlot): one per group, plan, phase and channel, and one
  // for every node's group of the same node-local shape.
  size_t shapes_kept() const { return shapes_kept_; }
  uint64_t transfers_started() const { return transfers_started_; }
  // Withdraws every collective `listener` started that has not finished: its latency waits and
  // transfers are cancelled, its members' comm SMs released, and the listener is not told (a job
  // that aborts). Returns how many collectives were withdrawn.
  size_t cancel(const CollectiveListener* listener);

  void on_event(uint32_t transfer) override;                       // latency elapsed
  // A flow's tag is flow_tag(transfer, instance).
  void on_activity_done(sim::ActivityId, uint64_t tag) override;  // bytes moved
  // Hints from the run loop (see sim::EventHandler::prefetch): a transfer whose latency ends soon
  // is about to start its flow from its list of uses (its links' records were asked for when its
  // route was built); one whose bytes are about to arrive reads its record and its collective's
  // (the tag names both, so neither waits for the other).
  void prefetch(uint32_t transfer, int stage) const override;
  void prefetch_done(uint64_t tag) const override;
  std::string describe_activity(uint64_t tag) const override;
  static uint64_t flow_tag(uint32_t transfer, uint32_t instance) { return (uint64_t{instance} << 32) | transfer; }
  // A transfer through a constraint that failed never completes: its collective hangs (as NCCL's
  // does) and its listener is never told; the workload reports it as pending.
  void on_activity_failed(sim::ActivityId, uint64_t) override { ++failed_transfers_; }
  uint64_t failed_transfers() const { return failed_transfers_; }

 private:
  // Two cache lines. Up to kInlineMembers members (a node's tensor-parallel group) sit in the
  // record itself: at 131k GPUs thousands of collectives are in flight at once, and a record taken
  // from the free list and a separate members buffer were two cold misses per collective.
  struct alignas(64) Instance {
    static constexpr uint32_t kInlineMembers = 8;
    const CollectivePlan* plan = nullptr;
    CollectiveListener* listener = nullptr;
    uint64_t tag = 0;
    uint64_t flow_base = 0;  // splitmix64(salt ^ comm), see the flow hash above
    const ReplicaCopies* copies = nullptr;
    uint32_t phase = 0;
    uint32_t outstanding = 0;
    uint32_t num_members = 0;  // 0: a free record
    bool relative = false;
    bool holds_sms = true;  // NCCL-style kernels on the members' SMs; false: copy engines
    // With its members all on one node (relative hops, no copies, a topology whose routes inside a
    // node repeat from node to node), its transfers' kept uses are shared with the same group shape
    // on every node (see ShapeSlot), found under shape_base, and its own are theirs raised by
    // node_shift (ClusterResources::node_constraint_stride x its node); 0 for other groups.
    uint32_t node_shift = 0;
    uint64_t shape_base = 0;  // flow_base, or for a node-local group a hash of its members' places in the node
    uint32_t inline_members[kInlineMembers] = {};
    std::vector<uint32_t> more_members;  // all the members, when more than kInlineMembers
    std::span<const uint32_t> members() const {
      return {num_members <= kInlineMembers ? inline_members : more_members.data(), num_members};
    }
  };
  static_assert(sizeof(Instance) == 128);
  // What a transfer's routes give: the latencies its steps pay and the slowest link it crosses.
  struct RouteSummary {
    sim::Time max_latency = sim::Time::zero();
    sim::Time sum_latency = sim::Time::zero();
    double slowest = sim::kUnbounded;  // nominal capacity; computed only when asked for
  };
  // A transfer's uses and route summary are a function of its group, plan, phase and channel
  // alone (routes and nominal capacities do not change during a run; a failure or straggler changes
  // a constraint's capacity, not the links a flow crosses). A group sends the same transfers again
  // and again (a tensor-parallel all-reduce in every layer and micro-batch, a data-parallel ring in
  // every bucket), so for a kept plan (keep_id) each is walked once and its uses kept (ShapeSlot;
  // which transfers: see start_phase). Walking the routes was most of start_phase and topology's
  // route, about a tenth of the instructions of the Llama 3 405B step (4,096 GPUs: 23.7 G -> 21.4 G);
  // in symmetric mode a transfer standing for its copies or spanning the replicas has thousands of
  // uses.
  struct ShapeKey {
    const ReplicaCopies* copies;
    uint64_t plan;  // its keep_id (0: an empty slot)
    uint32_t phase, channel;
    uint64_t group;  // Instance::shape_base: a hash of its members (see the flow hash above)
    bool operator==(const ShapeKey&) const = default;
  };
  // A kept transfer: one line, found by open addressing (linear probing) in shape_table_, so that
  // a lookup at 131k GPUs costs one miss where a node-based map cost three or four.
  // A node-local group's (Instance::node_shift) is kept once for its shape, not once per node: a
  // tensor-parallel group's ring over its node's NVSwitch has the same routes on every node but
  // for their link numbers, so its uses are kept as node 0's and each transfer adds its node's
  // shift when its flow starts. At 131k GPUs a table per group (16,384 tensor-parallel groups)
  // held 33 MB of uses and made each lookup and each list of uses a cache miss.
  struct alignas(64) ShapeSlot {
    ShapeKey key{};
    uint32_t uses_at = 0;  // in shape_uses_
    uint32_t num_uses = 0;
    RouteSummary summary;
  };
  static_assert(sizeof(ShapeSlot) == 64);
  static constexpr uint32_t kNotKept = UINT32_MAX;
  struct TransferRun {
    uint32_t instance = 0;
    uint32_t kept_at = kNotKept;  // its kept uses in shape_uses_, or kNotKept: its uses are in `uses`
    uint32_t kept_count = 0;
    uint32_t shift = 0;  // added to its kept uses' constraint ids (a node-local group's node)
    double bytes = 0.0;  // on the wire
    double max_rate = 0.0;
    std::vector<sim::Use> uses;  // its own uses, when its plan is not kept
    sim::EventId wait{};         // the latency wait, until the bytes start
    sim::ActivityId activity{};  // the bytes moving, once started
    bool moving = false;
    bool live = false;
  };
  std::span<const sim::Use> uses_of(const TransferRun& run) const {
    if (run.kept_at == kNotKept) return run.uses;
    return {shape_uses_.data() + run.kept_at, run.kept_count};
  }
  // The kept transfer under `key`, walked (and kept) now if it is new; the slot stays valid until
  // the next call.
  const ShapeSlot& kept_shape(const ShapeKey& key, const Instance& in, size_t channel, const Transfer& tr,
                              bool copies, bool want_slowest);

  void start_phase(uint32_t inst);
  // Routes each hop of transfer `tr` (channel `channel`) of `in`, adds its uses to `uses` (with
  // `copies`, the copies' too: see ReplicaCopies) and sums up its latencies (and, if
  // `want_slowest`, its slowest link).
  RouteSummary walk_routes(const Instance& in, size_t channel, const Transfer& tr, bool copies, bool want_slowest,
                           std::vector<sim::Use>& uses);
  // comm_begin (begin) or comm_end on every member GPU a rank runs on (not the mirrored ones).
  void mark_members(const Instance& in, bool begin);
  // The fabric links the copies of transfer `tr` (channel `channel`) load, with how many copies
  // cross each: (link index, weight), in scratch valid until the next call (walk_routes adds them
  // to the transfer's uses, which kept_shape keeps).
  using CopyUses = std::vector<std::pair<uint32_t, double>>;
  const CopyUses& copy_uses(const Instance& in, size_t channel, const Transfer& tr);
  bool intra_node_aligned(const Instance& in) const;
  // Adds `weight` to link l's use in `uses`, the current transfer's (a new entry the first time l
  // is seen since start_phase cleared use_links_).
  void add_use(std::vector<sim::Use>& uses, uint32_t l, double weight);
  // A link whose load the copies' own stands for, left out of every transfer's uses (see
  // ReplicaCopies): a NIC or scale-up link of a GPU no simulated rank runs on, or a fabric link
  // that duplicates one under replica 0.
  bool mirror_private(uint32_t link, const ReplicaCopies& copies) const;
  void finish_transfer(uint32_t transfer);
  void free_transfer(uint32_t transfer);
  uint32_t alloc_transfer();

  topo::ClusterResources& res_;
  RuntimeOptions opt_;
  uint64_t ecmp_salt_;  // the simulation's "ecmp" stream seed
  sim::HandlerId handler_;
  sim::BigVector<Instance> instances_;
  std::vector<uint32_t> free_instances_;
  sim::BigVector<TransferRun> transfers_;
  struct FreeTransfer {
    uint32_t transfer;
    const sim::Use* uses;  // its list of uses' storage (kept for reuse), or null
  };
  std::vector<FreeTransfer> free_transfers_;
  size_t live_ = 0;
  uint64_t transfers_started_ = 0;
  uint64_t failed_transfers_ = 0;
  // Scratch: per-link weight accumulation for one transfer or copy list. A transfer's first
  // kLinearUses links are found by a scan of use_links_ (a node's NVLink pair, a few fabric hops:
  // at 131k GPUs the per-link marks were two cold misses per link); past that, and in
  // copy_uses, a link's mark says where its entry is (the stamp avoids clearing).
  static constexpr size_t kLinearUses = 16;
  struct LinkMark {
    uint32_t stamp = 0;
    uint32_t slot = 0;
  };
  sim::BigVector<LinkMark> link_mark_;
  std::vector<uint32_t> use_links_;
  uint64_t use_seen_ = 0;  // a bit per link of use_links_, by a hash of its id: clear means not in it
  bool use_marks_ = false;
  uint32_t stamp_ = 0;
  topo::Route route_;
  CopyUses copy_scratch_;  // copy_uses' result
  // Kept transfers (see ShapeSlot): a power-of-two table at most half full, their uses one
  // after another in shape_uses_.
  sim::BigVector<ShapeSlot> shape_table_;
  size_t shapes_kept_ = 0;
  sim::BigVector<sim::Use> shape_uses_;
  std::vector<sim::Use> shape_scratch_;
  std::vector<sim::Use> shifted_;  // a node-local transfer's uses, its kept ones shifted to its node
};

}  // namespace wl
