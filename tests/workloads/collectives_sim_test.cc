// End-to-end collective timing on the engine, checked against closed forms worked out by hand:
// ring / reduce-scatter / all-gather / halving-doubling / tree on an ideal switch, the cost of
// an oversubscribed fat-tree for all-to-all, published NCCL bandwidths for H100 nodes, and
// invariance under relabelling ranks of a symmetric topology.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "workloads/collectives/collective.h"
#include "tests/workloads/ideal_cluster.h"
#include "workloads/collectives/runtime.h"

namespace wl {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr double kMiB = 1024.0 * 1024.0;

class Done : public CollectiveListener {
 public:
  void on_collective_done(uint64_t) override { ++count; }
  int count = 0;
};

// Ideal switch (n single-GPU nodes under one leaf, NIC bandwidth B per direction) and profile
// (every link at 100% efficiency, no communication SM effects).
using test::ideal_switch;
topo::HardwareProfile ideal_options() { return test::ideal_profile(); }

// Simulated seconds of one collective started at t=0 on an idle cluster.
double simulate(const topo::Topology& t, const topo::HardwareProfile& o, const CollectiveRequest& req,
                const ClusterShape& shape, RuntimeOptions ro = {}) {
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, t, topo::find_gpu("h100-sxm"), o);
  CollectiveRuntime rt(res, ro);
  CollectivePlan plan = lower_collective(req, shape);
  Done done;
  rt.start(plan, req.group, &done, 0);
  auto r = sim.run();
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(done.count, 1);
  return sim.now().seconds();
}

std::vector<uint32_t> iota(uint32_t n, uint32_t first = 0) {
  std::vector<uint32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

// A plan of one direct transfer of `bytes` over `hops` (member positions), paying no step latency.
CollectivePlan direct_plan(std::vector<std::pair<uint32_t, uint32_t>> hops, double bytes, uint32_t ranks) {
  CollectivePlan plan;
  plan.op = CollectiveOp::kSendRecv;
  plan.algorithm = Algorithm::kDirect;
  plan.bytes = bytes;
  plan.ranks = ranks;
  Transfer tr;
  tr.hops = std::move(hops);
  tr.bytes = bytes;
  tr.latency_steps = 0;
  plan.phases.push_back(Phase{{tr}});
  return plan;
}

// Per-step latency a = software step overhead + one GPU -> switch -> GPU route.
double step_latency(const topo::Topology& t, const RuntimeOptions& ro) {
  topo::Route r;
  t.route(0, 1, 0, r);
  return (ro.step_overhead + r.latency).seconds();
}

// A withdrawn collective gives back what it took, as it took it: copy-engine copies (AsyncTP's,
// holds_sms false) held HBM but no SMs. Withdrawn at 1 us, long before its 1 GiB all-gather
// ends, the GPU runs a memory-bound kernel of 3.35e9 bytes in 1 ms again (3.35 TB/s, all of HBM;
// before the withdrawal 1 ms / 0.95 for the HBM share, as ClusterResourcesComm works out).
TEST(CollectiveSim, AWithdrawnCopyEngineCollectiveReleasesWhatItHeld) {
  auto t = ideal_switch(2, 100e9);
  sim::Simulation sim(1);
  topo::HardwareProfile o = ideal_options();
  o.comm_sms = 16;
  o.comm_hbm_fraction = 0.05;
  topo::ClusterResources res(sim, t, topo::find_gpu("h100-sxm"), o);
  CollectiveRuntime rt(res, RuntimeOptions{});
  CollectiveRequest req;
  req.op = CollectiveOp::kAllGather;
  req.bytes = kGiB;
  req.group = iota(2);
  req.algorithm = Algorithm::kRing;
  CollectivePlan plan = lower_collective(req, ClusterShape{});
  Done done;
  rt.start(plan, req.group, &done, 0, false, nullptr, /*holds_sms=*/false);
  sim.run(sim::Time::us(1));
  EXPECT_EQ(rt.cancel(&done), 1u);
  EXPECT_EQ(rt.in_flight(), 0u);
  const sim::Time at = sim.now();
  res.start_kernel(0, 0, 1e15, 3.35e9, 1.0, nullptr, 0);
  auto r = sim.run();
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(sim.now() - at, sim::Time::ms(1));
  EXPECT_EQ(done.count, 0);
}

// A transfer whose hops cross a link more than once loads it once per crossing. One transfer of
// S = 1 MB with hops 0->1, 1->0, 0->1 on an ideal 2-GPU switch (B = 1 GB/s per direction, no
// latency, no software step): GPU 0's uplink and GPU 1's downlink carry it twice, so it moves at
// B / 2 and takes 2 ms; counted as separate uses of weight 1 it would take 1 ms.
TEST(CollectiveSim, ATransferCrossingALinkTwiceLoadsItTwice) {
  auto t = ideal_switch(2, 1e9, /*no_latency=*/true);
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, t, topo::find_gpu("h100-sxm"), ideal_options());
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::zero();
  CollectiveRuntime rt(res, ro);
  const CollectivePlan plan = direct_plan({{0, 1}, {1, 0}, {0, 1}}, 1e6, 2);
  Done done;
  rt.start(plan, iota(2), &done, 0);
  auto r = sim.run();
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(done.count, 1);
  EXPECT_EQ(sim.now(), sim::Time::ms(2));
}

