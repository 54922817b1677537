// Tests for workloads/collectives: lowering of each algorithm (phases, transfers, bytes, hops,
// latency steps), the alpha-beta estimate against closed forms worked out by hand, bus factors,
// parsing, errors and kAuto's choice. Every expected number is derived in the comment next to it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/error.h"
#include "workloads/collectives/collective.h"

namespace wl {
namespace {

using Hops = std::vector<std::pair<uint32_t, uint32_t>>;

std::vector<uint32_t> iota_group(uint32_t n, uint32_t first = 0) {
  std::vector<uint32_t> g(n);
  std::iota(g.begin(), g.end(), first);
  return g;
}

CollectiveRequest request(CollectiveOp op, Algorithm a, std::vector<uint32_t> group, double bytes) {
  CollectiveRequest r;
  r.op = op;
  r.algorithm = a;
  r.group = std::move(group);
  r.bytes = bytes;
  return r;
}

ClusterShape nodes_of(uint32_t gpus_per_node, uint32_t nics_per_node) {
  ClusterShape s;
  s.gpus_per_node = gpus_per_node;
  s.nics_per_node = nics_per_node;
  return s;
}

// A "single switch": one GPU per node, so every hop is inter_node_* and nothing else differs.
ClusterShape switch_like() { return nodes_of(1, 1); }

CostHints hints_a_b(double step_s, double bps) {
  CostHints h;
  h.inter_node_Bps = bps;
  h.inter_step_s = step_s;
  h.intra_node_Bps = bps;
  h.intra_step_s = step_s;
  return h;
}

double sum_hop_bytes(const CollectivePlan& p) {
  double total = 0.0;
  for (const auto& ph : p.phases)
    for (const auto& t : ph.transfers) total += t.bytes * static_cast<double>(t.hops.size());
  return total;
}

// The sequence of GPUs a closed ring visits, starting from hops[0].first.
std::vector<uint32_t> ring_order(const Hops& hops) {
  std::vector<uint32_t> order;
  for (const auto& h : hops) order.push_back(h.first);
  return order;
}

std::set<std::pair<uint32_t, uint32_t>> hop_set(const Hops& h) { return {h.begin(), h.end()}; }

void expect_config_error(const CollectiveRequest& r, const ClusterShape& s, const std::string& needle) {
  try {
    (void)lower_collective(r, s);
    ADD_FAILURE() << "expected ConfigError containing '" << needle << "'";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

constexpr double kGiB = 1073741824.0;

// ---------------------------------------------------------------------------------------------
// Names, parsing, bus factors

TEST(CollectiveNames, RoundTripAndAliases) {
  for (auto op : {CollectiveOp::kAllReduce, CollectiveOp::kReduceScatter, CollectiveOp::kAllGather,
                  CollectiveOp::kBroadcast, CollectiveOp::kReduce, CollectiveOp::kAllToAll, CollectiveOp::kSendRecv}) {
    EXPECT_EQ(parse_op(op_name(op)), op);
  }
  for (auto a : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kTree, Algorithm::kHalvingDoubling,
                 Algorithm::kHierarchical, Algorithm::kTorus, Algorithm::kDirect}) {
    EXPECT_EQ(parse_algorithm(algorithm_name(a)), a);
  }
  EXPECT_EQ(op_name(CollectiveOp::kAllReduce), "all-reduce");
  EXPECT_EQ(algorithm_name(Algorithm::kHalvingDoubling), "halving-doubling");
  // nccl-tests binary spellings (all_reduce_perf) and NCCL API spellings (ncclAllReduce).
  EXPECT_EQ(parse_op("all_reduce"), CollectiveOp::kAllReduce);
  EXPECT_EQ(parse_op("AllGather"), CollectiveOp::kAllGather);
  EXPECT_EQ(parse_op("alltoall"), CollectiveOp::kAllToAll);
  EXPECT_EQ(parse_algorithm("Rabenseifner"), Algorithm::kHalvingDoubling);
}

TEST(CollectiveNames, ParseErrorsListAcceptedNames) {
  try {
    (void)parse_op("allreduse");
    FAIL();
  } catch (const sim::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("allreduse"), std::string::npos) << m;
    EXPECT_NE(m.find("all-reduce, reduce-scatter, all-gather, broadcast, reduce, all-to-all, send-recv"),
              std::string::npos) << m;
  }
  try {
    (void)parse_algorithm("butterfly");
    FAIL();
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("auto, ring, tree, halving-doubling, hierarchical, torus, direct"),
              std::string::npos) << e.what();
  }
}

TEST(CollectiveBusFactor, MatchesNcclTestsPerformanceMd) {
  // nccl-tests doc/PERFORMANCE.md: all-reduce 2(n-1)/n, all-gather / reduce-scatter (n-1)/n,
  // all-to-all (n-1)/n, broadcast / reduce / send-recv 1.
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllReduce, 8), 1.75);      // 2*7/8
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllReduce, 2), 1.0);       // 2*1/2
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllGather, 8), 0.875);     // 7/8
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kReduceScatter, 4), 0.75);  // 3/4
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllToAll, 16), 0.9375);    // 15/16
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kSendRecv, 2), 1.0);
  EXPECT_DOUBLE_EQ(bus_factor(CollectiveOp::kAllReduce, 1), 0.0);  // nothing crosses a bus
}

// ---------------------------------------------------------------------------------------------
// Errors

TEST(CollectiveErrors, BadRequests) {
  const ClusterShape s = nodes_of(8, 8);
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kRing, {}, 1.0), s, "the group is empty");
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kRing, {0, 1, 2, 1}, 1.0), s,
                      "GPU 1 appears more than once");
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kRing, {0, 1}, -5.0), s, "bytes must be >= 0");
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kRing, {0, 1}, std::nan("")), s,
                      "bytes must be >= 0");
  expect_config_error(request(CollectiveOp::kSendRecv, Algorithm::kDirect, {0, 1, 2}, 1.0), s,
                      "send-recv needs a group of exactly 2 GPUs");
}

TEST(CollectiveErrors, AlgorithmNotApplicableNamesOpAlgorithmAndGroupSize) {
  const ClusterShape s = nodes_of(8, 8);
  try {
    (void)lower_collective(request(CollectiveOp::kAllToAll, Algorithm::kTree, iota_group(8), 1.0), s);
    FAIL();
  } catch (const sim::ConfigError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("tree does not implement all-to-all (use direct or auto)"), std::string::npos) << m;
    EXPECT_NE(m.find("on 8 ranks"), std::string::npos) << m;
  }
  expect_config_error(request(CollectiveOp::kBroadcast, Algorithm::kHalvingDoubling, iota_group(4), 1.0), s,
                      "halving-doubling does not implement broadcast (use ring, tree, or auto)");
  expect_config_error(request(CollectiveOp::kSendRecv, Algorithm::kRing, {0, 9}, 1.0), s,
                      "ring does not implement send-recv (use direct or auto)");
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kHalvingDoubling, iota_group(12), 1.0), s,
                      "halving-doubling needs a power-of-two group, got 12 ranks");
  // 3 GPUs on node 0, 1 on node 1.
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kHierarchical, {0, 1, 2, 8}, 1.0), s,
                      "hierarchical needs the same number of group GPUs on every node");
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kTorus, iota_group(8), 1.0), s,
                      "torus needs a torus cluster shape");
}

// ---------------------------------------------------------------------------------------------
// Ring

