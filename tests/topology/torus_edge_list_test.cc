// Tori (dimension-order routing, wraparound, small dimensions) and edge lists (BFS + ECMP).
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "sim/error.h"
#include "topology/catalog.h"
#include "topology/topology.h"
#include "tests/topology/topology_test_util.h"

namespace topo {
namespace {

using testing::expect_valid_route;

std::vector<uint32_t> route_of(const Topology& t, uint32_t s, uint32_t d, uint64_t h = 0) {
  Route r;
  t.route(s, d, h, r);
  expect_valid_route(t, s, d, r);
  return r.links;
}

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const sim::TopologyError& e) {
    return e.what();
  }
  return "(no error)";
}

TorusSpec torus(std::vector<uint32_t> dims, uint32_t chips_per_host = 1) {
  TorusSpec s;
  s.dims = std::move(dims);
  s.chips_per_host = chips_per_host;
  s.link_bandwidth_Bps = 100e9;
  s.link_latency = sim::Time::ns(1000);
  return s;
}

TEST(TopologyTorus, EightCubedCountsAndRoute) {
  const Topology t = build_torus(torus({8, 8, 8}, 4));
  // 512 chips * 6 links (+/- in 3 dimensions) = 3072 directed links; no switch vertices.
  EXPECT_EQ(t.num_gpus(), 512u);
  EXPECT_EQ(t.num_vertices(), 512u);
  EXPECT_EQ(t.links().size(), 3072u);
  EXPECT_EQ(t.node_of(5), 1u);
  // (0,0,0) -> (7,4,1) = chip 7 + 8*(4 + 8*1) = 103. Link of chip c, dimension k, direction
  // (0 = +, 1 = -): 6c + 2k + dir.
  // x: 7 steps forward or 1 back -> back once: link 1, now at (7,0,0) = chip 7.
  // y: 4 either way, tie -> positive: chips 7, 15, 23, 31 -> links 44, 92, 140, 188; at (7,4,0) = 39.
  // z: 1 forward: 6*39 + 4 = 238. Total 1 + 4 + 1 = 6 hops, 6 us.
  Route r;
  t.route(0, 103, 0, r);
  expect_valid_route(t, 0, 103, r);
  EXPECT_EQ(r.links, (std::vector<uint32_t>{1, 44, 92, 140, 188, 238}));
  EXPECT_EQ(r.latency, sim::Time::us(6));
  EXPECT_EQ(t.links()[1].tier, 0);
  EXPECT_EQ(t.links()[238].tier, 2);
  EXPECT_EQ(t.vertex_name(103), "chip103(7,4,1)");
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyTorus, RingWraparound) {
  const Topology five = build_torus(torus({5}));
  // Ring of 5: 10 links, chip c: + link 2c, - link 2c+1.
  EXPECT_EQ(five.links().size(), 10u);
  EXPECT_EQ(route_of(five, 0, 4), (std::vector<uint32_t>{1}));     // 4 forward or 1 back
  EXPECT_EQ(route_of(five, 0, 2), (std::vector<uint32_t>{0, 2}));  // 2 forward
  EXPECT_EQ(route_of(five, 4, 1), (std::vector<uint32_t>{8, 0}));  // 4 -> 0 -> 1 across the seam
  const Topology four = build_torus(torus({4}));
  EXPECT_EQ(route_of(four, 0, 2), (std::vector<uint32_t>{0, 2}));  // tie: positive direction
  EXPECT_EQ(route_of(four, 3, 1), (std::vector<uint32_t>{6, 0}));  // tie from 3: 3 -> 0 -> 1
}

TEST(TopologyTorus, SizeOneAndTwoDimensionsHaveNoDuplicates) {
  const Topology t = build_torus(torus({2, 1, 3}));
  // Per chip: dimension of size 2 -> 1 link, size 1 -> none, size 3 -> 2: 3 links; 6 chips -> 18.
  EXPECT_EQ(t.links().size(), 18u);
  EXPECT_EQ(route_of(t, 0, 1), (std::vector<uint32_t>{0}));
  EXPECT_EQ(route_of(t, 1, 0), (std::vector<uint32_t>{3}));
  // chip 0 -> chip 5 = (1,0,2): x one link (0), now chip 1; z: 2 forward or 1 back -> back:
  // link 3*1 + 1 (offset of z) + 1 = 5.
  EXPECT_EQ(route_of(t, 0, 5), (std::vector<uint32_t>{0, 5}));
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyTorus, HopCountIsSumOfRingDistances) {
  const std::vector<uint32_t> dims = {4, 3, 5};
  const Topology t = build_torus(torus(dims));
  auto ring = [](int a, int b, int n) {
    const int d = std::abs(a - b);
    return std::min(d, n - d);
  };
  for (uint32_t s = 0; s < t.num_gpus(); ++s) {
    for (uint32_t d = 0; d < t.num_gpus(); ++d) {
      const auto r = route_of(t, s, d);
      int expected = 0;
      uint32_t stride = 1;
      for (uint32_t n : dims) {
        expected += ring((s / stride) % n, (d / stride) % n, static_cast<int>(n));
        stride *= n;
      }
      ASSERT_EQ(static_cast<int>(r.size()), expected) << s << "->" << d;
    }
  }
}

