// workloads/collectives/collective.cc: names, bus factors, request validation, the choice made by
// Algorithm::kAuto and the alpha-beta estimate. The per-algorithm builders are in algorithms.cc.
#include "workloads/collectives/collective.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sim/error.h"

namespace wl {

namespace collective_detail {
// Defined in algorithms.cc.
std::string shape_problem(Algorithm a, const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_ring(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_tree(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_halving_doubling(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_hierarchical(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_torus(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_direct(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_nvls(const CollectiveRequest& req, const ClusterShape& shape);
CollectivePlan lower_nvls_tree(const CollectiveRequest& req, const ClusterShape& shape);
}  // namespace collective_detail

namespace {

constexpr std::array<CollectiveOp, 7> kOps = {
    CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather, CollectiveOp::kBroadcast,
    CollectiveOp::kReduce,    CollectiveOp::kAllToAll,      CollectiveOp::kSendRecv};
constexpr std::array<Algorithm, 9> kAlgorithms = {Algorithm::kAuto,         Algorithm::kRing,
                                                  Algorithm::kTree,         Algorithm::kHalvingDoubling,
                                                  Algorithm::kHierarchical, Algorithm::kTorus,
                                                  Algorithm::kDirect,       Algorithm::kNvls,
                                                  Algorithm::kNvlsTree};
constexpr std::array<Protocol, 4> kProtocols = {Protocol::kAuto, Protocol::kLL, Protocol::kLL128, Protocol::kSimple};

// Which algorithm can lower which op, in kAuto's tie-break order (ring, then tree; hierarchical
// and halving-doubling are not auto candidates; torus and direct only where they are the natural
// or only choice).
constexpr std::array<Algorithm, 8> kPreference = {Algorithm::kRing,  Algorithm::kHierarchical,
                                                  Algorithm::kTree,  Algorithm::kHalvingDoubling,
                                                  Algorithm::kTorus, Algorithm::kDirect,
                                                  Algorithm::kNvls,  Algorithm::kNvlsTree};
// Protocols in auto's tie-break order: Simple first, so a free (neutral) cost model keeps it.
constexpr std::array<Protocol, 3> kProtocolPreference = {Protocol::kSimple, Protocol::kLL128, Protocol::kLL};

// NVLS and direct exchanges run Simple only (NCCL's NVLS kernels and p2p at these sizes).
bool protocol_applies(Algorithm a, Protocol p) {
  if (p == Protocol::kAuto || p == Protocol::kSimple) return true;
  return a != Algorithm::kNvls && a != Algorithm::kNvlsTree && a != Algorithm::kDirect;
}

bool implements(Algorithm a, CollectiveOp op) {
  switch (a) {
    case Algorithm::kAuto:
      return true;
    case Algorithm::kRing:
      return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather ||
             op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce;
    case Algorithm::kTree:
      return op == CollectiveOp::kAllReduce || op == CollectiveOp::kBroadcast || op == CollectiveOp::kReduce;
    case Algorithm::kHalvingDoubling:
    case Algorithm::kHierarchical:
    case Algorithm::kTorus:
      return op == CollectiveOp::kAllReduce || op == CollectiveOp::kReduceScatter || op == CollectiveOp::kAllGather;
    case Algorithm::kDirect:
      return op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv || op == CollectiveOp::kAllGather ||
             op == CollectiveOp::kReduceScatter;
    case Algorithm::kNvls:
    case Algorithm::kNvlsTree:
      return op == CollectiveOp::kAllReduce;
  }
  return false;
}

// Candidates kAuto compares: the algorithms NCCL itself chooses among (ring, tree, NVLS,
// NVLS-tree; NCCL v2.26.2 src/graph/tuning.cc). Direct all-gather / reduce-scatter are left out:
// the estimate sees the sender's port but not the incast at each receiver's switch port, and NCCL
// never picks it. Halving-doubling (MPI) and hierarchical (Horovod's two-level all-reduce) are
// algorithms NCCL does not implement; they stay available by name. Torus is handled before the
// comparison (it is what a torus is built for).
//
// Tree inside one node: NCCL builds its trees between nodes (a chain inside each node), so on a
// single node its "tree" is a chain that never beats the ring; auto leaves it out there.
bool auto_candidate(Algorithm a, CollectiveOp op) {
  if (a == Algorithm::kTorus || a == Algorithm::kHalvingDoubling || a == Algorithm::kHierarchical) return false;
  if (a == Algorithm::kDirect) return op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv;
  return implements(a, op);
}

// "all-reduce" -> "allreduce": accept the nccl-tests spellings (all_reduce) and the NCCL API
// ones (AllReduce) as well as ours.
std::string normalise(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '-' || c == '_' || c == '/' || c == ' ') continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

std::string format_seconds(double s) {
  char buf[64];
  if (s < 1e-3) std::snprintf(buf, sizeof buf, "%.3g us", s * 1e6);
  else if (s < 1.0) std::snprintf(buf, sizeof buf, "%.3g ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g s", s);
  return buf;
}

std::string context(const CollectiveRequest& req) {
  std::ostringstream os;
  os << "collective " << op_name(req.op) << " with " << algorithm_name(req.algorithm) << " on " << req.group.size()
     << (req.group.size() == 1 ? " rank: " : " ranks: ");
  return os.str();
}

[[noreturn]] void fail(const CollectiveRequest& req, const std::string& why) {
  throw sim::ConfigError(context(req) + why);
}

void validate(const CollectiveRequest& req) {
  if (req.group.empty()) fail(req, "the group is empty");
  if (!(req.bytes >= 0.0)) {
    std::ostringstream os;
    os << "bytes must be >= 0, got " << req.bytes;
    fail(req, os.str());
  }
  std::vector<uint32_t> sorted = req.group;
  std::sort(sorted.begin(), sorted.end());
  const auto dup = std::adjacent_find(sorted.begin(), sorted.end());
  if (dup != sorted.end()) fail(req, "GPU " + std::to_string(*dup) + " appears more than once in the group");
  if (req.op == CollectiveOp::kSendRecv && req.group.size() != 2) {
    fail(req, "send-recv needs a group of exactly 2 GPUs {src, dst}");
  }
  if (!implements(req.algorithm, req.op)) {
    // "use direct or auto", "use ring, tree, or auto".
    std::vector<std::string> names;
    for (Algorithm a : kPreference) {
      if (implements(a, req.op)) names.emplace_back(algorithm_name(a));
    }
    std::string alternatives;
    for (const auto& name : names) alternatives += name + (names.size() == 1 ? " " : ", ");
    fail(req, std::string(algorithm_name(req.algorithm)) + " does not implement " + std::string(op_name(req.op)) +
                  " (use " + alternatives + "or auto)");
  }
  if (!protocol_applies(req.algorithm, req.protocol)) {
    fail(req, std::string(algorithm_name(req.algorithm)) + " runs the Simple protocol only, not " +
                  std::string(protocol_name(req.protocol)));
  }
}

CollectivePlan build_pattern(Algorithm a, const CollectiveRequest& req, const ClusterShape& shape);

// NVLS and NVLS-tree phases wait their pipeline's fill (collective.h): the stages' times for one
// loop less the slowest's. Switch stages (scatter, reduce, gather) move a loop's S(G+1)/G share
// of each port at NVLS's rate; each network level, up then down the tree, a loop's S/G shard
// through a NIC, twice that inside trees of more than two nodes. No NVLS rate in the hints (a
// neutral cost model): no fill.
void set_pipeline_fill(CollectivePlan& plan, const CostHints& hints) {
  if (plan.algorithm != Algorithm::kNvls && plan.algorithm != Algorithm::kNvlsTree) return;
  const double nvls_Bps = hints.costs.nvls_efficiency * hints.scale_up_Bps;
  if (!(nvls_Bps > 0.0) || plan.ranks == 0) return;
  for (Phase& ph : plan.phases) {
    uint32_t nodes = 0;
    uint32_t levels = 0;  // the trees' depth: a tree transfer pays 2 x depth latency steps
    for (const Transfer& t : ph.transfers) {
      if (t.in_switch) ++nodes;
      else levels = std::max(levels, t.latency_steps / 2);
    }
    if (nodes == 0) continue;
    const uint32_t heads = plan.ranks / nodes;
    const double g = static_cast<double>(heads);
    const double loop = std::min(plan.bytes, nvls_loop_bytes(plan.algorithm, plan.bytes, nodes, heads, hints.costs));
    const double switch_s = loop * (g + 1.0) / g / nvls_Bps;
    double net_s = 0.0;
    if (levels > 0 && hints.inter_node_Bps > 0.0) net_s = (nodes > 2 ? 2.0 : 1.0) * loop / g / hints.inter_node_Bps;
    const double stages_s = 3.0 * switch_s + 2.0 * levels * net_s;
    ph.fill_s = stages_s - std::max(switch_s, net_s);
  }
}

// A GPU's port of one kind, as a key: its NVLink/NVSwitch port inside the node (intra) or its
// NIC, each direction apart. The sharing rule of estimate_seconds and the tree's fill: the hops of
// a phase through one port split its bandwidth.
uint64_t gpu_port_key(uint32_t gpu, bool out, bool intra) {
  return (static_cast<uint64_t>(gpu) << 2) | (out ? 2u : 0u) | (intra ? 1u : 0u);
}

// Tree phases wait their chunk pipeline's fill (collective.h): along each channel tree's deepest
// path, up to the root and (all-reduce) down again, a chunk crosses every edge in turn before the
// last chunk can leave the slowest one, so the fill is the sum of one chunk's times over the path's
// stages less the slowest stage's. While the first chunks climb, the ports carry the upward edges
// only: an edge's rate is its GPU port's bandwidth shared by the upward hops of every channel
// through that port (every channel's chain crosses every GPU of a node; a parent hears two
// children), by estimate_seconds's sharing rule; a chunk is NCCL's for the plan's protocol
// (tree_chunk_bytes), at most a channel's bytes.
void set_tree_fill(CollectivePlan& plan, const ClusterShape& shape, const CostHints& hints) {
  if (plan.algorithm != Algorithm::kTree || shape.torus) return;
  const uint32_t gpn = std::max<uint32_t>(1, shape.gpus_per_node);
  const double payload = hints.costs.of(plan.protocol).payload > 0.0 ? hints.costs.of(plan.protocol).payload : 1.0;
  std::unordered_map<uint64_t, uint32_t> users;  // per GPU port (gpu_port_key): upward hops through it
  const bool both_ways = plan.op == CollectiveOp::kAllReduce;
  const bool down_only = plan.op == CollectiveOp::kBroadcast;
  // Edges as (child, parent): an all-reduce lists them up then down, a reduce up, a broadcast down.
  auto upward = [&](const Transfer& t) { return both_ways ? t.hops.size() / 2 : t.hops.size(); };
  std::unordered_map<uint32_t, std::pair<uint32_t, double>> up;  // child -> (parent, stage seconds)
  for (Phase& ph : plan.phases) {
    if (ph.transfers.empty()) continue;
    users.clear();
    std::unordered_set<uint32_t> nodes;
    for (const Transfer& t : ph.transfers)
      for (size_t i = 0; i < upward(t); ++i) {
        const auto [a, b] = t.hops[i];
        const bool intra = a / gpn == b / gpn;
        ++users[gpu_port_key(a, true, intra)];
        ++users[gpu_port_key(b, false, intra)];
        nodes.insert(a / gpn);
        nodes.insert(b / gpn);
      }
    const auto channels = static_cast<uint32_t>(ph.transfers.size());
    const double chunk = tree_chunk_bytes(plan.protocol, plan.bytes, channels, static_cast<uint32_t>(nodes.size()),
                                          plan.ranks / std::max<uint32_t>(1, static_cast<uint32_t>(nodes.size())));
    double fill = 0.0;
    for (const Transfer& t : ph.transfers) {
      const double c = std::min(chunk, t.bytes);
      up.clear();
      for (size_t i = 0; i < upward(t); ++i) {
        const auto [a, b] = t.hops[i];
        const uint32_t child = down_only ? b : a, parent = down_only ? a : b;
        const bool intra = a / gpn == b / gpn;
        const uint32_t share = std::max(users[gpu_port_key(a, true, intra)], users[gpu_port_key(b, false, intra)]);
        const double rate = (intra ? hints.intra_node_Bps : hints.inter_node_Bps) / share * payload;
        up[child] = {parent, rate > 0.0 ? c / rate : 0.0};
      }
      // The deepest path by time: every vertex's walk to the root, its stages summed.
      for (const auto& entry : up) {
        double sum = 0.0, slowest = 0.0;
        uint32_t v = entry.first;
        for (size_t guard = 0; guard <= up.size(); ++guard) {
          const auto it = up.find(v);
          if (it == up.end()) break;
          sum += it->second.second;
          slowest = std::max(slowest, it->second.second);
          v = it->second.first;
        }
        const double stages = (both_ways ? 2.0 : 1.0) * sum;
        fill = std::max(fill, stages - slowest);
      }
    }
    ph.fill_s = fill;
  }
}

// Pipeline fills depend on the protocol (the chunk), so they are set again whenever it changes.
void set_fills(CollectivePlan& plan, const ClusterShape& shape, const CostHints& hints) {
  set_pipeline_fill(plan, hints);
  set_tree_fill(plan, shape, hints);
}

CollectivePlan build(Algorithm a, const CollectiveRequest& req, const ClusterShape& shape, const CostHints& hints) {
  CollectivePlan plan = build_pattern(a, req, shape);
  plan.bytes = req.bytes;
  plan.ranks = static_cast<uint32_t>(req.group.size());
  set_fills(plan, shape, hints);
  return plan;
}

CollectivePlan build_pattern(Algorithm a, const CollectiveRequest& req, const ClusterShape& shape) {
  switch (a) {
    case Algorithm::kRing:
      return collective_detail::lower_ring(req, shape);
    case Algorithm::kTree:
      return collective_detail::lower_tree(req, shape);
    case Algorithm::kHalvingDoubling:
      return collective_detail::lower_halving_doubling(req, shape);
    case Algorithm::kHierarchical:
      return collective_detail::lower_hierarchical(req, shape);
    case Algorithm::kTorus:
      return collective_detail::lower_torus(req, shape);
    case Algorithm::kDirect:
      return collective_detail::lower_direct(req, shape);
    case Algorithm::kNvls:
      return collective_detail::lower_nvls(req, shape);
    case Algorithm::kNvlsTree:
      return collective_detail::lower_nvls_tree(req, shape);
    case Algorithm::kAuto:
      break;
  }
  return {};
}

bool single_node(const CollectiveRequest& req, const ClusterShape& shape) {
  if (shape.torus) return false;
  const uint32_t gpn = std::max<uint32_t>(1, shape.gpus_per_node);
  for (uint32_t g : req.group) {
    if (g / gpn != req.group.front() / gpn) return false;
  }
  return true;
}

std::string plan_label(const CollectivePlan& plan) {
  return std::string(algorithm_name(plan.algorithm)) + "/" + std::string(protocol_name(plan.protocol));
}

// The fastest enabled protocol for an already lowered plan (the requested one when not auto).
void pick_protocol(CollectivePlan& plan, Protocol requested, const ClusterShape& shape, const CostHints& hints) {
  if (requested != Protocol::kAuto) {
    plan.protocol = requested;
    set_fills(plan, shape, hints);
    return;
  }
  double best = -1.0;
  Protocol chosen = Protocol::kSimple;  // every protocol disabled: Simple always runs
  for (Protocol p : kProtocolPreference) {
    if (!protocol_applies(plan.algorithm, p) || !hints.costs.of(p).enabled) continue;
    plan.protocol = p;
    set_fills(plan, shape, hints);
    const double t = estimate_seconds(plan, shape, hints);
    if (best < 0.0 || t < best * (1.0 - 1e-9)) {
      best = t;
      chosen = p;
    }
  }
  plan.protocol = chosen;
  set_fills(plan, shape, hints);
}

CollectivePlan choose(const CollectiveRequest& req, const ClusterShape& shape, const CostHints& hints) {
  // A torus is built for per-dimension rings; a ring in group order would zig-zag across it.
  if (shape.torus && implements(Algorithm::kTorus, req.op) &&
      collective_detail::shape_problem(Algorithm::kTorus, req, shape).empty()) {
    CollectivePlan plan = build(Algorithm::kTorus, req, shape, hints);
    plan.note = "auto: torus (est " + format_seconds(estimate_seconds(plan, shape, hints)) +
                "; per-dimension rings on a torus shape)";
    return plan;
  }
  struct Candidate {
    CollectivePlan plan;
    double seconds;
  };
  std::vector<Candidate> candidates;
  const bool one_node = single_node(req, shape);
  for (Algorithm a : kPreference) {
    if (!auto_candidate(a, req.op) || !collective_detail::shape_problem(a, req, shape).empty()) continue;
    if (a == Algorithm::kTree && one_node) continue;
    if ((a == Algorithm::kNvls || a == Algorithm::kNvlsTree) && hints.costs.nvls_efficiency <= 0.0) continue;
    if (!protocol_applies(a, req.protocol)) continue;
    CollectivePlan plan = build(a, req, shape, hints);
    if (plan.algorithm != a) continue;  // degraded to another candidate (hierarchical on one node)
    pick_protocol(plan, req.protocol, shape, hints);
    const double t = estimate_seconds(plan, shape, hints);
    candidates.push_back({std::move(plan), t});
  }
  SIM_ASSERT(!candidates.empty(), "every op has at least one auto candidate");
  size_t best = 0;
  for (size_t i = 1; i < candidates.size(); ++i) {
    // Strictly better by more than rounding: ties keep the earlier (preferred) algorithm.
    if (candidates[i].seconds < candidates[best].seconds * (1.0 - 1e-9)) best = i;
  }
  std::string note = "auto: " + plan_label(candidates[best].plan) + " (est " + format_seconds(candidates[best].seconds);
  std::string others;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i == best) continue;
    others += (others.empty() ? "" : ", ") + plan_label(candidates[i].plan) + " " + format_seconds(candidates[i].seconds);
  }
  note += others.empty() ? "; no alternative)" : "; " + others + ")";
  CollectivePlan plan = std::move(candidates[best].plan);
  if (!plan.note.empty()) note += "; " + plan.note;
  plan.note = std::move(note);
  return plan;
}

}  // namespace

std::string_view op_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all-reduce";
    case CollectiveOp::kReduceScatter: return "reduce-scatter";
    case CollectiveOp::kAllGather: return "all-gather";
    case CollectiveOp::kBroadcast: return "broadcast";
    case CollectiveOp::kReduce: return "reduce";
    case CollectiveOp::kAllToAll: return "all-to-all";
    case CollectiveOp::kSendRecv: return "send-recv";
  }
  return "?";
}

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kHalvingDoubling: return "halving-doubling";
    case Algorithm::kHierarchical: return "hierarchical";
    case Algorithm::kTorus: return "torus";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kNvls: return "nvls";
    case Algorithm::kNvlsTree: return "nvls-tree";
  }
  return "?";
}

double CommCosts::channel_fraction(Protocol p, double bytes, uint32_t ranks) const {
  const ProtocolCost& c = of(p);
  if (channels <= 1 || c.channel_bytes <= 0.0) return 1.0;
  const double unit = c.channel_bytes * (c.channel_bytes_per_rank ? static_cast<double>(std::max<uint32_t>(1, ranks)) : 1.0);
  const double nc = std::clamp(std::floor(bytes / unit), 1.0, static_cast<double>(channels));
  return nc / static_cast<double>(channels);
}

std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::kAuto: return "auto";
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
    case Protocol::kSimple: return "Simple";
  }
  return "?";
}