TEST(CollectiveRing, AllReduceOnOneNode) {
  // n = 4 on one 8-GPU node, S = 1000: one transfer around 0->1->2->3->0 carrying
  // 2(n-1)/n S = 1.5 * 1000 = 1500 bytes, 2(n-1) = 6 steps.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(4), 1000.0),
                                  nodes_of(8, 8));
  EXPECT_EQ(p.algorithm, Algorithm::kRing);
  EXPECT_EQ(p.op, CollectiveOp::kAllReduce);
  ASSERT_EQ(p.phases.size(), 1u);
  ASSERT_EQ(p.phases[0].transfers.size(), 1u);
  const Transfer& t = p.phases[0].transfers[0];
  EXPECT_EQ(t.hops, (Hops{{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
  EXPECT_DOUBLE_EQ(t.bytes, 1500.0);
  EXPECT_EQ(t.latency_steps, 6u);
  EXPECT_TRUE(p.note.empty());
}

TEST(CollectiveRing, FollowsGroupOrder) {
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, {3, 1, 2, 0}, 8.0),
                                  nodes_of(8, 8));
  EXPECT_EQ(p.phases[0].transfers[0].hops, (Hops{{3, 1}, {1, 2}, {2, 0}, {0, 3}}));
}

TEST(CollectiveRing, ReduceScatterAndAllGather) {
  // (n-1)/n S = 3/4 * 1000 = 750 bytes, n-1 = 3 steps.
  for (auto op : {CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    const auto p = lower_collective(request(op, Algorithm::kRing, iota_group(4), 1000.0), nodes_of(8, 8));
    ASSERT_EQ(p.phases.size(), 1u);
    ASSERT_EQ(p.phases[0].transfers.size(), 1u);
    EXPECT_DOUBLE_EQ(p.phases[0].transfers[0].bytes, 750.0);
    EXPECT_EQ(p.phases[0].transfers[0].latency_steps, 3u);
    EXPECT_EQ(p.phases[0].transfers[0].hops.size(), 4u);
  }
}

TEST(CollectiveRing, BroadcastAndReduceAreChainsThroughTheRoot) {
  // Root = group[0] = 5. Broadcast streams 5->6->7->4 (no hop back into the root); reduce flows
  // the other way round the same ring and ends at the root: 6->7->4->5. S bytes, n-1 = 3 steps.
  const std::vector<uint32_t> g = {5, 6, 7, 4};
  const auto b = lower_collective(request(CollectiveOp::kBroadcast, Algorithm::kRing, g, 64.0), nodes_of(8, 8));
  ASSERT_EQ(b.phases.size(), 1u);
  ASSERT_EQ(b.phases[0].transfers.size(), 1u);
  EXPECT_EQ(b.phases[0].transfers[0].hops, (Hops{{5, 6}, {6, 7}, {7, 4}}));
  EXPECT_DOUBLE_EQ(b.phases[0].transfers[0].bytes, 64.0);
  EXPECT_EQ(b.phases[0].transfers[0].latency_steps, 3u);
  const auto r = lower_collective(request(CollectiveOp::kReduce, Algorithm::kRing, g, 64.0), nodes_of(8, 8));
  EXPECT_EQ(r.phases[0].transfers[0].hops, (Hops{{6, 7}, {7, 4}, {4, 5}}));
  EXPECT_EQ(r.phases[0].transfers[0].latency_steps, 3u);
}

TEST(CollectiveRing, MultiNodeChannelsRotateTheLocalOrder) {
  // 2 nodes x 8 GPUs, 8 NICs: C = min(8, 8) = 8 rings. Ring c goes through node 0 starting at
  // local c and then node 1 starting at local c. Each carries S/8 of the data:
  // 2(n-1)/n * S/C = 2*15/16 * 1600/8 = 375 bytes, 2(n-1) = 30 steps.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(16), 1600.0),
                                  nodes_of(8, 8));
  ASSERT_EQ(p.phases.size(), 1u);
  const auto& ts = p.phases[0].transfers;
  ASSERT_EQ(ts.size(), 8u);
  EXPECT_EQ(ring_order(ts[0].hops), iota_group(16));
  EXPECT_EQ(ring_order(ts[3].hops),
            (std::vector<uint32_t>{3, 4, 5, 6, 7, 0, 1, 2, 11, 12, 13, 14, 15, 8, 9, 10}));
  std::map<uint32_t, int> nic_egress, nic_ingress;
  for (const auto& t : ts) {
    EXPECT_DOUBLE_EQ(t.bytes, 375.0);
    EXPECT_EQ(t.latency_steps, 30u);
    ASSERT_EQ(t.hops.size(), 16u);
    EXPECT_EQ(t.hops.back().second, t.hops.front().first);  // closed ring
    for (const auto& [s, d] : t.hops) {
      if (s / 8 != d / 8) {
        ++nic_egress[s];
        ++nic_ingress[d];
      }
    }
  }
  // Ring c leaves node 0 from local c-1 and enters node 1 at local c (and back): every one of
  // the 16 GPUs' NICs carries exactly one ring's egress and one ring's ingress.
  EXPECT_EQ(nic_egress.size(), 16u);
  EXPECT_EQ(nic_ingress.size(), 16u);
  for (const auto& [gpu, c] : nic_egress) EXPECT_EQ(c, 1) << gpu;
  for (const auto& [gpu, c] : nic_ingress) EXPECT_EQ(c, 1) << gpu;
}

TEST(CollectiveRing, ChannelsLimitedByNics) {
  // 2 NICs per node: C = min(2, 8) = 2; ring 1 is 1..7,0 then 9..15,8.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(16), 1600.0),
                                  nodes_of(8, 2));
  ASSERT_EQ(p.phases[0].transfers.size(), 2u);
  EXPECT_EQ(ring_order(p.phases[0].transfers[1].hops),
            (std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 0, 9, 10, 11, 12, 13, 14, 15, 8}));
  // 2*15/16 * 1600/2 = 1500.
  EXPECT_DOUBLE_EQ(p.phases[0].transfers[1].bytes, 1500.0);
}

TEST(CollectiveRing, UnevenGroupFallsBackToFlatRing) {
  // 3 GPUs of node 0 and 1 of node 1: no channel layout; one ring in group order, noted.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, {0, 1, 2, 8}, 100.0),
                                  nodes_of(8, 8));
  ASSERT_EQ(p.phases[0].transfers.size(), 1u);
  EXPECT_EQ(p.phases[0].transfers[0].hops, (Hops{{0, 1}, {1, 2}, {2, 8}, {8, 0}}));
  EXPECT_NE(p.note.find("flat ring in group order"), std::string::npos) << p.note;
}

TEST(CollectiveRing, AllReduceConservesBytes) {
  // Each rank sends 2(n-1)/n S, so n ranks send 2(n-1) S in total, whatever the channel split.
  // n = 6 on one node: 2*5*S = 10 S. 2 x 8 with 8 channels: 2*15*S = 30 S.
  const double s = 12345.0;
  const auto one = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(6), s),
                                    nodes_of(8, 8));
  EXPECT_NEAR(sum_hop_bytes(one), 10.0 * s, 1e-9 * s);
  const auto two = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(16), s),
                                    nodes_of(8, 8));
  EXPECT_NEAR(sum_hop_bytes(two), 30.0 * s, 1e-9 * s);
  // Reduce-scatter: each rank sends (n-1)/n S: 16 ranks -> 15 S.
  const auto rs = lower_collective(request(CollectiveOp::kReduceScatter, Algorithm::kRing, iota_group(16), s),
                                   nodes_of(8, 8));
  EXPECT_NEAR(sum_hop_bytes(rs), 15.0 * s, 1e-9 * s);
}

