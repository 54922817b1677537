#include "topology/cluster_config.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include "sim/error.h"
#include "sim/units.h"

namespace topo {

namespace {

// A rate the user wrote outside what hardware of its kind offers: allowed (a what-if), but said,
// since it is more often a unit slip (Mbps for Gbps, Gbps for GB/s) than a design.
// `bits`: the kind's rates are quoted in bits per second (NICs), else in bytes (NVLink).
void warn_rate(const sim::ConfigNode& map, const char* key, double Bps, double lo_Bps, double hi_Bps,
               const char* what, bool bits) {
  if (!map.has(key) || (Bps >= lo_Bps && Bps <= hi_Bps)) return;
  auto rate = [bits](double v) {
    if (!bits) return sim::format_bandwidth(v);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g Gb/s", v * 8 / 1e9);
    return std::string(buf);
  };
  map.child(key).warn(sim::format_bandwidth(Bps) + (bits ? " (" + rate(Bps) + ")" : std::string()) +
                      " is outside what " + what + " (" + rate(lo_Bps) + " to " + rate(hi_Bps) +
                      "); a unit slip? (Gbps is gigabits per second, GB/s gigabytes)");
}

// A key that moved into `cluster.profile`: a clear error instead of "unknown key".
void moved_to_profile(const sim::ConfigNode& n, const char* key, const char* profile_key) {
  n.refuse_moved(key, std::string("link latencies, efficiencies and communication settings are the hardware "
                                  "profile's; set cluster.profile.") +
                          profile_key);
}

GpuSpec bind_gpu(const sim::ConfigNode& cluster) {
  auto node = cluster.child("gpu");
  if (node.is_scalar()) {
    try {
      return find_gpu(node.as_string());
    } catch (const sim::TopologyError& e) {
      node.fail(e.what());
    }
  }
  if (!node.is_map()) node.fail("expected a catalog name (e.g. h100-sxm) or a map with 'preset' and overrides");
  GpuSpec g;
  try {
    g = find_gpu(node.get_string("preset"));
  } catch (const sim::TopologyError& e) {
    node.child("preset").fail(e.what());
  }
  g.peak_bf16_flops = node.get_flop_rate("peak_bf16", g.peak_bf16_flops);
  g.peak_fp16_flops = node.get_flop_rate("peak_fp16", g.peak_fp16_flops);
  g.peak_fp8_flops = node.get_flop_rate("peak_fp8", g.peak_fp8_flops);
  g.peak_tf32_flops = node.get_flop_rate("peak_tf32", g.peak_tf32_flops);
  g.peak_fp32_flops = node.get_flop_rate("peak_fp32", g.peak_fp32_flops);
  g.hbm_capacity_bytes = static_cast<uint64_t>(node.get_bytes("hbm_capacity", static_cast<double>(g.hbm_capacity_bytes)));
  g.hbm_bandwidth_Bps = node.get_bandwidth("hbm_bandwidth", g.hbm_bandwidth_Bps);
  g.sm_count = static_cast<uint32_t>(node.get_int_in("sm_count", 1, 100000, g.sm_count));
  g.l2_bytes = static_cast<uint64_t>(node.get_bytes("l2_cache", static_cast<double>(g.l2_bytes)));
  g.scale_up_bandwidth_Bps = node.get_bandwidth("scale_up_bandwidth", g.scale_up_bandwidth_Bps);
  g.ici_link_bandwidth_Bps = node.get_bandwidth("ici_link_bandwidth", g.ici_link_bandwidth_Bps);
  if (g.hbm_bandwidth_Bps <= 0) node.child("hbm_bandwidth").fail("must be > 0");
  // Plain numbers are bytes: `hbm_capacity: 80` is 80 B, and the step then fails for want of
  // memory with nothing pointing here. Every accelerator in the catalog has 16 GiB or more.
  if (node.has("hbm_capacity") && g.hbm_capacity_bytes < (uint64_t{1} << 30))
    node.child("hbm_capacity")
        .fail("is " + sim::format_bytes(static_cast<double>(g.hbm_capacity_bytes)) +
              ", below 1 GiB: a number without a unit is bytes (write 80GB or 80GiB)");
  if (g.peak_bf16_flops <= 0) node.child("peak_bf16").fail("must be > 0");
  return g;
}

FatTreeSpec bind_fat_tree(const sim::ConfigNode& so, const ClusterSpec& spec) {
  FatTreeSpec ft;
  ft.nic_bandwidth_Bps = so.get_bandwidth("nic_bandwidth", ft.nic_bandwidth_Bps);
  if (ft.nic_bandwidth_Bps <= 0) so.child("nic_bandwidth").fail("must be > 0");
  // Datacentre NICs: 10 Gb/s Ethernet up to ConnectX-8's 800 Gb/s (NVIDIA datasheet), with room
  // for the next generation's 1.6 Tb/s.
  warn_rate(so, "nic_bandwidth", ft.nic_bandwidth_Bps, 10e9 / 8, 1.6e12 / 8, "datacentre NICs offer per GPU", true);
  ft.rails = static_cast<uint32_t>(so.get_int_in("rails", 1, 1024, 1));
  moved_to_profile(so, "hop_latency", "fabric_latency");
  moved_to_profile(so, "nic_latency", "nic_latency");
  moved_to_profile(so, "link_latency", "fabric_latency and nic_latency");
  std::string policy = so.get_enum("uplink_policy", {"d-mod-k", "flow-hash"}, "d-mod-k");
  ft.uplink_policy = policy == "d-mod-k" ? UplinkPolicy::kDModK : UplinkPolicy::kFlowHash;
  auto tiers = so.child("tiers");
  if (!tiers.is_sequence() || tiers.size() == 0)
    tiers.fail("expected a list of tiers, the first one giving `nodes` per leaf group");
  std::string prev;
  for (size_t i = 0; i < tiers.size(); ++i) {
    auto t = tiers.at(i);
    if (!t.is_map()) t.fail("expected a map like {name: leaf, nodes: 16}");
    FatTreeTier tier;
    tier.name = t.get_string("name", i == 0 ? "leaf" : "tier" + std::to_string(i));
    if (i == 0) {
      tier.group_size = static_cast<uint32_t>(t.get_int_in("nodes", 1, 1 << 30));
    } else {
      std::string plural = prev + "s";
      bool by_groups = t.has("groups");
      bool by_name = t.has(plural);
      if (by_groups == by_name)
        t.fail("give the number of " + prev + " groups per " + tier.name + " group as either `groups: N` or `" +
               plural + ": N`");
      tier.group_size = static_cast<uint32_t>(t.get_int_in(by_groups ? "groups" : plural, 1, 1 << 30));
    }
    // The leaf tier has neither (read only when given, so that --resolved does not write keys the
    // README says it does not take).
    if (i > 0 || t.has("oversubscription")) tier.oversubscription = t.get_double_in("oversubscription", 1.0, 1e6, 1.0);
    if (i > 0 || t.has("uplinks")) tier.uplinks = static_cast<uint32_t>(t.get_int_in("uplinks", 1, 1 << 20, 1));
    if (i == 0 && (tier.oversubscription != 1.0 || tier.uplinks != 1))
      t.fail("the leaf tier takes no oversubscription or uplinks: GPUs enter it through their own NIC; "
             "set them on the tier above");
    prev = tier.name;
    ft.tiers.push_back(tier);
  }
  (void)spec;
  return ft;
}

}  // namespace

ClusterConfig bind_cluster(const sim::ConfigNode& c) {
  ClusterConfig cfg;
  cfg.gpu = bind_gpu(c);
  bool tpu = cfg.gpu.kind == AcceleratorKind::kTpu;
  cfg.spec.nodes = static_cast<uint32_t>(c.get_int_in("nodes", 1, 1 << 24));
  cfg.spec.gpus_per_node = static_cast<uint32_t>(c.get_int_in("gpus_per_node", 1, 4096, tpu ? 4 : 8));
  cfg.spare_nodes = static_cast<uint32_t>(c.get_int_in("spare_nodes", 0, 1 << 24, 0));
  if (cfg.spare_nodes >= cfg.spec.nodes)
    c.child("spare_nodes").fail("spare_nodes (" + std::to_string(cfg.spare_nodes) + ") must leave the job at least one of the " +
                                std::to_string(cfg.spec.nodes) + " nodes");

  // Scale-up domain.
  if (auto su = c.find("scale_up")) {
    std::string kind = su->get_enum("kind", {"none", "nvswitch"}, tpu ? "none" : "nvswitch");
    cfg.spec.scale_up.kind = kind == "nvswitch" ? ScaleUpKind::kNvSwitch : ScaleUpKind::kNone;
    cfg.spec.scale_up.bandwidth_Bps = su->get_bandwidth("bandwidth", cfg.gpu.scale_up_bandwidth_Bps);
    moved_to_profile(*su, "latency", "scale_up_latency");
    if (cfg.spec.scale_up.bandwidth_Bps <= 0) su->child("bandwidth").fail("must be > 0");
    // PCIe 3.0 x8 (8 GB/s per direction) up to NVLink 6's 1.8 TB/s per direction (3.6 TB/s per
    // GPU, NVIDIA Vera Rubin NVL144).
    warn_rate(*su, "bandwidth", cfg.spec.scale_up.bandwidth_Bps, 8e9, 2e12, "scale-up links offer per GPU per direction", false);
  } else {
    cfg.spec.scale_up.kind = tpu || cfg.spec.gpus_per_node == 1 ? ScaleUpKind::kNone : ScaleUpKind::kNvSwitch;
    cfg.spec.scale_up.bandwidth_Bps = cfg.gpu.scale_up_bandwidth_Bps;
  }

  // Scale-out network.
  auto so = c.find("scale_out");
  std::string kind = so ? so->get_enum("kind", {"none", "fat-tree", "torus"}) : std::string("none");
  if (kind == "fat-tree") {
    cfg.spec.scale_out.kind = ScaleOutKind::kFatTree;
    cfg.spec.scale_out.fat_tree = bind_fat_tree(*so, cfg.spec);
  } else if (kind == "torus") {
    cfg.spec.scale_out.kind = ScaleOutKind::kTorus;
    auto& t = cfg.spec.scale_out.torus;
    auto dims_node = so->child("dims");
    auto dims = so->get_int_list("dims");
    if (dims.empty() || dims.size() > 3) dims_node.fail("a torus has 1 to 3 dimensions, got " + std::to_string(dims.size()));
    uint64_t product = 1;
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 1)
        dims_node.at(i).fail("torus dimension " + std::to_string(i) + " is " + std::to_string(dims[i]) +
                       ": every dimension must be >= 1");
      if (dims[i] > (int64_t{1} << 26))  // the largest cluster
        dims_node.at(i).fail("torus dimension " + std::to_string(i) + " is " + std::to_string(dims[i]) +
                             ": at most 2^26 (67108864)");
      t.dims.push_back(static_cast<uint32_t>(dims[i]));
      product *= static_cast<uint64_t>(dims[i]);  // <= 2^26 * 2^26: no wrap
      if (product > (uint64_t{1} << 26))
        dims_node.at(i).fail("the torus dimensions up to " + std::to_string(i) + " hold " + std::to_string(product) +
                             " chips: at most 2^26 (67108864) in all");
    }
    double def_bw = cfg.gpu.ici_link_bandwidth_Bps > 0 ? cfg.gpu.ici_link_bandwidth_Bps : t.link_bandwidth_Bps;
    t.link_bandwidth_Bps = so->get_bandwidth("link_bandwidth", def_bw);
    if (t.link_bandwidth_Bps <= 0) so->child("link_bandwidth").fail("must be > 0");
    moved_to_profile(*so, "link_latency", "torus_latency");
    // Several pods joined by the data-centre network (Cloud TPU Multislice).
    t.pods = static_cast<uint32_t>(so->get_int_in("pods", 1, int64_t{1} << 26, 1));
    if (product * t.pods > (uint64_t{1} << 26))  // both <= 2^26: no wrap
      so->child("pods").fail(std::to_string(t.pods) + " pods of " + std::to_string(product) + " chips hold " +
                             std::to_string(product * t.pods) + " chips: at most 2^26 (67108864) in all");
    const bool dcn_given = so->has("dcn_bandwidth");
    t.dcn_bandwidth_Bps = so->get_bandwidth("dcn_bandwidth", cfg.gpu.dcn_bandwidth_Bps);
    if (dcn_given && t.dcn_bandwidth_Bps <= 0) so->child("dcn_bandwidth").fail("must be > 0");
    warn_rate(*so, "dcn_bandwidth", t.dcn_bandwidth_Bps, 1e9 / 8, 1.6e12 / 8, "data-centre networks offer per chip", true);
    if (t.pods > 1 && t.dcn_bandwidth_Bps <= 0)
      so->child("pods").fail("pods joined by the data-centre network need its bandwidth, and the catalog has none for " +
                             cfg.gpu.name + ": set scale_out.dcn_bandwidth (per chip per direction)");
    moved_to_profile(*so, "dcn_latency", "dcn_latency");
    uint64_t chips = uint64_t{cfg.spec.nodes} * cfg.spec.gpus_per_node;
    if (product * t.pods != chips)
      dims_node.fail("the torus holds " + std::to_string(product) + " chips" +
                     (t.pods > 1 ? " per pod, " + std::to_string(product * t.pods) + " in " + std::to_string(t.pods) + " pods," : std::string()) +
                     " but nodes x gpus_per_node = " + std::to_string(chips));
    if (t.pods > 1 && product % cfg.spec.gpus_per_node != 0)
      dims_node.fail("a pod of " + std::to_string(product) + " chips is not a whole number of hosts of " +
                     std::to_string(cfg.spec.gpus_per_node) + " (gpus_per_node): a host lies in one pod");
  } else if (cfg.spec.nodes > 1) {
    if (so) so->child("kind").fail("a cluster of " + std::to_string(cfg.spec.nodes) + " nodes needs a scale-out network (fat-tree or torus)");
    c.fail("a cluster of " + std::to_string(cfg.spec.nodes) + " nodes needs a `scale_out` network (fat-tree or torus)");
  }

  // The hardware profile: efficiencies, latencies, communication runtime settings.
  moved_to_profile(c, "efficiency", "scale_up_efficiency, nic_efficiency, fabric_efficiency, torus_efficiency");
  moved_to_profile(c, "comm_sms", "comm_sms");
  cfg.profile = bind_profile(c, cfg.gpu);
  cfg.spec.scale_up.latency = cfg.profile.scale_up_latency;
  cfg.spec.scale_out.fat_tree.hop_latency = cfg.profile.fabric_latency;
  cfg.spec.scale_out.fat_tree.nic_latency = cfg.profile.nic_latency;
  cfg.spec.scale_out.torus.link_latency = cfg.profile.torus_latency;
  cfg.spec.scale_out.torus.dcn_latency = cfg.profile.dcn_latency;
  return cfg;
}