Protocol parse_protocol(std::string_view s) {
  const std::string key = normalise(s);
  for (Protocol p : kProtocols) {
    if (normalise(protocol_name(p)) == key) return p;
  }
  std::string names;
  for (Protocol p : kProtocols) names += (names.empty() ? "" : ", ") + std::string(protocol_name(p));
  throw sim::ConfigError("unknown collective protocol '" + std::string(s) + "' (expected one of: " + names + ")");
}

CollectiveOp parse_op(std::string_view s) {
  const std::string key = normalise(s);
  for (CollectiveOp op : kOps) {
    if (normalise(op_name(op)) == key) return op;
  }
  if (key == "p2p") return CollectiveOp::kSendRecv;
  std::string names;
  for (CollectiveOp op : kOps) names += (names.empty() ? "" : ", ") + std::string(op_name(op));
  throw sim::ConfigError("unknown collective op '" + std::string(s) + "' (expected one of: " + names + ")");
}

Algorithm parse_algorithm(std::string_view s) {
  const std::string key = normalise(s);
  for (Algorithm a : kAlgorithms) {
    if (normalise(algorithm_name(a)) == key) return a;
  }
  if (key == "rabenseifner") return Algorithm::kHalvingDoubling;
  std::string names;
  for (Algorithm a : kAlgorithms) names += (names.empty() ? "" : ", ") + std::string(algorithm_name(a));
  throw sim::ConfigError("unknown collective algorithm '" + std::string(s) + "' (expected one of: " + names + ")");
}