TEST(CollectiveEstimate, RingClosedFormsOnASwitch) {
  // gpus_per_node = 1: every hop is one a = 5 us, B = 100 GB/s hop. n = 8, S = 64 MB.
  // all-reduce 2(n-1)(a + S/(nB)) = 14 * (5e-6 + 64e6/8e11) = 14 * (5e-6 + 8e-5) = 1.19e-3 s.
  // RS / AG (n-1)(a + S/(nB)) = 7 * 8.5e-5 = 5.95e-4 s.
  // broadcast chain (n-1) a + S/B = 3.5e-5 + 6.4e-4 = 6.75e-4 s.
  const CostHints h = hints_a_b(5e-6, 100e9);
  const auto est = [&](CollectiveOp op) {
    return estimate_seconds(lower_collective(request(op, Algorithm::kRing, iota_group(8), 64e6), switch_like(), h),
                            switch_like(), h);
  };
  EXPECT_NEAR(est(CollectiveOp::kAllReduce), 1.19e-3, 1e-12);
  EXPECT_NEAR(est(CollectiveOp::kReduceScatter), 5.95e-4, 1e-12);
  EXPECT_NEAR(est(CollectiveOp::kAllGather), 5.95e-4, 1e-12);
  EXPECT_NEAR(est(CollectiveOp::kBroadcast), 6.75e-4, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Tree

// Per-GPU number of tree neighbours, from the child->parent hops of a transfer.
std::map<uint32_t, int> degrees(const Hops& hops) {
  std::map<uint32_t, int> d;
  for (const auto& [s, dst] : hops) ++d[s];  // hops hold both directions: out-degree = degree
  return d;
}

TEST(CollectiveTree, DoubleBinaryTreeOnEightRanks) {
  // In-order tree over 8 positions (parent of r with lowest set bit b: r+b if bit 2b of r is clear
  // and r+b < n, else r-b): 1->2, 3->2, 2->4, 5->6, 7->6, 6->4, 4->0. Depth 3 = ceil(log2 8).
  // Tree 1 mirrors labels (r -> 7-r): 0->1, 2->1, 1->3, 4->5, 6->5, 5->3, 3->7.
  // Leaves: odd ranks in tree 0, even ranks in tree 1. Each tree carries S/2 = 500 over its 7
  // edges in both directions (14 hops); steps 2 * 3 = 6.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTree, iota_group(8), 1000.0),
                                  nodes_of(8, 8));
  EXPECT_EQ(p.algorithm, Algorithm::kTree);
  ASSERT_EQ(p.phases.size(), 1u);
  ASSERT_EQ(p.phases[0].transfers.size(), 2u);
  const auto& t0 = p.phases[0].transfers[0];
  const auto& t1 = p.phases[0].transfers[1];
  for (const auto* t : {&t0, &t1}) {
    EXPECT_DOUBLE_EQ(t->bytes, 500.0);
    EXPECT_EQ(t->latency_steps, 6u);
    EXPECT_EQ(t->hops.size(), 14u);
  }
  const auto s0 = hop_set(t0.hops);
  for (auto e : Hops{{1, 2}, {3, 2}, {2, 4}, {5, 6}, {7, 6}, {6, 4}, {4, 0}}) {
    EXPECT_TRUE(s0.count(e)) << e.first << "->" << e.second;
    EXPECT_TRUE(s0.count({e.second, e.first})) << e.second << "->" << e.first;
  }
  const auto s1 = hop_set(t1.hops);
  for (auto e : Hops{{0, 1}, {2, 1}, {1, 3}, {4, 5}, {6, 5}, {5, 3}, {3, 7}}) {
    EXPECT_TRUE(s1.count(e)) << e.first << "->" << e.second;
  }
  // Every rank is a leaf (one neighbour; the roots 0 and 7 have one child but are not leaves
  // in the sense NCCL cares about: they still pass data) in at most one tree.
  const auto d0 = degrees(t0.hops), d1 = degrees(t1.hops);
  for (uint32_t r = 1; r < 7; ++r) EXPECT_FALSE(d0.at(r) == 1 && d1.at(r) == 1) << r;
}

TEST(CollectiveTree, OddRankCountShiftsTheSecondTree) {
  // n = 5. Tree 0: 1->2, 3->2, 2->4, 4->0 (depth 3). Tree 1 relabels r -> r-1 (mod 5), so its
  // root is rank 1: 0->1, 3->0, 2->3, 4->3 (depth 3). Leaves {1,3} vs {2,4}: disjoint.
  // steps 2 * ceil(log2 5) = 6.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTree, iota_group(5), 10.0),
                                  nodes_of(8, 8));
  const auto& t1 = p.phases[0].transfers[1];
  const auto s1 = hop_set(t1.hops);
  for (auto e : Hops{{0, 1}, {3, 0}, {2, 3}, {4, 3}}) EXPECT_TRUE(s1.count(e)) << e.first << "->" << e.second;
  EXPECT_EQ(t1.latency_steps, 6u);
  EXPECT_EQ(p.phases[0].transfers[0].latency_steps, 6u);
}

TEST(CollectiveTree, MultiNodeTreeOverNodesWithChains) {
  // 4 nodes x 2 GPUs. Tree 0 over nodes: 1->2, 3->2, 2->0; heads are local 0 (GPUs 0,2,4,6),
  // chains 1->0, 3->2, 5->4, 7->6; inter-node edges 2->4, 6->4, 4->0. Tree 1 mirrors nodes
  // (node parents 2->1, 0->1, 1->3) with heads at local G/2 = 1 (GPUs 1,3,5,7): edges 5->3,
  // 1->3, 3->7 and chains 0->1, 2->3, 4->5, 6->7. Depth = 2 node levels + (G-1) = 3, steps 6.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTree, iota_group(8), 100.0),
                                  nodes_of(2, 2));
  ASSERT_EQ(p.phases[0].transfers.size(), 2u);
  const auto s0 = hop_set(p.phases[0].transfers[0].hops);
  const auto s1 = hop_set(p.phases[0].transfers[1].hops);
  EXPECT_EQ(s0.size(), 14u);
  for (auto e : Hops{{1, 0}, {3, 2}, {5, 4}, {7, 6}, {2, 4}, {6, 4}, {4, 0}}) EXPECT_TRUE(s0.count(e));
  for (auto e : Hops{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {5, 3}, {1, 3}, {3, 7}}) EXPECT_TRUE(s1.count(e));
  EXPECT_EQ(p.phases[0].transfers[0].latency_steps, 6u);
  EXPECT_DOUBLE_EQ(p.phases[0].transfers[0].bytes, 50.0);
}

TEST(CollectiveTree, OneTreePerChannelLeavesThroughEachNic) {
  // 4 nodes x 4 GPUs with 4 NICs: C = min(4, 4) = 4 channel trees, shapes 0, 1, 0, 1, heads at
  // local c * 4 / 4 = c, each carrying S/4 = 25. Channel 2 is tree 0 (node parents 1->2, 3->2,
  // 2->0) with heads GPU 4k + 2: inter-node edges 6->10, 14->10, 10->2, and its chain from the
  // head through the rotated order 3, 0, 1: 3->2, 0->3, 1->0 in node 0. Channel 3 is tree 1
  // (node parents 2->1, 0->1, 1->3) with heads 4k + 3: 11->7, 3->7, 7->15. Every inter-node edge
  // of channel c joins two GPUs of local index c, so the four trees use the four NICs. Depth 2
  // node levels + 3 along the chain = 5: 10 steps.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTree, iota_group(16), 100.0),
                                  nodes_of(4, 4));
  ASSERT_EQ(p.phases[0].transfers.size(), 4u);
  for (uint32_t c = 0; c < 4; ++c) {
    const auto& t = p.phases[0].transfers[c];
    EXPECT_DOUBLE_EQ(t.bytes, 25.0) << "channel " << c;
    EXPECT_EQ(t.latency_steps, 10u) << "channel " << c;
    for (auto [a, b] : t.hops)
      if (a / 4 != b / 4) { EXPECT_TRUE(a % 4 == c && b % 4 == c) << "channel " << c << " edge " << a << "->" << b; }
  }
  const auto s2 = hop_set(p.phases[0].transfers[2].hops);
  for (auto e : Hops{{6, 10}, {14, 10}, {10, 2}, {3, 2}, {0, 3}, {1, 0}}) EXPECT_TRUE(s2.count(e)) << e.first << "->" << e.second;
  const auto s3 = hop_set(p.phases[0].transfers[3].hops);
  for (auto e : Hops{{11, 7}, {3, 7}, {7, 15}}) EXPECT_TRUE(s3.count(e)) << e.first << "->" << e.second;
}

TEST(CollectiveTree, BroadcastAndReduceUseOneTreeRootedAtGroupFront) {
  // Group {5,1,2,3}: positions 0..3, tree 1->2, 3->2, 2->0 rooted at position 0 = GPU 5.
  // Broadcast hops parent->child: 5->2, 2->1, 2->3; reduce the reverse. S bytes, depth 2 steps.
  const std::vector<uint32_t> g = {5, 1, 2, 3};
  const auto b = lower_collective(request(CollectiveOp::kBroadcast, Algorithm::kTree, g, 77.0), nodes_of(8, 8));
  ASSERT_EQ(b.phases[0].transfers.size(), 1u);
  EXPECT_EQ(hop_set(b.phases[0].transfers[0].hops), hop_set({{5, 2}, {2, 1}, {2, 3}}));
  EXPECT_DOUBLE_EQ(b.phases[0].transfers[0].bytes, 77.0);
  EXPECT_EQ(b.phases[0].transfers[0].latency_steps, 2u);
  const auto r = lower_collective(request(CollectiveOp::kReduce, Algorithm::kTree, g, 77.0), nodes_of(8, 8));
  EXPECT_EQ(hop_set(r.phases[0].transfers[0].hops), hop_set({{2, 5}, {1, 2}, {3, 2}}));
}

