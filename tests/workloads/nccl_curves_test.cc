// The collective model against published nccl-tests curves (tests/data/nccl-tests-curves/, each
// file citing its source): simulated busbw per size against the measured one, with the error
// bound per size band that issue 11 sets (one H100 node: 15% from 64 KiB up, 30% below).
//
// Which curve tests what. NVLS's latency (hardware_profile.cc) was fitted to the xxrjun NCCL 2.29.2
// all-reduce curve, so that curve is not used here; the NVIDIA dgxc-benchmarking curve (8 ranks, one
// process per GPU) and the vpbench NCCL 2.24.3 curve are independent of it. Every other constant
// comes from NCCL's source or logs (hardware_profile.cc). Curves measured with one process driving
// all 8 GPUs (`-g 8`: vpbench, together) have a floor of 33-35 us at small sizes, the cost of one
// thread launching eight kernels, which a one-process-per-GPU job does not pay; they are checked
// from 2 MiB up for all-reduce and from 8 MiB up for all-gather and reduce-scatter (whose times
// stay on that floor up to 4 MiB).
//
// A row is a measurement glitch, and skipped, when it took longer than the row of twice its size
// (a larger message does the smaller one's work and more): dgxc's 32 B (68 us; 13.5 us in place)
// and 4 KiB (23.6 us, between 17.1 and 17.4) rows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"
#include "workloads/collectives/benchmark.h"

namespace wl {
namespace {

struct Row {
  double bytes = 0;
  double time_us = 0;
  double busbw = 0;
};

std::vector<Row> load(const std::string& name) {
  std::ifstream in(std::string(CLUSTERSIM_SOURCE_DIR) + "/tests/data/nccl-tests-curves/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::vector<Row> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    std::istringstream ls(line);
    Row r;
    double algbw = 0;
    ls >> r.bytes >> r.time_us >> algbw >> r.busbw;
    rows.push_back(r);
  }
  std::vector<Row> kept;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i + 1 < rows.size() && rows[i + 1].bytes == 2 * rows[i].bytes && rows[i].time_us > rows[i + 1].time_us) continue;
    kept.push_back(rows[i]);
  }
  return kept;
}

topo::Topology dgx_h100() {
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  su.bandwidth_Bps = topo::find_gpu("h100-sxm").scale_up_bandwidth_Bps;
  return topo::build_scale_up(8, su);
}

// DGX H100 nodes (two unless said), one 400 Gb/s NIC per GPU on a rail-optimized leaf/spine
// (non-blocking).
topo::Topology two_dgx_h100(uint32_t nodes = 2) {
  topo::ClusterSpec c;
  c.nodes = nodes;
  c.gpus_per_node = 8;
  c.scale_up.kind = topo::ScaleUpKind::kNvSwitch;
  c.scale_up.bandwidth_Bps = topo::find_gpu("h100-sxm").scale_up_bandwidth_Bps;
  c.scale_out.kind = topo::ScaleOutKind::kFatTree;
  c.scale_out.fat_tree.nic_bandwidth_Bps = 50e9;
  c.scale_out.fat_tree.rails = 8;
  c.scale_out.fat_tree.tiers = {topo::FatTreeTier{"leaf", nodes, 1.0, 1}, topo::FatTreeTier{"spine", 1, 1.0, 1}};
  return topo::build_cluster(c);
}

// Simulated time per size (seconds), on `topo` (one H100 node by default) with the default profile.
std::vector<double> simulate(CollectiveOp op, Algorithm a, const std::vector<Row>& rows,
                             const topo::Topology& topo = dgx_h100()) {
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  CollectiveBenchConfig cfg;
  cfg.iterations = 1;
  cfg.warmup = 0;
  CollectiveTest t;
  t.op = op;
  t.algorithm = a;
  for (uint32_t g = 0; g < topo.num_gpus(); ++g) t.group.push_back(g);
  for (const Row& r : rows) t.sizes.push_back(r.bytes);
  cfg.tests.push_back(t);
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, topo, gpu, topo::default_profile(gpu));
  std::vector<double> out;
  for (const auto& r : run_collective_benchmark(res, cfg)) out.push_back(r.time_s);
  return out;
}

