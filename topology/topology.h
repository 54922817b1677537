// topology/topology.h: the network as plain data plus arithmetic routing.
//
// A Topology is a set of vertices and directed links. Vertices 0..num_gpus()-1 are the
// accelerators (vertex id == global GPU index, GPU g lives on node g / gpus_per_node()); switches
// and other vertices follow. A full-duplex cable is two Links, one per direction, and each Link is
// meant to become one engine constraint (link index == constraint index).
// Units: bandwidth in bytes per second per direction (double), latency as sim::Time; a route's
// latency is the sum of the latencies of its links.
//
// Builders (below) validate every config field and throw sim::TopologyError naming the bad value.
// Routing is computed on demand (no all-pairs tables): a scale-up domain sends same-node traffic
// up to the node's NVSwitch and down; a fat-tree climbs to the lowest common ancestor group and
// descends, choosing among parallel uplinks by D-mod-K (or by flow hash); a torus uses dimension
// order routing, shorter way round each ring (chips of different pods: up to the DCN and down);
// an edge list uses BFS shortest hops per destination,
// computed lazily and cached, ECMP ties broken by the flow hash.
//
// Thread safety: every const member may be called concurrently (the edge-list route cache is
// guarded by a mutex). Topology is move-only.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/huge_pages.h"
#include "sim/time.h"