TEST(CollectiveTree, ChunkIsNcclsForEachProtocol) {
  // NCCL v2.26.2 calcCollChunking (src/enqueue.cc) with its default buffers (8 steps each):
  // Simple one step of 4 MiB / 8 = 524,288 B; LL one step of 512 threads x 8 lines x 16 B =
  // 65,536 B, half of it data: 32,768 B; LL128 one step of 640 x 120 x 8 B = 614,400 B, 15/16 of
  // it data: 576,000 B. The result is rounded down to the protocol's grain (512 B, 16 B and, for
  // LL128, 32 x 8 / 16 x 15 x 8 = 1,920 B).
  EXPECT_DOUBLE_EQ(tree_chunk_bytes(Protocol::kSimple, 64.0 * (1 << 20), 8, 10, 8), 524288.0);
  EXPECT_DOUBLE_EQ(tree_chunk_bytes(Protocol::kLL, 64.0 * (1 << 20), 8, 10, 8), 32768.0);
  // LL128, 10 nodes of 8 on 8 channels: nsteps = 1 + log2i(10) + 0.1 x 8 = 4.8, so halve while a
  // channel holds fewer than 4.8 x 64 / 8 = 38.4 chunks (and the chunk is over 128 KiB), then
  // fewer than 9.6 (over 32 KiB). 64 MiB: 67108864 / (8 x 576000) = 14 -> 288,000: 29 ->
  // 144,000: 58, enough (75 grains). 1 MiB: 0, 0, 0 chunks down to 72,000 (no longer over
  // 128 KiB), then 1 -> 36,000: 3 -> 18,000 (no longer over 32 KiB): 9 grains, 17,280 B.
  EXPECT_DOUBLE_EQ(tree_chunk_bytes(Protocol::kLL128, 64.0 * (1 << 20), 8, 10, 8), 144000.0);
  EXPECT_DOUBLE_EQ(tree_chunk_bytes(Protocol::kLL128, 1 << 20, 8, 10, 8), 17280.0);
}

TEST(CollectiveTree, FillIsOneChunkPerEdgeOfTheDeepestPathUpAndDownLessTheSlowest) {
  // Two nodes of 2 GPUs (1 NIC each), all-reduce of 8 MiB, Simple, hints: inside a node 100 GB/s,
  // across 10 GB/s. Channels: max(2, min(1 NIC, 2 GPUs)) = 2 trees, heads local 0 and 1; tree c
  // climbs node k's chain to its head, then one node's head to the other's (tree 1 mirrors tree
  // 0). Upward edges: tree 0: 1->0, 3->2, 2->0; tree 1: 0->1, 2->3, 1->3. Each GPU sends one
  // upward edge inside its node and hears one (100 GB/s: 5.24288 us a 524,288-byte chunk); 2 and
  // 1 each send one across to a parent hearing one (10 GB/s: 52.4288 us). Deepest path (tree 0:
  // 3->2->0): up 57.67168 us, down as much, less the slowest 52.4288: 62.91456 us. Both alike.
  CostHints h = hints_a_b(1e-6, 10e9);
  h.intra_node_Bps = 100e9;
  auto simple = [](CollectiveRequest r) {
    r.protocol = Protocol::kSimple;
    return r;
  };
  const auto p = lower_collective(simple(request(CollectiveOp::kAllReduce, Algorithm::kTree, iota_group(4), 8.0 * (1 << 20))),
                                  nodes_of(2, 1), h);
  ASSERT_EQ(p.phases.size(), 1u);
  EXPECT_NEAR(p.phases[0].fill_s, 62.91456e-6, 1e-15);
  // Reduce: one tree, up only: 3->2->0 less the slowest: 5.24288 us.
  const auto r = lower_collective(simple(request(CollectiveOp::kReduce, Algorithm::kTree, iota_group(4), 8.0 * (1 << 20))),
                                  nodes_of(2, 1), h);
  EXPECT_NEAR(r.phases[0].fill_s, 5.24288e-6, 1e-15);
}

TEST(CollectiveEstimate, TreeSharesEachGpusPort) {
  // n = 8 on a switch (a = 5 us, B = 100 GB/s), S = 64 MB. Rank 2 has 3 neighbours in tree 0 and
  // is a leaf (1) in tree 1: 4 hops leave its port, so each gets B/4. Each tree moves S/2:
  // 2*3*a + (S/2)/(B/4) = 3e-5 + 2 * 64e6 / 1e11 = 3e-5 + 1.28e-3 = 1.31e-3 s.
  // Plus the chunk pipeline's fill (Simple: 524,288-byte chunks). Upward edges: tree 0 1->2, 3->2,
  // 2->4, 6->4, 5->6, 7->6, 4->0; tree 1 0->1, 2->1, 1->3, 5->3, 4->5, 6->5, 3->7. Every GPU but 0
  // and 7 sends two of them and every parent but 0 and 7 hears two, so each upward edge runs at
  // B/2 = 50 GB/s: 10.48576 us a chunk. Deepest path 3 edges (1->2->4->0), up and down: 6 stages
  // less the slowest: 5 x 10.48576 us = 52.4288 us.
  const CostHints h = hints_a_b(5e-6, 100e9);
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTree, iota_group(8), 64e6),
                                  switch_like(), h);
  EXPECT_NEAR(p.phases[0].fill_s, 52.4288e-6, 1e-15);
  EXPECT_NEAR(estimate_seconds(p, switch_like(), h), 1.31e-3 + 52.4288e-6, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Halving-doubling

TEST(CollectiveHalvingDoubling, PhasesDistancesAndSizes) {
  // n = 8, S = 800. Reduce-scatter by halving from distance 1: (d=1, 400), (d=2, 200), (d=4, 100);
  // all-gather by doubling the same distances backwards: (d=4, 100), (d=2, 200), (d=1, 400).
  const std::vector<uint32_t> g = {10, 11, 12, 13, 14, 15, 16, 17};
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kHalvingDoubling, g, 800.0),
                                  nodes_of(8, 8));
  ASSERT_EQ(p.phases.size(), 6u);
  const std::vector<std::pair<size_t, double>> expect = {{1, 400}, {2, 200}, {4, 100}, {4, 100}, {2, 200}, {1, 400}};
  for (size_t k = 0; k < 6; ++k) {
    const auto& ts = p.phases[k].transfers;
    ASSERT_EQ(ts.size(), 8u) << k;
    for (size_t r = 0; r < 8; ++r) {
      EXPECT_EQ(ts[r].hops, (Hops{{g[r], g[r ^ expect[k].first]}})) << "phase " << k << " rank " << r;
      EXPECT_DOUBLE_EQ(ts[r].bytes, expect[k].second);
      EXPECT_EQ(ts[r].latency_steps, 1u);
    }
  }
  // Each rank sends 400+200+100 = 700 = (n-1)/n S per half: total 2 * 8 * 700 = 11200 = 2(n-1)S.
  EXPECT_DOUBLE_EQ(sum_hop_bytes(p), 11200.0);
}