// nccl-tests doc/PERFORMANCE.md: busbw = algbw x factor, the factor making busbw comparable to
// the link speed whatever the rank count.
double bus_factor(CollectiveOp op, uint32_t n) {
  if (n == 0) return 0.0;
  const double r = static_cast<double>(n);
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (r - 1.0) / r;
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllGather:
    case CollectiveOp::kAllToAll: return (r - 1.0) / r;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kReduce:
    case CollectiveOp::kSendRecv: return 1.0;
  }
  return 1.0;
}

CollectivePlan lower_collective(const CollectiveRequest& req, const ClusterShape& shape, const CostHints& hints) {
  validate(req);
  if (req.group.size() == 1) {
    // Nothing moves. Report the algorithm that would have been used.
    CollectivePlan plan;
    plan.op = req.op;
    plan.algorithm = req.algorithm;
    if (plan.algorithm == Algorithm::kAuto) {
      for (Algorithm a : kPreference) {
        if (auto_candidate(a, req.op)) {
          plan.algorithm = a;
          break;
        }
      }
    }
    plan.protocol = req.protocol == Protocol::kAuto ? Protocol::kSimple : req.protocol;
    plan.bytes = req.bytes;
    plan.ranks = 1;
    plan.note = "single rank: nothing to move";
    return plan;
  }
  if (req.algorithm == Algorithm::kAuto) return choose(req, shape, hints);
  const std::string problem = collective_detail::shape_problem(req.algorithm, req, shape);
  if (!problem.empty()) fail(req, problem);
  CollectivePlan plan = build(req.algorithm, req, shape, hints);
  pick_protocol(plan, req.protocol, shape, hints);
  return plan;
}