uint64_t available_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return kib * 1024;
  return 0;
}

Topology build_cluster_checked(const ClusterConfig& cfg, const sim::ConfigNode& cluster, uint64_t max_memory_bytes) {
  const uint64_t gpus = uint64_t{cfg.spec.nodes} * cfg.spec.gpus_per_node;
  // Parallel uplinks of a fat-tree: each switch of tier k-1 has `uplinks` links to its tier-k
  // parent (battery f12: 2^20 uplinks on 16 GPUs took 4.3 GiB, about 2 KiB per uplink).
  unsigned __int128 uplinks = 0;
  if (cfg.spec.scale_out.kind == ScaleOutKind::kFatTree) {
    const auto& tiers = cfg.spec.scale_out.fat_tree.tiers;
    uint64_t below = 0;  // switches of the tier below
    for (size_t k = 0; k < tiers.size(); ++k) {
      const uint64_t g = std::max<uint32_t>(1, tiers[k].group_size);
      if (k == 0) {
        below = (cfg.spec.nodes + g - 1) / g * std::max<uint32_t>(1, cfg.spec.scale_out.fat_tree.rails);
      } else {
        uplinks += static_cast<unsigned __int128>(below) * tiers[k].uplinks;
        below = (below + g - 1) / g;
      }
    }
  }
  const unsigned __int128 need128 = static_cast<unsigned __int128>(gpus) * kTopologyBytesPerGpu + uplinks * 2048;
  const uint64_t need = need128 > static_cast<unsigned __int128>(UINT64_MAX / 2) ? UINT64_MAX / 2
                                                                                   : static_cast<uint64_t>(need128);
  const uint64_t limit = max_memory_bytes > 0 ? max_memory_bytes : available_memory_bytes();
  if (limit > 0 && need > limit)
    cluster.fail("a cluster of " + std::to_string(gpus) + " accelerators needs at least " + sim::format_bytes(
                     static_cast<double>(need)) + " for its network model alone (1 KiB per accelerator" +
                 (uplinks > 0 ? ", 2 KiB per parallel fat-tree uplink" : "") + "), more than the " +
                 sim::format_bytes(static_cast<double>(limit)) +
                 (max_memory_bytes > 0 ? " --max-memory allows" : " of memory available (MemAvailable)"));
  try {
    Topology t = build_cluster(cfg.spec);
    t.validate();
    return t;
  } catch (const sim::TopologyError& e) {
    cluster.fail(e.what());
  }
}

}  // namespace topo