TEST(CollectiveHalvingDoubling, ReduceScatterAndAllGatherAreTheHalves) {
  // n = 4, S = 400: RS (d=1, 200), (d=2, 100); AG (d=2, 100), (d=1, 200).
  const auto rs = lower_collective(request(CollectiveOp::kReduceScatter, Algorithm::kHalvingDoubling,
                                           iota_group(4), 400.0), nodes_of(8, 8));
  ASSERT_EQ(rs.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(rs.phases[0].transfers[0].bytes, 200.0);
  EXPECT_EQ(rs.phases[0].transfers[0].hops, (Hops{{0, 1}}));
  EXPECT_DOUBLE_EQ(rs.phases[1].transfers[0].bytes, 100.0);
  EXPECT_EQ(rs.phases[1].transfers[0].hops, (Hops{{0, 2}}));
  const auto ag = lower_collective(request(CollectiveOp::kAllGather, Algorithm::kHalvingDoubling,
                                           iota_group(4), 400.0), nodes_of(8, 8));
  ASSERT_EQ(ag.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(ag.phases[0].transfers[0].bytes, 100.0);
  EXPECT_EQ(ag.phases[0].transfers[0].hops, (Hops{{0, 2}}));
  EXPECT_DOUBLE_EQ(ag.phases[1].transfers[0].bytes, 200.0);
}

TEST(CollectiveEstimate, HalvingDoublingClosedForm) {
  // 2 log2(n) a + 2(n-1)/n S/B, n = 8, a = 5 us, B = 100 GB/s, S = 64 MB:
  // 6 * 5e-6 + 2 * 7/8 * 64e6 / 1e11 = 3e-5 + 1.12e-3 = 1.15e-3 s.
  // Reduce-scatter alone: 3 * 5e-6 + 7/8 * 6.4e-4 = 1.5e-5 + 5.6e-4 = 5.75e-4 s.
  const CostHints h = hints_a_b(5e-6, 100e9);
  const auto ar = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kHalvingDoubling, iota_group(8), 64e6),
                                   switch_like(), h);
  EXPECT_NEAR(estimate_seconds(ar, switch_like(), h), 1.15e-3, 1e-12);
  const auto rs = lower_collective(
      request(CollectiveOp::kReduceScatter, Algorithm::kHalvingDoubling, iota_group(8), 64e6), switch_like(), h);
  EXPECT_NEAR(estimate_seconds(rs, switch_like(), h), 5.75e-4, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Hierarchical

TEST(CollectiveHierarchical, ThreePhasesOnTwoNodes) {
  // 2 nodes x 8 GPUs, S = 1600. Phase 1: per node a ring reduce-scatter, (G-1)/G S = 1400 bytes,
  // 7 steps. Phase 2: 8 rails (local i of both nodes), all-reduce of S/G = 200 across N = 2:
  // 2(N-1)/N * 200 = 200 bytes, 2 steps. Phase 3: like phase 1.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kHierarchical, iota_group(16), 1600.0),
                                  nodes_of(8, 8));
  EXPECT_EQ(p.algorithm, Algorithm::kHierarchical);
  ASSERT_EQ(p.phases.size(), 3u);
  ASSERT_EQ(p.phases[0].transfers.size(), 2u);
  EXPECT_EQ(ring_order(p.phases[0].transfers[1].hops), iota_group(8, 8));
  EXPECT_DOUBLE_EQ(p.phases[0].transfers[0].bytes, 1400.0);
  EXPECT_EQ(p.phases[0].transfers[0].latency_steps, 7u);
  ASSERT_EQ(p.phases[1].transfers.size(), 8u);
  EXPECT_EQ(p.phases[1].transfers[3].hops, (Hops{{3, 11}, {11, 3}}));
  EXPECT_DOUBLE_EQ(p.phases[1].transfers[3].bytes, 200.0);
  EXPECT_EQ(p.phases[1].transfers[3].latency_steps, 2u);
  ASSERT_EQ(p.phases[2].transfers.size(), 2u);
  EXPECT_DOUBLE_EQ(p.phases[2].transfers[0].bytes, 1400.0);
}

TEST(CollectiveHierarchical, ReduceScatterAndAllGatherHaveTwoPhases) {
  // RS: intra (7/8 * 1600 = 1400, 7 steps) then rails ((N-1)/N * S/G = 1/2 * 200 = 100, 1 step).
  // AG: the same two stages in the other order.
  const auto rs = lower_collective(
      request(CollectiveOp::kReduceScatter, Algorithm::kHierarchical, iota_group(16), 1600.0), nodes_of(8, 8));
  ASSERT_EQ(rs.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(rs.phases[0].transfers[0].bytes, 1400.0);
  EXPECT_DOUBLE_EQ(rs.phases[1].transfers[0].bytes, 100.0);
  EXPECT_EQ(rs.phases[1].transfers[0].latency_steps, 1u);
  const auto ag = lower_collective(
      request(CollectiveOp::kAllGather, Algorithm::kHierarchical, iota_group(16), 1600.0), nodes_of(8, 8));
  ASSERT_EQ(ag.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(ag.phases[0].transfers[0].bytes, 100.0);
  EXPECT_DOUBLE_EQ(ag.phases[1].transfers[0].bytes, 1400.0);
}

TEST(CollectiveHierarchical, SingleNodeDegradesToRing) {
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kHierarchical, iota_group(8), 80.0),
                                  nodes_of(8, 8));
  EXPECT_EQ(p.algorithm, Algorithm::kRing);
  EXPECT_NE(p.note.find("single node"), std::string::npos) << p.note;
  EXPECT_DOUBLE_EQ(p.phases[0].transfers[0].bytes, 140.0);  // 2*7/8 * 80
}

TEST(CollectiveEstimate, HierarchicalWorkedByHandOnTwoNodes) {
  // Default hints: intra 450 GB/s and 2 us per step, inter 50 GB/s and 6 us. S = 1 GiB.
  // Phase 1: 7 * 2e-6 + (7/8 * 1073741824 = 939524096) / 450e9 = 1.4e-5 + 2.0878313244e-3
  //        = 2.1018313244e-3.
  // Phase 2: 2 * 6e-6 + (2*1/2 * 1073741824/8 = 134217728) / 50e9 = 1.2e-5 + 2.68435456e-3
  //        = 2.69635456e-3.
  // Phase 3 = phase 1. Total = 2 * 2.1018313244e-3 + 2.69635456e-3 = 6.9000172089e-3 s.
  const CostHints h;
  const ClusterShape s = nodes_of(8, 8);
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kHierarchical, iota_group(16), kGiB),
                                  s, h);
  EXPECT_NEAR(estimate_seconds(p, s, h), 6.9000172089e-3, 1e-12);
  // The 8-channel ring on the same machine: 2(n-1) = 30 steps, each at the mean step latency of
  // the ring's 16 hops (14 inside a node at 2 us, 2 across at 6 us: 2.5 us), 75 us; each ring
  // carries 2*15/16 * 1 GiB / 8 = 251658240 bytes through one NIC: 7.5e-5 + 5.0331648e-3
  // = 5.1081648e-3 s (each GPU's NVLink port carries the 7 other rings: 450/7 = 64 GB/s > 50 GB/s,
  // not the limit).
  const auto r = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(16), kGiB), s, h);
  EXPECT_NEAR(estimate_seconds(r, s, h), 5.1081648e-3, 1e-12);
}

// ---------------------------------------------------------------------------------------------
// Torus

ClusterShape torus(uint32_t x, uint32_t y, uint32_t z) {
  ClusterShape s;
  s.gpus_per_node = 1;
  s.nics_per_node = 1;
  s.torus = true;
  s.torus_dims = {x, y, z};
  return s;
}

TEST(CollectiveTorus, AllReduceOn4x4x4StagesWorkedByHand) {
  // 64 chips, S = 1280. Each stage: 16 lines x 2 directions = 32 transfers of 4 hops, 3 steps.
  // RS x: data S, each direction 3/4 * S/2 = 3S/8 = 480; data becomes S/4 = 320.
  // RS y: 3/4 * 320/2 = 120; data S/16 = 80.  RS z: 3/4 * 80/2 = 30; data S/64 = 20.
  // AG z: output 80: 3/4 * 80/2 = 30. AG y: output 320: 120. AG x: output 1280: 480.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, iota_group(64), 1280.0),
                                  torus(4, 4, 4));
  EXPECT_EQ(p.algorithm, Algorithm::kTorus);
  ASSERT_EQ(p.phases.size(), 6u);
  const double expect[6] = {480, 120, 30, 30, 120, 480};
  for (size_t k = 0; k < 6; ++k) {
    ASSERT_EQ(p.phases[k].transfers.size(), 32u) << k;
    for (const auto& t : p.phases[k].transfers) {
      EXPECT_DOUBLE_EQ(t.bytes, expect[k]) << k;
      EXPECT_EQ(t.latency_steps, 3u);
      EXPECT_EQ(t.hops.size(), 4u);
    }
  }
  // The x line through chip 0 both ways, the y line (stride 4) and the z line (stride 16).
  EXPECT_EQ(p.phases[0].transfers[0].hops, (Hops{{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
  EXPECT_EQ(p.phases[0].transfers[1].hops, (Hops{{3, 2}, {2, 1}, {1, 0}, {0, 3}}));
  EXPECT_EQ(p.phases[1].transfers[0].hops, (Hops{{0, 4}, {4, 8}, {8, 12}, {12, 0}}));
  EXPECT_EQ(p.phases[2].transfers[0].hops, (Hops{{0, 16}, {16, 32}, {32, 48}, {48, 0}}));
  EXPECT_EQ(p.phases[5].transfers[0].hops, (Hops{{0, 1}, {1, 2}, {2, 3}, {3, 0}}));
  // Conservation: 6 stages x 32 transfers x 4 hops: 128 * 2 * (480 + 120 + 30) = 161280 bytes,
  // the same 2(n-1)/n S = 2 * 63/64 * 1280 = 2520 per chip as a flat ring (x 64 = 161280).
  EXPECT_DOUBLE_EQ(sum_hop_bytes(p), 2.0 * (480 + 120 + 30) * 32 * 4);
}

TEST(CollectiveTorus, EstimateOn4x4x4) {
  // Each directed torus link carries one transfer per stage: 6 stages x (3 a) + bytes/B with
  // bytes 3S/8 + 3S/32 + 3S/128 twice = 126/128 S = 63/64 S. a = 5 us, B = 100 GB/s, S = 64 MB:
  // 18 * 5e-6 + 63/64 * 64e6 / 1e11 = 9e-5 + 6.3e-4 = 7.2e-4 s.
  const CostHints h = hints_a_b(5e-6, 100e9);
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, iota_group(64), 64e6),
                                  torus(4, 4, 4), h);
  EXPECT_NEAR(estimate_seconds(p, torus(4, 4, 4), h), 7.2e-4, 1e-12);
}

TEST(CollectiveTorus, SizeOneDimensionsAndSubGridsAreSkipped) {
  // 4x4x1: only x and y stages, 4 phases. The z = 1 plane of a 4x4x4 torus (GPUs 16..31) is a
  // sub-grid spanning x and y only: also 4 phases, the first x line 16->17->18->19.
  const auto flat = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, iota_group(16), 64.0),
                                     torus(4, 4, 1));
  EXPECT_EQ(flat.phases.size(), 4u);
  const auto plane = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, iota_group(16, 16), 64.0),
                                      torus(4, 4, 4));
  ASSERT_EQ(plane.phases.size(), 4u);
  EXPECT_EQ(plane.phases[0].transfers[0].hops, (Hops{{16, 17}, {17, 18}, {18, 19}, {19, 16}}));
  // RS alone: x then y; AG alone: y then x with the output sizes S/4 then S (3/4*16/2 = 6, 24).
  const auto ag = lower_collective(request(CollectiveOp::kAllGather, Algorithm::kTorus, iota_group(16), 64.0),
                                   torus(4, 4, 1));
  ASSERT_EQ(ag.phases.size(), 2u);
  EXPECT_DOUBLE_EQ(ag.phases[0].transfers[0].bytes, 6.0);
  EXPECT_EQ(ag.phases[0].transfers[0].hops.front(), (std::pair<uint32_t, uint32_t>{0, 4}));
  EXPECT_DOUBLE_EQ(ag.phases[1].transfers[0].bytes, 24.0);
  // Not a sub-grid: {0, 1, 2, 5} spans x {0,1,2} x y {0,1} = 6 cells for 4 GPUs.
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kTorus, {0, 1, 2, 5}, 1.0), torus(4, 4, 4),
                      "full sub-grid");
}

