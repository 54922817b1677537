// topology/builders.cc: the builders declared in topology.h. Each checks every config field first
// and throws sim::TopologyError naming the field and the bad value, then lays out vertices and
// links in the order the arithmetic routers in topology.cc expect (see the layout comments on the
// Topology members). Builders do not call validate(): callers do, once, after building.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "sim/error.h"
#include "topology/topology.h"
#include "topology/topology_internal.h"

namespace topo {
namespace {

// Vertex and link ids are uint32; keep well inside that so that link indices (2 per cable, a few
// cables per GPU) cannot overflow.
constexpr uint64_t kMaxGpus = uint64_t{1} << 26;

// a * b for chip counts, which stops growing once past kMaxGpus (so it never wraps: a <= 2^26 and
// b < 2^32); the caller refuses anything above kMaxGpus.
uint64_t capped_product(uint64_t a, uint32_t b) { return a > kMaxGpus ? a : a * b; }

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

void check_bandwidth(double bps, const std::string& what) {
  if (!(bps > 0) || !std::isfinite(bps)) {
    throw sim::TopologyError(what + " is " + num(bps) + " B/s: must be positive and finite");
  }
}

void check_latency(sim::Time t, const std::string& what) {
  if (t < sim::Time::zero()) {
    throw sim::TopologyError(what + " is " + std::to_string(t.count_ns()) + " ns: must be >= 0");
  }
}

uint32_t ceil_div(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

Topology build_cluster(const ClusterSpec& spec) {
  if (spec.nodes == 0) throw sim::TopologyError("cluster nodes is 0: must be >= 1");
  if (spec.gpus_per_node == 0) throw sim::TopologyError("cluster gpus_per_node is 0: must be >= 1");
  const uint64_t total = uint64_t{spec.nodes} * spec.gpus_per_node;
  if (total > kMaxGpus) {
    throw sim::TopologyError("cluster of " + std::to_string(total) + " GPUs is larger than the supported " +
                             std::to_string(kMaxGpus));
  }
  const ScaleOutKind out_kind = spec.scale_out.kind;
  if (out_kind == ScaleOutKind::kTorus) {
    if (spec.scale_up.kind != ScaleUpKind::kNone) {
      throw sim::TopologyError("a torus cluster has only torus links: scale_up.kind must be none");
    }
    TorusSpec t = spec.scale_out.torus;
    t.chips_per_host = spec.gpus_per_node;
    uint64_t chips = t.pods;
    for (uint32_t d : t.dims) chips = capped_product(chips, d);
    if (!t.dims.empty() && chips != total) {
      throw sim::TopologyError("torus has " + std::to_string(chips) + " chips" +
                               (t.pods > 1 ? " (" + std::to_string(t.pods) + " pods)" : std::string()) +
                               " but nodes * gpus_per_node is " + std::to_string(total) + ": they must match");
    }
    return build_torus(t);
  }
  const bool up = spec.scale_up.kind == ScaleUpKind::kNvSwitch;
  const bool tree = out_kind == ScaleOutKind::kFatTree;
  if (spec.nodes > 1 && !tree) {
    throw sim::TopologyError("cluster has " + std::to_string(spec.nodes) +
                             " nodes but scale_out.kind is none: nodes would be disconnected");
  }
  if (spec.gpus_per_node > 1 && !up && !tree) {
    throw sim::TopologyError("node has " + std::to_string(spec.gpus_per_node) +
                             " GPUs but neither scale_up nor scale_out connects them");
  }

  const uint32_t g_per_node = spec.gpus_per_node;
  const uint32_t n_gpus = static_cast<uint32_t>(total);
  const FatTreeSpec& ft = spec.scale_out.fat_tree;

  // Check every field before building anything.
  std::vector<uint32_t> tier_groups;  // groups per tier (before rails)
  if (up) {
    check_bandwidth(spec.scale_up.bandwidth_Bps, "scale_up.bandwidth");
    check_latency(spec.scale_up.latency, "scale_up.latency");
  }
  if (tree) {
    check_bandwidth(ft.nic_bandwidth_Bps, "fat_tree.nic_bandwidth");
    check_latency(ft.nic_latency, "fat_tree.nic_latency");
    check_latency(ft.hop_latency, "fat_tree.hop_latency");
    // Messages name the scenario's keys (cluster.scale_out.*), where these values come from.
    if (ft.rails == 0) throw sim::TopologyError("scale_out.rails is 0: must be >= 1");
    if (ft.rails > g_per_node) {
      throw sim::TopologyError("scale_out.rails is " + std::to_string(ft.rails) + " but a node has " +
                               std::to_string(g_per_node) + (g_per_node == 1 ? " GPU" : " GPUs") +
                               ": rails must be <= gpus_per_node");
    }
    if (ft.tiers.empty()) throw sim::TopologyError("fat_tree.tiers is empty: at least the leaf tier is needed");
    if (ft.tiers.size() > Topology::kMaxTiers) {
      throw sim::TopologyError("fat_tree has " + std::to_string(ft.tiers.size()) + " tiers: at most " +
                               std::to_string(Topology::kMaxTiers) + " are supported");
    }
    if (ft.rails > 1 && ft.tiers.size() < 2) {
      throw sim::TopologyError("fat_tree.rails is " + std::to_string(ft.rails) +
                               " with a single tier: rails merge at tier 1, so add a tier above the leaves");
    }
    uint64_t below = spec.nodes;
    for (size_t k = 0; k < ft.tiers.size(); ++k) {
      const FatTreeTier& t = ft.tiers[k];
      const std::string what = "fat_tree tier " + std::to_string(k) + (t.name.empty() ? "" : " (" + t.name + ")");
      if (t.group_size == 0) throw sim::TopologyError(what + " group_size is 0: must be >= 1");
      if (!(t.oversubscription >= 1.0) || !std::isfinite(t.oversubscription)) {
        throw sim::TopologyError(what + " oversubscription is " + num(t.oversubscription) + ": must be >= 1");
      }
      if (t.uplinks == 0) throw sim::TopologyError(what + " uplinks is 0: must be >= 1");
      if (k == 0 && (t.oversubscription != 1.0 || t.uplinks != 1)) {
        throw sim::TopologyError(what + " is the leaf tier: its oversubscription and uplinks must be 1 "
                                        "(NICs enter it at full rate); set them on the tier above");
      }
      tier_groups.push_back(ceil_div(below, t.group_size));
      below = tier_groups.back();
    }
    if (tier_groups.back() > 1) {
      // The top tier must join everything below it in one group. Its group size is the tier's
      // `nodes` (a single tier) or `<tier below>s` in the scenario.
      const size_t top = ft.tiers.size() - 1;
      const uint64_t children = top == 0 ? spec.nodes : tier_groups[top - 1];
      const std::string key = top == 0 ? "nodes" : (ft.tiers[top - 1].name.empty() ? "groups" : ft.tiers[top - 1].name + "s");
      throw sim::TopologyError("scale_out.tiers[" + std::to_string(top) + "]" +
                               (ft.tiers[top].name.empty() ? "" : " (" + ft.tiers[top].name + ")") +
                               ", the top tier, would need " + std::to_string(tier_groups.back()) +
                               " switches to join its " + std::to_string(children) + " children, " +
                               std::to_string(ft.tiers[top].group_size) + " per switch (its " + key +
                               "): raise " + key + " to >= " + std::to_string(children) + " or add a tier");
    }
  }

  Topology t;
  t.kind_ = TopologyKind::kCluster;
  t.num_gpus_ = n_gpus;
  t.gpus_per_node_ = g_per_node;
  // Every vertex and link counted first, so that the tables are allocated once (at 131,072 GPUs,
  // growing them moved 540k links and 155k names several times over).
  uint64_t vertices = n_gpus + (up ? spec.nodes : 0), links = up ? 2 * uint64_t{n_gpus} : 0;
  if (tree) {
    links += 2 * uint64_t{n_gpus};
    for (size_t k = 0; k < tier_groups.size(); ++k) {
      const uint64_t here = tier_groups[k] * (k == 0 ? ft.rails : 1);
      vertices += here;
      if (k + 1 < tier_groups.size()) links += 2 * here * ft.tiers[k + 1].uplinks;
    }
  }
  t.vertex_names_.reserve(vertices);
  t.links_.reserve(links);
  for (uint32_t g = 0; g < n_gpus; ++g) t.add_vertex("gpu" + std::to_string(g));

  if (up) {
    t.has_scale_up_ = true;
    t.su_bandwidth_Bps_ = spec.scale_up.bandwidth_Bps;
    t.su_vertex_base_ = t.num_vertices();
    for (uint32_t n = 0; n < spec.nodes; ++n) t.add_vertex("node" + std::to_string(n) + ".nvswitch");
    t.su_link_base_ = static_cast<uint32_t>(t.links_.size());
    for (uint32_t g = 0; g < n_gpus; ++g) {
      const uint32_t sw = t.su_vertex_base_ + g / g_per_node;
      t.add_link(g, sw, spec.scale_up.bandwidth_Bps, spec.scale_up.latency, LinkKind::kScaleUp, 0, false);
      t.add_link(sw, g, spec.scale_up.bandwidth_Bps, spec.scale_up.latency, LinkKind::kScaleUp, 0, false);
    }
  }

  if (tree) {
    const uint32_t rails = ft.rails;
    t.has_fat_tree_ = true;
    t.rails_ = rails;
    t.nic_bandwidth_Bps_ = ft.nic_bandwidth_Bps;
    t.uplink_policy_ = ft.uplink_policy;
    // Vertices, tier by tier; tier 0 holds one vertex per (leaf group, rail).
    for (size_t k = 0; k < ft.tiers.size(); ++k) {
      Topology::TierLayout layout;
      layout.name = ft.tiers[k].name.empty() ? "tier" + std::to_string(k) : ft.tiers[k].name;
      layout.group_size = ft.tiers[k].group_size;
      layout.uplinks = ft.tiers[k].uplinks;
      layout.oversubscription = ft.tiers[k].oversubscription;
      layout.num_vertices = tier_groups[k] * (k == 0 ? rails : 1);
      layout.vertex_base = t.num_vertices();
      for (uint32_t i = 0; i < layout.num_vertices; ++i) {
        if (k == 0 && rails > 1) {
          t.add_vertex(layout.name + std::to_string(i / rails) + ".rail" + std::to_string(i % rails));
        } else {
          t.add_vertex(layout.name + std::to_string(i));
        }
      }
      t.tiers_.push_back(std::move(layout));
    }
    // NIC links. The up link ends in the leaf switch, so it also carries that switch's hop latency.
    const uint32_t leaf_size = ft.tiers[0].group_size;
    t.nic_link_base_ = static_cast<uint32_t>(t.links_.size());
    for (uint32_t g = 0; g < n_gpus; ++g) {
      const uint32_t leaf = t.tiers_[0].vertex_base + (g / g_per_node / leaf_size) * rails + (g % g_per_node) % rails;
      t.add_link(g, leaf, ft.nic_bandwidth_Bps, ft.nic_latency + ft.hop_latency, LinkKind::kNic, 0, false);
      t.add_link(leaf, g, ft.nic_bandwidth_Bps, ft.nic_latency, LinkKind::kNic, 0, false);
    }
    // GPUs under each vertex of the current tier, for uplink capacities. Partial groups count
    // only the GPUs they really hold.
    std::vector<uint64_t> under(t.tiers_[0].num_vertices);
    for (uint32_t i = 0; i < under.size(); ++i) {
      const uint32_t group = i / rails;
      const uint32_t rail = i % rails;
      const uint64_t nodes_in = std::min<uint64_t>(leaf_size, uint64_t{spec.nodes} - uint64_t{group} * leaf_size);
      const uint64_t gpus_on_rail = (g_per_node - rail + rails - 1) / rails;
      under[i] = nodes_in * gpus_on_rail;
    }
    for (size_t k = 1; k < t.tiers_.size(); ++k) {
      Topology::TierLayout& layout = t.tiers_[k];
      const Topology::TierLayout& below = t.tiers_[k - 1];
      layout.link_base = static_cast<uint32_t>(t.links_.size());
      std::vector<uint64_t> next(layout.num_vertices, 0);
      for (uint32_t c = 0; c < below.num_vertices; ++c) {
        const uint32_t parent = (k == 1 ? c / rails : c) / layout.group_size;
        const double per_link =
            static_cast<double>(under[c]) * ft.nic_bandwidth_Bps / layout.oversubscription / layout.uplinks;
        const uint32_t cv = below.vertex_base + c;
        const uint32_t pv = layout.vertex_base + parent;
        for (uint32_t p = 0; p < layout.uplinks; ++p) {
          const bool par = layout.uplinks > 1;
          t.add_link(cv, pv, per_link, ft.hop_latency, LinkKind::kFabric, static_cast<uint8_t>(k), par);
          t.add_link(pv, cv, per_link, ft.hop_latency, LinkKind::kFabric, static_cast<uint8_t>(k), par);
        }
        next[parent] += under[c];
      }
      under = std::move(next);
    }
  }
  SIM_ASSERT(t.links_.size() == links && t.vertex_names_.size() == vertices, "build_cluster: counted tables");
  return t;
}

Topology build_scale_up(uint32_t gpus_per_node, const ScaleUpSpec& scale) {
  if (scale.kind != ScaleUpKind::kNvSwitch) {
    throw sim::TopologyError("build_scale_up needs scale_up.kind nvswitch");
  }
  ClusterSpec spec;
  spec.nodes = 1;
  spec.gpus_per_node = gpus_per_node;
  spec.scale_up = scale;
  return build_cluster(spec);
}

Topology build_fat_tree(uint32_t nodes, uint32_t gpus_per_node, const FatTreeSpec& fat_tree) {
  ClusterSpec spec;
  spec.nodes = nodes;
  spec.gpus_per_node = gpus_per_node;
  spec.scale_out.kind = ScaleOutKind::kFatTree;
  spec.scale_out.fat_tree = fat_tree;
  return build_cluster(spec);
}

Topology build_torus(const TorusSpec& spec) {
  const size_t nd = spec.dims.size();
  if (nd < 1 || nd > 3) {
    throw sim::TopologyError("torus has " + std::to_string(nd) + " dimensions: 1 to 3 are supported");
  }
  uint64_t chips = 1;
  for (size_t k = 0; k < nd; ++k) {
    if (spec.dims[k] == 0) {
      throw sim::TopologyError("torus dimension " + std::to_string(k) + " is 0: every dimension must be >= 1");
    }
    chips = capped_product(chips, spec.dims[k]);
  }
  if (spec.pods == 0) throw sim::TopologyError("torus pods is 0: must be >= 1");
  const uint64_t per_pod = chips;
  chips = capped_product(chips, spec.pods);
  if (chips > kMaxGpus) {
    throw sim::TopologyError("torus of " + std::to_string(chips) + " chips is larger than the supported " +
                             std::to_string(kMaxGpus));
  }
  if (spec.chips_per_host == 0) throw sim::TopologyError("torus chips_per_host is 0: must be >= 1");
  if (per_pod % spec.chips_per_host != 0) {
    throw sim::TopologyError("torus of " + std::to_string(per_pod) + " chips is not a whole number of hosts of " +
                             std::to_string(spec.chips_per_host) + " chips");
  }
  check_bandwidth(spec.link_bandwidth_Bps, "torus link_bandwidth");
  check_latency(spec.link_latency, "torus link_latency");
  if (spec.pods > 1) {
    check_bandwidth(spec.dcn_bandwidth_Bps, "torus dcn_bandwidth");
    check_latency(spec.dcn_latency, "torus dcn_latency");
  }

  Topology t;
  t.kind_ = TopologyKind::kTorus;
  t.num_gpus_ = static_cast<uint32_t>(chips);
  t.torus_pods_ = spec.pods;
  t.gpus_per_node_ = spec.chips_per_host;
  t.torus_ndims_ = static_cast<uint32_t>(nd);
  uint32_t stride = 1;
  uint32_t offset = 0;
  uint32_t slots[3] = {0, 0, 0};
  for (size_t k = 0; k < nd; ++k) {
    const uint32_t n = spec.dims[k];
    t.torus_dims_[k] = n;
    t.torus_stride_[k] = stride;
    t.torus_offset_[k] = offset;
    // Size 1: no neighbour. Size 2: + and - reach the same chip, so one link each way.
    slots[k] = n == 1 ? 0 : (n == 2 ? 1 : 2);
    offset += slots[k];
    stride *= n;
  }
  t.torus_links_per_chip_ = offset;

  for (uint32_t c = 0; c < t.num_gpus_; ++c) {
    std::string name = "chip" + std::to_string(c) + "(";
    for (size_t k = 0; k < nd; ++k) {
      if (k) name += ',';
      name += std::to_string((c / t.torus_stride_[k]) % t.torus_dims_[k]);
    }
    if (spec.pods > 1) {
      name += " pod ";
      name += std::to_string(c / per_pod);
    }
    t.add_vertex(name + ")");
  }
  t.links_.reserve(uint64_t{t.num_gpus_} * (offset + (spec.pods > 1 ? 2 : 0)));
  for (uint32_t c = 0; c < t.num_gpus_; ++c) {
    for (size_t k = 0; k < nd; ++k) {
      const uint32_t n = t.torus_dims_[k];
      const uint32_t s = t.torus_stride_[k];
      const uint32_t x = (c / s) % n;
      const uint32_t base = c - x * s;
      if (slots[k] >= 1) {
        t.add_link(c, base + ((x + 1) % n) * s, spec.link_bandwidth_Bps, spec.link_latency, LinkKind::kTorus,
                   static_cast<uint8_t>(k), false);
      }
      if (slots[k] == 2) {
        t.add_link(c, base + ((x + n - 1) % n) * s, spec.link_bandwidth_Bps, spec.link_latency, LinkKind::kTorus,
                   static_cast<uint8_t>(k), false);
      }
    }
  }
  if (spec.pods > 1) {
    const uint32_t dcn = t.add_vertex("dcn");
    t.dcn_link_base_ = static_cast<uint32_t>(t.links_.size());
    for (uint32_t c = 0; c < t.num_gpus_; ++c) {
      t.add_link(c, dcn, spec.dcn_bandwidth_Bps, spec.dcn_latency, LinkKind::kNic, 0, false);
      t.add_link(dcn, c, spec.dcn_bandwidth_Bps, spec.dcn_latency, LinkKind::kNic, 0, false);
    }
  }
  return t;
}

Topology build_edge_list(const EdgeListSpec& spec) {
  if (spec.num_gpus == 0) throw sim::TopologyError("edge list num_gpus is 0: must be >= 1");
  if (spec.gpus_per_node == 0) throw sim::TopologyError("edge list gpus_per_node is 0: must be >= 1");
  if (spec.num_gpus % spec.gpus_per_node != 0) {
    throw sim::TopologyError("edge list num_gpus " + std::to_string(spec.num_gpus) +
                             " is not a multiple of gpus_per_node " + std::to_string(spec.gpus_per_node));
  }
  if (uint64_t{spec.num_gpus} + spec.other_vertices.size() > kMaxGpus) {
    throw sim::TopologyError("edge list has too many vertices");
  }
  Topology t;
  t.kind_ = TopologyKind::kEdgeList;
  t.num_gpus_ = spec.num_gpus;
  t.gpus_per_node_ = spec.gpus_per_node;
  std::set<std::string> seen;
  for (uint32_t g = 0; g < spec.num_gpus; ++g) seen.insert(t.vertex_names_.emplace_back("gpu" + std::to_string(g)));
  for (const std::string& name : spec.other_vertices) {
    if (name.empty()) throw sim::TopologyError("edge list vertex " + std::to_string(t.num_vertices()) + " has an empty name");
    if (!seen.insert(name).second) throw sim::TopologyError("edge list vertex name '" + name + "' is used twice");
    t.add_vertex(name);
  }
  const uint32_t nv = t.num_vertices();
  for (size_t i = 0; i < spec.edges.size(); ++i) {
    const EdgeSpec& e = spec.edges[i];
    const std::string what = "edge " + std::to_string(i);
    if (e.from >= nv || e.to >= nv) {
      throw sim::TopologyError(what + " names vertex " + std::to_string(std::max(e.from, e.to)) + " but there are " +
                               std::to_string(nv) + " vertices");
    }
    if (e.from == e.to) throw sim::TopologyError(what + " connects vertex " + std::to_string(e.from) + " to itself");
    check_bandwidth(e.bandwidth_Bps, what + " bandwidth");
    check_latency(e.latency, what + " latency");
    t.add_link(e.from, e.to, e.bandwidth_Bps, e.latency, LinkKind::kCustom, 0, e.parallel);
    if (e.bidirectional) t.add_link(e.to, e.from, e.bandwidth_Bps, e.latency, LinkKind::kCustom, 0, e.parallel);
  }
  // Compressed adjacency by source and by destination (counting sort keeps link order).
  auto st = std::make_unique<Topology::EdgeListState>();
  st->out_offset.assign(nv + 1, 0);
  st->in_offset.assign(nv + 1, 0);
  for (const Link& l : t.links_) {
    ++st->out_offset[l.src + 1];
    ++st->in_offset[l.dst + 1];
  }
  for (uint32_t v = 0; v < nv; ++v) {
    st->out_offset[v + 1] += st->out_offset[v];
    st->in_offset[v + 1] += st->in_offset[v];
  }
  st->out_links.resize(t.links_.size());
  st->in_links.resize(t.links_.size());
  std::vector<uint32_t> out_fill(st->out_offset.begin(), st->out_offset.end() - 1);
  std::vector<uint32_t> in_fill(st->in_offset.begin(), st->in_offset.end() - 1);
  for (uint32_t i = 0; i < t.links_.size(); ++i) {
    st->out_links[out_fill[t.links_[i].src]++] = i;
    st->in_links[in_fill[t.links_[i].dst]++] = i;
  }
  st->dist_to.resize(spec.num_gpus);
  t.edge_list_ = std::move(st);
  return t;
}

}  // namespace topo