namespace topo {

enum class LinkKind : uint8_t { kScaleUp, kNic, kFabric, kTorus, kCustom };
const char* to_string(LinkKind kind);

// One direction of a cable. tier: kScaleUp and kNic 0; kFabric j for the links between fat-tree
// tier j-1 and tier j; kTorus the dimension (0, 1, 2); kCustom 0.
struct Link {
  uint32_t src = 0;
  uint32_t dst = 0;
  double bandwidth_Bps = 0;
  sim::Time latency;
  LinkKind kind = LinkKind::kCustom;
  uint8_t tier = 0;
  bool parallel = false;  // one of a declared bundle of parallel links between the same pair
};

// A path from one GPU to another: link indices in travel order. Reuse one Route across calls:
// route() clears it and keeps its capacity, so steady-state routing does not allocate.
struct Route {
  std::vector<uint32_t> links;
  sim::Time latency;
  void clear() {
    links.clear();
    latency = sim::Time::zero();
  }
};

// ---- Builder configs. Defaults describe an HGX H100 node with 400 Gb/s NICs. ----

enum class ScaleUpKind : uint8_t { kNone, kNvSwitch };

// One non-blocking switch vertex per node; each GPU has one up and one down link to it.
struct ScaleUpSpec {
  ScaleUpKind kind = ScaleUpKind::kNone;
  double bandwidth_Bps = 450e9;  // per GPU per direction: NVLink4 900 GB/s bidirectional [V2, catalog]
  // Per link (GPU->switch or switch->GPU): half of NCCL's NVLink per-hop ring LL latency,
  // 0.47 us (NCCL src/graph/tuning.cc), rounded.
  sim::Time latency = sim::Time::ns(250);
};

// How a fat-tree picks one of a bundle of parallel uplinks at each tier.
//  kDModK: index = (position of the destination GPU within its rail plane) mod uplinks, the same
//          index up and down at a tier (the same spine plane); deterministic per destination, so
//          all flows to one GPU share a path and distinct destinations spread evenly.
//  kFlowHash: index = mix(flow_hash, tier) mod uplinks (ECMP): flows to one GPU spread.
enum class UplinkPolicy : uint8_t { kDModK, kFlowHash };

// Tier 0 is the leaf tier: group_size = nodes per leaf group; its oversubscription and uplinks
// must stay 1 (GPUs enter it through their own NIC at full rate). Tier k >= 1: group_size =
// number of tier-(k-1) groups per group; each child's uplink capacity = (NIC bandwidth of the
// GPUs under the child) / oversubscription, split into `uplinks` parallel links per direction.
// The last group of a tier may be partial. The top tier must hold every group below it in one
// group (an error otherwise: add a tier or enlarge the top group), so every pair has an ancestor.
struct FatTreeTier {
  std::string name;  // "" -> "tier<k>"
  uint32_t group_size = 1;
  double oversubscription = 1.0;
  uint32_t uplinks = 1;
};

struct FatTreeSpec {
  double nic_bandwidth_Bps = 400e9 / 8;  // per GPU per direction: ConnectX-7 400 Gb/s [catalog]
  // GPU local index i attaches to rail i % rails: one leaf vertex per (leaf group, rail); rails
  // merge at tier 1, so rails > 1 needs at least two tiers.
  uint32_t rails = 1;
  std::vector<FatTreeTier> tiers;
  // Entering a switch: Quantum-2 port-to-port ~130 ns [R] plus cable and serialization, rounded
  // up so that RoCE switches (deeper pipelines) are not flattered.
  sim::Time hop_latency = sim::Time::ns(500);
  // NIC + PCIe at each end; 2 * 1 us + 0.5 us for a same-leaf hop is close to NCCL's network
  // per-hop ring LL latency of 2.7 us (NCCL src/graph/tuning.cc).
  sim::Time nic_latency = sim::Time::ns(1000);
  UplinkPolicy uplink_policy = UplinkPolicy::kDModK;
};

// 1D/2D/3D torus with wraparound in every dimension. Chip c has coordinates
// x_k = (c / prod(dims[0..k-1])) % dims[k] (dimension 0 fastest). A dimension of size 1 has no
// links, size 2 one link per direction between the pair, size >= 3 a + and a - link per chip.
// Several pods (Cloud TPU Multislice): `pods` tori of the same shape, chip c in pod
// c / prod(dims); chips of different pods talk over the data-centre network (DCN), leaving the
// chip through its host (PCIe DMA to host memory, then the host's NICs). Each chip's share of its
// host's DCN bandwidth is one link up to and one link down from a non-blocking DCN switch (Cloud
// TPU's v5p docs give the DCN bandwidth per chip: 50 Gb/s); the DCN fabric beyond the hosts is
// not modelled.
struct TorusSpec {
  std::vector<uint32_t> dims;     // 1 to 3 entries, each >= 1
  uint32_t chips_per_host = 4;    // TPU v4/v5p hosts hold 4 chips; only used by node_of()
  double link_bandwidth_Bps = 50e9;  // per link per direction (TPU v4 ICI [R], see catalog)
  sim::Time link_latency = sim::Time::ns(1000);  // per hop; an assumption, override from calibration
  uint32_t pods = 1;                                // tori joined by the DCN; 1: no DCN
  double dcn_bandwidth_Bps = 50e9 / 8;              // per chip per direction (v5p docs, 50 Gb/s)
  sim::Time dcn_latency = sim::Time::us(10);        // per chip<->DCN link; an assumption
};

enum class ScaleOutKind : uint8_t { kNone, kFatTree, kTorus };

struct ScaleOutSpec {
  ScaleOutKind kind = ScaleOutKind::kNone;
  FatTreeSpec fat_tree;  // used when kind == kFatTree
  TorusSpec torus;       // used when kind == kTorus (chips_per_host is taken from gpus_per_node)
};

// A whole cluster: num_gpus = nodes * gpus_per_node. With a torus, scale_up must be kNone and
// nodes * gpus_per_node must equal the product of the torus dimensions.
struct ClusterSpec {
  uint32_t nodes = 1;
  uint32_t gpus_per_node = 8;
  ScaleUpSpec scale_up;
  ScaleOutSpec scale_out;
};

// Explicit graph. Vertices 0..num_gpus-1 are GPUs ("gpu<i>"), then other_vertices in order.
struct EdgeSpec {
  uint32_t from = 0;
  uint32_t to = 0;
  double bandwidth_Bps = 0;
  sim::Time latency;
  bool bidirectional = true;  // true: two Links, from->to and to->from
  bool parallel = false;      // declares a deliberate parallel link to an existing one
};

struct EdgeListSpec {
  uint32_t num_gpus = 0;
  uint32_t gpus_per_node = 1;
  std::vector<std::string> other_vertices;
  std::vector<EdgeSpec> edges;
};

class Topology;

Topology build_cluster(const ClusterSpec& spec);
// One node of gpus_per_node GPUs around one NVSwitch (scale.kind must be kNvSwitch).
Topology build_scale_up(uint32_t gpus_per_node, const ScaleUpSpec& scale);
// Scale-out only: every pair of GPUs, same node or not, goes through the NICs.
Topology build_fat_tree(uint32_t nodes, uint32_t gpus_per_node, const FatTreeSpec& spec);
Topology build_torus(const TorusSpec& spec);
Topology build_edge_list(const EdgeListSpec& spec);

enum class TopologyKind : uint8_t { kCluster, kTorus, kEdgeList };

class Topology {
 public:
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;
  ~Topology();