TEST(CollectiveTorus, PodsAreTheLastDimensionOverTheDataCentreNetwork) {
  // 3 pods of a 4x1x1 torus: GPU = x + 4 * pod. All-reduce of S = 960 over all 12:
  // RS x: 3/4 * 960/2 = 360 per direction, data 240; RS pods (3 pods): 2/3 * 240/2 = 80, data 80;
  // AG pods: output 240: 80; AG x: output 960: 360. The pod lines join chips of one x: {0, 4, 8}.
  ClusterShape s = torus(4, 1, 1);
  s.torus_pods = 3;
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, iota_group(12), 960.0), s);
  ASSERT_EQ(p.phases.size(), 4u);
  const double expect[4] = {360, 80, 80, 360};
  for (size_t k = 0; k < 4; ++k) {
    ASSERT_EQ(p.phases[k].transfers.size(), k == 0 || k == 3 ? 6u : 8u) << k;  // 3 x-lines or 4 pod-lines, 2 ways
    EXPECT_DOUBLE_EQ(p.phases[k].transfers[0].bytes, expect[k]) << k;
  }
  EXPECT_EQ(p.phases[1].transfers[0].hops, (Hops{{0, 4}, {4, 8}, {8, 0}}));
  EXPECT_EQ(p.phases[0].transfers[2].hops.front(), (std::pair<uint32_t, uint32_t>{4, 5}));  // pod 1's x line
  // Conservation: the same 2(n-1)/n S per GPU as a flat ring: 2 * 11/12 * 960 = 1760.
  EXPECT_DOUBLE_EQ(sum_hop_bytes(p), 1760.0 * 12);
  // One chip per pod (GPUs 1, 5, 9: x = 1 in every pod) is a 1x1x1 x 3 grid: one pod ring.
  const auto dp = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, {1, 5, 9}, 960.0), s);
  ASSERT_EQ(dp.phases.size(), 2u);
  EXPECT_EQ(dp.phases[0].transfers[0].hops, (Hops{{1, 5}, {5, 9}, {9, 1}}));
  // Different chips in different pods is not a sub-grid.
  expect_config_error(request(CollectiveOp::kAllReduce, Algorithm::kTorus, {0, 5}, 1.0), s,
                      "the last factor counts pods");
}

TEST(CollectiveTorus, EstimateSeesTheDataCentreNetworkBetweenPods) {
  // {1, 5, 9}: x = 1 in each of 3 pods, one pod ring both ways, S = 3e9. Each phase (RS, AG):
  // 2 transfers of 2/3 x S/2 = 1e9 bytes, 2 steps. Chip 1's DCN link out carries hop 1->5 of one
  // and 1->9 of the other: each at DCN / 2 = 5 GB/s. Per phase 2 x 20 us + 1e9 / 5e9 = 0.20004 s;
  // two phases 0.40008 s. Without DCN hints the hops would look like ICI links (100 GB/s).
  ClusterShape s = torus(4, 1, 1);
  s.torus_pods = 3;
  CostHints h = hints_a_b(1e-6, 100e9);
  h.dcn_Bps = 10e9;
  h.dcn_step_s = 20e-6;
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kTorus, {1, 5, 9}, 3e9), s, h);
  EXPECT_NEAR(estimate_seconds(p, s, h), 0.40008, 1e-12);
  // A flat ring over all 12 crosses pods 3 times a lap, so auto keeps the torus plan, and its
  // estimate (2 x 11/12 x S = 5.5e9 through a DCN link at 10 GB/s: > 0.55 s) says why.
  const auto ring = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(12), 3e9), s, h);
  EXPECT_GT(estimate_seconds(ring, s, h), 0.55);
}

// ---------------------------------------------------------------------------------------------
// Direct

TEST(CollectiveDirect, AllToAllSendRecvAllGather) {
  // all-to-all, n = 4, S = 400: 4*3 = 12 transfers of S/n = 100, one hop, one step each.
  const auto a2a = lower_collective(request(CollectiveOp::kAllToAll, Algorithm::kDirect, {4, 5, 6, 7}, 400.0),
                                    nodes_of(8, 8));
  ASSERT_EQ(a2a.phases.size(), 1u);
  ASSERT_EQ(a2a.phases[0].transfers.size(), 12u);
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  for (const auto& t : a2a.phases[0].transfers) {
    ASSERT_EQ(t.hops.size(), 1u);
    EXPECT_NE(t.hops[0].first, t.hops[0].second);
    EXPECT_DOUBLE_EQ(t.bytes, 100.0);
    EXPECT_EQ(t.latency_steps, 1u);
    pairs.insert(t.hops[0]);
  }
  EXPECT_EQ(pairs.size(), 12u);
  const auto sr = lower_collective(request(CollectiveOp::kSendRecv, Algorithm::kAuto, {3, 12}, 55.0), nodes_of(8, 8));
  EXPECT_EQ(sr.algorithm, Algorithm::kDirect);
  ASSERT_EQ(sr.phases.size(), 1u);
  ASSERT_EQ(sr.phases[0].transfers.size(), 1u);
  EXPECT_EQ(sr.phases[0].transfers[0].hops, (Hops{{3, 12}}));
  EXPECT_DOUBLE_EQ(sr.phases[0].transfers[0].bytes, 55.0);
  const auto ag = lower_collective(request(CollectiveOp::kAllGather, Algorithm::kDirect, iota_group(4), 400.0),
                                   nodes_of(8, 8));
  EXPECT_EQ(ag.phases[0].transfers.size(), 12u);
  EXPECT_DOUBLE_EQ(ag.phases[0].transfers[0].bytes, 100.0);
}

TEST(CollectiveEstimate, AllToAllSharesTheSendersPort) {
  // n = 4 on a switch, S = 400 MB: each rank sends 3 chunks of 100 MB at once through its port:
  // a + 100e6 / (B/3) = 5e-6 + 3e-3 = 3.005e-3 s (= a + (n-1)/n S/B).
  const CostHints h = hints_a_b(5e-6, 100e9);
  const auto p = lower_collective(request(CollectiveOp::kAllToAll, Algorithm::kDirect, iota_group(4), 400e6),
                                  switch_like(), h);
  EXPECT_NEAR(estimate_seconds(p, switch_like(), h), 3.005e-3, 1e-12);
}