double nvls_loop_bytes(Algorithm a, double bytes, uint32_t nodes, uint32_t heads, const CommCosts& costs) {
  const double ops = static_cast<double>(costs.nvls_channels) * static_cast<double>(std::max<uint32_t>(1, heads));
  double chunk = costs.nvls_chunk_bytes;
  auto shrink = [&](double loops, double above) {
    if (bytes < loops * ops * chunk && chunk > above) chunk = above;
  };
  if (a == Algorithm::kNvlsTree) {
    if (nodes >= 4) chunk = std::min(chunk, 65536.0);
    shrink(32, 262144);
    shrink(16, 131072);
    shrink(4, 65536);
    shrink(1, 32768);
  } else {
    // NVLS starts from Simple's step (the 4 MiB buffer over NCCL_STEPS = 8), capped at the chunk.
    chunk = std::min(chunk, 524288.0);
    shrink(64, 65536);
    shrink(8, 32768);
    shrink(2, 16384);
  }
  return ops * chunk;
}

double tree_chunk_bytes(Protocol p, double bytes, uint32_t channels, uint32_t nodes, uint32_t per_node) {
  if (p == Protocol::kSimple) return 524288.0;  // DEFAULT_BUFFSIZE 4 MiB / NCCL_STEPS 8, one step
  if (p == Protocol::kLL) return 32768.0;       // 512 threads x 8 lines x 16 B per step, half of it data
  // LL128: 640 threads x 120 elements x 8 B per step, 15 of each 16 words data, halved while a
  // channel's buffer is fewer than nsteps x 64 / ppn chunks (down to 128 KiB) or nsteps x 16 / ppn
  // (down to 32 KiB), nsteps = 1 + log2(nodes) + ppn / 10. NCCL divides integers on the left.
  // (per_node is the group's GPUs per node; NCCL's ppn is ranks / nodes, the same when uniform.)
  double chunk = 576000.0;
  const double ppn = static_cast<double>(std::max<uint32_t>(1, per_node));
  const double nsteps = 1.0 + std::floor(std::log2(std::max<uint32_t>(1, nodes))) + 0.1 * ppn;
  const double ch = static_cast<double>(std::max<uint32_t>(1, channels));
  while (std::floor(bytes / (ch * chunk)) < nsteps * 64.0 / ppn && chunk > 131072.0) chunk = std::floor(chunk / 2.0);
  while (std::floor(bytes / (ch * chunk)) < nsteps * 16.0 / ppn && chunk > 32768.0) chunk = std::floor(chunk / 2.0);
  // Then down to a whole number of LL128 grains: 32 threads x 8 elements / 16 x 15 x 8 B = 1,920 B
  // (src/include/device.h ncclProtoGrainSize; Simple's 512 B and LL's 16 B grains divide theirs).
  return std::floor(chunk / 1920.0) * 1920.0;
}

