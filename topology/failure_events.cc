#include "topology/failure_events.h"

#include <cstdio>
#include <unordered_map>

#include "sim/error.h"

namespace topo {

namespace {

struct Names {
  std::unordered_map<std::string, uint32_t> vertex;
  explicit Names(const Topology& t) {
    for (uint32_t v = 0; v < t.num_vertices(); ++v) vertex.emplace(t.vertex_name(v), v);
  }
  uint32_t find(const sim::ConfigNode& n, const Topology& t) const {
    const std::string name = n.as_string();
    auto it = vertex.find(name);
    if (it == vertex.end())
      n.fail("no vertex '" + name + "' in this cluster (vertices are named as `clustersim topology --dot` prints: gpu0.." +
             "gpu" + std::to_string(t.num_gpus() - 1) + ", node0.nvswitch, leaf0.rail0, spine0, ...)");
    return it->second;
  }
};

uint32_t gpu_index(const sim::ConfigNode& n, const Topology& t) {
  const int64_t g = n.as_int();
  if (g < 0 || g >= t.num_gpus())
    n.fail("GPU " + std::to_string(g) + " is outside the cluster (0.." + std::to_string(t.num_gpus() - 1) + ")");
  return static_cast<uint32_t>(g);
}

// The target of a kill or slow entry: GPUs or links, and a description.
void bind_target(const sim::ConfigNode& m, const Topology& t, const Names& names, bool slow, FailureEvent& e) {
  const char* kinds_kill = "one of gpu, node, nic, link, switch";
  const char* kinds_slow = "one of gpu, node, link";
  int given = 0;
  for (const char* k : {"gpu", "node", "nic", "link", "switch"}) given += m.has(k) ? 1 : 0;
  if (given != 1) m.fail(std::string("give exactly ") + (slow ? kinds_slow : kinds_kill));
  const auto& links = t.links();
  auto both_directions = [&](uint32_t a, uint32_t b) {
    for (uint32_t l = 0; l < links.size(); ++l)
      if ((links[l].src == a && links[l].dst == b) || (links[l].src == b && links[l].dst == a)) e.links.push_back(l);
  };
  if (auto g = m.find("gpu")) {
    e.gpus.push_back(gpu_index(*g, t));
    e.what = "GPU " + std::to_string(e.gpus[0]) + " (node " + std::to_string(t.node_of(e.gpus[0])) + ")";
  } else if (auto n = m.find("node")) {
    const int64_t node = n->as_int();
    if (node < 0 || node >= t.num_nodes())
      n->fail("node " + std::to_string(node) + " is outside the cluster (0.." + std::to_string(t.num_nodes() - 1) + ")");
    const uint32_t first = static_cast<uint32_t>(node) * t.gpus_per_node();
    for (uint32_t g = first; g < first + t.gpus_per_node(); ++g) e.gpus.push_back(g);
    e.what = "node " + std::to_string(node) + " (GPUs " + std::to_string(first) + "-" +
             std::to_string(first + t.gpus_per_node() - 1) + ")";
  } else if (auto nic = m.find("nic")) {
    if (slow) nic->fail(std::string("slow takes ") + kinds_slow);
    const uint32_t g = gpu_index(*nic, t);
    for (uint32_t l = 0; l < links.size(); ++l)
      if ((links[l].src == g || links[l].dst == g) && links[l].kind == LinkKind::kNic) e.links.push_back(l);
    if (e.links.empty()) nic->fail("GPU " + std::to_string(g) + " has no NIC link in this cluster (no fat-tree, and no data-centre network between torus pods)");
    e.what = "the NIC of GPU " + std::to_string(g);
  } else if (auto l = m.find("link")) {
    if (!l->is_sequence() || l->size() != 2) l->fail("a link is [vertex, vertex], e.g. [gpu3, leaf0.rail3]");
    const uint32_t a = names.find(l->at(0), t), b = names.find(l->at(1), t);
    both_directions(a, b);
    if (e.links.empty())
      l->fail("no link between " + t.vertex_name(a) + " and " + t.vertex_name(b) + " in this cluster");
    e.what = "the link " + t.vertex_name(a) + " <-> " + t.vertex_name(b);
  } else if (auto s = m.find("switch")) {
    if (slow) s->fail(std::string("slow takes ") + kinds_slow);
    const uint32_t v = names.find(*s, t);
    if (v < t.num_gpus()) s->fail("'" + t.vertex_name(v) + "' is a GPU, not a switch (kill it with gpu:)");
    for (uint32_t k = 0; k < links.size(); ++k)
      if (links[k].src == v || links[k].dst == v) e.links.push_back(k);
    e.what = "switch " + t.vertex_name(v) + " (" + std::to_string(e.links.size()) + " links)";
  }
}

}  // namespace

std::vector<FailureEvent> bind_failure_events(const sim::ConfigNode& events, const Topology& topo) {
  if (!events.is_sequence()) events.fail("a list of {at: TIME, kill: {...}} or {at: TIME, slow: {...}} entries");
  const Names names(topo);
  std::vector<FailureEvent> out;
  for (size_t i = 0; i < events.size(); ++i) {
    const sim::ConfigNode n = events.at(i);
    if (!n.is_map()) n.fail("an entry is {at: TIME, kill: {...}} or {at: TIME, slow: {...}}");
    FailureEvent e;
    e.at = n.get_duration("at");
    e.where = n.child("at").where();
    if (e.at < sim::Time::zero()) n.child("at").fail("a failure time cannot be negative");
    const bool kill = n.has("kill"), slow = n.has("slow");
    if (kill == slow) n.fail("give either kill: {...} or slow: {...}");
    const sim::ConfigNode m = n.child(kill ? "kill" : "slow");
    if (!m.is_map()) m.fail(kill ? "kill: {gpu: N} | {node: N} | {nic: N} | {link: [A, B]} | {switch: NAME}"
                                 : "slow: {gpu: N, factor: F, for: TIME} (or node:, link: [A, B])");
    bind_target(m, topo, names, slow, e);
    if (kill) {
      e.action = e.gpus.empty() ? FailureEvent::Action::kKillLinks : FailureEvent::Action::kKillGpus;
    } else {
      e.action = e.gpus.empty() ? FailureEvent::Action::kSlowLinks : FailureEvent::Action::kSlowGpus;
      e.factor = m.get_double("factor");
      if (!(e.factor > 1) || e.factor > 1e6)
        m.child("factor").fail("a slowdown factor is above 1 (2: half speed) and at most 1e6");
      e.duration = m.get_duration("for", sim::Time::infinite());
      if (e.duration <= sim::Time::zero()) m.child("for").fail("a slowdown lasts a positive time");
      char buf[48];
      std::snprintf(buf, sizeof buf, " slowed %gx", e.factor);
      e.what += buf;
    }
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace topo