TEST(CollectiveLowering, SingleRankMovesNothing) {
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, {7}, 100.0), nodes_of(8, 8));
  EXPECT_TRUE(p.phases.empty());
  EXPECT_EQ(p.algorithm, Algorithm::kRing);
  EXPECT_DOUBLE_EQ(estimate_seconds(p, nodes_of(8, 8), {}), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Auto

TEST(CollectiveAuto, TinyAllReduceOn48NodesPicksTree) {
  // 48 nodes x 8 GPUs (384 ranks: not a power of two, so no halving-doubling), 8 NICs, default
  // hints (intra 450 GB/s, 2 us; inter 50 GB/s, 6 us), S = 1 KiB: latency decides.
  //  ring: 2*383 = 766 steps at the mean of its hops' step latencies (336 inside nodes at 2 us,
  //        48 across at 6 us: 960 us / 384 = 2.5 us) = 1.915 ms (+ 5 ns of bytes).
  //  (hierarchical, 2 * 7 * 2 us + 2*47 * 6 us = 0.592 ms, is not a candidate: NCCL has no such
  //  algorithm.)
  //  tree: depth ceil(log2 48) = 6 between nodes + 7 along the chain = 13; its steps run down
  //        its deepest path, so each pays the slowest hop: 26 * 6 us = 156 us (+ 512 B at 50/3
  //        GB/s = 31 ns).
  // Same as NCCL's tuning model: ring latency linear in ranks, tree logarithmic in nodes.
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, iota_group(384), 1024.0),
                                  nodes_of(8, 8));
  EXPECT_EQ(p.algorithm, Algorithm::kTree) << p.note;
  EXPECT_EQ(p.note.rfind("auto: tree/Simple (est 156 us; ", 0), 0u) << p.note;
  EXPECT_NE(p.note.find("ring/Simple 1.92 ms"), std::string::npos) << p.note;
  EXPECT_EQ(p.note.find("hierarchical"), std::string::npos) << p.note;
}

TEST(CollectiveAuto, LargeAllReduceOn48NodesPicksRing) {
  // Same machine, S = 1 GiB = 1073741824: bandwidth decides.
  //  ring: 8 channels, each 2*383/384 * S/8 = 267736405.33 bytes through one NIC:
  //        1.915e-3 (766 steps at 2.5 us, as above) + 5.3547281e-3 = 7.2697281e-3 s.
  //  tree: one tree per channel, C = min(8 NICs, 8 GPUs) = 8, each carrying S/8 and leaving its
  //        nodes through its own head's NIC; an inner node's head sends to its parent and two
  //        children through that NIC (B/3): 156 us + (S/8) / (50e9/3) = 156 us + 8.053 ms =
  //        8.21 ms (with the two trees of the old lowering, S/2 each: 32.4 ms); plus the fill of
  //        its 524,288-byte chunks along the deepest path: 7 chain edges, each GPU port carrying
  //        the upward edges of the 7 channels it is not the head of (450e9/7: 8.1556 us a chunk),
  //        then node positions 1->2->4->8->16->32->0 (tree 0 over 48: every parent hears two
  //        children, 20.97152 us, but the root hears one, 10.48576 us): 57.0891 + 115.3434 =
  //        172.4325 us up, as much down, less the slowest 20.97152 us: 323.893 us; 8.53 ms.
  const CostHints h;
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, iota_group(384), kGiB),
                                  nodes_of(8, 8), h);
  EXPECT_EQ(p.algorithm, Algorithm::kRing) << p.note;
  EXPECT_NEAR(estimate_seconds(p, nodes_of(8, 8), h), 7.2697281e-3, 1e-9);
  EXPECT_EQ(p.note.find("hierarchical"), std::string::npos) << p.note;
  EXPECT_NE(p.note.find("tree/Simple 8.53 ms"), std::string::npos) << p.note;
}

TEST(CollectiveAuto, NeverPicksHalvingDoublingWhichNcclLacks) {
  // 64 nodes x 8 GPUs = 512 ranks, 8 NICs. Halving-doubling would win the contention-free
  // alpha-beta race here (84 us at 1 KiB, 9.54 ms at 1 GiB), but auto only weighs NCCL's own
  // algorithms. Among those:
  // 1 KiB: tree 2 * (6 + 7) * 6 us = 156 us, ahead of the ring's 1022 * 6 us.
  // 1 GiB: ring 1022 steps at 2.5 us (448 hops inside nodes at 2 us, 64 across at 6 us) = 2.555
  //        ms + 2*511/512 * S/8 / 50e9 = 5.3582 ms: 7.913 ms, ahead of the tree (8 channel trees of
  //        S/8, each head's NIC shared three ways: 156 us + 8.05 ms = 8.21 ms).
  const auto small = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, iota_group(512), 1024.0),
                                      nodes_of(8, 8));
  EXPECT_EQ(small.algorithm, Algorithm::kTree) << small.note;
  const auto big = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, iota_group(512), kGiB),
                                    nodes_of(8, 8));
  EXPECT_EQ(big.algorithm, Algorithm::kRing) << big.note;
  EXPECT_EQ(big.note.find("halving-doubling"), std::string::npos) << big.note;
  // Still available by name.
  const auto hd = lower_collective(
      request(CollectiveOp::kAllReduce, Algorithm::kHalvingDoubling, iota_group(512), kGiB), nodes_of(8, 8));
  EXPECT_EQ(hd.algorithm, Algorithm::kHalvingDoubling);
}

TEST(CollectiveAuto, TiesPreferRingAndTorusWinsOnATorus) {
  // n = 2 on a switch: ring 2a + S/B equals halving-doubling 2a + S/B; the tie goes to ring.
  const auto two = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, {0, 1}, 1e6), switch_like());
  EXPECT_EQ(two.algorithm, Algorithm::kRing) << two.note;
  // Whole 4x4x4 torus: per-dimension rings.
  const auto t = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kAuto, iota_group(64), 1e6),
                                  torus(4, 4, 4));
  EXPECT_EQ(t.algorithm, Algorithm::kTorus);
  EXPECT_EQ(t.note.rfind("auto: torus", 0), 0u) << t.note;
  // Broadcast on the torus has no torus variant: ring or tree.
  const auto b = lower_collective(request(CollectiveOp::kBroadcast, Algorithm::kAuto, iota_group(64), 1e6),
                                  torus(4, 4, 4));
  EXPECT_TRUE(b.algorithm == Algorithm::kRing || b.algorithm == Algorithm::kTree) << b.note;
  // all-to-all: direct is the only candidate.
  const auto a = lower_collective(request(CollectiveOp::kAllToAll, Algorithm::kAuto, iota_group(8), 1e6),
                                  nodes_of(8, 8));
  EXPECT_EQ(a.algorithm, Algorithm::kDirect);
  EXPECT_NE(a.note.find("no alternative"), std::string::npos) << a.note;
}

// ---------------------------------------------------------------------------------------------
// NVLS and protocols

TEST(CollectiveNvls, OneNodeIsOneInSwitchTransferOfSTimesNPlusOneOverN) {
  // Each GPU sends S + S/n into the switch and receives S/n + S (collective.h): one ring transfer
  // of S(n+1)/n, one step. S = 800, n = 8: 900 bytes.
  ClusterShape s = nodes_of(8, 8);
  s.nvls = true;
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kNvls, iota_group(8), 800.0), s);
  ASSERT_EQ(p.phases.size(), 1u);
  ASSERT_EQ(p.phases[0].transfers.size(), 1u);
  EXPECT_DOUBLE_EQ(p.phases[0].transfers[0].bytes, 900.0);
  EXPECT_TRUE(p.phases[0].transfers[0].in_switch);
  EXPECT_EQ(p.phases[0].transfers[0].latency_steps, 1u);
  EXPECT_EQ(p.protocol, Protocol::kSimple);
  // Without NVLink SHARP (A100-class switch) or across nodes it is an error naming why.
  EXPECT_NE(collective_problem(request(CollectiveOp::kAllReduce, Algorithm::kNvls, iota_group(8), 8.0), nodes_of(8, 8))
                .find("NVLink SHARP"),
            std::string::npos);
  EXPECT_NE(collective_problem(request(CollectiveOp::kAllReduce, Algorithm::kNvls, iota_group(16), 8.0), s).find("2 nodes"),
            std::string::npos);
  CollectiveRequest ll = request(CollectiveOp::kAllReduce, Algorithm::kNvls, iota_group(8), 8.0);
  ll.protocol = Protocol::kLL;
  EXPECT_NE(collective_problem(ll, s).find("Simple protocol only"), std::string::npos);
}

