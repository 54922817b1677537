// topology/topology.cc: Topology members: routing, validation (Boost.Graph), DOT export, summary.
// The builders live in builders.cc.
#include "topology/topology.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/graphviz.hpp>

#include "sim/error.h"
#include "sim/units.h"
#include "topology/topology_internal.h"

namespace topo {

const char* to_string(LinkKind kind) {
  switch (kind) {
    case LinkKind::kScaleUp: return "scale-up";
    case LinkKind::kNic: return "nic";
    case LinkKind::kFabric: return "fabric";
    case LinkKind::kTorus: return "torus";
    case LinkKind::kCustom: return "custom";
  }
  return "?";
}

Topology::Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;
Topology::~Topology() = default;

uint32_t Topology::add_vertex(std::string name) {
  vertex_names_.push_back(std::move(name));
  return static_cast<uint32_t>(vertex_names_.size() - 1);
}

bool Topology::extends_last_run(uint32_t l, sim::Time latency) {
  if (latency_runs_.empty()) return false;
  // The last run reaches the link before l.
  LatencyRun& run = latency_runs_.back();
  const uint32_t offset = l - run.first;
  if (offset == 1) {  // the run's second link sets its odd positions' latency
    run.odd = latency;
    return true;
  }
  return (offset % 2 == 0 ? run.even : run.odd) == latency;
}

uint32_t Topology::add_link(uint32_t src, uint32_t dst, double bandwidth_Bps, sim::Time latency, LinkKind kind,
                            uint8_t tier, bool parallel) {
  links_.push_back(Link{src, dst, bandwidth_Bps, latency, kind, tier, parallel});
  const auto l = static_cast<uint32_t>(links_.size() - 1);
  if (!latency_by_run_) {
    link_latency_.push_back(latency);
  } else if (!extends_last_run(l, latency)) {
    if (latency_runs_.size() < kMaxLatencyRuns) {
      latency_runs_.push_back(LatencyRun{l, latency, latency});
    } else {
      // Latencies vary link by link: route() reads one per link from now on.
      latency_by_run_ = false;
      latency_runs_.clear();
      link_latency_.reserve(links_.capacity());
      for (const Link& k : links_) link_latency_.push_back(k.latency);
    }
  }
  return l;
}

// ---------------------------------------------------------------- routing

void Topology::route(uint32_t src_gpu, uint32_t dst_gpu, uint64_t flow_hash, Route& out) const {
  out.clear();
  if (src_gpu >= num_gpus_ || dst_gpu >= num_gpus_) {
    throw sim::TopologyError("route from gpu " + std::to_string(src_gpu) + " to gpu " + std::to_string(dst_gpu) +
                             ": the topology has " + std::to_string(num_gpus_) + " GPUs");
  }
  if (src_gpu == dst_gpu) return;
  switch (kind_) {
    case TopologyKind::kCluster: route_cluster(src_gpu, dst_gpu, flow_hash, out); break;
    case TopologyKind::kTorus: route_torus(src_gpu, dst_gpu, out); break;
    case TopologyKind::kEdgeList: route_edge_list(src_gpu, dst_gpu, flow_hash, out); break;
  }
  sim::Time total = sim::Time::zero();
  if (latency_by_run_)
    for (uint32_t l : out.links) {
      // The last run starting at or before l (runs are few and sorted by their first link).
      size_t i = latency_runs_.size() - 1;
      while (latency_runs_[i].first > l) --i;
      const LatencyRun& run = latency_runs_[i];
      total += (l - run.first) % 2 == 0 ? run.even : run.odd;
    }
  else
    for (uint32_t l : out.links) total += link_latency_[l];
  out.latency = total;
}

void Topology::route_cluster(uint32_t s, uint32_t d, uint64_t flow_hash, Route& out) const {
  const uint32_t g = gpus_per_node_;
  if (has_scale_up_ && s / g == d / g) {
    out.links.push_back(su_link_base_ + 2 * s);
    out.links.push_back(su_link_base_ + 2 * d + 1);
    return;
  }
  SIM_ASSERT(has_fat_tree_, "cluster builder admitted GPUs on different nodes without a scale-out fabric");
  const uint32_t r = rails_;
  const uint32_t leaf_group_size = tiers_[0].group_size;
  auto leaf_of = [&](uint32_t gpu) { return (gpu / g / leaf_group_size) * r + (gpu % g) % r; };
  // Tier-k parent of child c of tier k-1; leaves are numbered (group * rails + rail).
  auto parent = [&](size_t k, uint32_t c) { return (k == 1 ? c / r : c) / tiers_[k].group_size; };

  out.links.push_back(nic_link_base_ + 2 * s);
  uint32_t cs = leaf_of(s);
  uint32_t cd = leaf_of(d);
  if (cs != cd) {
    // D-mod-K key: the destination's position within its rail plane, so that the GPUs of one
    // rail (which share a leaf) spread across parallel uplinks instead of all mapping to one.
    const uint32_t per_rail = (g + r - 1) / r;
    const uint64_t key = uint64_t{d / g} * per_rail + (d % g) / r;
    uint32_t down[kMaxTiers];
    size_t n_down = 0;
    for (size_t k = 1; k < tiers_.size(); ++k) {
      const TierLayout& t = tiers_[k];
      uint32_t p = 0;
      if (t.uplinks > 1) {
        p = uplink_policy_ == UplinkPolicy::kDModK
                ? static_cast<uint32_t>(key % t.uplinks)
                : static_cast<uint32_t>(detail::mix64(flow_hash ^ (0x9E3779B97F4A7C15ull * k)) % t.uplinks);
      }
      out.links.push_back(t.link_base + 2 * (cs * t.uplinks + p));
      down[n_down++] = t.link_base + 2 * (cd * t.uplinks + p) + 1;
      const uint32_t ps = parent(k, cs);
      const uint32_t pd = parent(k, cd);
      if (ps == pd) break;
      cs = ps;
      cd = pd;
    }
    while (n_down > 0) out.links.push_back(down[--n_down]);
  }
  out.links.push_back(nic_link_base_ + 2 * d + 1);
}

Topology::FabricSpan Topology::fabric_span(uint32_t link) const {
  SIM_ASSERT(has_fat_tree_ && link < links_.size() && links_[link].kind == LinkKind::kFabric,
             "fabric_span of a link that is not a fat-tree fabric link");
  const size_t k = links_[link].tier;
  SIM_ASSERT(k >= 1 && k < tiers_.size(), "fabric link of an unknown tier");
  const uint32_t at = link - tiers_[k].link_base;
  const uint32_t c = at / 2 / tiers_[k].uplinks;
  FabricSpan out;
  out.up = at % 2 == 0;
  uint64_t group = 1;  // nodes per vertex of tier k - 1
  for (size_t t = 0; t < k; ++t) group *= tiers_[t].group_size;
  const uint64_t block = k == 1 ? c / rails_ : c;
  const uint64_t first = block * group, nodes = num_gpus_ / gpus_per_node_;
  out.first_node = static_cast<uint32_t>(std::min<uint64_t>(first, nodes));
  out.num_nodes = static_cast<uint32_t>(std::min<uint64_t>(group, nodes - out.first_node));
  out.full_nodes = static_cast<uint32_t>(std::min<uint64_t>(group, UINT32_MAX));
  for (size_t t = 1; t <= k; ++t) out.unique_up = out.unique_up && tiers_[t].uplinks == 1;
  return out;
}

uint32_t Topology::fabric_link_shifted(uint32_t link, int64_t nodes) const {
  const FabricSpan span = fabric_span(link);
  if (nodes % static_cast<int64_t>(span.full_nodes) != 0) return kNoLink;
  const int64_t first = static_cast<int64_t>(span.first_node) + nodes;
  if (first < 0 || first >= static_cast<int64_t>(num_gpus_ / gpus_per_node_)) return kNoLink;
  const size_t k = links_[link].tier;
  const uint32_t at = link - tiers_[k].link_base;
  const int64_t blocks = nodes / static_cast<int64_t>(span.full_nodes);
  const int64_t c = static_cast<int64_t>(at / 2 / tiers_[k].uplinks) + blocks * (k == 1 ? rails_ : 1);
  if (c < 0 || c >= tiers_[k - 1].num_vertices) return kNoLink;
  return tiers_[k].link_base +
         2 * (static_cast<uint32_t>(c) * tiers_[k].uplinks + at / 2 % tiers_[k].uplinks) + at % 2;
}

void Topology::route_torus(uint32_t s, uint32_t d, Route& out) const {
  if (torus_pods_ > 1) {
    const uint32_t per_pod = num_gpus_ / torus_pods_;
    if (s / per_pod != d / per_pod) {  // another pod: up to the DCN switch and down
      out.links.push_back(dcn_link_base_ + 2 * s);
      out.links.push_back(dcn_link_base_ + 2 * d + 1);
      return;
    }
  }
  uint32_t cur = s;
  for (uint32_t k = 0; k < torus_ndims_; ++k) {
    const uint32_t n = torus_dims_[k];
    const uint32_t stride = torus_stride_[k];
    const uint32_t xs = (cur / stride) % n;
    const uint32_t xd = (d / stride) % n;
    const uint32_t delta = (xd + n - xs) % n;  // steps in the positive direction
    if (delta == 0) continue;
    if (n == 2) {  // one link each way between the pair
      out.links.push_back(cur * torus_links_per_chip_ + torus_offset_[k]);
      cur = xs == 0 ? cur + stride : cur - stride;
      continue;
    }
    const bool positive = delta <= n - delta;  // ties go the positive way
    const uint32_t steps = positive ? delta : n - delta;
    uint32_t x = xs;
    for (uint32_t i = 0; i < steps; ++i) {
      out.links.push_back(cur * torus_links_per_chip_ + torus_offset_[k] + (positive ? 0 : 1));
      const uint32_t nx = positive ? (x + 1 == n ? 0 : x + 1) : (x == 0 ? n - 1 : x - 1);
      cur = cur - x * stride + nx * stride;
      x = nx;
    }
  }
  SIM_ASSERT(cur == d, "torus dimension-order route did not end at the destination");
}

void Topology::route_edge_list(uint32_t s, uint32_t d, uint64_t flow_hash, Route& out) const {
  EdgeListState& st = *edge_list_;
  const std::vector<uint32_t>* dist = nullptr;
  {
    std::lock_guard<std::mutex> lock(st.mutex);
    std::vector<uint32_t>& cached = st.dist_to[d];
    if (cached.empty()) {
      // Backwards BFS from d over incoming links: cached[v] = hops from v to d.
      cached.assign(vertex_names_.size(), detail::kUnreached);
      std::vector<uint32_t> queue;
      queue.reserve(vertex_names_.size());
      cached[d] = 0;
      queue.push_back(d);
      for (size_t head = 0; head < queue.size(); ++head) {
        const uint32_t v = queue[head];
        for (uint32_t i = st.in_offset[v]; i < st.in_offset[v + 1]; ++i) {
          const uint32_t u = links_[st.in_links[i]].src;
          if (cached[u] == detail::kUnreached) {
            cached[u] = cached[v] + 1;
            queue.push_back(u);
          }
        }
      }
    }
    dist = &cached;  // never reallocated again: the outer vector is sized once at build
  }
  const std::vector<uint32_t>& h = *dist;
  if (h[s] == detail::kUnreached) {
    throw sim::TopologyError("no path from " + vertex_names_[s] + " to " + vertex_names_[d] + " in the edge list");
  }
  uint32_t cur = s;
  while (cur != d) {
    // Candidates: out links one hop closer to d. ECMP: pick one by hashing (flow, vertex) so
    // that a flow keeps its path and different flows spread.
    uint32_t n = 0;
    for (uint32_t i = st.out_offset[cur]; i < st.out_offset[cur + 1]; ++i) {
      if (h[links_[st.out_links[i]].dst] + 1 == h[cur]) ++n;
    }
    SIM_ASSERT(n > 0, "BFS distances admit no next hop");
    uint32_t pick = n == 1 ? 0 : static_cast<uint32_t>(detail::mix64(flow_hash ^ (uint64_t{cur} << 32)) % n);
    for (uint32_t i = st.out_offset[cur]; i < st.out_offset[cur + 1]; ++i) {
      const uint32_t l = st.out_links[i];
      if (h[links_[l].dst] + 1 != h[cur]) continue;
      if (pick-- == 0) {
        out.links.push_back(l);
        cur = links_[l].dst;
        break;
      }
    }
  }
}

// ---------------------------------------------------------------- validation and export

namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS, boost::no_property, uint32_t>;
using CsrGraph = boost::compressed_sparse_row_graph<boost::directedS, boost::no_property, boost::no_property,
                                                    boost::no_property, uint32_t, uint32_t>;

Graph make_graph(const Topology& t) {
  Graph g(t.num_vertices());
  const auto& links = t.links();
  for (uint32_t i = 0; i < links.size(); ++i) boost::add_edge(links[i].src, links[i].dst, i, g);
  return g;
}

template <class G>
std::vector<bool> reachable_from(const G& g, uint32_t start, size_t n) {
  std::vector<boost::default_color_type> color(n, boost::white_color);
  auto cmap = boost::make_iterator_property_map(color.begin(), boost::get(boost::vertex_index, g));
  boost::breadth_first_search(g, start, boost::color_map(cmap));
  std::vector<bool> seen(n);
  for (size_t v = 0; v < n; ++v) seen[v] = color[v] != boost::white_color;
  return seen;
}

std::string format_Bps(double bps) {
  char buf[64];
  if (bps >= 1e12) {
    std::snprintf(buf, sizeof buf, "%.3g TB/s", bps / 1e12);
  } else {
    std::snprintf(buf, sizeof buf, "%.4g GB/s", bps / 1e9);
  }
  return buf;
}

std::string format_time(sim::Time t) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3g us", t.microseconds());
  return buf;
}

