// Scale-up domains and fat-trees: link counts, link layout, routes, D-mod-K, capacities, errors.
// Defaults used below: scale-up latency 250 ns per link; fat-tree NIC latency 1 us, hop 0.5 us;
// NIC up link latency = nic + hop (it enters the leaf switch), NIC down = nic, fabric = hop.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "sim/error.h"
#include "topology/topology.h"
#include "tests/topology/topology_test_util.h"

namespace topo {
namespace {

using testing::expect_valid_route;
constexpr double B = 50e9;  // one 400 Gb/s NIC

std::vector<uint32_t> route_of(const Topology& t, uint32_t s, uint32_t d, uint64_t h = 0) {
  Route r;
  t.route(s, d, h, r);
  expect_valid_route(t, s, d, r);
  return r.links;
}

sim::Time latency_of(const Topology& t, uint32_t s, uint32_t d) {
  Route r;
  t.route(s, d, 0, r);
  return r.latency;
}

FatTreeSpec two_tier(uint32_t leaf_nodes, uint32_t spine_groups, double oversub = 1, uint32_t uplinks = 1) {
  FatTreeSpec f;
  f.nic_bandwidth_Bps = B;
  f.tiers = {{"leaf", leaf_nodes, 1, 1}, {"spine", spine_groups, oversub, uplinks}};
  return f;
}

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const sim::TopologyError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(TopologyScaleUp, HgxNodeLinksAndRoute) {
  ScaleUpSpec su;
  su.kind = ScaleUpKind::kNvSwitch;
  const Topology t = build_scale_up(8, su);
  // 8 GPU vertices + 1 NVSwitch; each GPU one up and one down link: 16 links.
  EXPECT_EQ(t.num_gpus(), 8u);
  EXPECT_EQ(t.num_vertices(), 9u);
  EXPECT_EQ(t.links().size(), 16u);
  EXPECT_EQ(t.vertex_name(8), "node0.nvswitch");
  for (const Link& l : t.links()) {
    EXPECT_EQ(l.kind, LinkKind::kScaleUp);
    EXPECT_DOUBLE_EQ(l.bandwidth_Bps, 450e9);
  }
  // GPU 2 -> GPU 5: up link of GPU 2 = 2*2 = 4, down link of GPU 5 = 2*5+1 = 11; 2 * 250 ns.
  EXPECT_EQ(route_of(t, 2, 5), (std::vector<uint32_t>{4, 11}));
  EXPECT_EQ(latency_of(t, 2, 5), sim::Time::ns(500));
  EXPECT_TRUE(route_of(t, 3, 3).empty());
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyScaleUp, Nvl72Domain) {
  ScaleUpSpec su;
  su.kind = ScaleUpKind::kNvSwitch;
  su.bandwidth_Bps = 900e9;  // B200 NVLink 5 per direction
  const Topology t = build_scale_up(72, su);
  // 72 GPUs * 2 links = 144 links; 73 vertices.
  EXPECT_EQ(t.links().size(), 144u);
  EXPECT_EQ(t.num_vertices(), 73u);
  EXPECT_EQ(route_of(t, 0, 71), (std::vector<uint32_t>{0, 143}));
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyFatTree, SixteenNodesInFourLeavesCounts) {
  const Topology t = build_fat_tree(16, 1, two_tier(4, 4));
  // Vertices: 16 GPUs + 4 leaves + 1 spine = 21.
  // Links: 16 GPUs * 2 NIC directions = 32, + 4 leaves * 1 uplink * 2 directions = 8 -> 40.
  EXPECT_EQ(t.num_vertices(), 21u);
  EXPECT_EQ(t.links().size(), 40u);
  EXPECT_EQ(t.vertex_name(16), "leaf0");
  EXPECT_EQ(t.vertex_name(20), "spine0");
  // Uplink capacity: 4 GPUs * B / oversubscription 1 = 4B.
  EXPECT_DOUBLE_EQ(t.links()[32].bandwidth_Bps, 4 * B);
  EXPECT_EQ(t.links()[32].kind, LinkKind::kFabric);
  EXPECT_EQ(t.links()[32].tier, 1);
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyFatTree, RoutesSameLeafAndAcrossSpine) {
  const Topology t = build_fat_tree(16, 1, two_tier(4, 4));
  // 0 -> 1, same leaf: NIC up of GPU 0 (link 0), NIC down of GPU 1 (2*1+1 = 3).
  // Latency: (1 us + 0.5 us) + 1 us = 2.5 us.
  EXPECT_EQ(route_of(t, 0, 1), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(latency_of(t, 0, 1), sim::Time::ns(2500));
  // 0 -> 5: leaf 0 -> spine -> leaf 1. Tier-1 links start at 32: leaf 0 up = 32, leaf 1 down =
  // 32 + 2*1 + 1 = 35; NIC down of GPU 5 = 11. Latency 1.5 + 0.5 + 0.5 + 1 = 3.5 us.
  EXPECT_EQ(route_of(t, 0, 5), (std::vector<uint32_t>{0, 32, 35, 11}));
  EXPECT_EQ(latency_of(t, 0, 5), sim::Time::ns(3500));
}

TEST(TopologyFatTree, OversubscribedUplinkCapacity) {
  // 4 nodes per leaf, oversubscription 4 at the spine: 4 * B / 4 = B per leaf uplink.
  const Topology t = build_fat_tree(16, 1, two_tier(4, 4, 4.0));
  EXPECT_DOUBLE_EQ(t.links()[32].bandwidth_Bps, B);
  EXPECT_DOUBLE_EQ(t.links()[33].bandwidth_Bps, B);  // the down direction too
}

TEST(TopologyFatTree, DModKChoosesUplinkByDestination) {
  // Two parallel uplinks per leaf; each carries 4 * B / 2 = 2B. Layout: tier-1 link for child c,
  // parallel p: 32 + 2 * (c * 2 + p) up, +1 down.
  const Topology t = build_fat_tree(16, 1, two_tier(4, 4, 1, 2));
  EXPECT_EQ(t.links().size(), 48u);  // 32 NIC + 4 leaves * 2 parallel * 2 directions
  EXPECT_DOUBLE_EQ(t.links()[32].bandwidth_Bps, 2 * B);
  EXPECT_TRUE(t.links()[32].parallel);
  // 0 -> 5: key 5, 5 mod 2 = 1: up 32 + 2*(0*2+1) = 34, down to leaf 1: 32 + 2*(1*2+1) + 1 = 39.
  EXPECT_EQ(route_of(t, 0, 5), (std::vector<uint32_t>{0, 34, 39, 11}));
  // 0 -> 4: key 4, p = 0: up 32, down 32 + 2*(1*2+0) + 1 = 37.
  EXPECT_EQ(route_of(t, 0, 4), (std::vector<uint32_t>{0, 32, 37, 9}));
  // D-mod-K ignores the flow hash.
  EXPECT_EQ(route_of(t, 0, 5, 12345), route_of(t, 0, 5, 0));
  EXPECT_NO_THROW(t.validate());  // parallel links are declared, so not duplicates
}

TEST(TopologyFatTree, FlowHashPolicySpreadsOneDestination) {
  FatTreeSpec f = two_tier(4, 4, 1, 2);
  f.uplink_policy = UplinkPolicy::kFlowHash;
  const Topology t = build_fat_tree(16, 1, f);
  std::set<uint32_t> first_uplinks;
  for (uint64_t h = 0; h < 64; ++h) {
    const auto r = route_of(t, 0, 5, h);
    ASSERT_EQ(r.size(), 4u);
    first_uplinks.insert(r[1]);
    EXPECT_EQ(r[2], r[1] == 32 ? 37u : 39u);  // same spine plane up and down
    EXPECT_EQ(route_of(t, 0, 5, h), r);       // deterministic per hash
  }
  EXPECT_EQ(first_uplinks, (std::set<uint32_t>{32, 34}));
}

TEST(TopologyFatTree, RailsWithNvSwitchNodes) {
  ClusterSpec c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.scale_up.kind = ScaleUpKind::kNvSwitch;
  c.scale_out.kind = ScaleOutKind::kFatTree;
  c.scale_out.fat_tree.nic_bandwidth_Bps = B;
  c.scale_out.fat_tree.rails = 8;
  c.scale_out.fat_tree.tiers = {{"rack", 2, 1, 1}, {"pod", 2, 1, 1}};
  const Topology t = build_cluster(c);
  // Vertices: 32 GPUs + 4 NVSwitches + 2 racks * 8 rails + 1 pod = 53.
  // Links: 32*2 scale-up + 32*2 NIC + 16 leaves * 2 = 160.
  // Link bases: scale-up 0, NIC 64, tier 1 128.
  EXPECT_EQ(t.num_vertices(), 53u);
  EXPECT_EQ(t.links().size(), 160u);
  EXPECT_EQ(t.vertex_name(36 + 3), "rack0.rail3");
  // Each (rack, rail) leaf holds 2 nodes * 1 GPU: uplink 2B.
  EXPECT_DOUBLE_EQ(t.links()[128].bandwidth_Bps, 2 * B);
  // Same node: NVSwitch. GPU 3 up = 6, GPU 5 down = 11.
  EXPECT_EQ(route_of(t, 3, 5), (std::vector<uint32_t>{6, 11}));
  // GPU 3 (node 0) -> GPU 11 (node 1), both rail 3 of rack 0: NIC up 64+6 = 70, down 64+22+1 = 87.
  EXPECT_EQ(route_of(t, 3, 11), (std::vector<uint32_t>{70, 87}));
  // GPU 3 -> GPU 12 (node 1, rail 4): leaf 3 -> pod -> leaf 4: 128+6 = 134, 128+8+1 = 137,
  // then NIC down 64+24+1 = 89.
  EXPECT_EQ(route_of(t, 3, 12), (std::vector<uint32_t>{70, 134, 137, 89}));
  // GPU 3 -> GPU 19 (node 2 in rack 1, rail 3): leaf 3 -> pod -> leaf 11 (1*8+3):
  // 134, 128 + 22 + 1 = 151, NIC down 64 + 38 + 1 = 103.
  EXPECT_EQ(route_of(t, 3, 19), (std::vector<uint32_t>{70, 134, 151, 103}));
  for (uint32_t s = 0; s < 32; ++s) {
    for (uint32_t d = 0; d < 32; ++d) route_of(t, s, d);
  }
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyFatTree, ThreeTiersWithOversubscriptionAtTheTop) {
  // 8 single-GPU nodes; leaf = 2 nodes, agg = 2 leaves (1:1), core = 2 aggs (1:4).
  FatTreeSpec f;
  f.nic_bandwidth_Bps = B;
  f.tiers = {{"leaf", 2, 1, 1}, {"agg", 2, 1, 1}, {"core", 2, 4, 1}};
  const Topology t = build_fat_tree(8, 1, f);
  // Vertices: 8 + 4 leaves + 2 aggs + 1 core = 15. Links: 16 NIC + 4*2 + 2*2 = 28.
  EXPECT_EQ(t.num_vertices(), 15u);
  EXPECT_EQ(t.links().size(), 28u);
  EXPECT_DOUBLE_EQ(t.links()[16].bandwidth_Bps, 2 * B);  // leaf: 2 GPUs * B / 1
  EXPECT_DOUBLE_EQ(t.links()[24].bandwidth_Bps, B);      // agg: 4 GPUs * B / 4
  EXPECT_EQ(t.links()[24].tier, 2);
  // 0 -> 7 climbs to the core: NIC up, leaf0->agg0 (16), agg0->core (24), core->agg1 (24+2+1 = 27),
  // agg1->leaf3 (16 + 2*3 + 1 = 23), NIC down (15). Latency 1.5 + 4*0.5 + 1 = 4.5 us.
  EXPECT_EQ(route_of(t, 0, 7), (std::vector<uint32_t>{0, 16, 24, 27, 23, 15}));
  EXPECT_EQ(latency_of(t, 0, 7), sim::Time::ns(4500));
  // 0 -> 3 stops at agg 0: 0, 16, 16 + 2*1 + 1 = 19, NIC down 7.
  EXPECT_EQ(route_of(t, 0, 3), (std::vector<uint32_t>{0, 16, 19, 7}));
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyFatTree, PartialLastGroup) {
  // 5 nodes in leaves of 2: leaves hold 2, 2, 1 nodes; the last uplink is 1 * B.
  const Topology t = build_fat_tree(5, 1, two_tier(2, 4));
  EXPECT_EQ(t.num_vertices(), 5u + 3 + 1);
  EXPECT_EQ(t.links().size(), 10u + 6);
  EXPECT_DOUBLE_EQ(t.links()[10].bandwidth_Bps, 2 * B);
  EXPECT_DOUBLE_EQ(t.links()[14].bandwidth_Bps, B);
  EXPECT_EQ(route_of(t, 0, 4), (std::vector<uint32_t>{0, 10, 15, 9}));
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyFatTree, ScaleOutOnlyNodeUsesNics) {
  // Two GPUs per node with no NVSwitch: same-node traffic goes NIC up, NIC down.
  const Topology t = build_fat_tree(2, 2, two_tier(2, 1));
  EXPECT_EQ(route_of(t, 0, 1), (std::vector<uint32_t>{0, 3}));
  EXPECT_EQ(t.node_of(3), 1u);
}

TEST(TopologyFatTree, Llama3SixteenThousandGpuShape) {
  // Llama 3 §3.3.1: 2 nodes per rack, 192 racks per pod (1:1), 8 pods at 1:7; 2,048 nodes fill
  // 1,024 racks = 5 full pods + one pod of 64 racks.
  ClusterSpec c;
  c.nodes = 2048;
  c.gpus_per_node = 8;
  c.scale_up.kind = ScaleUpKind::kNvSwitch;
  c.scale_out.kind = ScaleOutKind::kFatTree;
  FatTreeSpec& f = c.scale_out.fat_tree;
  f.rails = 8;
  f.tiers = {{"rack", 2, 1, 1}, {"pod", 192, 1, 1}, {"cluster", 8, 7, 1}};
  const Topology t = build_cluster(c);
  EXPECT_EQ(t.num_gpus(), 16384u);
  // Vertices: 16384 GPUs + 2048 NVSwitches + 1024 racks * 8 rails + 6 pods + 1 = 26631.
  EXPECT_EQ(t.num_vertices(), 26631u);
  // Links: 2*16384 scale-up + 2*16384 NIC + 2*8192 leaf uplinks + 2*6 pod uplinks = 81932,
  // i.e. about 5 per GPU: linear, no GPUs^2 structure.
  EXPECT_EQ(t.links().size(), 81932u);
  // Pod uplinks start after 2*8192 leaf uplinks at 65536 + 16384 = 81920; full pod: 3072 GPUs *
  // 50 GB/s / 7; the sixth pod holds 64 racks = 1024 GPUs: 1024 * 50 GB/s / 7.
  EXPECT_DOUBLE_EQ(t.links()[81920].bandwidth_Bps, 3072 * B / 7);
  EXPECT_DOUBLE_EQ(t.links()[81930].bandwidth_Bps, 1024 * B / 7);
  // GPU 0 -> GPU 16383 (last node, rail 7): NIC up, rack->pod, pod->cluster, cluster->pod,
  // pod->rack, NIC down = 6 links; 1.5 + 4*0.5 + 1 = 4.5 us.
  Route r;
  t.route(0, 16383, 0, r);
  expect_valid_route(t, 0, 16383, r);
  EXPECT_EQ(r.links.size(), 6u);
  EXPECT_EQ(r.latency, sim::Time::ns(4500));
  // Many routes, one reused Route: each is a valid chain of at most 6 links.
  uint64_t x = 12345;
  for (int i = 0; i < 20000; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t s = static_cast<uint32_t>((x >> 20) % 16384);
    const uint32_t d = static_cast<uint32_t>((x >> 40) % 16384);
    t.route(s, d, x, r);
    ASSERT_LE(r.links.size(), 6u);
    if (i % 100 == 0) expect_valid_route(t, s, d, r);
  }
  EXPECT_NO_THROW(t.validate());
  const std::string desc = t.describe();
  EXPECT_NE(desc.find("16384 GPUs in 2048 nodes of 8"), std::string::npos) << desc;
  EXPECT_NE(desc.find("1:7"), std::string::npos) << desc;
}

TEST(TopologyFatTree, BadConfigsNameTheField) {
  EXPECT_NE(error_of([] { build_fat_tree(0, 1, two_tier(4, 4)); }).find("nodes is 0"), std::string::npos);
  FatTreeSpec neg = two_tier(4, 4);
  neg.nic_bandwidth_Bps = -5;
  EXPECT_NE(error_of([&] { build_fat_tree(16, 1, neg); }).find("nic_bandwidth is -5"), std::string::npos);
  EXPECT_NE(error_of([] { build_fat_tree(16, 1, two_tier(0, 4)); }).find("group_size is 0"), std::string::npos);
  EXPECT_NE(error_of([] { build_fat_tree(16, 1, two_tier(4, 4, 0.5)); }).find("oversubscription is 0.5"),
            std::string::npos);
  EXPECT_NE(error_of([] { build_fat_tree(16, 1, two_tier(4, 4, 1, 0)); }).find("uplinks is 0"), std::string::npos);
  // 16 nodes / 4 per leaf = 4 leaves, but the spine holds only 2: two top groups.
  EXPECT_NE(error_of([] { build_fat_tree(16, 1, two_tier(4, 2)); }).find("the top tier, would need 2 switches"), std::string::npos);
  FatTreeSpec rails = two_tier(4, 4);
  rails.rails = 3;
  EXPECT_NE(error_of([&] { build_fat_tree(4, 2, rails); }).find("rails is 3"), std::string::npos);
  rails.rails = 0;
  EXPECT_NE(error_of([&] { build_fat_tree(4, 2, rails); }).find("rails is 0"), std::string::npos);
  FatTreeSpec leaf_oversub = two_tier(4, 4);
  leaf_oversub.tiers[0].oversubscription = 2;
  EXPECT_NE(error_of([&] { build_fat_tree(16, 1, leaf_oversub); }).find("leaf tier"), std::string::npos);
  FatTreeSpec none;
  EXPECT_NE(error_of([&] { build_fat_tree(16, 1, none); }).find("tiers is empty"), std::string::npos);

  ClusterSpec islands;
  islands.nodes = 2;
  islands.scale_up.kind = ScaleUpKind::kNvSwitch;
  EXPECT_NE(error_of([&] { build_cluster(islands); }).find("disconnected"), std::string::npos);
  ScaleUpSpec su;
  su.kind = ScaleUpKind::kNvSwitch;
  su.bandwidth_Bps = 0;
  EXPECT_NE(error_of([&] { build_scale_up(8, su); }).find("scale_up.bandwidth is 0"), std::string::npos);
}

TEST(TopologyFatTree, RouteRejectsBadGpuIndex) {
  const Topology t = build_fat_tree(4, 1, two_tier(4, 1));
  Route r;
  EXPECT_THROW(t.route(0, 4, 0, r), sim::TopologyError);
}

TEST(TopologyExport, DotContainsVertices) {
  ScaleUpSpec su;
  su.kind = ScaleUpKind::kNvSwitch;
  const Topology t = build_scale_up(8, su);
  const std::string dot = t.to_dot();
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("\"node0.nvswitch\""), std::string::npos);
  EXPECT_NE(dot.find("\"gpu7\""), std::string::npos);
  EXPECT_NE(dot.find("450 GB/s"), std::string::npos) << dot;
  EXPECT_NE(dot.find("->"), std::string::npos);
}

TEST(TopologyExport, DescribeSummarizes) {
  ClusterSpec c;
  c.nodes = 4;
  c.gpus_per_node = 8;
  c.scale_up.kind = ScaleUpKind::kNvSwitch;
  c.scale_out.kind = ScaleOutKind::kFatTree;
  c.scale_out.fat_tree.rails = 8;
  c.scale_out.fat_tree.tiers = {{"rack", 2, 1, 1}, {"pod", 2, 1, 1}};
  const std::string d = build_cluster(c).describe();
  EXPECT_NE(d.find("32 GPUs in 4 nodes of 8"), std::string::npos) << d;
  EXPECT_NE(d.find("8 rails"), std::string::npos) << d;
  EXPECT_NE(d.find("160 directed links"), std::string::npos) << d;
}

}  // namespace
}  // namespace topo

