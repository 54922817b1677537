#include "workloads/collectives/cluster_shape.h"

#include <algorithm>

namespace wl {

ClusterShape cluster_shape_of(const topo::Topology& topo) {
  ClusterShape shape;
  shape.gpus_per_node = topo.gpus_per_node();
  shape.nics_per_node = topo.gpus_per_node();  // one NIC per GPU in every catalog node
  if (topo.kind() == topo::TopologyKind::kTorus) {
    shape.torus = true;
    shape.torus_dims = topo.torus_dims();
  }
  return shape;
}

CostHints cost_hints_for(const topo::ClusterResources& res, const RuntimeOptions& opt) {
  CostHints h;
  const auto& topo = res.topology();
  const auto& o = res.profile();
  h.intra_node_Bps = res.gpu_spec().scale_up_bandwidth_Bps * o.scale_up_efficiency;
  double inter = 0;
  for (const auto& l : topo.links()) {
    if (l.kind == topo::LinkKind::kNic) inter = std::max(inter, l.bandwidth_Bps * o.nic_efficiency);
    if (l.kind == topo::LinkKind::kTorus) inter = std::max(inter, l.bandwidth_Bps * o.torus_efficiency);
  }
  if (inter > 0) h.inter_node_Bps = inter;
  if (topo.gpus_per_node() == 1 || h.intra_node_Bps <= 0) h.intra_node_Bps = h.inter_node_Bps;
  // One step: software overhead plus a typical route (two links inside a node; NIC, leaf, NIC across).
  topo::Route r;
  uint32_t n = topo.num_gpus();
  h.intra_step_s = opt.step_overhead.seconds();
  h.inter_step_s = opt.step_overhead.seconds();
  if (topo.gpus_per_node() > 1 && n > 1) {
    topo.route(0, 1, 0, r);
    h.intra_step_s += r.latency.seconds();
  }
  if (topo.num_nodes() > 1) {
    topo.route(0, topo.gpus_per_node(), 0, r);
    h.inter_step_s += r.latency.seconds();
  }
  return h;
}

}  // namespace wl
