#include "workloads/training/recovery.h"

#include <algorithm>
#include <set>

#include "sim/error.h"

namespace wl {

Dim replica_axis(const TrainingJob& j) {
  if (j.dp_outer > 1) return Dim::kDpOuter;
  if (j.data_parallel == DataParallel::kDdp && j.dp > 1) return Dim::kDp;
  return Dim::kCount;
}

std::vector<std::vector<int32_t>> replicas_by_node(const TrainingJob& j, uint32_t gpus_per_node) {
  SIM_ASSERT(gpus_per_node >= 1 && j.world() % gpus_per_node == 0,
             "replicas_by_node: the ranks do not fill whole nodes");
  const Dim axis = replica_axis(j);
  const Layout layout({j.tp, j.cp, j.pp, j.dp, j.dp_outer}, j.order);
  std::vector<std::vector<int32_t>> out(layout.world() / gpus_per_node);
  for (uint32_t r = 0; r < layout.world(); ++r) {
    const auto replica = static_cast<int32_t>(axis == Dim::kCount ? 0 : layout.coord(r, axis));
    std::vector<int32_t>& on_node = out[r / gpus_per_node];
    if (std::find(on_node.begin(), on_node.end(), replica) == on_node.end()) on_node.push_back(replica);
  }
  for (std::vector<int32_t>& on_node : out) std::sort(on_node.begin(), on_node.end());
  return out;
}

TrainingSettings without_replicas(const TrainingSettings& ts, int64_t down) {
  TrainingSettings out = ts;
  if (down == 0) return out;
  int64_t& size = replica_axis(ts.job) == Dim::kDp ? out.job.dp : out.job.dp_outer;
  const int64_t replicas = size;
  size = replicas - down;
  out.job.global_batch = ts.job.global_batch / replicas * size;
  return out;
}

FailureSettings bind_failures(const sim::ConfigNode& f, const topo::Topology& topo, const TrainingSettings& ts,
                              uint32_t spare_nodes) {
  if (!f.is_map()) f.fail("failures: {watchdog: 10min, recovery: none|spare|elastic, events: [...]}");
  FailureSettings out;
  out.watchdog = f.get_duration("watchdog", sim::Time::sec(600));
  if (out.watchdog <= sim::Time::zero()) f.child("watchdog").fail("the watchdog timeout must be positive");
  const std::string rec = f.get_enum("recovery", {"none", "spare", "elastic"}, "none");
  out.recovery = rec == "spare" ? Recovery::kSpare : rec == "elastic" ? Recovery::kElastic : Recovery::kNone;
  if (out.recovery == Recovery::kSpare && spare_nodes == 0)
    f.child("recovery").fail("recovery: spare needs hot spare nodes: set cluster.spare_nodes (the cluster's last nodes)");
  if (out.recovery == Recovery::kElastic && replica_axis(ts.job) == Dim::kCount)
    f.child("recovery").fail(
        "recovery: elastic drops whole data-parallel replicas; this job has none to drop (it needs data_parallel: ddp "
        "with dp >= 2, or hsdp with dp_outer >= 2; ZeRO and FSDP shard the state across every dp rank)");
  out.events = topo::bind_failure_events(f.child("events"), topo);
  return out;
}

RecoveredJob recover(Recovery how, const TrainingSettings& ts, const std::vector<uint32_t>& placement,
                     const std::vector<uint32_t>& dead_gpus, const std::vector<uint32_t>& dead_links,
                     const topo::Topology& topo, uint32_t spare_nodes) {
  RecoveredJob out;
  out.ts = ts;
  out.options.failed_gpus = dead_gpus;
  out.options.failed_links = dead_links;
  const uint32_t gpn = topo.gpus_per_node();
  const uint32_t job_nodes = topo.num_nodes() - spare_nodes;
  // Failed nodes: a dead GPU, or a dead NIC link of one of its GPUs.
  std::set<uint32_t> bad_nodes;
  for (uint32_t g : dead_gpus) bad_nodes.insert(topo.node_of(g));
  for (uint32_t l : dead_links) {
    const topo::Link& k = topo.links()[l];
    if (k.kind != topo::LinkKind::kNic) continue;
    if (k.src < topo.num_gpus()) bad_nodes.insert(topo.node_of(k.src));
    if (k.dst < topo.num_gpus()) bad_nodes.insert(topo.node_of(k.dst));
  }
  const uint32_t world = static_cast<uint32_t>(ts.job.world());
  std::vector<uint32_t> gpu_of(world);
  for (uint32_t r = 0; r < world; ++r) gpu_of[r] = placement.empty() ? r : placement[r];
  if (how == Recovery::kNone) {
    out.impossible = "no recovery configured (failures.recovery: none)";
    return out;
  }
  if (bad_nodes.empty()) {
    out.options.gpu_of_rank = gpu_of;
    out.change = "no node failed (only links or switches): the job restarts where it was, with the dead links down "
                 "(routes are static here: one that crosses a dead link hangs again)";
    return out;
  }
  if (how == Recovery::kSpare) {
    std::vector<uint32_t> spares;
    for (uint32_t n = job_nodes; n < topo.num_nodes(); ++n)
      if (!bad_nodes.count(n)) spares.push_back(n);
    std::vector<uint32_t> used;
    for (uint32_t n : bad_nodes) {
      bool hosts_ranks = false;
      for (uint32_t g : gpu_of) hosts_ranks = hosts_ranks || topo.node_of(g) == n;
      if (hosts_ranks) used.push_back(n);
    }
    if (used.size() > spares.size()) {
      out.impossible = std::to_string(used.size()) + " failed node(s) hold ranks but only " + std::to_string(spares.size()) +
                       " spare node(s) are left (cluster.spare_nodes = " + std::to_string(spare_nodes) + ")";
      return out;
    }
    for (size_t i = 0; i < used.size(); ++i) {
      for (uint32_t& g : gpu_of)
        if (topo.node_of(g) == used[i]) g = spares[i] * gpn + g % gpn;
      out.change += std::string(out.change.empty() ? "" : "; ") + "the ranks of node " + std::to_string(used[i]) +
                    " moved to spare node " + std::to_string(spares[i]);
    }
    out.options.gpu_of_rank = gpu_of;
    return out;
  }
  // Elastic: drop every replica that has a rank on a failed node.
  const TrainingJob& j = ts.job;
  const Dim axis = replica_axis(j);
  const Layout old_layout({j.tp, j.cp, j.pp, j.dp, j.dp_outer}, j.order);
  std::set<uint32_t> dropped;
  for (uint32_t r = 0; r < world; ++r)
    if (bad_nodes.count(topo.node_of(gpu_of[r]))) dropped.insert(old_layout.coord(r, axis));
  const int64_t replicas = old_layout.size(axis);
  const int64_t left = replicas - static_cast<int64_t>(dropped.size());
  if (left < 1) {
    out.impossible = "every data-parallel replica lost a node: none is left to go on with";
    return out;
  }
  std::vector<uint32_t> kept;
  for (uint32_t c = 0; c < replicas; ++c)
    if (!dropped.count(c)) kept.push_back(c);
  out.ts = without_replicas(ts, static_cast<int64_t>(dropped.size()));
  const TrainingJob& nj = out.ts.job;
  const Layout new_layout({nj.tp, nj.cp, nj.pp, nj.dp, nj.dp_outer}, nj.order);
  std::vector<uint32_t> new_gpu(new_layout.world());
  for (uint32_t r = 0; r < new_layout.world(); ++r) {
    // Same coordinates, the replica coordinate mapped to the kept replica it now is.
    uint64_t old_rank = 0;
    for (size_t d = 0; d < kNumDims; ++d) {
      const Dim dim = static_cast<Dim>(d);
      uint32_t c = new_layout.coord(r, dim);
      if (dim == axis) c = kept[c];
      old_rank += static_cast<uint64_t>(c) * old_layout.stride(dim);
    }
    new_gpu[r] = gpu_of[old_rank];
  }
  out.options.gpu_of_rank = std::move(new_gpu);
  std::string which;
  for (uint32_t c : dropped) which += (which.empty() ? "" : ", ") + std::to_string(c);
  out.change = "dropped data-parallel replica(s) " + which + " of " + std::to_string(replicas) + " (" +
               std::string(dim_name(axis)) + "); " + std::to_string(left) + " go on with a global batch of " +
               std::to_string(nj.global_batch) + " sequences instead of " + std::to_string(j.global_batch) +
               ". This changes the training: a smaller batch per step, so another effective learning-rate schedule";
  return out;
}

}  // namespace wl