  TopologyKind kind() const { return kind_; }
  // Torus dimension sizes (dimension 0 fastest), of one pod; empty unless kind() == kTorus.
  std::vector<uint32_t> torus_dims() const { return {torus_dims_, torus_dims_ + torus_ndims_}; }
  // Tori joined by the data-centre network (1 unless kind() == kTorus with several pods).
  uint32_t torus_pods() const { return torus_pods_; }
  uint32_t num_gpus() const { return num_gpus_; }
  uint32_t gpus_per_node() const { return gpus_per_node_; }
  uint32_t num_nodes() const { return num_gpus_ / gpus_per_node_; }
  uint32_t node_of(uint32_t gpu) const { return gpu / gpus_per_node_; }
  // A cluster whose nodes have a scale-up switch: traffic between two GPUs of a node stays on it
  // (without one it goes out through the NICs, across rails through the fabric).
  bool has_scale_up() const { return has_scale_up_; }
  // Routes inside a node repeat from node to node: the route between GPUs a + k x gpus_per_node
  // and b + k x gpus_per_node (a and b on one node) is the route between a and b with every link
  // index raised by k x this stride, link by link of the same latency and bandwidth (a cluster's
  // scale-up links are built from one spec, two per GPU in GPU order). 0 where that is not so:
  // no scale-up switch (the route leaves through the NICs), a torus, an edge list.
  uint32_t node_link_stride() const {
    return kind_ == TopologyKind::kCluster && has_scale_up_ ? 2 * gpus_per_node_ : 0;
  }
  uint32_t num_vertices() const { return static_cast<uint32_t>(vertex_names_.size()); }
  const std::string& vertex_name(uint32_t v) const { return vertex_names_.at(v); }
  const sim::BigVector<Link>& links() const { return links_; }

  // Fills out with the links from src_gpu to dst_gpu (empty when equal) and their summed latency.
  // flow_hash only matters where the topology offers equal choices (kFlowHash uplinks, edge-list
  // ECMP). Throws sim::TopologyError for a GPU index out of range or (edge lists) no path.
  void route(uint32_t src_gpu, uint32_t dst_gpu, uint64_t flow_hash, Route& out) const;

  // A fat-tree fabric link (kind kFabric, tier k >= 1: between a vertex of tier k - 1 and its
  // parent at tier k), seen from its lower vertex: the nodes under it, [first_node, first_node +
  // num_nodes) of a full group's full_nodes (fewer at the cluster's end; at tier 0 with several
  // rails, of one rail's GPUs); whether it goes up; and whether every route's links up to tier k
  // follow from its endpoints alone (one uplink per child at tiers 1..k: no D-mod-K or flow-hash
  // choice). So a route crosses the link up exactly when its source is under the lower vertex and
  // its destination is not (down: the reverse).
  struct FabricSpan {
    uint32_t first_node = 0, num_nodes = 0, full_nodes = 0;
    bool up = true, unique_up = true;
  };
  static constexpr uint32_t kNoLink = UINT32_MAX;
  FabricSpan fabric_span(uint32_t link) const;
  // The fabric link of the same tier and direction whose lower vertex spans this one's nodes
  // shifted by `nodes` (a whole number of full groups at its tier), or kNoLink.
  uint32_t fabric_link_shifted(uint32_t link, int64_t nodes) const;

  std::string describe() const;  // one paragraph for people
  std::string to_dot() const;    // Graphviz digraph: vertices labelled by name, edges by GB/s
  // Connectivity (every GPU reaches every GPU), no self links, positive finite bandwidths,
  // non-negative latencies, no undeclared duplicate (src, dst, kind) links, every GPU and switch
  // with in- and out-degree >= 1. Throws sim::TopologyError on the first failure.
  void validate() const;

  // Layout of each router, public so tests and diagnostics can read it; filled by the builders.
  struct TierLayout {
    std::string name;
    uint32_t group_size = 1;
    uint32_t num_vertices = 0;  // groups at this tier (tier 0 with rails: groups * rails)
    uint32_t vertex_base = 0;
    uint32_t uplinks = 1;       // parallel links from each child to its parent at this tier
    uint32_t link_base = 0;     // first up link from tier k-1 into this tier (k >= 1)
    double oversubscription = 1.0;
  };
  static constexpr size_t kMaxTiers = 8;
  // The fat-tree's tiers (empty for other kinds), rails and uplink policy, as built.
  const std::vector<TierLayout>& fat_tree_tiers() const { return tiers_; }
  uint32_t rails() const { return rails_; }
  UplinkPolicy uplink_policy() const { return uplink_policy_; }

