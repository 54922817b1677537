// The collective runtime's ECMP flow hash draws on the simulation's seed (its "ecmp" stream):
// on a fat-tree with flow-hash uplinks, which flows collide on an uplink, and so the time, depends
// on the seed; the same seed always gives the same time; where routes offer no equal choice
// (D-mod-K uplinks, NVSwitch, tori) every seed gives the same time. Expected times are worked out
// by hand on a small 2-tier fat-tree with no latencies and every efficiency at 100%.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "workloads/collectives/collective.h"
#include "workloads/collectives/runtime.h"

namespace wl {
namespace {

class Done : public CollectiveListener {
 public:
  void on_collective_done(uint64_t) override { ++count; }
  int count = 0;
};

using Options = topo::HardwareProfile;

Options ideal_options() {
  Options o;
  o.scale_up_efficiency = o.nic_efficiency = o.fabric_efficiency = o.torus_efficiency = 1.0;
  o.comm_sms = 0;
  o.comm_hbm_fraction = 0.0;
  return o;
}

// 4 single-GPU nodes, 2 per leaf (leaf 0: GPUs 0, 1; leaf 1: GPUs 2, 3), one spine group over both
// leaves. NIC bandwidth B per direction; each leaf's uplink capacity 2B (its two NICs, 1:1) split
// into `uplinks` parallel links of 2B/uplinks each. No latencies anywhere.
topo::Topology two_leaf_tree(double B, uint32_t uplinks, topo::UplinkPolicy policy) {
  topo::FatTreeSpec ft;
  ft.nic_bandwidth_Bps = B;
  ft.hop_latency = sim::Time::zero();
  ft.nic_latency = sim::Time::zero();
  ft.uplink_policy = policy;
  ft.tiers = {topo::FatTreeTier{"leaf", 2, 1.0, 1}, topo::FatTreeTier{"spine", 2, 1.0, uplinks}};
  return topo::build_fat_tree(4, 1, ft);
}

// One phase; transfer i (channel i) is the single hop flows[i], S bytes, one latency step.
CollectivePlan one_phase(const std::vector<std::pair<uint32_t, uint32_t>>& flows, double S) {
  CollectivePlan plan;
  plan.op = CollectiveOp::kSendRecv;
  plan.algorithm = Algorithm::kDirect;
  Phase ph;
  for (auto f : flows) ph.transfers.push_back(Transfer{{f}, S, 1});
  plan.phases.push_back(std::move(ph));
  return plan;
}

// Simulated time of `plan` on GPUs 0..n-1 of `t`, started at 0 in a simulation seeded `seed`.
sim::Time run_plan(const topo::Topology& t, const CollectivePlan& plan, uint64_t seed,
                   const Options& o = ideal_options()) {
  sim::Simulation sim(seed);
  topo::ClusterResources res(sim, t, topo::find_gpu("h100-sxm"), o);
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::zero();
  CollectiveRuntime rt(res, ro);
  std::vector<uint32_t> members(t.num_gpus());
  std::iota(members.begin(), members.end(), 0u);
  Done done;
  rt.start(plan, members, &done, 0);
  auto r = sim.run();
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(done.count, 1);
  return sim.now();
}

constexpr double kB = 50e9;  // bytes/s
constexpr double kS = 1e9;   // bytes

TEST(EcmpFlowHash, CollisionsOnFlowHashUplinksDependOnTheSeed) {
  // GPU 0 -> GPU 2 and GPU 1 -> GPU 3 cross from leaf 0 to leaf 1 on their own NICs (B each).
  // With 2 uplinks of 2B/2 = B, each flow picks one; the spine's down link to leaf 1 has the same
  // index. Different uplinks: each flow runs at B, time S/B = 20 ms. The same uplink: they share
  // B, each at B/2, time 2S/B = 40 ms. Each seed gives a new salt (a bijective mix of the seed),
  // so each seed's two picks are in effect two fresh fair coins: the same uplink with probability
  // 1/2. Over 64 seeds both outcomes must occur (that all 64 agree has probability 2^-63, and the
  // outcome is a fixed function of the seed, so this cannot flake), which means that some pairs
  // of seeds give different times; the collision count stays near 32 (16..48 is 4 standard
  // deviations of Binomial(64, 1/2)) if the hash is unbiased.
  const auto t = two_leaf_tree(kB, 2, topo::UplinkPolicy::kFlowHash);
  const auto plan = one_phase({{0, 2}, {1, 3}}, kS);
  const int64_t apart = sim::Time::from_seconds(kS / kB).count_ns();       // 20 ms
  const int64_t shared = sim::Time::from_seconds(2 * kS / kB).count_ns();  // 40 ms
  std::map<int64_t, int> seen;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const int64_t ns = run_plan(t, plan, seed).count_ns();
    EXPECT_TRUE(std::llabs(ns - apart) <= 2 || std::llabs(ns - shared) <= 2) << "seed " << seed << ": " << ns << " ns";
    ++seen[std::llabs(ns - shared) <= 2 ? shared : apart];
    // The same seed always draws the same paths.
    EXPECT_EQ(run_plan(t, plan, seed).count_ns(), ns) << "seed " << seed;
  }
  EXPECT_GE(seen[apart], 16);
  EXPECT_GE(seen[shared], 16);
  EXPECT_EQ(seen[apart] + seen[shared], 64);
}

TEST(EcmpFlowHash, ConnectionsBetweenOnePairSpread) {
  // Two channels (connections) of the same pair, GPU 0 -> GPU 2, each S bytes. Both share GPU 0's
  // NIC (B), so at best each gets B/2: 2S/B = 40 ms. With 4 uplinks of 2B/4 = B/2, two flows on
  // different uplinks run at B/2 each (40 ms); on the same uplink they share B/2, B/4 each:
  // 4S/B = 80 ms. Were the hash a function of (src, dst) alone, both channels would always take
  // the same uplink (80 ms for every seed); with a per-connection hash they collide with
  // probability 1/4, so over 64 seeds both outcomes occur (all 64 the same: 0.75^64 + 0.25^64,
  // about 1e-8).
  const auto t = two_leaf_tree(kB, 4, topo::UplinkPolicy::kFlowHash);
  const auto plan = one_phase({{0, 2}, {0, 2}}, kS);
  const int64_t apart = sim::Time::from_seconds(2 * kS / kB).count_ns();   // 40 ms
  const int64_t shared = sim::Time::from_seconds(4 * kS / kB).count_ns();  // 80 ms
  int n_apart = 0, n_shared = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    const int64_t ns = run_plan(t, plan, seed).count_ns();
    if (std::llabs(ns - apart) <= 2) ++n_apart;
    else if (std::llabs(ns - shared) <= 2) ++n_shared;
    else ADD_FAILURE() << "seed " << seed << ": " << ns << " ns";
  }
  EXPECT_GT(n_apart, 0);
  EXPECT_GT(n_shared, 0);
}