// A kept plan (keep_id) has its transfers' routes walked once per group it runs on, not once for
// all: two disjoint groups of three GPUs under one switch (1 GB/s NICs, no latency) run the same
// relative ring of 1 MB at the same time. Each hop loads its sender's uplink and its receiver's
// downlink once, so each group moves at 1 GB/s: 1 ms. Had the second group reused the first's
// routes, both flows would share the first group's six links at 0.5 GB/s: 2 ms. Run again, from
// the kept routes, the same 1 ms.
TEST(CollectiveSim, AKeptPlanRoutesEachGroupItRunsOn) {
  auto t = ideal_switch(6, 1e9, /*no_latency=*/true);
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, t, topo::find_gpu("h100-sxm"), ideal_options());
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::zero();
  CollectiveRuntime rt(res, ro);
  CollectivePlan plan = direct_plan({{0, 1}, {1, 2}, {2, 0}}, 1e6, 3);
  plan.keep_id = 1;
  Done done;
  rt.start(plan, iota(3), &done, 0, /*relative_hops=*/true);
  rt.start(plan, iota(3, 3), &done, 1, /*relative_hops=*/true);
  EXPECT_FALSE(sim.run().deadlocked);
  EXPECT_EQ(done.count, 2);
  EXPECT_EQ(sim.now(), sim::Time::ms(1));
  rt.start(plan, iota(3, 3), &done, 2, /*relative_hops=*/true);
  rt.start(plan, iota(3), &done, 3, /*relative_hops=*/true);
  EXPECT_FALSE(sim.run().deadlocked);
  EXPECT_EQ(done.count, 4);
  EXPECT_EQ(sim.now(), sim::Time::ms(2));
}

