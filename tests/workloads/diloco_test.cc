// DiLoCo across islands (workloads/diloco): the WAN topology and the outer-round program run by the
// program executor as collectives on it, the outer all-reduce against its closed form and the
// Appendix A bound of arXiv 2503.09799, the outer-round timeline against H T / (H T + sync),
// Streaming DiLoCo hiding (or not) its fragment syncs and overlapping two of them, byte
// conservation on the WAN links, the Table 6 row for Llama 3 405B, strict binding errors and one
// end-to-end run.
// Every expected value is worked out by hand in the comment next to it.
#include "workloads/diloco/diloco.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/cluster_config.h"
#include "topology/cluster_resources.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/runtime.h"
#include "workloads/model/transformer.h"
#include "workloads/program/executor.h"

namespace wl {
namespace {

constexpr double kNs = 1e-9;

DilocoConfig make_config(int64_t m, int64_t h, int64_t rounds, double bw_Bps, double latency_s) {
  DilocoConfig c;
  c.islands = m;
  c.inner_steps = h;
  c.outer_steps = rounds;
  c.sync.bandwidth_Bps = bw_Bps;
  c.sync.latency = sim::Time::from_seconds(latency_s);
  return c;
}

DilocoTimeline run(const DilocoConfig& c, double step_s, double bytes) {
  std::vector<double> steps(static_cast<size_t>(c.islands), step_s);
  return simulate_diloco_timeline(c, steps, bytes);
}

TEST(DiLoCoSync, RingOnIdleWanMatchesClosedForm) {
  // M = 4 islands, 16 GB pseudo-gradient, 400 Gb/s = 50 GB/s per island per direction, 10 ms:
  // 2(M-1)(latency + bytes/(M W)) = 6 x (0.01 + 16e9 / (4 x 50e9)) = 6 x (0.01 + 0.08) = 0.54 s.
  EXPECT_NEAR(ring_sync_seconds(4, 16e9, 50e9, 0.01), 0.54, 1e-12);
  struct Case {
    int64_t m;
    double bytes, bw, lat, expect_s;
  };
  const Case cases[] = {
      {4, 16e9, 50e9, 0.01, 0.54},
      // M = 2: 2 x (0.005 + 1e9 / (2 x 1.25e9)) = 2 x 0.405 = 0.81 s.
      {2, 1e9, 1.25e9, 0.005, 0.81},
      // M = 8: 14 x (0.001 + 8e9 / (8 x 12.5e9)) = 14 x 0.081 = 1.134 s.
      {8, 8e9, 12.5e9, 0.001, 1.134},
  };
  for (const auto& c : cases) {
    // One round with a 1 ns step: the sync is the round, so its duration is measured alone.
    auto cfg = make_config(c.m, 1, 1, c.bw, c.lat);
    auto t = run(cfg, kNs, c.bytes);
    EXPECT_NEAR(t.fragment_sync_time_s, c.expect_s, 2 * kNs) << "M = " << c.m;
    EXPECT_NEAR(t.fragment_sync_time_s, ring_sync_seconds(c.m, c.bytes, c.bw, c.lat), 2 * kNs);
  }
}

TEST(DiLoCoWan, TopologyHasTheConfiguredBandwidthAndOneWayLatency) {
  // Three islands, 10 Gb/s = 1.25 GB/s, an odd one-way latency of 5 ms + 1 ns: gateways 0..2, the
  // WAN switch vertex 3, an up link (gateway -> wan, 2.5 ms + 1 ns) and a down link (wan ->
  // gateway, 2.5 ms) per gateway, custom links (efficiency 1): every gateway-to-gateway route is
  // up then down, 5 ms + 1 ns in all.
  const sim::Time lat = sim::Time::ms(5) + sim::Time::ns(1);
  auto wan = build_wan_topology(3, 1.25e9, lat);
  EXPECT_EQ(wan.num_gpus(), 3u);
  EXPECT_EQ(wan.num_vertices(), 4u);
  EXPECT_EQ(wan.vertex_name(3), "wan");
  ASSERT_EQ(wan.links().size(), 6u);
  for (const auto& l : wan.links()) {
    EXPECT_EQ(l.kind, topo::LinkKind::kCustom);
    EXPECT_EQ(l.bandwidth_Bps, 1.25e9);
    EXPECT_TRUE(l.src == 3 || l.dst == 3);
  }
  topo::Route r;
  for (uint32_t a = 0; a < 3; ++a)
    for (uint32_t b = 0; b < 3; ++b) {
      if (a == b) continue;
      wan.route(a, b, 0, r);
      EXPECT_EQ(r.links.size(), 2u);
      EXPECT_EQ(r.latency, lat) << a << " -> " << b;
    }
  // The profile's link efficiencies leave custom links alone: the constraint is 1.25 GB/s.
  sim::Simulation s(1);
  topo::HardwareProfile profile = topo::default_profile(topo::find_gpu("h100-sxm"));
  topo::ClusterResources res(s, wan, topo::find_gpu("h100-sxm"), profile);
  EXPECT_EQ(s.fluid().effective_capacity(res.link(0)), 1.25e9);
}

TEST(DiLoCoWan, OuterSyncRunsAsCollectivesOnTheWanTier) {
  // Two islands, one round of H = 1 step of 1 ns, S = 1 GB over B = 1.25 GB/s, L = 5 ms: the
  // program is one delay and one all-reduce per island on the communicator of both islands; run by
  // the executor and the collective runtime on the WAN topology the ring takes
  // 2(M-1)(L + S/(M B)) = 2 x (0.005 + 1e9 / 2.5e9) = 0.81 s after the 1 ns step.
  auto cfg = make_config(2, 1, 1, 1.25e9, 0.005);
  std::vector<double> steps = {kNs, kNs};
  JobProgram jp = diloco_outer_program(cfg, steps, 1e9);
  ASSERT_EQ(jp.world(), 2u);
  ASSERT_EQ(jp.templates.size(), 1u);  // identical islands share one program
  ASSERT_EQ(jp.comms.size(), 1u);
  EXPECT_EQ(jp.comms[0].members, (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(jp.comms[0].algorithm, Algorithm::kRing);
  const Program& p = jp.templates[0];
  EXPECT_EQ(p.stream_name(0), "compute");
  EXPECT_EQ(p.stream_name(1), "sync");
  int delays = 0, collectives = 0;
  for (const Op& op : p.ops()) {
    delays += op.kind == OpKind::kDelay;
    if (op.kind == OpKind::kCollective) {
      ++collectives;
      EXPECT_EQ(op.coll, CollectiveOp::kAllReduce);
      EXPECT_EQ(op.bytes, 1e9);
    }
  }
  EXPECT_EQ(delays, 1);
  EXPECT_EQ(collectives, 1);
  const double closed = ring_sync_seconds(2, 1e9, 1.25e9, 0.005);
  EXPECT_NEAR(closed, 0.81, 1e-12);
  // By hand on the executor: the step ends at 1 ns, the all-reduce 0.81 s later (within the 1 ns
  // rounding of the flow's end). A software overhead per step, which the timeline leaves at 0, is
  // paid once per ring step: 2(M-1) x 1 ms more.
  for (double overhead_s : {0.0, 0.001}) {
    sim::Simulation s(1);
    auto wan = build_wan_topology(2, 1.25e9, sim::Time::ms(5));
    topo::HardwareProfile profile = topo::default_profile(topo::find_gpu("h100-sxm"));
    topo::ClusterResources res(s, wan, topo::find_gpu("h100-sxm"), profile);
    RuntimeOptions ro;
    ro.step_overhead = sim::Time::from_seconds(overhead_s);
    CollectiveRuntime rt(res, ro);
    ProgramExecutor exec(res, rt, jp, cluster_shape_of(wan), cost_hints_for(res, ro), ExecutorOptions{});
    s.add_pending_work(&exec);
    exec.start();
    auto rr = s.run();
    ASSERT_FALSE(rr.deadlocked) << rr.deadlock_report;
    ASSERT_TRUE(exec.finished()) << exec.error();
    EXPECT_NEAR(exec.step_end().seconds(), kNs + closed + 2 * overhead_s, 2 * kNs) << overhead_s;
    EXPECT_EQ(rt.transfers_started(), 1u);  // one pipelined ring: one flow through all four links
  }
  // The timeline runs the same program: the sync's duration is the closed form.
  auto t = simulate_diloco_timeline(cfg, steps, 1e9);
  EXPECT_NEAR(t.fragment_sync_time_s, closed, 2 * kNs);
  EXPECT_NEAR(t.total_time_s, kNs + closed, 2 * kNs);
  // Tree on the same two islands: both trees are the one edge, each carries S/2 both ways, so each
  // link carries S in all and the bytes take S/B = 0.8 s; depth 1: 2 latency steps = 10 ms; and
  // the chunk pipeline's fill: a 524,288-byte chunk goes up the edge before it can come back
  // down, one chunk time at B = 1.25 GB/s: 419.4304 us.
  cfg.sync.algorithm = OuterAlgorithm::kTree;
  auto tree = simulate_diloco_timeline(cfg, steps, 1e9);
  EXPECT_NEAR(tree.fragment_sync_time_s, 0.81 + 419.4304e-6, 2 * kNs);
}

TEST(DiLoCoSync, AppendixABoundAgreesWithRingAcrossIslands) {
  // arXiv 2503.09799 App. A: all-reduce of N over R nodes >= 2N/W (1 - 1/R) + eps. Our ring across
  // M islands is that bound with R = M and eps = 2(M-1) x latency: 2(M-1)/M x N/W + 2(M-1) lat.
  // Example: Llama 3 405B-sized pseudo-gradient in bf16 (810 GB), M = 4, W = 16 Gb/s = 2 GB/s,
  // latency 10 ms: 2 x 810e9 / 2e9 x 3/4 + 6 x 0.01 = 607.5 + 0.06 = 607.56 s.
  const double bytes = 810e9, w = 2e9, lat = 0.01;
  double bound = appendix_a_allreduce_bound_seconds(4, bytes, w, 6 * lat);
  EXPECT_NEAR(bound, 607.56, 1e-9);
  auto t = run(make_config(4, 1, 1, w, lat), kNs, bytes);
  EXPECT_NEAR(t.fragment_sync_time_s, bound, 2 * kNs);
}

TEST(DiLoCoTimeline, NonStreamingUtilizationIsHTOverHTPlusSync) {
  // M = 4, H = 10, T = 1.5 s, 3 rounds, 16 GB at 50 GB/s, 10 ms: sync = 0.54 s (test above).
  // Round = H T + sync = 15 + 0.54 = 15.54 s; total = 3 x 15.54 = 46.62 s;
  // utilisation = 15 / 15.54 = 0.965250965...; wait share = 0.54 / 15.54.
  auto cfg = make_config(4, 10, 3, 50e9, 0.01);
  auto t = run(cfg, 1.5, 16e9);
  EXPECT_NEAR(t.total_time_s, 46.62, 3 * kNs);  // within 1 ns per round
  for (double u : t.utilization) EXPECT_NEAR(u, 15.0 / 15.54, 3 * kNs / 46.62);
  EXPECT_NEAR(t.wait_share, 0.54 / 15.54, 3 * kNs / 46.62);
  EXPECT_NEAR(t.outer_sync_time_s, 0.54, kNs);
  EXPECT_EQ(t.syncs, 3);
  EXPECT_EQ(t.syncs_in_flight_at_end, 0);
}

TEST(DiLoCoTimeline, SlowestIslandSetsThePace) {
  // Two islands, T = 1.0 s and 1.2 s, H = 5, one round, sync 0.81 s (M = 2 case above): the
  // all-reduce starts when the slow island arrives at 6.0 s and ends at 6.81 s for both.
  // Fast island: utilisation 5.0 / 6.81; slow island: 6.0 / 6.81.
  auto cfg = make_config(2, 5, 1, 1.25e9, 0.005);
  std::vector<double> steps = {1.0, 1.2};
  auto t = simulate_diloco_timeline(cfg, steps, 1e9);
  EXPECT_NEAR(t.total_time_s, 6.81, 2 * kNs);
  EXPECT_NEAR(t.utilization[0], 5.0 / 6.81, 1e-9);
  EXPECT_NEAR(t.utilization[1], 6.0 / 6.81, 1e-9);
}

TEST(DiLoCoStreaming, EnoughBandwidthHidesEverySync) {
  // F = 4 fragments of 4 GB, M = 4, 50 GB/s, 10 ms: one fragment alone takes
  // 6 x (0.01 + 4e9 / 2e11) = 0.18 s; fragments are 25 steps apart, so they never overlap each
  // other, and with tau = 1 each has T = 1 s > 0.18 s to finish: no island ever waits.
  // Utilisation 1; total = 3 x 100 x 1 s = 300 s; the last fragment (needed in round 4) is still
  // in flight at the end and finishes 0.18 s later.
  auto cfg = make_config(4, 100, 3, 50e9, 0.01);
  cfg.sync.streaming = true;
  cfg.sync.fragments = 4;
  cfg.sync.overlap_steps = 1;
  auto t = run(cfg, 1.0, 16e9);
  for (double u : t.utilization) EXPECT_NEAR(u, 1.0, 1e-9);
  EXPECT_NEAR(t.wait_share, 0.0, 1e-9);
  EXPECT_NEAR(t.total_time_s, 300.0, kNs);
  EXPECT_NEAR(t.fragment_sync_time_s, 0.18, 2 * kNs);
  EXPECT_EQ(t.syncs, 12);
  EXPECT_EQ(t.syncs_in_flight_at_end, 1);
  EXPECT_NEAR(t.drain_time_s, 300.18, 2 * kNs);
}

TEST(DiLoCoStreaming, TwoFragmentSyncsOverlapAndShareTheWan) {
  // M = 2, H = 3, F = 2, tau = 1, 2 rounds, T = 1 s, fragments of 1.5 GB over 1 GB/s, no latency:
  // a fragment alone takes S/B = 1.5 s (M = 2 ring: S through each link). Syncs are sent after
  // steps 1, 3, 4, 6 and due after 2, 4, 5, 7. Sync 2 is sent after step 4, the step sync 1 is due
  // after, so both run at once:
  //   sync 0 [1, 2.5]; step 3 waits for it: [2.5, 3.5]; sync 1 starts 3.5; step 4 [3.5, 4.5];
  //   sync 2 starts 4.5 beside sync 1 (0.5 s of bytes left): each gets B/2, sync 1 ends 5.5;
  //   sync 2 has 1 GB left at full rate, ends 6.5; step 5 (waits for sync 1) [5.5, 6.5]; step 6
  //   (waits for sync 2) [6.5, 7.5]; sync 3 [7.5, 9.0] is due after step 7 > 6: in flight at the end.
  // Total 7.5 s, waits 0.5 + 1.0 = 1.5 s per island, syncs 1.5, 2.0, 2.0, 1.5 s (mean 1.75).
  // Serialising the syncs would start sync 2 at 5.5 and end at 8.0 s.
  auto cfg = make_config(2, 3, 2, 1e9, 0.0);
  cfg.sync.streaming = true;
  cfg.sync.fragments = 2;
  cfg.sync.overlap_steps = 1;
  auto t = run(cfg, 1.0, 3e9);
  EXPECT_NEAR(t.total_time_s, 7.5, 2 * kNs);
  EXPECT_NEAR(t.drain_time_s, 9.0, 3 * kNs);
  EXPECT_EQ(t.syncs, 4);
  EXPECT_EQ(t.syncs_in_flight_at_end, 1);
  EXPECT_NEAR(t.fragment_sync_time_s, 1.75, 2 * kNs);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(t.compute_s[i], 6.0, kNs);
    EXPECT_NEAR(t.wait_s[i], 1.5, 3 * kNs);
    EXPECT_NEAR(t.compute_s[i] + t.wait_s[i], t.elapsed_s[i], kNs);  // the parts add up
  }
}

TEST(DiLoCoStreaming, StrictlyAbovePlainDiLoCoWhenTheWanIsTheBottleneck) {
  // The configuration of the hand-worked timeline above (M = 2, H = 3, 2 rounds, T = 1 s, a 3 GB
  // model over 1 GB/s, no latency). Plain DiLoCo syncs the whole 3 GB after each round's 3 steps:
  // an M = 2 ring moves S through each link, 3 s, so each round is 3 s of compute and 3 s of
  // waiting: total 12 s, utilisation 6 / 12 = 0.5. Streaming with F = 2, tau = 1 (above): 7.5 s,
  // utilisation 6 / 7.5 = 0.8, strictly above.
  auto plain = run(make_config(2, 3, 2, 1e9, 0.0), 1.0, 3e9);
  EXPECT_NEAR(plain.total_time_s, 12.0, 2 * kNs);
  EXPECT_NEAR(plain.utilization[0], 0.5, 1e-9);
  auto cfg = make_config(2, 3, 2, 1e9, 0.0);
  cfg.sync.streaming = true;
  cfg.sync.fragments = 2;
  cfg.sync.overlap_steps = 1;
  auto streaming = run(cfg, 1.0, 3e9);
  EXPECT_NEAR(streaming.utilization[0], 0.8, 1e-9);
  EXPECT_GT(streaming.utilization[0], plain.utilization[0] + 0.25);
}

TEST(DiLoCoStreaming, TooLittleBandwidthDegradesMonotonically) {
  // Same run with the WAN shrinking from 50 GB/s to 50 MB/s: a fragment's 4 GB needs
  // 4e9 x 1.5 / W seconds of bytes, which exceeds T = 1 s below 6 GB/s; from there on islands
  // wait, more for less bandwidth. Streaming must never do worse than blocking DiLoCo at the same
  // bandwidth (it sends the same bytes, earlier and overlapped).
  const double bws[] = {50e9, 10e9, 5e9, 2e9, 1e9, 0.5e9, 0.2e9, 0.05e9};
  double prev = 2.0;
  for (double bw : bws) {
    auto cfg = make_config(4, 100, 3, bw, 0.01);
    cfg.sync.streaming = true;
    cfg.sync.fragments = 4;
    cfg.sync.overlap_steps = 1;
    auto s = run(cfg, 1.0, 16e9);
    auto plain = run(make_config(4, 100, 3, bw, 0.01), 1.0, 16e9);
    double u = s.utilization[0];
    EXPECT_LE(u, prev + 1e-12) << "bandwidth " << bw;
    EXPECT_GE(u + 1e-12, plain.utilization[0]) << "bandwidth " << bw;
    // Where the WAN is the bottleneck (plain DiLoCo waits), streaming is strictly better.
    if (plain.utilization[0] < 1.0 - 1e-9) { EXPECT_GT(u, plain.utilization[0] + 1e-6) << "bandwidth " << bw; }
    prev = u;
  }
  EXPECT_LT(prev, 0.5);  // at 50 MB/s a 4 GB fragment takes 120 s of a 25 s fragment period
}

TEST(DiLoCoSync, RingMovesTwoMMinusOneOverMBytesPerIsland) {
  // Ring across M = 5 islands, 10 GB, 2 rounds: each island sends and receives
  // 2(M-1)/M x 10 GB = 16 GB per round, 32 GB in all; the WAN carries M x 16 = 80 GB per round.
  auto t = run(make_config(5, 4, 2, 10e9, 0.001), 0.5, 10e9);
  double total = 0;
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_NEAR(t.wan_up_bytes[i], 32e9, 1.0);
    EXPECT_NEAR(t.wan_down_bytes[i], 32e9, 1.0);
    total += t.wan_up_bytes[i];
  }
  EXPECT_NEAR(total / 2, 5 * 16e9, 5.0);
  // Streaming changes when, not how much: 4 fragments of 2.5 GB move the same 32 GB per island.
  auto cfg = make_config(5, 4, 2, 10e9, 0.001);
  cfg.sync.fragments = 4;
  auto s = run(cfg, 0.5, 10e9);
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(s.wan_up_bytes[i], 32e9, 1.0);
}

TEST(DiLoCoSync, DoubleBinaryTreeMovesSameTotalAndIsBalanced) {
  // Tree across M = 4: each of the two trees has M - 1 = 3 edges carrying half the bytes, in the
  // reduce and again in the broadcast phase: 2 x 2 x 3 x B/2 = 6 B = 2(M-1) B in all, as the ring.
  // Tree 0 (in-order) is 1 -> 2 <- 3, 2 -> 0; its mirror 2 -> 1 <- 0, 1 -> 3. Islands 1 and 2
  // each have four of the trees' hops (up and down) through their link each way, B/2 each, so
  // each tree moves at W/4: the bytes take (B/2)/(W/4) = 2 B/W, and the sync 2 B/W + 2 depth x
  // lat, depth 2: with B = 1 GB, W = 1 GB/s, lat = 0: 2 s. Plus the chunk pipeline's fill: on the
  // deepest path 1 -> 2 -> 0 both upward edges share a port with another (island 1 also sends
  // 1 -> 3, island 2 also hears 3), so a 524,288-byte chunk takes 1.048576 ms on each; up and
  // down, less the slowest: 3 x 1.048576 ms = 3.145728 ms.
  auto cfg = make_config(4, 1, 1, 1e9, 0.0);
  cfg.sync.algorithm = OuterAlgorithm::kTree;
  auto t = run(cfg, kNs, 1e9);
  double total = 0;
  for (double b : t.wan_up_bytes) total += b;
  EXPECT_NEAR(total, 6e9, 1.0);
  EXPECT_NEAR(t.fragment_sync_time_s, 2.0 + 3.145728e-3, 2 * kNs);
  cfg.sync.latency = sim::Time::ms(10);
  auto l = run(cfg, kNs, 1e9);
  EXPECT_NEAR(l.fragment_sync_time_s, 2.0 + 3.145728e-3 + 2 * 2 * 0.01, 3 * kNs);  // 2 x depth 2 x 10 ms
}

TEST(DiLoCoPublished, Table6Llama405BRowAtNinetyPercent) {
  // arXiv 2503.09799 Table 6: Llama 3 405B, 26 s step, DiLoCo H = 100 reaches 90% compute
  // utilisation at 16.0 Gbit/s (Charles et al., arXiv 2503.09799). Our model: blocking ring across M
  // islands, utilisation = H T / (H T + 2(M-1)(lat + N b / (M W))). With N = count_params of our
  // llama3-405b preset (405.8e9 -- 405B), bf16 (b = 2), M = 2, lat = 10 ms (their "low" network):
  // sync budget = 100 x 26 x (1 - 0.9) / 0.9 = 288.89 s; minus 2 x 0.01 s of latency = 288.87 s;
  // W = (2(M-1)/M) N b / 288.87 = 811.6e9 / 288.87 = 2.81 GB/s = 22.5 Gbit/s.
  // That is 1.4x the published 16.0 (next grid point up from ours: 23.3). Their number comes from
  // the simulator of the Streaming DiLoCo paper, which overlaps the outer all-reduce with the
  // backward pass and reports on a coarse bandwidth grid; the exact bits per parameter and what W
  // is "per" are not stated in the text we have, so we check only the ballpark (within 2x).
  const double n = static_cast<double>(count_params(find_model_preset("llama3-405b")).total);
  EXPECT_NEAR(n, 405.8e9, 1e9);
  const double bytes = 2 * n;
  double w = ring_bandwidth_for_utilization(2, 100, 26.0, bytes, 0.01, 0.9);
  double gbit = w * 8 / 1e9;
  std::printf(
      "[ Table 6 ] Llama 3 405B, T = 26 s, H = 100, 90%% CU: ours %.1f Gbit/s per island "
      "(bf16, M = 2, ring, blocking), published 16.0\n",
      gbit);
  for (int64_t m : {4, 8}) {
    double wm = ring_bandwidth_for_utilization(m, 100, 26.0, bytes, 0.01, 0.9);
    std::printf("[ Table 6 ]   same with M = %lld: %.1f Gbit/s; fp32: %.1f Gbit/s\n", static_cast<long long>(m),
                wm * 8 / 1e9, ring_bandwidth_for_utilization(m, 100, 26.0, 2 * bytes, 0.01, 0.9) * 8 / 1e9);
  }
  EXPECT_NEAR(gbit, 22.48, 0.05);
  EXPECT_GT(gbit / 16.0, 0.5);
  EXPECT_LT(gbit / 16.0, 2.0);
  // The event simulation at that bandwidth gives the target utilisation back.
  auto t = run(make_config(2, 100, 2, w, 0.01), 26.0, bytes);
  EXPECT_NEAR(t.utilization[0], 0.9, 1e-8);
}

// --- binding -----------------------------------------------------------------------------------

constexpr const char* kScenario = R"(cluster:
  gpu: h100-sxm
  nodes: 1
  gpus_per_node: 8
  scale_up: {kind: nvswitch}
workload:
  kind: diloco
  islands: 3
  inner_steps: 20
  outer_steps: 2
  island:
    model: {name: tiny, layers: 4, hidden: 1024, ffn_hidden: 4096, heads: 8, kv_heads: 8, head_dim: 128, vocab: 32000}
    training: {seq_len: 2048, global_batch: 8, micro_batch: 1, precision: bf16}
    parallelism: {tp: 1, pp: 1, dp: 8, data_parallel: ddp}
    schedule: {kind: 1f1b}
  outer_sync:
    precision: fp32
    bandwidth: 10Gbps
    latency: 5ms
    algorithm: ring
)";

struct Bound {
  topo::ClusterConfig cluster;
  DilocoSettings settings;
};

Bound bind(const std::vector<std::string>& overrides) {
  auto doc = sim::ConfigDoc::load_string(kScenario, "diloco.yaml");
  for (const auto& o : overrides) doc.apply_override(o);
  auto root = doc.root();
  Bound b;
  b.cluster = topo::bind_cluster(root.child("cluster"));
  EXPECT_EQ(root.child("workload").get_string("kind"), "diloco");  // read by the app's dispatch
  b.settings = bind_diloco(root.child("workload"), b.cluster.gpu, 8, 0);
  doc.check_all_used();
  return b;
}

std::string bind_error(const std::vector<std::string>& overrides) {
  try {
    bind(overrides);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  return "no error";
}

TEST(DiLoCoConfig, BindsEveryKey) {
  auto b = bind({"workload.outer_sync.streaming={fragments: 2, overlap_steps: 3}"});
  const auto& c = b.settings.config;
  EXPECT_EQ(c.islands, 3);
  EXPECT_EQ(c.inner_steps, 20);
  EXPECT_EQ(c.outer_steps, 2);
  EXPECT_EQ(c.sync.bytes_per_param, 4.0);
  EXPECT_DOUBLE_EQ(c.sync.bandwidth_Bps, 10e9 / 8);
  EXPECT_EQ(c.sync.latency, sim::Time::ms(5));
  EXPECT_EQ(c.sync.fragments, 2);
  EXPECT_EQ(c.sync.overlap_steps, 3);
  EXPECT_EQ(b.settings.island.job.world(), 8);
  // 4-bit outer gradients (Streaming DiLoCo): half a byte per parameter.
  EXPECT_EQ(bind({"workload.outer_sync.precision=fp4"}).settings.config.sync.bytes_per_param, 0.5);
}

TEST(DiLoCoConfig, ErrorsNameLocationAndKey) {
  struct Case {
    std::string set, key, what;
  };
  // Line:col of each value in kScenario, counted by hand: islands on line 8, inner_steps 9,
  // bandwidth 18 (column 16). Overrides report "--set <key>" instead of a line.
  const Case cases[] = {
      {"workload.islands=1", "workload.islands", "at least 2 islands"},
      {"workload.inner_steps=0", "workload.inner_steps", "must be >= 1"},
      {"workload.outer_sync.bandwidth=fast", "workload.outer_sync.bandwidth", "fast"},
      {"workload.outer_sync.bandwidth=0Gbps", "workload.outer_sync.bandwidth", "must be > 0"},
      {"workload.outer_sync.streaming={fragments: 0}", "workload.outer_sync.streaming.fragments", "between 1 and"},
      {"workload.outer_sync.streaming={fragments: 5}", "workload.outer_sync.streaming.fragments", "4 layers"},
      {"workload.outer_sync.streaming={fragments: 4, overlap_steps: 5}", "workload.outer_sync.streaming.overlap_steps",
       "must be < inner_steps / fragments"},
      {"workload.outer_sync.algorithm=butterfly", "workload.outer_sync.algorithm", "ring"},
  };
  for (const auto& c : cases) {
    std::string e = bind_error({c.set});
    EXPECT_NE(e.find(c.key), std::string::npos) << c.set << " -> " << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << c.set << " -> " << e;
  }
  // A value from the file carries file:line:col.
  auto doc_text = std::string(kScenario);
  doc_text.replace(doc_text.find("islands: 3"), 10, "islands: 1");
  try {
    auto doc = sim::ConfigDoc::load_string(doc_text, "diloco.yaml");
    auto root = doc.root();
    auto cl = topo::bind_cluster(root.child("cluster"));
    bind_diloco(root.child("workload"), cl.gpu, 8, 0);
    ADD_FAILURE() << "islands: 1 accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("diloco.yaml:8:12: workload.islands:", 0), 0u) << e.what();
  }
}

TEST(DiLoCoRun, EndToEndOnAnIslandCluster) {
  // Three 8-GPU islands of a tiny model; sync of N x 4 B over 1.25 GB/s, 5 ms:
  // 2 x 2 x (0.005 + 4N / (3 x 1.25e9)); utilisation = 20 T / (20 T + sync) with T the simulated
  // island step; the data-parallel reference pays the same sync after every step.
  auto b = bind({});
  sim::Simulation s(1);
  auto topo = topo::build_cluster(b.cluster.spec);
  topo::ClusterResources res(s, topo, b.cluster.gpu, b.cluster.profile);
  auto r = run_diloco(res, b.settings);
  ASSERT_GT(r.step.step_time_s, 0);
  double sync = ring_sync_seconds(3, r.params * 4, 1.25e9, 0.005);
  EXPECT_NEAR(r.idle_sync_s, sync, 1e-12);
  double t = sim::Time::from_seconds(r.step.step_time_s).seconds();
  EXPECT_NEAR(r.diloco.utilization[0], 20 * t / (20 * t + sync), 1e-8);
  EXPECT_NEAR(r.data_parallel.utilization[0], t / (t + sync), 1e-8);
  EXPECT_EQ(r.data_parallel_steps, 40);
  EXPECT_NEAR(r.tokens_per_s, 3 * r.step.tokens_per_step * 40 / r.diloco.total_time_s, 1e-6);
  std::string text = format_diloco_summary(b.settings, r);
  EXPECT_NE(text.find("islands are identical"), std::string::npos) << text;
  EXPECT_NE(text.find("hidden"), std::string::npos) << text;
}

}  // namespace
}  // namespace wl