// busbw error = measured time / simulated time - 1 (busbw is size x factor / time). Checks the
// bound per row from `from_bytes` up to `to_bytes`, prints the largest error per band.
void check(const std::string& file, CollectiveOp op, Algorithm a, double from_bytes,
           const topo::Topology& topo = dgx_h100(), double to_bytes = 1e30) {
  SCOPED_TRACE(file);
  const std::vector<Row> rows = load(file);
  ASSERT_FALSE(rows.empty());
  const std::vector<double> t = simulate(op, a, rows, topo);
  ASSERT_EQ(t.size(), rows.size());
  double worst_small = 0, worst_large = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].bytes < from_bytes || rows[i].bytes > to_bytes) continue;
    const double err = rows[i].time_us * 1e-6 / t[i] - 1.0;
    const bool large = rows[i].bytes >= 65536;
    (large ? worst_large : worst_small) = std::max(large ? worst_large : worst_small, std::abs(err));
    EXPECT_LT(std::abs(err), large ? 0.15 : 0.30)
        << rows[i].bytes << " B: measured " << rows[i].time_us << " us, simulated " << t[i] * 1e6 << " us";
  }
  std::printf("%s: max |busbw error| %.1f%% below 64 KiB, %.1f%% from 64 KiB (rows from %.0f B)\n", file.c_str(),
              100 * worst_small, 100 * worst_large, from_bytes);
}

TEST(NcclCurves, OneH100NodeAllReduceDefaultMatchesDgxcFromEightBytes) {
  check("h100-1node-allreduce-nvls-dgxc.tsv", CollectiveOp::kAllReduce, Algorithm::kAuto, 8);
}

TEST(NcclCurves, OneH100NodeAllReduceDefaultMatchesVpbenchFromTwoMiB) {
  check("h100-1node-allreduce-nvls-g8-vpbench.tsv", CollectiveOp::kAllReduce, Algorithm::kAuto, 2 << 20);
}

TEST(NcclCurves, OneH100NodeRingAllReduceMatchesFromTwoMiB) {
  check("h100-1node-allreduce-ring-together.tsv", CollectiveOp::kAllReduce, Algorithm::kRing, 2 << 20);
}

TEST(NcclCurves, OneH100NodeAllGatherAndReduceScatterMatch) {
  check("h100-1node-allgather-ring-together.tsv", CollectiveOp::kAllGather, Algorithm::kAuto, 8 << 20);
  check("h100-1node-reducescatter-ring-together.tsv", CollectiveOp::kReduceScatter, Algorithm::kAuto, 8 << 20);
  check("h100-1node-allgather-mpi-xxrjun.tsv", CollectiveOp::kAllGather, Algorithm::kAuto, 0);
  check("h100-1node-reducescatter-mpi-xxrjun.tsv", CollectiveOp::kReduceScatter, Algorithm::kAuto, 0);
}