TEST(TopologyTorus, TpuV5pSliceThroughClusterSpec) {
  const GpuSpec chip = find_gpu("tpu-v5p");
  ClusterSpec c;
  c.nodes = 1536;  // 16x16x24 = 6144 chips / 4 chips per host
  c.gpus_per_node = 4;
  c.scale_out.kind = ScaleOutKind::kTorus;
  c.scale_out.torus.dims = {16, 16, 24};
  c.scale_out.torus.link_bandwidth_Bps = chip.ici_link_bandwidth_Bps;
  const Topology t = build_cluster(c);
  EXPECT_EQ(t.num_gpus(), 6144u);
  EXPECT_EQ(t.gpus_per_node(), 4u);
  EXPECT_EQ(t.links().size(), 6144u * 6);
  // Farthest pair: (8,8,12) from (0,0,0): 8 + 8 + 12 = 28 hops.
  const uint32_t far = 8 + 16 * (8 + 16 * 12);
  EXPECT_EQ(route_of(t, 0, far).size(), 28u);
  EXPECT_NO_THROW(t.validate());
  // Bisection across z (24): 256 rings * 2 links * 100 GB/s = 51.2 TB/s.
  EXPECT_NE(t.describe().find("bisection 51.2 TB/s"), std::string::npos) << t.describe();

  c.nodes = 1000;
  EXPECT_NE(error_of([&] { build_cluster(c); }).find("must match"), std::string::npos);
}

TEST(TopologyTorus, PodsJoinedByTheDataCentreNetwork) {
  // 2 pods of a 4-ring, 2 chips per host: 8 chips. Torus links: 2 per chip (+/-) = 16, numbered
  // 2c + dir; then the DCN switch (vertex 8) and 2 links per chip: up 16 + 2c, down 16 + 2c + 1.
  TorusSpec s = torus({4}, 2);
  s.pods = 2;
  s.dcn_bandwidth_Bps = 6.25e9;
  s.dcn_latency = sim::Time::us(10);
  const Topology t = build_torus(s);
  EXPECT_EQ(t.num_gpus(), 8u);
  EXPECT_EQ(t.torus_pods(), 2u);
  EXPECT_EQ(t.torus_dims(), (std::vector<uint32_t>{4}));
  EXPECT_EQ(t.num_vertices(), 9u);
  EXPECT_EQ(t.links().size(), 32u);
  EXPECT_EQ(t.vertex_name(5), "chip5(1 pod 1)");
  EXPECT_EQ(t.vertex_name(8), "dcn");
  // Across pods: chip 1 up, chip 6 down; 2 x 10 us.
  Route r;
  t.route(1, 6, 0, r);
  expect_valid_route(t, 1, 6, r);
  EXPECT_EQ(r.links, (std::vector<uint32_t>{16 + 2, 16 + 2 * 6 + 1}));
  EXPECT_EQ(r.latency, sim::Time::us(20));
  EXPECT_EQ(t.links()[18].kind, LinkKind::kNic);
  EXPECT_DOUBLE_EQ(t.links()[18].bandwidth_Bps, 6.25e9);
  // Inside pod 1: chip 4 (x = 0) -> chip 7 (x = 3): one step back, link 2*4 + 1 = 9, to chip 7.
  EXPECT_EQ(route_of(t, 4, 7), (std::vector<uint32_t>{9}));
  EXPECT_EQ(t.links()[9].dst, 7u);
  EXPECT_NO_THROW(t.validate());
  EXPECT_NE(t.describe().find("2 pods, each a torus 4 of 4 chips"), std::string::npos) << t.describe();
  EXPECT_NE(t.describe().find("6.25 GB/s and 10 us per chip"), std::string::npos) << t.describe();
  // Hosts lie in one pod; pods >= 1; the DCN needs a bandwidth.
  TorusSpec odd = torus({3}, 2);
  odd.pods = 2;
  EXPECT_NE(error_of([&] { build_torus(odd); }).find("whole number of hosts"), std::string::npos);
  TorusSpec none = s;
  none.pods = 0;
  EXPECT_NE(error_of([&] { build_torus(none); }).find("pods is 0"), std::string::npos);
  TorusSpec no_bw = s;
  no_bw.dcn_bandwidth_Bps = 0;
  EXPECT_NE(error_of([&] { build_torus(no_bw); }).find("dcn_bandwidth"), std::string::npos);
}