std::string dot_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r;
}

}  // namespace

void Topology::validate() const {
  const size_t n = vertex_names_.size();
  auto vname = [&](uint32_t v) { return "'" + vertex_names_[v] + "'"; };
  for (uint32_t i = 0; i < links_.size(); ++i) {
    const Link& l = links_[i];
    const bool bad = l.src >= n || l.dst >= n || l.src == l.dst || !(l.bandwidth_Bps > 0) ||
                     !std::isfinite(l.bandwidth_Bps) || l.latency < sim::Time::zero();
    if (!bad) continue;  // the message is built only for a bad link
    const std::string which = "link " + std::to_string(i);
    if (l.src >= n || l.dst >= n) throw sim::TopologyError(which + " names a vertex that does not exist");
    if (l.src == l.dst) throw sim::TopologyError(which + " connects " + vname(l.src) + " to itself");
    if (!(l.bandwidth_Bps > 0) || !std::isfinite(l.bandwidth_Bps)) {
      throw sim::TopologyError(which + " from " + vname(l.src) + " to " + vname(l.dst) + " has bandwidth " +
                               std::to_string(l.bandwidth_Bps) + " B/s: must be positive and finite");
    }
    if (l.latency < sim::Time::zero()) {
      throw sim::TopologyError(which + " from " + vname(l.src) + " has negative latency");
    }
  }
  // Duplicates: equal (src, dst, kind) links are allowed only if both are declared parallel. The
  // links are grouped by source with a counting sort (sequential passes), then each source's few
  // links are sorted by (dst, kind): at 131k GPUs half a million links, where one sort of them all
  // was a fifth of set-up.
  std::vector<uint32_t> first(n + 1, 0);  // first[v]: where source v's links start in by_src
  for (const Link& l : links_) ++first[l.src + 1];
  for (size_t v = 0; v < n; ++v) first[v + 1] += first[v];
  std::vector<uint32_t> by_src(links_.size());
  {
    std::vector<uint32_t> next(first.begin(), first.end() - 1);
    for (uint32_t i = 0; i < links_.size(); ++i) by_src[next[links_[i].src]++] = i;  // in link order
  }
  auto key = [&](uint32_t i) { return std::make_pair(links_[i].dst, links_[i].kind); };
  for (size_t v = 0; v < n; ++v) {
    const auto b = by_src.begin() + first[v], e = by_src.begin() + first[v + 1];
    std::sort(b, e, [&](uint32_t x, uint32_t y) { return key(x) != key(y) ? key(x) < key(y) : x < y; });
    for (auto it = b; it != e && it + 1 != e; ++it) {
      const uint32_t a = *it, c = *(it + 1);
      if (key(a) == key(c) && !(links_[a].parallel && links_[c].parallel)) {
        throw sim::TopologyError("duplicate " + std::string(to_string(links_[c].kind)) + " link from " +
                                 vname(links_[c].src) + " to " + vname(links_[c].dst) + " (links " + std::to_string(a) +
                                 " and " + std::to_string(c) + "): declare them parallel if intended");
      }
    }
  }
  if (num_gpus_ > 1) {
    std::vector<uint32_t> in(n, 0), out(n, 0);
    for (const Link& l : links_) {
      ++out[l.src];
      ++in[l.dst];
    }
    for (uint32_t v = 0; v < n; ++v) {
      if (out[v] == 0 || in[v] == 0) {
        throw sim::TopologyError("vertex " + vname(v) + " has in-degree " + std::to_string(in[v]) + " and out-degree " +
                                 std::to_string(out[v]) + ": every vertex needs both");
      }
    }
    // GPU 0 reaches every GPU and every GPU reaches GPU 0, so all GPUs reach each other. The
    // graphs are compressed sparse rows (two arrays, no per-vertex lists: 131k GPUs' half a
    // million links in a few MB).
    std::vector<std::pair<uint32_t, uint32_t>> edges;
    edges.reserve(links_.size());
    for (const Link& l : links_) edges.emplace_back(l.src, l.dst);
    const std::vector<bool> fwd = reachable_from(CsrGraph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), n), 0, n);
    for (auto& e : edges) std::swap(e.first, e.second);
    const std::vector<bool> bwd = reachable_from(CsrGraph(boost::edges_are_unsorted_multi_pass, edges.begin(), edges.end(), n), 0, n);
    for (uint32_t v = 0; v < num_gpus_; ++v) {
      if (!fwd[v]) throw sim::TopologyError("disconnected: no path from " + vname(0) + " to " + vname(v));
      if (!bwd[v]) throw sim::TopologyError("disconnected: no path from " + vname(v) + " to " + vname(0));
    }
  }
}