TEST(CollectiveNvls, NvlsTreeOnTwoNodesPipelinesSwitchAndRailTrees) {
  // 2 nodes x 8, S = 1600: per node one in-switch transfer of S x 9/8 = 1800; per rail (8) the
  // double binary tree over 2 nodes (depth 1): two transfers of S/8/2 = 100 bytes over the edge
  // both ways, 2 steps. All 2 + 16 transfers in one phase.
  ClusterShape s = nodes_of(8, 8);
  s.nvls = true;
  const auto p = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kNvlsTree, iota_group(16), 1600.0), s);
  ASSERT_EQ(p.phases.size(), 1u);
  ASSERT_EQ(p.phases[0].transfers.size(), 18u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(p.phases[0].transfers[i].bytes, 1800.0);
    EXPECT_TRUE(p.phases[0].transfers[i].in_switch);
  }
  for (size_t i = 2; i < 18; ++i) {
    const auto& t = p.phases[0].transfers[i];
    EXPECT_DOUBLE_EQ(t.bytes, 100.0);
    EXPECT_FALSE(t.in_switch);
    EXPECT_EQ(t.latency_steps, 2u);
    ASSERT_EQ(t.hops.size(), 2u);
    EXPECT_EQ(t.hops[0].first % 8, t.hops[0].second % 8) << "a rail tree stays on its rail";
  }
}

TEST(CollectiveNvls, LoopBytesFollowNcclsChunking) {
  // 16 channels x 8 heads = 128 concurrent chunks (NCCL v2.26.2 calcCollChunking).
  CommCosts c;
  c.nvls_channels = 16;
  c.nvls_chunk_bytes = 131072;
  const double MiB = 1 << 20;
  // NVLS: 128 KiB from 64 x 16 MiB = 1 GiB; 64 KiB from 8 x 8 MiB = 64 MiB; 32 KiB from
  // 2 x 4 MiB = 8 MiB; 16 KiB below.
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 1024 * MiB, 1, 8, c), 128 * 131072.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 1023 * MiB, 1, 8, c), 128 * 65536.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 64 * MiB, 1, 8, c), 128 * 65536.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 63 * MiB, 1, 8, c), 128 * 32768.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 8 * MiB, 1, 8, c), 128 * 32768.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 7 * MiB, 1, 8, c), 128 * 16384.0);
  // NVLSTree on 2 nodes: 128 KiB from 4 x 16 MiB = 64 MiB; 64 KiB from 8 MiB; 32 KiB below.
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 64 * MiB, 2, 8, c), 128 * 131072.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 63 * MiB, 2, 8, c), 128 * 65536.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 8 * MiB, 2, 8, c), 128 * 65536.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 7 * MiB, 2, 8, c), 128 * 32768.0);
  // From 4 nodes at most 64 KiB; a larger NCCL_NVLS_CHUNKSIZE (1 MiB) shrinks to 256 KiB below
  // 32 x 128 MiB on 2 nodes.
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 8192 * MiB, 4, 8, c), 128 * 65536.0);
  c.nvls_chunk_bytes = 1 << 20;
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 4096 * MiB, 2, 8, c), 128.0 * (1 << 20));
  // NVLS starts from Simple's 512 KiB step: 128 x 512 KiB = 64 MiB loops from 64 x 64 MiB = 4 GiB.
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 4096 * MiB, 1, 8, c), 128 * 524288.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvls, 4095 * MiB, 1, 8, c), 128 * 65536.0);
  EXPECT_DOUBLE_EQ(nvls_loop_bytes(Algorithm::kNvlsTree, 4095 * MiB, 2, 8, c), 128 * 262144.0);
}

TEST(CollectiveNvls, PhasesWaitThePipelineFill) {
  // NVLS at 300 GB/s per port (0.667 x 450 GB/s), NICs at 47 GB/s, 16 channels, 128 KiB chunks.
  CostHints h;
  h.scale_up_Bps = 450e9;
  h.inter_node_Bps = 47e9;
  h.costs.nvls_efficiency = 0.667;
  h.costs.nvls_channels = 16;
  h.costs.nvls_chunk_bytes = 131072;
  const double nvls_Bps = 0.667 * 450e9;
  const double MiB = 1 << 20;
  ClusterShape s = nodes_of(8, 8);
  s.nvls = true;
  // One node, 1 GiB: 16 MiB loops; three switch stages of 16 MiB x 9/8 / 300.15 GB/s = 62.9 us,
  // less the slowest: 2 x 62.9 = 125.8 us.
  const auto one = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kNvls, iota_group(8), 1024 * MiB), s, h);
  EXPECT_NEAR(one.phases[0].fill_s, 2 * 16 * MiB * 9 / 8 / nvls_Bps, 1e-12);
  // A buffer smaller than a loop fills with the buffer: 1 MiB (loop 2 MiB).
  const auto small = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kNvls, iota_group(8), MiB), s, h);
  EXPECT_NEAR(small.phases[0].fill_s, 2 * MiB * 9 / 8 / nvls_Bps, 1e-12);
  // Two nodes, 64 MiB: 16 MiB loops; switch stages 62.9 us, one tree level up and down, each a
  // loop's 2 MiB shard through a NIC at 47 GB/s = 44.6 us: 3 x 62.9 + 2 x 44.6 - 62.9 = 215 us.
  const auto two =
      lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kNvlsTree, iota_group(16), 64 * MiB), s, h);
  const double sw = 16 * MiB * 9 / 8 / nvls_Bps, net = 2 * MiB / 47e9;
  EXPECT_NEAR(two.phases[0].fill_s, 2 * sw + 2 * net, 1e-12);
  EXPECT_NEAR(two.phases[0].fill_s, 215e-6, 0.5e-6);
  // The estimate waits it too: the same plan without its fill is that much faster.
  CollectivePlan no_fill = two;
  no_fill.phases[0].fill_s = 0;
  EXPECT_NEAR(estimate_seconds(two, s, h) - estimate_seconds(no_fill, s, h), two.phases[0].fill_s, 1e-12);
  // Ring, tree and a neutral cost model have none.
  EXPECT_EQ(lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(16), 64 * MiB), s, h)
                .phases[0]
                .fill_s,
            0.0);
  EXPECT_EQ(lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kNvlsTree, iota_group(16), 64 * MiB), s)
                .phases[0]
                .fill_s,
            0.0);
}

TEST(CollectiveProtocols, AutoPicksTheFastestEstimateAndLLIsCapped) {
  // 8 ranks on a switch, 100 GB/s links; a step costs 1 us with Simple and 0.2 us with LL (LL's
  // step latency replaces Simple's), no launch latency; LL carries half payload and is capped at
  // 20 GB/s of bus bandwidth. A ring all-reduce of S: 14 steps, 1.75 S through each link.
  //  S = 1 KiB: Simple 14 x 1 us + 1792 B / 100 GB/s = 14.018 us; LL 14 x 0.2 us + 1792 B /
  //  min(50, 20) GB/s = 2.8896 us: LL.
  //  S = 64 MiB: Simple 14 us + 117440512 / 100e9 = 1.1884 ms; LL 2.8 us + 117440512 / 50e9 =
  //  2.3516 ms, and with a 20 GB/s cap 5.87 ms: Simple.
  CostHints h = hints_a_b(1e-6, 100e9);
  h.costs.simple.step_s = 1e-6;
  h.costs.ll.enabled = true;
  h.costs.ll.step_s = 0.2e-6;
  h.costs.ll.max_busbw_Bps = 20e9;
  const auto small = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(8), 1024.0),
                                      switch_like(), h);
  EXPECT_EQ(small.protocol, Protocol::kLL);
  EXPECT_NEAR(estimate_seconds(small, switch_like(), h), 2.8e-6 + 1792.0 / 20e9, 1e-12);  // the cap binds: 20 < 50
  const auto big = lower_collective(request(CollectiveOp::kAllReduce, Algorithm::kRing, iota_group(8), 64.0 * (1 << 20)),
                                    switch_like(), h);
  EXPECT_EQ(big.protocol, Protocol::kSimple);
  EXPECT_NEAR(estimate_seconds(big, switch_like(), h), 14e-6 + 117440512.0 / 100e9, 1e-12);
}

}  // namespace
}  // namespace wl