// A group inside one node shares its kept routes with the groups of the same shape on the other
// nodes, each loading its own node's links. Three nodes of 4 GPUs on NVSwitch (1 GB/s per GPU
// per direction, no latency) run the same relative ring of 1 MB on each node at once, node 2's
// first (so node 0's and node 1's come from the routes walked on node 2). Each hop loads its
// sender's link up to the switch and its receiver's link down from it, every link of a node once,
// so each ring moves at 1 GB/s and ends at 1 ms; a group reusing another node's links unshifted
// would share them at 0.5 GB/s and end at 2 ms, leaving its own idle. Halfway, every hop's two
// links carry 1 GB/s. One shape is kept for the three; a group spanning nodes 0 and 1 gets its own.
TEST(CollectiveSim, AGroupInsideANodeSharesItsKeptRoutesWithEveryNode) {
  topo::ClusterSpec cs;
  cs.nodes = 3;
  cs.gpus_per_node = 4;
  cs.scale_up.kind = topo::ScaleUpKind::kNvSwitch;
  cs.scale_up.bandwidth_Bps = 1e9;
  cs.scale_up.latency = sim::Time::zero();
  cs.scale_out.kind = topo::ScaleOutKind::kFatTree;
  cs.scale_out.fat_tree.nic_bandwidth_Bps = 1e9;
  cs.scale_out.fat_tree.tiers = {topo::FatTreeTier{"leaf", 3, 1.0, 1}};
  const topo::Topology t = topo::build_cluster(cs);
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, t, topo::find_gpu("h100-sxm"), ideal_options());
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::zero();
  CollectiveRuntime rt(res, ro);
  const std::vector<std::pair<uint32_t, uint32_t>> ring{{0, 1}, {1, 2}, {2, 3}, {3, 0}};
  CollectivePlan plan = direct_plan(ring, 1e6, 4);
  plan.keep_id = 1;
  Done done;
  for (uint32_t node : {2u, 0u, 1u}) rt.start(plan, iota(4, 4 * node), &done, node, /*relative_hops=*/true);
  sim.run(sim::Time::us(500));
  for (uint32_t node = 0; node < 3; ++node)
    for (auto [a, b] : ring) {
      topo::Route r;
      t.route(4 * node + a, 4 * node + b, 0, r);
      ASSERT_EQ(r.links.size(), 2u);
      for (uint32_t l : r.links) EXPECT_DOUBLE_EQ(sim.fluid().load(res.link(l)), 1e9) << "node " << node << " link " << l;
    }
  EXPECT_FALSE(sim.run().deadlocked);
  EXPECT_EQ(done.count, 3);
  EXPECT_EQ(sim.now(), sim::Time::ms(1));
  EXPECT_EQ(rt.shapes_kept(), 1u);
  rt.start(plan, iota(4, 2), &done, 3, /*relative_hops=*/true);
  EXPECT_FALSE(sim.run().deadlocked);
  EXPECT_EQ(rt.shapes_kept(), 2u);
}

TEST(CollectiveSim, RingAllReduceMatchesClosedForm) {
  // 2(n-1)(a + S/(nB)) [Patarasuk & Yuan 2009 ring all-reduce; NCCL ring], within 0.5% for S >= 1 MiB.
  const double B = 50e9;
  for (uint32_t n : {2u, 4u, 8u, 16u}) {
    auto t = ideal_switch(n, B);
    RuntimeOptions ro;
    double a = step_latency(t, ro);
    for (double S : {1 * kMiB, 64 * kMiB, 1 * kGiB}) {
      SCOPED_TRACE("n=" + std::to_string(n) + " S=" + std::to_string(S));
      CollectiveRequest req{CollectiveOp::kAllReduce, Algorithm::kRing, iota(n), S};
      double expect = 2.0 * (n - 1) * (a + S / (n * B));
      EXPECT_NEAR(simulate(t, ideal_options(), req, ClusterShape{}), expect, expect * 0.005);
    }
  }
}

TEST(CollectiveSim, RingReduceScatterAndAllGatherMatchClosedForm) {
  // (n-1)(a + S/(nB)), S the total (n chunks) as in nccl-tests.
  const double B = 50e9;
  const uint32_t n = 8;
  auto t = ideal_switch(n, B);
  double a = step_latency(t, RuntimeOptions{});
  for (auto op : {CollectiveOp::kReduceScatter, CollectiveOp::kAllGather}) {
    for (double S : {1 * kMiB, 1 * kGiB}) {
      CollectiveRequest req{op, Algorithm::kRing, iota(n), S};
      double expect = (n - 1) * (a + S / (n * B));
      EXPECT_NEAR(simulate(t, ideal_options(), req, ClusterShape{}), expect, expect * 0.005);
    }
  }
}

TEST(CollectiveSim, HalvingDoublingMatchesClosedForm) {
  // Rabenseifner: 2 log2(n) a + 2 (n-1)/n S/B (Thakur, Rabenseifner, Gropp 2005).
  const double B = 50e9;
  const uint32_t n = 16;
  auto t = ideal_switch(n, B);
  double a = step_latency(t, RuntimeOptions{});
  for (double S : {1 * kMiB, 1 * kGiB}) {
    CollectiveRequest req{CollectiveOp::kAllReduce, Algorithm::kHalvingDoubling, iota(n), S};
    double expect = 2 * 4 * a + 2.0 * (n - 1) / n * S / B;
    EXPECT_NEAR(simulate(t, ideal_options(), req, ClusterShape{}), expect, expect * 0.005);
  }
}

