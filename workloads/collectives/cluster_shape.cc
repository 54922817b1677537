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
    shape.torus_pods = topo.torus_pods();
  }
  return shape;
}

ClusterShape cluster_shape_of(const topo::ClusterResources& res) { return cluster_shape_of(res.topology(), res.profile()); }

ClusterShape cluster_shape_of(const topo::Topology& topo, const topo::HardwareProfile& profile) {
  ClusterShape shape = cluster_shape_of(topo);
  if (profile.nvls_efficiency <= 0.0 || topo.kind() != topo::TopologyKind::kCluster || topo.gpus_per_node() < 2)
    return shape;
  for (const auto& l : topo.links()) {
    if (l.kind == topo::LinkKind::kScaleUp) {
      shape.nvls = true;  // the nodes have an NVSwitch
      break;
    }
  }
  return shape;
}

RuntimeOptions runtime_options_for(const topo::ClusterResources& res) {
  return runtime_options_for(res.gpu_spec(), res.profile());
}

RuntimeOptions runtime_options_for(const topo::GpuSpec& gpu, const topo::HardwareProfile& p) {
  RuntimeOptions ro;
  ro.step_overhead = p.step_overhead;
  CommCosts& c = ro.costs;
  c.ll.enabled = topo::protocol_enabled(p, "LL");
  c.ll128.enabled = topo::protocol_enabled(p, "LL128");
  c.simple.enabled = topo::protocol_enabled(p, "Simple");
  c.ll.launch_s = p.ll_launch.seconds();
  c.ll128.launch_s = p.ll128_launch.seconds();
  c.simple.launch_s = p.simple_launch.seconds();
  c.ll.step_s = p.ll_step_overhead.seconds();
  c.ll128.step_s = p.ll128_step_overhead.seconds();
  c.simple.step_s = p.step_overhead.seconds();
  c.ll.max_busbw_Bps = p.ll_max_bandwidth;
  // Channel thresholds: threads x bytes per thread, NCCL's defaults (src/include/device.h: LL 512
  // threads, LL128 640, Simple 512; `threadThresholds 8/8/64 | 64/8/64` in NCCL's INFO log on
  // 8 GPUs: ring LL 8 x nRanks, LL128 8, Simple 64 bytes per thread).
  c.ll.channel_bytes = 512.0 * 8.0;
  c.ll.channel_bytes_per_rank = true;
  c.ll128.channel_bytes = 640.0 * 8.0;
  c.simple.channel_bytes = 512.0 * 64.0;
  c.channels = p.nccl_channels;
  c.nvls_efficiency = p.nvls_efficiency;
  c.nvls_launch_s = p.nvls_latency.seconds();
  c.nvls_channels = p.nvls_channels;
  c.nvls_chunk_bytes = p.nvls_chunk;
  ro.scale_up_Bps = gpu.scale_up_bandwidth_Bps;
  return ro;
}

CostHints cost_hints_for(const topo::ClusterResources& res, const RuntimeOptions& opt) {
  return cost_hints_for(res.topology(), res.gpu_spec(), res.profile(), opt);
}

CostHints cost_hints_for(const topo::Topology& topo, const topo::GpuSpec& gpu, const topo::HardwareProfile& o,
                         const RuntimeOptions& opt) {
  CostHints h;
  h.costs = opt.costs;
  h.costs.simple.step_s = opt.step_overhead.seconds();
  h.scale_up_Bps = opt.scale_up_Bps;
  h.intra_node_Bps = gpu.scale_up_bandwidth_Bps * o.scale_up_efficiency;
  double inter = 0;
  double custom = 0;  // an edge list's links out of an accelerator's node (a DiLoCo gateway's WAN link)
  const bool torus = topo.kind() == topo::TopologyKind::kTorus;
  const auto& links = topo.links();
  const uint32_t gpn = std::max<uint32_t>(1, topo.gpus_per_node());
  for (uint32_t i = 0; i < links.size(); ++i) {
    const auto& l = links[i];
    // A torus's NIC links are its DCN links between pods: their own hint, below.
    if (l.kind == topo::LinkKind::kNic && !torus) inter = std::max(inter, l.bandwidth_Bps * o.nic_efficiency);
    if (l.kind == topo::LinkKind::kNic && torus) h.dcn_Bps = std::max(h.dcn_Bps, l.bandwidth_Bps * o.nic_efficiency);
    if (l.kind == topo::LinkKind::kTorus) inter = std::max(inter, l.bandwidth_Bps * o.torus_efficiency);
    const bool inside_node = l.dst < topo.num_gpus() && l.dst / gpn == l.src / gpn;
    if (l.kind == topo::LinkKind::kCustom && l.src < topo.num_gpus() && !inside_node)
      custom = std::max(custom, ::topo::link_capacity(l, o));
  }
  if (inter <= 0) inter = custom;
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
  if (torus && topo.torus_pods() > 1) {  // chip 0 to the first chip of pod 1: up to the DCN and down
    topo.route(0, n / topo.torus_pods(), 0, r);
    h.dcn_step_s = opt.step_overhead.seconds() + r.latency.seconds();
  }
  return h;
}

}  // namespace wl