 private:
  Topology();
  friend Topology build_cluster(const ClusterSpec& spec);
  friend Topology build_torus(const TorusSpec& spec);
  friend Topology build_edge_list(const EdgeListSpec& spec);

  void route_cluster(uint32_t s, uint32_t d, uint64_t flow_hash, Route& out) const;
  void route_torus(uint32_t s, uint32_t d, Route& out) const;
  void route_edge_list(uint32_t s, uint32_t d, uint64_t flow_hash, Route& out) const;
  uint32_t add_vertex(std::string name);
  uint32_t add_link(uint32_t src, uint32_t dst, double bandwidth_Bps, sim::Time latency, LinkKind kind,
                    uint8_t tier, bool parallel);

  TopologyKind kind_ = TopologyKind::kCluster;
  uint32_t num_gpus_ = 0;
  uint32_t gpus_per_node_ = 1;
  std::vector<std::string> vertex_names_;
  sim::BigVector<Link> links_;
  // links_[l].latency again, densely: route() sums it for every flow, and at 16k GPUs the Link
  // records far outgrow the caches. Builders add links block by block (scale-up, NICs, each tier),
  // each block as up/down pairs whose two directions may differ (a NIC's up link also enters the
  // leaf switch), so route() reads a latency off a handful of runs of consecutive links, each run
  // one latency at its even positions and one at its odd ones (no per-link load: at 131k GPUs a
  // one-byte-per-link table was a cache miss per link of every route), while there are at most
  // kMaxLatencyRuns of them; beyond, it reads link_latency_.
  struct LatencyRun {
    uint32_t first;    // the run's first link
    sim::Time even;    // links first, first + 2, ...
    sim::Time odd;     // links first + 1, first + 3, ...
  };
  static constexpr size_t kMaxLatencyRuns = 32;
  // Whether link l (the newest) continues the last run's pattern; takes it into the run if so.
  bool extends_last_run(uint32_t l, sim::Time latency);
  sim::BigVector<sim::Time> link_latency_;  // filled only when the runs are too many
  std::vector<LatencyRun> latency_runs_;
  bool latency_by_run_ = true;

  // Cluster: scale-up. GPU g: up link su_link_base_ + 2g, down link su_link_base_ + 2g + 1;
  // node n's switch is vertex su_vertex_base_ + n.
  bool has_scale_up_ = false;
  uint32_t su_vertex_base_ = 0;
  uint32_t su_link_base_ = 0;
  double su_bandwidth_Bps_ = 0;

  // Cluster: fat-tree. GPU g: NIC up link nic_link_base_ + 2g, down + 1. Tier k >= 1, child c
  // (index within tier k-1), parallel p: up link tiers_[k].link_base + 2(c * uplinks + p), down + 1.
  bool has_fat_tree_ = false;
  uint32_t rails_ = 1;
  uint32_t nic_link_base_ = 0;
  double nic_bandwidth_Bps_ = 0;
  UplinkPolicy uplink_policy_ = UplinkPolicy::kDModK;
  std::vector<TierLayout> tiers_;

  // Torus. Chip c, dimension k: link c * torus_links_per_chip_ + torus_offset_[k] (+ direction),
  // slot 1 is the negative direction (absent for dimensions of size 2 and 1).
  uint32_t torus_ndims_ = 0;
  uint32_t torus_dims_[3] = {1, 1, 1};
  uint32_t torus_stride_[3] = {1, 1, 1};
  uint32_t torus_offset_[3] = {0, 0, 0};
  uint32_t torus_links_per_chip_ = 0;
  // Several pods: chip c's DCN up link dcn_link_base_ + 2c, down + 1; the DCN switch follows the chips.
  uint32_t torus_pods_ = 1;
  uint32_t dcn_link_base_ = 0;

  // Edge list: adjacency and the lazy per-destination BFS cache (defined in topology.cc).
  struct EdgeListState;
  std::unique_ptr<EdgeListState> edge_list_;
};

}  // namespace topo