TEST(CollectiveSim, DoubleBinaryTreeAllReduceIsBandwidthBoundLikeRing) {
  // Double binary tree, pipelined: every rank's NIC sends (and receives) 2S in total over the two
  // trees (S/2 up and S down where it is interior, S/2 up where it is a leaf), so the bandwidth
  // term is 2S/B, plus 2 ceil(log2 n) latency steps.
  const double B = 50e9;
  const uint32_t n = 16;
  auto t = ideal_switch(n, B);
  double a = step_latency(t, RuntimeOptions{});
  double S = 1 * kGiB;
  CollectiveRequest req{CollectiveOp::kAllReduce, Algorithm::kTree, iota(n), S};
  double expect = 2 * 4 * a + 2 * S / B;
  EXPECT_NEAR(simulate(t, ideal_options(), req, ClusterShape{}), expect, expect * 0.02);
}

TEST(CollectiveSim, OversubscribedUplinksBoundAllToAll) {
  // 16 single-NIC nodes, 4 per leaf, one spine. Each rank sends S/16 to each of the 15 others.
  // Non-blocking: a NIC sends 15 S/16 -> S (N-1)/(N B).
  // 4:1 oversubscribed: a leaf uplink has 4B/4 = B and carries 4 ranks x 12 off-leaf peers x S/16
  // = 3S -> o S (N-k)/(N B) with o = 4, N = 16, k = 4.
  const double B = 50e9, S = 1 * kGiB;
  const uint32_t N = 16, k = 4;
  for (double o : {1.0, 4.0}) {
    topo::FatTreeSpec ft;
    ft.nic_bandwidth_Bps = B;
    ft.tiers = {topo::FatTreeTier{"leaf", k, 1.0, 1}, topo::FatTreeTier{"spine", N / k, o, 1}};
    auto t = topo::build_fat_tree(N, 1, ft);
    CollectiveRequest req{CollectiveOp::kAllToAll, Algorithm::kDirect, iota(N), S};
    double expect = o == 1.0 ? S * (N - 1) / (N * B) : o * S * (N - k) / (N * B);
    SCOPED_TRACE("oversubscription " + std::to_string(o));
    EXPECT_NEAR(simulate(t, ideal_options(), req, ClusterShape{}), expect, expect * 0.02);
  }
}

// DGX H100 nodes with catalog defaults: NVSwitch at 450 GB/s per GPU per direction, 8 x 400 Gb/s
// ConnectX-7 on 8 rails, default efficiencies.
topo::Topology dgx_h100(uint32_t nodes) {
  topo::ClusterSpec cs;
  cs.nodes = nodes;
  cs.gpus_per_node = 8;
  cs.scale_up.kind = topo::ScaleUpKind::kNvSwitch;
  cs.scale_up.bandwidth_Bps = topo::find_gpu("h100-sxm").scale_up_bandwidth_Bps;
  if (nodes > 1) {
    cs.scale_out.kind = topo::ScaleOutKind::kFatTree;
    cs.scale_out.fat_tree.nic_bandwidth_Bps = 400e9 / 8;
    cs.scale_out.fat_tree.rails = 8;
    cs.scale_out.fat_tree.tiers = {topo::FatTreeTier{"leaf", nodes, 1.0, 1}, topo::FatTreeTier{"spine", 1, 1.0, 1}};
  }
  return topo::build_cluster(cs);
}

TEST(CollectiveSim, SingleNodeH100AllReduceBusBandwidthNearPublishedRing) {
  // Published: ~370 GB/s busbw for ring all-reduce on 8x H100 SXM (nccl-tests#212, NCCL
  // maintainer; nccl#1455 measured 365-370). Within 10%.
  auto t = dgx_h100(1);
  ClusterShape shape{8, 8, false, {}};
  double S = 1 * kGiB;
  CollectiveRequest req{CollectiveOp::kAllReduce, Algorithm::kRing, iota(8), S};
  double secs = simulate(t, topo::HardwareProfile{}, req, shape);
  double busbw = S / secs * bus_factor(CollectiveOp::kAllReduce, 8) / 1e9;
  EXPECT_NEAR(busbw, 370.0, 37.0);
}