// Two nodes (dstack's Nebius example, NCCL's default choice, NVLS-tree on 2 nodes by NVIDIA's
// account in nccl-tests#309/#319). NVLS-tree's pipeline fill (collective.h) sets its mid sizes:
// at 64 MiB a loop is 16 channels x 8 heads x 128 KiB = 16 MiB, and one loop takes 16 MiB x 9/8 /
// 300 GB/s = 62.9 us through each of the three switch stages and 2 MiB / 47 GB/s = 44.6 us over
// each NIC up and down, a fill of 3 x 62.9 + 2 x 44.6 - 62.9 = 215 us (the measured curve reaches
// 64 MiB 190 us later than 1 GiB's bandwidth would: 472 us against 67.1 MB / 238 GB/s = 282 us).
// nvls-tree within 15% from 4 MiB (below, NCCL runs LL protocols); auto from 64 MiB, the bound
// issue 11 sets for several nodes.
TEST(NcclCurves, TwoH100NodesAllReduceMatchesNvlsTreeFromFourMiB) {
  check("h100-2node-allreduce-default-nebius-dstack.tsv", CollectiveOp::kAllReduce, Algorithm::kNvlsTree, 4 << 20,
        two_dgx_h100());
  check("h100-2node-allreduce-default-nebius-dstack.tsv", CollectiveOp::kAllReduce, Algorithm::kAuto, 64 << 20,
        two_dgx_h100());
  // Small sizes, auto among NCCL's own algorithms: the ring's LL latency (2 x 15 steps) and
  // NVLS-tree's 25 us sit at the measured 30-45 us floor, within 30% up to 32 KiB. (Horovod's
  // hierarchical all-reduce, which NCCL does not have, was estimated at 20 us and picked: 66% fast.)
  check("h100-2node-allreduce-default-nebius-dstack.tsv", CollectiveOp::kAllReduce, Algorithm::kAuto, 8,
        two_dgx_h100(), 32768);
}

// Ten nodes (xxrjun, 80 H100s, NCCL 2.29.2, default choice, NICs inferred as 8x 400G): nvls-tree
// within 15% from 64 MiB to 2 GiB. From 4 GiB the measured curve sags from 345 to 314-320 GB/s
// busbw, which nothing in the model explains (the fabric is not documented), so those rows are
// not asserted. Fill at 64 MiB: 16 x 8 x 64 KiB = 8 MiB loops (NCCL's chunk is at most 64 KiB
// from 4 nodes), 3 switch stages of 31.5 us and 2 x 3 tree levels of 2 x 1 MiB / 47 GB/s = 44.6 us
// (a NIC inside a tree of more than two nodes carries twice a leaf's share), less the slowest:
// 3 x 31.5 + 6 x 44.6 - 44.6 = 318 us.
TEST(NcclCurves, TenH100NodesNvlsTreeMatchesFrom64MiBToTwoGiB) {
  check("h100-10node-allreduce-mpi-xxrjun.tsv", CollectiveOp::kAllReduce, Algorithm::kNvlsTree, 64 << 20,
        two_dgx_h100(10), 2.0 * (1 << 30));
}

// NVLS's gain follows the GPU count as the in-switch model says: per-port traffic S(n+1)/n against
// a ring's 2S(n-1)/n, so NVLS loses to the ring up to 4 GPUs and wins from 5 (n+1 < 2(n-1) x
// 0.667/0.82 from n = 5), as NVIDIA/nccl#1455 measured (busbw ~370 GB/s for 2-4 GPUs, the ring's,
// then 420 / 440 / 460 / 480 for 5-8). At 4 GiB the model gives busbw 2(n-1)/n x 300 GB/s x
// n/(n+1) = 600 (n-1)/(n+1): 400, 429, 450, 467 GB/s for 5-8 (less the 59 us latency), within
// 7% of those.
TEST(NcclCurves, NvlsWinsFromFiveGpusAsMeasured) {
  const topo::Topology topo = dgx_h100();
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  const double published[9] = {0, 0, 370, 370, 370, 420, 440, 460, 480};
  for (uint32_t n = 2; n <= 8; ++n) {
    SCOPED_TRACE(n);
    CollectiveBenchConfig cfg;
    cfg.iterations = 1;
    cfg.warmup = 0;
    CollectiveTest t;
    t.op = CollectiveOp::kAllReduce;
    for (uint32_t g = 0; g < n; ++g) t.group.push_back(g);
    t.sizes = {4.0 * (1u << 30)};
    cfg.tests.push_back(t);
    sim::Simulation sim(1);
    topo::ClusterResources res(sim, topo, gpu, topo::default_profile(gpu));
    const auto r = run_collective_benchmark(res, cfg);
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].algorithm, n >= 5 ? Algorithm::kNvls : Algorithm::kRing) << r[0].note;
    EXPECT_NEAR(r[0].busbw_GBps, published[n], published[n] * 0.07);
  }
}

}  // namespace
}  // namespace wl