TEST(TopologyTorus, BadConfigs) {
  EXPECT_EQ(error_of([] { build_torus(torus({4, 4, 0})); }),
            "torus dimension 2 is 0: every dimension must be >= 1");
  EXPECT_NE(error_of([] { build_torus(torus({2, 2, 2, 2})); }).find("4 dimensions"), std::string::npos);
  EXPECT_NE(error_of([] { build_torus(torus({})); }).find("0 dimensions"), std::string::npos);
  EXPECT_NE(error_of([] { build_torus(torus({3, 3}, 4)); }).find("whole number of hosts"), std::string::npos);
  TorusSpec neg = torus({4});
  neg.link_bandwidth_Bps = -1;
  EXPECT_NE(error_of([&] { build_torus(neg); }).find("link_bandwidth is -1"), std::string::npos);
}

// gpu0 and gpu1 joined through switch a (vertex 2) or switch b (vertex 3). Links in edge order,
// two per bidirectional edge: 0: gpu0->a, 1: a->gpu0, 2: gpu0->b, 3: b->gpu0, 4: a->gpu1,
// 5: gpu1->a, 6: b->gpu1, 7: gpu1->b.
EdgeListSpec diamond() {
  EdgeListSpec e;
  e.num_gpus = 2;
  e.other_vertices = {"a", "b"};
  const double bw = 10e9;
  const sim::Time lat = sim::Time::ns(100);
  e.edges = {{0, 2, bw, lat}, {0, 3, bw, lat}, {2, 1, bw, lat}, {3, 1, bw, lat}};
  return e;
}

TEST(TopologyEdgeList, EcmpTiesBrokenByFlowHash) {
  const Topology t = build_edge_list(diamond());
  EXPECT_EQ(t.num_vertices(), 4u);
  EXPECT_EQ(t.links().size(), 8u);
  std::set<std::vector<uint32_t>> paths;
  for (uint64_t h = 0; h < 64; ++h) {
    const auto r = route_of(t, 0, 1, h);
    paths.insert(r);
    EXPECT_EQ(route_of(t, 0, 1, h), r);  // same hash, same path (cached distances)
  }
  EXPECT_EQ(paths, (std::set<std::vector<uint32_t>>{{0, 4}, {2, 6}}));
  Route r;
  t.route(1, 0, 7, r);
  EXPECT_EQ(r.latency, sim::Time::ns(200));
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyEdgeList, RouteLatencyIsTheSumOfItsLinksWhateverTheirNumber) {
  // route() reads latencies off runs of consecutive links with one latency while they are few,
  // one per link otherwise. A chain of 41 GPUs whose 40 edges all differ (edge i: (i + 1) * 10 ns,
  // 80 links: more runs than the run table holds): from GPU 0 to GPU k the route crosses edges
  // 0..k-1, so its latency is 10 ns * (1 + 2 + ... + k) = 5 ns * k (k + 1); back, the same.
  // A chain with one latency (a single run) gives k hops of 7 ns; one whose forward links take
  // 10 ns and backward ones 30 ns, added alternately (one run, as a builder's up/down pairs),
  // 10 k ns forward and 30 k ns back.
  EdgeListSpec varied, uniform, updown;
  varied.num_gpus = uniform.num_gpus = updown.num_gpus = 41;
  for (uint32_t i = 0; i < 40; ++i) {
    varied.edges.push_back({i, i + 1, 1e9, sim::Time::ns(10 * (i + 1))});
    uniform.edges.push_back({i, i + 1, 1e9, sim::Time::ns(7)});
    updown.edges.push_back({i, i + 1, 1e9, sim::Time::ns(10), false});
    updown.edges.push_back({i + 1, i, 1e9, sim::Time::ns(30), false});
  }
  const Topology tv = build_edge_list(varied), tu = build_edge_list(uniform), td = build_edge_list(updown);
  for (uint32_t k : {1u, 2u, 17u, 40u}) {
    Route r;
    tv.route(0, k, 0, r);
    EXPECT_EQ(r.latency, sim::Time::ns(5 * k * (k + 1))) << "0 -> " << k;
    tv.route(k, 0, 0, r);
    EXPECT_EQ(r.latency, sim::Time::ns(5 * k * (k + 1))) << k << " -> 0";
    tu.route(0, k, 0, r);
    EXPECT_EQ(r.latency, sim::Time::ns(7 * k)) << "uniform 0 -> " << k;
    td.route(0, k, 0, r);
    EXPECT_EQ(r.latency, sim::Time::ns(10 * k)) << "up/down 0 -> " << k;
    td.route(k, 0, 0, r);
    EXPECT_EQ(r.latency, sim::Time::ns(30 * k)) << "up/down " << k << " -> 0";
  }
  Route r;
  tv.route(3, 5, 0, r);  // edges 3 and 4: 40 + 50 ns
  EXPECT_EQ(r.latency, sim::Time::ns(90));
}