TEST(CollectiveSim, TwoNodeH100AllReduceIsNicBound) {
  // Published: 46-48 GB/s per 400 Gb/s NIC in nccl-tests (nccl-tests#290, maintainer); 8 NICs per
  // node -> 8 x 47 = 376 GB/s busbw for a 2-node ring all-reduce. Within 10%.
  auto t = dgx_h100(2);
  ClusterShape shape{8, 8, false, {}};
  double S = 1 * kGiB;
  CollectiveRequest req{CollectiveOp::kAllReduce, Algorithm::kRing, iota(16), S};
  double secs = simulate(t, topo::HardwareProfile{}, req, shape);
  double busbw = S / secs * bus_factor(CollectiveOp::kAllReduce, 16) / 1e9;
  EXPECT_NEAR(busbw, 8 * 47.0, 8 * 47.0 * 0.10);
}

TEST(CollectiveSim, RelabellingRanksOfASymmetricTopologyKeepsTimes) {
  auto t = dgx_h100(2);
  ClusterShape shape{8, 8, false, {}};
  double S = 256 * kMiB;
  // Within a node: any order of the 8 GPUs of node 1 is the same ring on a non-blocking switch.
  CollectiveRequest a{CollectiveOp::kAllReduce, Algorithm::kRing, iota(8), S};
  CollectiveRequest b{CollectiveOp::kAllReduce, Algorithm::kRing, {11, 9, 15, 8, 13, 10, 14, 12}, S};
  EXPECT_EQ(simulate(t, topo::HardwareProfile{}, a, shape), simulate(t, topo::HardwareProfile{}, b, shape));
  // Swapping the two nodes of a 16-rank all-reduce.
  CollectiveRequest c{CollectiveOp::kAllReduce, Algorithm::kRing, iota(16), S};
  std::vector<uint32_t> swapped = iota(8, 8);
  for (uint32_t g : iota(8)) swapped.push_back(g);
  CollectiveRequest d{CollectiveOp::kAllReduce, Algorithm::kRing, swapped, S};
  EXPECT_EQ(simulate(t, topo::HardwareProfile{}, c, shape), simulate(t, topo::HardwareProfile{}, d, shape));
}

TEST(CollectiveSim, CommunicationSmsSlowConcurrentCompute) {
  // A compute-bound kernel of 1 s alone. While a collective holds 16 of the 132 SMs (T seconds
  // from t=0), the kernel runs at 116/132 of peak: by T it has done T*116/132 of its work; the
  // rest, 1 - T*116/132, at full speed -> it ends at T + 1 - T*116/132 = 1 + T*16/132.
  auto t = dgx_h100(1);
  sim::Simulation sim(1);
  topo::HardwareProfile o;
  o.comm_hbm_fraction = 0.0;
  auto gpu = topo::find_gpu("h100-sxm");
  topo::ClusterResources res(sim, t, gpu, o);
  CollectiveRuntime rt(res, RuntimeOptions{});
  ClusterShape shape{8, 8, false, {}};
  CollectiveRequest req{CollectiveOp::kAllReduce, Algorithm::kRing, iota(8), 256 * kMiB};
  CollectivePlan plan = lower_collective(req, shape);
  Done done;
  struct KernelDone : sim::ActivityOwner {
    sim::Simulation* s;
    sim::Time at;
    void on_activity_done(sim::ActivityId, uint64_t) override { at = s->now(); }
  } kd;
  kd.s = &sim;
  res.start_kernel(0, gpu.peak_bf16_flops * 1.0, gpu.peak_bf16_flops, 0.0, 1.0, &kd, 0);
  struct CommEnd : CollectiveListener {
    sim::Simulation* s;
    sim::Time at;
    void on_collective_done(uint64_t) override { at = s->now(); }
  } ce;
  ce.s = &sim;
  rt.start(plan, req.group, &ce, 0);
  sim.run();
  double T = ce.at.seconds();
  ASSERT_LT(T, 1.0);
  EXPECT_NEAR(kd.at.seconds(), 1.0 + T * 16.0 / 132.0, 1e-6);
}

}  // namespace
}  // namespace wl