namespace topo {
namespace {

// A fabric link seen from its lower end (Topology::fabric_span) and the same link shifted by
// whole groups (fabric_link_shifted), on 10 one-GPU nodes: leaves of 2 nodes, pods of 2 leaves
// (4 nodes; the last pod holds only nodes 8-9), one spine over the 3 pods. Routes name the links:
// 6 -> 0 goes NIC, leaf 3 up, pod 1 up, spine, pod 0 down, leaf 0 down, NIC.
TEST(TopologyFatTree, AFabricLinkKnowsTheNodesUnderItAndItsShiftedTwin) {
  FatTreeSpec f;
  f.nic_bandwidth_Bps = B;
  f.tiers = {{"leaf", 2, 1, 1}, {"pod", 2, 1, 1}, {"spine", 3, 1, 1}};
  const Topology t = build_fat_tree(10, 1, f);
  const std::vector<uint32_t> r60 = route_of(t, 6, 0), r06 = route_of(t, 0, 6), r80 = route_of(t, 8, 0);
  ASSERT_EQ(r60.size(), 6u);
  const uint32_t leaf3_up = r60[1], pod1_up = r60[2], pod0_down = r60[3], leaf0_up = r06[1], pod1_down = r06[3];
  const Topology::FabricSpan leaf = t.fabric_span(leaf3_up);
  EXPECT_EQ(leaf.first_node, 6u);
  EXPECT_EQ(leaf.num_nodes, 2u);
  EXPECT_EQ(leaf.full_nodes, 2u);
  EXPECT_TRUE(leaf.up);
  EXPECT_TRUE(leaf.unique_up);
  const Topology::FabricSpan pod = t.fabric_span(pod0_down);
  EXPECT_EQ(pod.first_node, 0u);
  EXPECT_EQ(pod.num_nodes, 4u);
  EXPECT_FALSE(pod.up);
  const Topology::FabricSpan last = t.fabric_span(r80[2]);  // pod 2's up link: nodes 8-9 of 4
  EXPECT_EQ(last.first_node, 8u);
  EXPECT_EQ(last.num_nodes, 2u);
  EXPECT_EQ(last.full_nodes, 4u);
  EXPECT_EQ(t.fabric_link_shifted(leaf3_up, -6), leaf0_up);
  EXPECT_EQ(t.fabric_link_shifted(leaf0_up, 6), leaf3_up);
  EXPECT_EQ(t.fabric_link_shifted(pod0_down, 4), pod1_down);
  EXPECT_EQ(t.fabric_link_shifted(pod1_up, -4), r06[2]);               // pod 0's up link
  EXPECT_EQ(t.fabric_link_shifted(leaf3_up, -3), Topology::kNoLink);   // not whole leaves
  EXPECT_EQ(t.fabric_link_shifted(leaf3_up, 4), Topology::kNoLink);    // nodes 10-11: none
  EXPECT_EQ(t.fabric_link_shifted(pod1_up, -8), Topology::kNoLink);    // before node 0
  // Two parallel uplinks per pod: a route picks one, so the pods' links are no longer unique.
  f.tiers[2].uplinks = 2;
  const Topology t2 = build_fat_tree(10, 1, f);
  const std::vector<uint32_t> r = route_of(t2, 6, 0);
  EXPECT_TRUE(t2.fabric_span(r[1]).unique_up);
  EXPECT_FALSE(t2.fabric_span(r[2]).unique_up);
}

}  // namespace
}  // namespace topo