TEST(TopologyEdgeList, ShortestHopsWin) {
  // Ring of 4 GPUs 0-1-2-3-0 plus a long detour 0 - x - y - 2: 0 -> 2 takes 2 hops via 1 or 3, never
  // the 3-hop detour. GPUs forward traffic here (a direct-connect mesh).
  EdgeListSpec e;
  e.num_gpus = 4;
  e.other_vertices = {"x", "y"};
  e.edges = {{0, 1, 1e9, {}}, {1, 2, 1e9, {}}, {2, 3, 1e9, {}}, {3, 0, 1e9, {}},
             {0, 4, 1e9, {}}, {4, 5, 1e9, {}}, {5, 2, 1e9, {}}};
  const Topology t = build_edge_list(e);
  for (uint64_t h = 0; h < 32; ++h) EXPECT_EQ(route_of(t, 0, 2, h).size(), 2u);
  EXPECT_EQ(route_of(t, 0, 1).size(), 1u);
  EXPECT_NO_THROW(t.validate());
}

TEST(TopologyEdgeList, ValidateCatchesDisconnection) {
  EdgeListSpec e;
  e.num_gpus = 3;
  e.edges = {{0, 1, 1e9, {}}};
  const Topology t = build_edge_list(e);
  // gpu2 has no links at all.
  EXPECT_NE(error_of([&] { t.validate(); }).find("'gpu2'"), std::string::npos);
  Route r;
  EXPECT_THROW(t.route(0, 2, 0, r), sim::TopologyError);

  // Two islands, every vertex with links: the reachability check reports it.
  EdgeListSpec islands;
  islands.num_gpus = 4;
  islands.edges = {{0, 1, 1e9, {}}, {2, 3, 1e9, {}}};
  EXPECT_NE(error_of([&] { build_edge_list(islands).validate(); }).find("disconnected"), std::string::npos);

  // One-way links: 0 -> 1 only; 1 cannot reach 0.
  EdgeListSpec oneway;
  oneway.num_gpus = 2;
  oneway.edges = {{0, 1, 1e9, {}, false}};
  EXPECT_THROW(build_edge_list(oneway).validate(), sim::TopologyError);
}

TEST(TopologyEdgeList, DuplicatesUnlessDeclaredParallel) {
  EdgeListSpec e;
  e.num_gpus = 2;
  e.edges = {{0, 1, 1e9, {}}, {0, 1, 1e9, {}}};
  EXPECT_NE(error_of([&] { build_edge_list(e).validate(); }).find("duplicate"), std::string::npos);
  e.edges[0].parallel = true;
  e.edges[1].parallel = true;
  EXPECT_NO_THROW(build_edge_list(e).validate());
}

TEST(TopologyEdgeList, BadEdgesNameTheField) {
  EdgeListSpec e;
  e.num_gpus = 2;
  e.edges = {{0, 1, -1, {}}};
  EXPECT_NE(error_of([&] { build_edge_list(e); }).find("edge 0 bandwidth is -1"), std::string::npos);
  e.edges = {{0, 7, 1e9, {}}};
  EXPECT_NE(error_of([&] { build_edge_list(e); }).find("names vertex 7"), std::string::npos);
  e.edges = {{1, 1, 1e9, {}}};
  EXPECT_NE(error_of([&] { build_edge_list(e); }).find("to itself"), std::string::npos);
  e.edges = {};
  e.num_gpus = 0;
  EXPECT_NE(error_of([&] { build_edge_list(e); }).find("num_gpus is 0"), std::string::npos);
  e.num_gpus = 2;
  e.other_vertices = {"s", "s"};
  EXPECT_NE(error_of([&] { build_edge_list(e); }).find("used twice"), std::string::npos);
}

}  // namespace
}  // namespace topo