TEST(EcmpFlowHash, DModKIgnoresTheSeed) {
  // D-mod-K: uplink = destination's position in its rail plane mod 2 (one GPU per node, one rail:
  // the GPU id), so GPU 2 -> uplink 0 and GPU 3 -> uplink 1: the flows never collide, S/B = 20 ms
  // for every seed.
  const auto t = two_leaf_tree(kB, 2, topo::UplinkPolicy::kDModK);
  const auto plan = one_phase({{0, 2}, {1, 3}}, kS);
  const int64_t apart = sim::Time::from_seconds(kS / kB).count_ns();
  for (uint64_t seed : {0ull, 1ull, 2ull, 7ull, 12345ull, 0x7FFFFFFFFFFFFFFFull}) {
    EXPECT_NEAR(static_cast<double>(run_plan(t, plan, seed).count_ns()), static_cast<double>(apart), 2.0) << "seed " << seed;
  }
}

TEST(EcmpFlowHash, RoutesWithoutEqualChoicesIgnoreTheSeed) {
  // Two DGX-like nodes (NVSwitch, 8 rails, one leaf group, D-mod-K) and a 4x4 torus, ring
  // all-reduce of 64 MiB over every GPU with default efficiencies and latencies: the same ns for
  // every seed, since no route reads the flow hash.
  topo::ClusterSpec cs;
  cs.nodes = 2;
  cs.gpus_per_node = 8;
  cs.scale_up.kind = topo::ScaleUpKind::kNvSwitch;
  cs.scale_out.kind = topo::ScaleOutKind::kFatTree;
  cs.scale_out.fat_tree.rails = 8;
  cs.scale_out.fat_tree.tiers = {topo::FatTreeTier{"leaf", 2, 1.0, 1}, topo::FatTreeTier{"spine", 1, 1.0, 4}};
  topo::TorusSpec ts;
  ts.dims = {4, 4};
  std::vector<std::pair<topo::Topology, ClusterShape>> cases;
  cases.emplace_back(topo::build_cluster(cs), ClusterShape{8, 8, false, {}});
  cases.emplace_back(topo::build_torus(ts), ClusterShape{4, 1, true, {4, 4}});
  for (const auto& [t, shape] : cases) {
    std::vector<uint32_t> group(t.num_gpus());
    std::iota(group.begin(), group.end(), 0u);
    const auto plan = lower_collective({CollectiveOp::kAllReduce, Algorithm::kRing, group, 64.0 * 1024 * 1024}, shape);
    const int64_t first = run_plan(t, plan, 1, Options{}).count_ns();
    EXPECT_GT(first, 0);
    for (uint64_t seed : {2ull, 3ull, 99ull, 0x7FFFFFFFFFFFFFFFull})
      EXPECT_EQ(run_plan(t, plan, seed, Options{}).count_ns(), first) << "seed " << seed;
  }
}

}  // namespace
}  // namespace wl
