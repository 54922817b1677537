// workloads/collectives/algorithms.cc: one builder per collective algorithm, used by
// lower_collective (collective.cc). Each builder turns a validated request into phases of
// transfers with the conventions of collective.h (one fluid transfer per pipelined ring or tree,
// one per pair for direct exchanges). Shape checks sit next to the builders so that kAuto can
// ask whether an algorithm applies without catching exceptions.
//
// Conventions shared by every builder:
//  - A GPU's node is gpu / gpus_per_node. Nodes are taken in the order in which the group first
//    touches them; inside a node the group's GPUs keep group order, and "local index i" means the
//    i-th of them (so group[0] is local index 0 of node 0, the root of broadcast/reduce).
//  - Sizes follow nccl-tests (collective.h): S is the per-rank buffer of all-reduce, broadcast and
//    reduce, the total of reduce-scatter input / all-gather output, and what a rank sends in
//    all-to-all.
#include <algorithm>
#include <cstdint>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/error.h"
#include "workloads/collectives/collective.h"

namespace wl::collective_detail {

// Declared again at the top of collective.cc; there is no private header because this pair of
// files is the whole module.
std::string shape_problem(Algorithm a, const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_ring(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_tree(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_halving_doubling(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_hierarchical(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_torus(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_direct(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_nvls(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_nvls_tree(const CollectiveRequest& req, const ClusterShape& shape);

namespace {

using Hop = std::pair<uint32_t, uint32_t>;

// The group seen node by node.
struct NodeLayout {
  std::vector<uint32_t> node_ids;                 // in first-touch order
  std::vector<std::vector<uint32_t>> members;     // per node, group order
  bool uniform = true;                            // same number of group GPUs on every node
  uint32_t per_node = 0;                          // that number when uniform
};

NodeLayout node_layout(const std::vector<uint32_t>& group, const ClusterShape& shape) {
  const uint32_t gpn = std::max<uint32_t>(1, shape.gpus_per_node);
  NodeLayout l;
  std::unordered_map<uint32_t, size_t> index;
  index.reserve(group.size());
  for (uint32_t g : group) {
    const auto [it, inserted] = index.emplace(g / gpn, l.members.size());
    if (inserted) {
      l.node_ids.push_back(g / gpn);
      l.members.emplace_back();
    }
    l.members[it->second].push_back(g);
  }
  l.per_node = l.members.empty() ? 0 : static_cast<uint32_t>(l.members[0].size());
  for (const auto& m : l.members) {
    if (m.size() != l.per_node) l.uniform = false;
  }
  return l;
}

std::string describe_non_uniform(const NodeLayout& l) {
  std::ostringstream os;
  for (size_t k = 1; k < l.members.size(); ++k) {
    if (l.members[k].size() != l.members[0].size()) {
      os << "node " << l.node_ids[0] << " holds " << l.members[0].size() << " group GPUs, node "
         << l.node_ids[k] << " holds " << l.members[k].size();
      break;
    }
  }
  return os.str();
}

std::vector<Hop> closed_ring_hops(const std::vector<uint32_t>& seq) {
  std::vector<Hop> hops;
  hops.reserve(seq.size());
  for (size_t i = 0; i < seq.size(); ++i) hops.emplace_back(seq[i], seq[(i + 1) % seq.size()]);
  return hops;
}

std::vector<Hop> chain_hops(const std::vector<uint32_t>& seq) {
  std::vector<Hop> hops;
  for (size_t i = 0; i + 1 < seq.size(); ++i) hops.emplace_back(seq[i], seq[i + 1]);
  return hops;
}

Transfer make_transfer(std::vector<Hop> hops, double bytes, uint32_t steps) {
  Transfer t;
  t.hops = std::move(hops);
  t.bytes = bytes;
  t.latency_steps = steps;
  return t;
}

void append_note(std::string& note, const std::string& more) {
  if (more.empty()) return;
  if (!note.empty()) note += "; ";
  note += more;
}

// Channels over a node's rails for a group with G GPUs on each node: one per NIC, at most G (a
// channel leaves the node through its own GPU's NIC).
uint32_t rail_channels(const ClusterShape& shape, uint32_t g) {
  return std::min(std::max<uint32_t>(1, shape.nics_per_node), g);
}

// The rings NCCL would run, one per channel. On one node, or on a group with one GPU per node,
// a single ring in group order. On several nodes with G group GPUs each, C = min(NICs, G)
// channels; ring c visits the nodes in order and each node's GPUs rotated to start at local
// index c, so it enters a node at local c and leaves from local c-1: every NIC (rail) carries
// one ring's egress and one ring's ingress, which is how NCCL's ring search lays channels over
// rails (NCCL src/graph/search.cc, rings.cc). Groups that are uneven across nodes get one flat
// ring in group order; the reason goes to *note.
std::vector<std::vector<uint32_t>> ring_sequences(const std::vector<uint32_t>& group,
                                                  const ClusterShape& shape, std::string* note) {
  const NodeLayout l = node_layout(group, shape);
  if (!l.uniform) {
    *note = "ring: " + describe_non_uniform(l) + ", so one flat ring in group order";
    return {group};
  }
  if (l.members.size() <= 1 || l.per_node <= 1) return {group};
  const uint32_t g = l.per_node;
  const uint32_t channels = rail_channels(shape, g);
  std::vector<std::vector<uint32_t>> rings(channels);
  for (uint32_t c = 0; c < channels; ++c) {
    rings[c].reserve(group.size());
    for (const auto& node : l.members) {
      for (uint32_t j = 0; j < g; ++j) rings[c].push_back(node[(c + j) % g]);
    }
  }
  return rings;
}

// ---- binary trees ---------------------------------------------------------------------------
//
// In-order numbered binary tree over positions 0..n-1: a position r > 0 whose lowest set bit is
// b sits at height log2(b); its parent is r + b when that keeps bit 2b clear and stays below n,
// otherwise r - b. Position 0 is the root; its one child is the largest power of two below n.
// Odd positions are exactly the leaves, the depth is ceil(log2 n). This is the tree NCCL's
// double binary tree is made of (NCCL src/graph/trees.cc); the second tree relabels positions
// (mirror r -> n-1-r for even n, shift r -> r-1 for odd n) so that every odd (leaf) position of
// the first tree is an even (inner) position of the second: each rank is a leaf in at most one
// tree and the two trees together use every rank's links evenly.
uint32_t inorder_parent(uint32_t r, uint32_t n) {
  const uint64_t low = static_cast<uint64_t>(r) & (~static_cast<uint64_t>(r) + 1);
  const uint64_t up = r + low;
  if ((static_cast<uint64_t>(r) & (low << 1)) != 0 || up >= n) return static_cast<uint32_t>(r - low);
  return static_cast<uint32_t>(up);
}

// Parent position of r in tree `which` (0 or 1) over n positions; -1 for the root.
int64_t tree_parent(uint32_t r, uint32_t n, int which) {
  if (which == 0) return r == 0 ? -1 : static_cast<int64_t>(inorder_parent(r, n));
  const bool mirror = n % 2 == 0;
  const uint32_t label = mirror ? n - 1 - r : (r + n - 1) % n;
  if (label == 0) return -1;
  const uint32_t plabel = inorder_parent(label, n);
  return mirror ? n - 1 - plabel : (plabel + 1) % n;
}

struct Tree {
  std::vector<Hop> child_to_parent;  // one per edge
  uint32_t depth = 0;                // edges on the longest root-to-leaf path
};

uint32_t position_depth(uint32_t r, uint32_t n, int which) {
  uint32_t d = 0;
  for (int64_t p = tree_parent(r, n, which); p >= 0; p = tree_parent(static_cast<uint32_t>(p), n, which)) {
    ++d;
  }
  return d;
}

// Tree `which` over the group. Multi-node groups with the same number G > 1 of GPUs on every node
// follow NCCL's layout: the binary tree spans nodes, and inside each node the GPUs hang off the
// node's head as a chain (NCCL's tree is "a chain inside the node, a tree between nodes"). The
// head is local index `head` (mod G), so trees with different heads leave through different NICs
// when the node has rails; the chain continues from the head through the rotated local order.
// Everything else (one node, one GPU per node, uneven groups) gets the binary tree over group order.
Tree build_tree(const std::vector<uint32_t>& group, const NodeLayout& l, int which, uint32_t head_index,
                std::string* note) {
  Tree t;
  if (l.members.size() > 1 && l.uniform && l.per_node > 1) {
    const uint32_t nodes = static_cast<uint32_t>(l.members.size());
    const uint32_t g = l.per_node;
    const uint32_t head = head_index % g;
    uint32_t node_depth = 0;
    for (uint32_t k = 0; k < nodes; ++k) {
      const auto& m = l.members[k];
      for (uint32_t j = 1; j < g; ++j) {
        t.child_to_parent.emplace_back(m[(head + j) % g], m[(head + j - 1) % g]);
      }
      const int64_t p = tree_parent(k, nodes, which);
      if (p >= 0) t.child_to_parent.emplace_back(m[head], l.members[static_cast<size_t>(p)][head]);
      node_depth = std::max(node_depth, position_depth(k, nodes, which));
    }
    t.depth = node_depth + (g - 1);
    return t;
  }
  if (!l.uniform) {
    *note = "tree: " + describe_non_uniform(l) + ", so binary trees over group order";
  }
  const uint32_t n = static_cast<uint32_t>(group.size());
  for (uint32_t r = 0; r < n; ++r) {
    const int64_t p = tree_parent(r, n, which);
    if (p >= 0) t.child_to_parent.emplace_back(group[r], group[static_cast<size_t>(p)]);
    t.depth = std::max(t.depth, position_depth(r, n, which));
  }
  return t;
}

// A double binary tree all-reduce of `bytes` over `group`: each tree reduces its share of the
// buffer up and broadcasts it down, both pipelined, so one transfer per tree over every edge in
// both directions, 2 x depth steps. On several nodes with G > 1 GPUs each there is one tree per
// channel, C = max(2, min(NICs, G)) of them, alternating the two tree shapes, with channel c's
// head at local index c G / C: as NCCL lays its tree channels over the node's NICs (each channel
// has its own tree and leaves the node through its own NIC; NCCL src/graph/trees.cc,
// connect.cc), so every rail carries tree traffic, not just two. Each channel carries bytes / C.
// Elsewhere the two trees of the double binary tree carry half each. Appends the transfers.
void add_double_tree_allreduce(const std::vector<uint32_t>& group, const ClusterShape& shape, double bytes, Phase& ph,
                               std::string* note) {
  const NodeLayout l = node_layout(group, shape);
  const bool multi_node = l.members.size() > 1 && l.uniform && l.per_node > 1;
  const uint32_t channels = multi_node ? std::max<uint32_t>(2, rail_channels(shape, l.per_node)) : 2;
  const uint32_t g = std::max<uint32_t>(1, l.per_node);
  std::vector<Tree> trees;
  trees.reserve(channels);
  for (uint32_t c = 0; c < channels; ++c)
    trees.push_back(build_tree(group, l, static_cast<int>(c % 2), c * g / channels, note));
  uint32_t depth = 0;
  for (const Tree& t : trees) depth = std::max(depth, t.depth);
  for (const Tree& t : trees) {
    std::vector<Hop> hops;
    hops.reserve(2 * t.child_to_parent.size());
    for (const auto& [c, p] : t.child_to_parent) hops.emplace_back(c, p);
    for (const auto& [c, p] : t.child_to_parent) hops.emplace_back(p, c);
    ph.transfers.push_back(make_transfer(std::move(hops), bytes / static_cast<double>(channels), 2 * depth));
  }
}

// NVLS inside one node's switch (collective.h): the reduce-scatter into and all-gather out of the
// switch of `bytes` over `members` load every port as one ring transfer of bytes (n+1)/n, one step.
Transfer in_switch_allreduce(const std::vector<uint32_t>& members, double bytes) {
  const double n = static_cast<double>(members.size());
  Transfer t = make_transfer(closed_ring_hops(members), bytes * (n + 1.0) / n, 1);
  t.in_switch = true;
  return t;
}

// ---- torus ----------------------------------------------------------------------------------

struct TorusGrid {
  std::vector<uint64_t> stride;                 // id = sum coord[d] * stride[d]
  std::vector<std::vector<uint32_t>> coords;    // per dimension, the group's sorted coordinates
};

// The torus's dimensions and, with several pods, the pod as the last, slowest one (its rings run
// over the data-centre network): GPU id = sum coord[d] * stride[d] over these.
std::vector<uint32_t> grid_dims(const ClusterShape& shape) {
  std::vector<uint32_t> dims = shape.torus_dims;
  if (shape.torus_pods > 1) dims.push_back(shape.torus_pods);
  return dims;
}

// The group must be a full sub-grid: the product of the coordinate sets it uses along each
// dimension (the whole torus is the usual case; with pods, the same sub-grid in each of a set of
// pods). Returns an empty string when it is.
std::string torus_grid(const std::vector<uint32_t>& group, const ClusterShape& shape, TorusGrid* grid) {
  if (!shape.torus) return "torus needs a torus cluster shape";
  if (shape.torus_dims.empty()) return "torus shape has no dimensions";
  const std::vector<uint32_t> dims_all = grid_dims(shape);
  uint64_t total = 1;
  grid->stride.clear();
  for (uint32_t d : dims_all) {
    if (d == 0) return "torus shape has a dimension of size 0";
    grid->stride.push_back(total);
    total *= d;
  }
  const size_t dims = dims_all.size();
  grid->coords.assign(dims, {});
  for (uint32_t g : group) {
    if (g >= total) {
      std::ostringstream os;
      os << "GPU " << g << " lies outside the torus of " << total << " chips";
      return os.str();
    }
    for (size_t d = 0; d < dims; ++d) grid->coords[d].push_back(static_cast<uint32_t>((g / grid->stride[d]) % dims_all[d]));
  }
  uint64_t product = 1;
  for (auto& c : grid->coords) {
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    product *= c.size();
  }
  // Group GPUs are distinct and all lie inside the product, so equal counts mean equal sets.
  if (product != group.size()) {
    std::ostringstream os;
    os << "torus needs the group to be a full sub-grid of the torus; its " << group.size()
       << " GPUs span a ";
    for (size_t d = 0; d < dims; ++d) os << (d ? "x" : "") << grid->coords[d].size();
    os << " box" << (shape.torus_pods > 1 ? " (the last factor counts pods)" : "");
    return os.str();
  }
  return {};
}

// Every 1-D line of the sub-grid along dimension d, each in increasing coordinate order.
std::vector<std::vector<uint32_t>> torus_lines(const std::vector<uint32_t>& group,
                                               const ClusterShape& shape, const TorusGrid& grid, size_t d) {
  std::vector<std::vector<uint32_t>> lines;
  const uint32_t first = grid.coords[d].front();
  const uint32_t size = grid_dims(shape)[d];
  std::vector<uint32_t> starts;
  for (uint32_t g : group) {
    if ((g / grid.stride[d]) % size == first) starts.push_back(g);
  }
  std::sort(starts.begin(), starts.end());
  for (uint32_t s : starts) {
    std::vector<uint32_t> line;
    const uint64_t base = s - static_cast<uint64_t>(first) * grid.stride[d];
    for (uint32_t c : grid.coords[d]) line.push_back(static_cast<uint32_t>(base + c * grid.stride[d]));
    lines.push_back(std::move(line));
  }
  return lines;
}

// One torus stage along dimension d: every line runs a ring both ways, each direction carrying
// half of `stage_bytes` x (k-1)/k (a ring reduce-scatter or all-gather of `stage_bytes`). Along a
// dimension of size 2 both directions use the same pair of links; they stay two transfers and the
// simulator's link sharing gives each half the bandwidth.
Phase torus_stage(const std::vector<std::vector<uint32_t>>& lines, double stage_bytes) {
  Phase ph;
  for (const auto& line : lines) {
    const double k = static_cast<double>(line.size());
    const double bytes = (k - 1.0) / k * stage_bytes / 2.0;
    const auto steps = static_cast<uint32_t>(line.size() - 1);
    std::vector<uint32_t> reversed(line.rbegin(), line.rend());
    ph.transfers.push_back(make_transfer(closed_ring_hops(line), bytes, steps));
    ph.transfers.push_back(make_transfer(closed_ring_hops(reversed), bytes, steps));
  }
  return ph;
}

bool is_power_of_two(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

uint32_t log2_exact(size_t n) {
  uint32_t l = 0;
  while ((size_t{1} << l) < n) ++l;
  return l;
}

}  // namespace

std::string shape_problem(Algorithm a, const CollectiveRequest& req, const ClusterShape& shape) {
  const size_t n = req.group.size();
  switch (a) {
    case Algorithm::kHalvingDoubling:
      if (!is_power_of_two(n)) {
        std::ostringstream os;
        os << "halving-doubling needs a power-of-two group, got " << n << " ranks";
        return os.str();
      }
      return {};
    case Algorithm::kHierarchical: {
      const NodeLayout l = node_layout(req.group, shape);
      if (!l.uniform) return "hierarchical needs the same number of group GPUs on every node; " + describe_non_uniform(l);
      return {};
    }
    case Algorithm::kTorus: {
      TorusGrid grid;
      return torus_grid(req.group, shape, &grid);
    }
    case Algorithm::kNvls: {
      if (!shape.nvls) return "nvls needs NVSwitch nodes with NVLink SHARP (H100/H200/B200 class) and a profile with nvls_efficiency > 0";
      const NodeLayout l = node_layout(req.group, shape);
      if (l.members.size() != 1) {
        std::ostringstream os;
        os << "nvls reduces inside one node's NVSwitch; the group spans " << l.members.size() << " nodes";
        return os.str();
      }
      return {};
    }
    case Algorithm::kNvlsTree: {
      if (!shape.nvls) return "nvls-tree needs NVSwitch nodes with NVLink SHARP (H100/H200/B200 class) and a profile with nvls_efficiency > 0";
      const NodeLayout l = node_layout(req.group, shape);
      if (l.members.size() < 2) return "nvls-tree spans nodes; the group is on one node (use nvls)";
      if (!l.uniform) return "nvls-tree needs the same number of group GPUs on every node; " + describe_non_uniform(l);
      if (l.per_node < 2) return "nvls-tree needs at least 2 group GPUs per node (one per node: use tree or ring)";
      return {};
    }
    default:
      return {};
  }
}

CollectivePlan lower_ring(const CollectiveRequest& req, const ClusterShape& shape) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kRing;
  const auto rings = ring_sequences(req.group, shape, &plan.note);
  const double n = static_cast<double>(req.group.size());
  const auto n_steps = static_cast<uint32_t>(req.group.size() - 1);
  const double per_channel = req.bytes / static_cast<double>(rings.size());
  const uint32_t root = req.group.front();
  Phase ph;
  for (const auto& seq : rings) {
    switch (req.op) {
      case CollectiveOp::kAllReduce:
        // Reduce-scatter then all-gather around the ring: 2(n-1) steps of S/n per channel.
        ph.transfers.push_back(make_transfer(closed_ring_hops(seq), 2.0 * (n - 1.0) / n * per_channel, 2 * n_steps));
        break;
      case CollectiveOp::kReduceScatter:
      case CollectiveOp::kAllGather:
        ph.transfers.push_back(make_transfer(closed_ring_hops(seq), (n - 1.0) / n * per_channel, n_steps));
        break;
      case CollectiveOp::kBroadcast:
      case CollectiveOp::kReduce: {
        // A pipelined chain along the ring: broadcast starts at the root, reduce ends there
        // (NCCL's ring broadcast/reduce); the hop into (or out of) the root is not used.
        const auto at = static_cast<size_t>(std::find(seq.begin(), seq.end(), root) - seq.begin());
        std::vector<uint32_t> chain;
        chain.reserve(seq.size());
        const size_t first = req.op == CollectiveOp::kBroadcast ? at : at + 1;
        for (size_t i = 0; i < seq.size(); ++i) chain.push_back(seq[(first + i) % seq.size()]);
        ph.transfers.push_back(make_transfer(chain_hops(chain), per_channel, n_steps));
        break;
      }
      default:
        break;
    }
  }
  plan.phases.push_back(std::move(ph));
  return plan;
}

CollectivePlan lower_tree(const CollectiveRequest& req, const ClusterShape& shape) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kTree;
  Phase ph;
  if (req.op == CollectiveOp::kAllReduce) {
    add_double_tree_allreduce(req.group, shape, req.bytes, ph, &plan.note);
  } else {
    // Broadcast / reduce: one tree rooted at group[0] (position 0 of tree 0) carrying S.
    const Tree t = build_tree(req.group, node_layout(req.group, shape), 0, 0, &plan.note);
    std::vector<Hop> hops;
    for (const auto& [c, p] : t.child_to_parent) {
      if (req.op == CollectiveOp::kBroadcast) hops.emplace_back(p, c);
      else hops.emplace_back(c, p);
    }
    ph.transfers.push_back(make_transfer(std::move(hops), req.bytes, t.depth));
  }
  plan.phases.push_back(std::move(ph));
  return plan;
}

// Rabenseifner: reduce-scatter by recursive halving, then all-gather by recursive doubling.
// Convention: the halving starts with the partner at distance 1 (phase k: distance 2^k, S/2^(k+1)
// each way) and the doubling runs the same distances backwards (n/2 first with S/n, distance 1
// last with S/2). With groups laid out node-major this keeps the largest exchanges between
// neighbouring ranks, which are on the same node, and sends only the small ones far away.
CollectivePlan lower_halving_doubling(const CollectiveRequest& req, const ClusterShape& shape) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kHalvingDoubling;
  const auto& g = req.group;
  const size_t n = g.size();
  const uint32_t levels = log2_exact(n);
  auto exchange = [&](size_t distance, double bytes) {
    Phase ph;
    ph.transfers.reserve(n);
    for (size_t r = 0; r < n; ++r) ph.transfers.push_back(make_transfer({{g[r], g[r ^ distance]}}, bytes, 1));
    plan.phases.push_back(std::move(ph));
  };
  const double s = req.bytes;
  if (req.op == CollectiveOp::kAllReduce || req.op == CollectiveOp::kReduceScatter) {
    for (uint32_t k = 0; k < levels; ++k) exchange(size_t{1} << k, s / static_cast<double>(size_t{2} << k));
  }
  if (req.op == CollectiveOp::kAllReduce || req.op == CollectiveOp::kAllGather) {
    for (uint32_t j = 0; j < levels; ++j) {
      exchange(n >> (j + 1), s / static_cast<double>(n) * static_cast<double>(size_t{1} << j));
    }
  }
  return plan;
}

// Intra-node ring, then rings across nodes along each rail (local index i), then intra-node ring
// (the two-level scheme of Horovod's hierarchical all-reduce, which suits rail-optimised fabrics:
// the inter-node rings of different rails never share a NIC). A single node or one GPU per node
// has only one level, so it is a plain ring.
CollectivePlan lower_hierarchical(const CollectiveRequest& req, const ClusterShape& shape) {
  const NodeLayout l = node_layout(req.group, shape);
  if (l.members.size() <= 1 || l.per_node <= 1) {
    CollectivePlan plan = lower_ring(req, shape);
    append_note(plan.note, l.members.size() <= 1 ? "hierarchical on a single node is a ring"
                                                 : "hierarchical with one GPU per node is a ring");
    return plan;
  }
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kHierarchical;
  const double g = l.per_node;
  const double nodes = static_cast<double>(l.members.size());
  const double s = req.bytes;
  auto intra = [&](double bytes) {
    Phase ph;
    for (const auto& m : l.members) ph.transfers.push_back(make_transfer(closed_ring_hops(m), bytes, l.per_node - 1));
    plan.phases.push_back(std::move(ph));
  };
  auto rails = [&](double bytes, uint32_t steps) {
    Phase ph;
    for (uint32_t i = 0; i < l.per_node; ++i) {
      std::vector<uint32_t> rail;
      rail.reserve(l.members.size());
      for (const auto& m : l.members) rail.push_back(m[i]);
      ph.transfers.push_back(make_transfer(closed_ring_hops(rail), bytes, steps));
    }
    plan.phases.push_back(std::move(ph));
  };
  const auto node_steps = static_cast<uint32_t>(l.members.size() - 1);
  switch (req.op) {
    case CollectiveOp::kAllReduce:
      intra((g - 1.0) / g * s);                                    // each GPU ends with S/G reduced on the node
      rails(2.0 * (nodes - 1.0) / nodes * s / g, 2 * node_steps);  // all-reduce that S/G across nodes
      intra((g - 1.0) / g * s);                                    // all-gather it back inside the node
      break;
    case CollectiveOp::kReduceScatter:
      intra((g - 1.0) / g * s);
      rails((nodes - 1.0) / nodes * s / g, node_steps);
      break;
    case CollectiveOp::kAllGather:
      rails((nodes - 1.0) / nodes * s / g, node_steps);
      intra((g - 1.0) / g * s);
      break;
    default:
      break;
  }
  return plan;
}

// Per-dimension bidirectional rings (TPU style): reduce-scatter along x, y, z, all-gather along
// z, y, x; the data each rank holds shrinks by a dimension's size after each reduce-scatter stage
// and grows back in the all-gather stages. Dimensions the group does not span are skipped. With
// several pods the pod is the last dimension: the data-centre network carries only the pod-local
// shard (reduce-scatter inside each pod, all-reduce across pods, all-gather inside each pod, as
// XLA lowers a Multislice all-reduce).
CollectivePlan lower_torus(const CollectiveRequest& req, const ClusterShape& shape) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kTorus;
  TorusGrid grid;
  const std::string problem = torus_grid(req.group, shape, &grid);
  if (!problem.empty()) throw sim::ConfigError(problem);  // lower_collective checked it already
  const size_t dims = grid.coords.size();
  double data = req.bytes;  // what each rank still holds un-scattered
  if (req.op == CollectiveOp::kAllReduce || req.op == CollectiveOp::kReduceScatter) {
    for (size_t d = 0; d < dims; ++d) {
      const size_t k = grid.coords[d].size();
      if (k <= 1) continue;
      plan.phases.push_back(torus_stage(torus_lines(req.group, shape, grid, d), data));
      data /= static_cast<double>(k);
    }
  }
  if (req.op == CollectiveOp::kAllGather) data = req.bytes / static_cast<double>(req.group.size());
  if (req.op == CollectiveOp::kAllReduce || req.op == CollectiveOp::kAllGather) {
    for (size_t d = dims; d-- > 0;) {
      const size_t k = grid.coords[d].size();
      if (k <= 1) continue;
      data *= static_cast<double>(k);  // an all-gather stage's output size
      plan.phases.push_back(torus_stage(torus_lines(req.group, shape, grid, d), data));
    }
  }
  return plan;
}

CollectivePlan lower_direct(const CollectiveRequest& req, const ClusterShape& shape) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kDirect;
  const auto& g = req.group;
  Phase ph;
  if (req.op == CollectiveOp::kSendRecv) {
    ph.transfers.push_back(make_transfer({{g[0], g[1]}}, req.bytes, 1));
  } else {
    // all-to-all, all-gather, reduce-scatter: every rank exchanges its S/n chunk with every other.
    const double chunk = req.bytes / static_cast<double>(g.size());
    ph.transfers.reserve(g.size() * (g.size() - 1));
    for (uint32_t src : g) {
      for (uint32_t dst : g) {
        if (src != dst) ph.transfers.push_back(make_transfer({{src, dst}}, chunk, 1));
      }
    }
  }
  plan.phases.push_back(std::move(ph));
  return plan;
}

// NVLS all-reduce on one node (see collective.h): one ring transfer of S(n+1)/n bytes stands for
// every GPU's S + S/n into and S/n + S out of the switch; one latency step (the switch does the
// reduction, no rank-to-rank hand-offs).
CollectivePlan lower_nvls(const CollectiveRequest& req, const ClusterShape&) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kNvls;
  Phase ph;
  ph.transfers.push_back(in_switch_allreduce(req.group, req.bytes));
  plan.phases.push_back(std::move(ph));
  return plan;
}

// NVLS-tree all-reduce over N nodes of G GPUs (see collective.h), one pipelined phase:
//  - per node, the in-switch reduce-scatter and all-gather of S: one ring transfer of S(G+1)/G
//    over the node's GPUs, one step;
//  - per rail i (the i-th GPU of every node), the all-reduce of its S/G shard across nodes on
//    NCCL's double binary tree: two transfers of S/(2G) over every tree edge both ways,
//    2 x depth steps.
CollectivePlan lower_nvls_tree(const CollectiveRequest& req, const ClusterShape& shape) {
  CollectivePlan plan;
  plan.op = req.op;
  plan.algorithm = Algorithm::kNvlsTree;
  const NodeLayout l = node_layout(req.group, shape);
  const double g = l.per_node;
  Phase ph;
  for (const auto& m : l.members) ph.transfers.push_back(in_switch_allreduce(m, req.bytes));
  std::string unused;  // one GPU per node on a rail: the trees have no note to make
  for (uint32_t i = 0; i < l.per_node; ++i) {
    std::vector<uint32_t> rail;
    rail.reserve(l.members.size());
    for (const auto& m : l.members) rail.push_back(m[i]);
    add_double_tree_allreduce(rail, shape, req.bytes / g, ph, &unused);
  }
  plan.phases.push_back(std::move(ph));
  return plan;
}

}  // namespace wl::collective_detail