std::string Topology::to_dot() const {
  const Graph g = make_graph(*this);
  std::ostringstream os;
  boost::write_graphviz(
      os, g,
      [&](std::ostream& o, Graph::vertex_descriptor v) {
        o << "[label=\"" << dot_escape(vertex_names_[v]) << "\"" << (v < num_gpus_ ? ",shape=box" : "") << "]";
      },
      [&](std::ostream& o, Graph::edge_descriptor e) {
        const Link& l = links_[g[e]];
        o << "[label=\"" << format_Bps(l.bandwidth_Bps) << "\",kind=\"" << to_string(l.kind) << "\"]";
      });
  return os.str();
}

std::string Topology::describe() const {
  std::ostringstream os;
  const size_t other = vertex_names_.size() - num_gpus_;
  switch (kind_) {
    case TopologyKind::kCluster: {
      os << "Cluster of " << sim::count_noun(num_gpus_, "GPU", "GPUs") << " in "
         << sim::count_noun(num_nodes(), "node", "nodes") << " of " << gpus_per_node_ << ".";
      if (has_scale_up_) {
        os << " Scale-up: one NVSwitch per node, " << format_Bps(su_bandwidth_Bps_) << " per GPU per direction, "
           << format_time(links_[su_link_base_].latency) << " per link.";
      }
      if (has_fat_tree_) {
        os << " Scale-out fat-tree: " << format_Bps(nic_bandwidth_Bps_) << " NIC per GPU, " << rails_ << " rail"
           << (rails_ > 1 ? "s" : "") << ", NIC up/down latency " << format_time(links_[nic_link_base_].latency) << "/"
           << format_time(links_[nic_link_base_ + 1].latency) << ", " << tiers_.size() << " tier"
           << (tiers_.size() > 1 ? "s" : "") << ":";
        for (size_t k = 0; k < tiers_.size(); ++k) {
          const TierLayout& t = tiers_[k];
          os << (k ? ";" : "") << " " << t.name << " "
             << sim::count_noun(t.num_vertices, "switch vertex", "switch vertices") << " (";
          if (t.group_size == 1)
            os << "one child each)";
          else
            os << "groups of up to " << t.group_size << ")";
          if (k > 0) {
            double up = 0;
            const uint32_t first = t.link_base;
            const uint32_t count = tiers_[k - 1].num_vertices * t.uplinks;
            for (uint32_t i = 0; i < count; ++i) up += links_[first + 2 * i].bandwidth_Bps;
            char ratio[32];
            std::snprintf(ratio, sizeof ratio, "1:%g", t.oversubscription);
            os << ", oversubscription " << ratio << ", " << t.uplinks << " uplink" << (t.uplinks > 1 ? "s" : "")
               << " per child, capacity into it " << format_Bps(up) << " per direction";
          }
        }
        os << ".";
      }
      break;
    }
    case TopologyKind::kTorus: {
      const uint32_t per_pod = num_gpus_ / torus_pods_;
      if (torus_pods_ > 1) os << torus_pods_ << " pods, each a torus ";
      else os << "Torus ";
      for (uint32_t k = 0; k < torus_ndims_; ++k) os << (k ? "x" : "") << torus_dims_[k];
      os << " of " << per_pod << " chips (" << gpus_per_node_ << " per host), wraparound in every dimension";
      // Bisection: cut the largest dimension in half; each ring along it crosses the cut twice
      // (once if the dimension has size 2).
      uint32_t kmax = 0;
      for (uint32_t k = 1; k < torus_ndims_; ++k) {
        if (torus_dims_[k] > torus_dims_[kmax]) kmax = k;
      }
      const uint32_t nmax = torus_dims_[kmax];
      if (nmax > 1 && !links_.empty()) {
        const double rings = static_cast<double>(per_pod) / nmax;
        const double cut = rings * (nmax == 2 ? 1 : 2) * links_[0].bandwidth_Bps;
        os << ", " << format_Bps(links_[0].bandwidth_Bps) << " and " << format_time(links_[0].latency)
           << " per link per direction; bisection "
           << format_Bps(cut) << " per direction";
      }
      if (torus_pods_ > 1) {
        const Link& dcn = links_[dcn_link_base_];
        os << "; the pods joined by the data-centre network (DCN), " << format_Bps(dcn.bandwidth_Bps) << " and "
           << format_time(dcn.latency) << " per chip per direction to and from one non-blocking DCN switch ("
           << format_Bps(dcn.bandwidth_Bps * per_pod) << " per pod)";
      }
      os << ".";
      break;
    }
    case TopologyKind::kEdgeList:
      os << "Edge list of " << num_gpus_ << " GPUs (" << gpus_per_node_ << " per node) and " << other
         << " other vertices; routes are BFS shortest hops with ECMP by flow hash.";
      break;
  }
  uint64_t by_kind[5] = {0, 0, 0, 0, 0};
  for (const Link& l : links_) ++by_kind[static_cast<int>(l.kind)];
  os << " " << sim::count_noun(vertex_names_.size(), "vertex", "vertices") << " (" << other << " switch or other), "
     << sim::count_noun(links_.size(), "directed link", "directed links");
  bool first = true;
  for (int k = 0; k < 5; ++k) {
    if (!by_kind[k]) continue;
    os << (first ? " (" : ", ") << by_kind[k] << " " << to_string(static_cast<LinkKind>(k));
    first = false;
  }
  os << (first ? "." : ").");
  return os.str();
}

}  // namespace topo