std::string collective_problem(const CollectiveRequest& req, const ClusterShape& shape) {
  try {
    validate(req);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  if (req.group.size() == 1 || req.algorithm == Algorithm::kAuto) return "";
  const std::string problem = collective_detail::shape_problem(req.algorithm, req, shape);
  return problem.empty() ? "" : context(req) + problem;
}

// Alpha-beta per phase: a phase lasts as long as its slowest transfer; phases add up. A hop is
// intra-node when both GPUs sit on the same node (intra_node_* hints), else inter-node. A
// transfer's hops all run at one rate, so it moves at its slowest hop's bandwidth and waits
// latency_steps x the largest step latency among its hops.
//
// Refinement over a pure per-hop model (reported to the design owner): a GPU has one port of
// each kind (its NVLink/NVSwitch port inside the node, its NIC outside), so the hops of a phase
// that leave (or enter) the same GPU over the same kind of link split that port's bandwidth
// equally. Every ring, chain, rail ring and halving-doubling exchange uses each port once, so
// their closed forms are unchanged; what it corrects is the shapes that would otherwise look far
// faster than the links allow: a tree node sending to its parent and two children, or an
// all-to-all rank sending n-1 chunks at once. On a torus every neighbour has its own link, so the
// shared resource there is the directed (src, dst) link itself; between pods of a torus it is the
// chip's DCN link, one each way (dcn_* hints). Fabric contention beyond the GPU's own ports
// (oversubscribed spines, shared NICs) is left to the simulator.
//
// Protocols: the launch latency once; per step the protocol's software latency replaces Simple's
// (hints.intra/inter_step_s hold Simple's); the bytes are divided by the payload fraction; a
// transfer moves at most max_busbw / (transfers in its phase). NVLS transfers move at most
// nvls_efficiency x the scale-up port bandwidth.
double estimate_seconds(const CollectivePlan& plan, const ClusterShape& shape, const CostHints& hints) {
  const uint32_t gpn = std::max<uint32_t>(1, shape.gpus_per_node);
  const ProtocolCost& proto = hints.costs.of(plan.protocol);
  const double step_delta = plan.protocol == Protocol::kSimple ? 0.0 : proto.step_s - hints.costs.simple.step_s;
  const double payload = proto.payload > 0.0 ? proto.payload : 1.0;
  const double channels = hints.costs.channel_fraction(plan.protocol, plan.bytes, plan.ranks);
  const uint64_t pod_size = shape.chips_per_pod();  // 0: no pods
  auto across_pods = [&](uint32_t a, uint32_t b) { return pod_size > 0 && a / pod_size != b / pod_size; };
  // Keys: a GPU's own ports (gpu << 2 | out | intra; on a torus between pods the same, its DCN
  // link) or, on a torus, the directed link (src << 32 | dst, with 1 << 63 set to stay apart).
  auto port = [&](uint32_t gpu, uint32_t other, bool out, bool intra) -> uint64_t {
    if (shape.torus && !across_pods(gpu, other))
      return (uint64_t{1} << 63) |
             (out ? (static_cast<uint64_t>(gpu) << 32) | other : (static_cast<uint64_t>(other) << 32) | gpu);
    return gpu_port_key(gpu, out, intra);
  };
  // Whether a hop is counted at its receiving end too (GPU ports and DCN links; torus links are
  // counted once, as the directed link).
  auto two_ended = [&](uint32_t src, uint32_t dst) { return !shape.torus || across_pods(src, dst); };
  std::unordered_map<uint64_t, uint32_t> users;
  double total = 0.0;
  for (const Phase& ph : plan.phases) {
    users.clear();
    for (const Transfer& t : ph.transfers) {
      for (const auto& [src, dst] : t.hops) {
        const bool intra = src / gpn == dst / gpn;
        ++users[port(src, dst, true, intra)];
        if (two_ended(src, dst)) ++users[port(dst, src, false, intra)];
      }
    }
    double phase_s = 0.0;
    for (const Transfer& t : ph.transfers) {
      double rate = 0.0;
      double step_s = 0.0;
      double step_sum = 0.0;
      bool first = true;
      for (const auto& [src, dst] : t.hops) {
        const bool intra = src / gpn == dst / gpn;
        const bool dcn = across_pods(src, dst) && hints.dcn_Bps > 0.0;
        uint32_t share = users[port(src, dst, true, intra)];
        if (two_ended(src, dst)) share = std::max(share, users[port(dst, src, false, intra)]);
        const double link_Bps = dcn ? hints.dcn_Bps : (intra ? hints.intra_node_Bps : hints.inter_node_Bps);
        const double r = link_Bps / static_cast<double>(share);
        rate = first ? r : std::min(rate, r);
        const double hop_step = (dcn ? hints.dcn_step_s : (intra ? hints.intra_step_s : hints.inter_step_s)) + step_delta;
        step_s = std::max(step_s, hop_step);
        step_sum += hop_step;
        first = false;
      }
      // As the runtime: a tree's steps pay its slowest hop, a ring's the mean of its hops.
      if (plan.algorithm != Algorithm::kTree && !t.hops.empty()) step_s = step_sum / static_cast<double>(t.hops.size());
      if (t.in_switch && hints.scale_up_Bps > 0.0) {
        rate = std::min(rate, hints.costs.nvls_efficiency * hints.scale_up_Bps);
      } else if (plan.algorithm != Algorithm::kDirect) {
        rate *= channels;
      }
      rate *= payload;  // payload bytes per second
      if (proto.max_busbw_Bps > 0.0) rate = std::min(rate, proto.max_busbw_Bps / static_cast<double>(ph.transfers.size()));
      const double move_s = t.bytes > 0.0 && rate > 0.0 ? t.bytes / rate : 0.0;
      phase_s = std::max(phase_s, static_cast<double>(t.latency_steps) * std::max(0.0, step_s) + move_s);
    }
    total += phase_s + ph.fill_s;
  }
  const bool nvls = plan.algorithm == Algorithm::kNvls || plan.algorithm == Algorithm::kNvlsTree;
  if (!plan.phases.empty()) total += nvls ? hints.costs.nvls_launch_s : proto.launch_s;
  return total;
}

}  // namespace wl
