// Tori joined by a data-centre network (Cloud TPU Multislice): collectives across pods, simulated
// end to end and worked out by hand.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "tests/workloads/ideal_cluster.h"
#include "workloads/collectives/benchmark.h"

namespace wl {
namespace {

// 2 pods of a 4-chip ring, one chip per host: ICI 100 GB/s, DCN 10 GB/s per chip, no latency,
// every link at full rate, no software cost per collective or step.
topo::Topology two_pods() {
  topo::TorusSpec s;
  s.dims = {4};
  s.chips_per_host = 1;
  s.link_bandwidth_Bps = 100e9;
  s.link_latency = sim::Time::zero();
  s.pods = 2;
  s.dcn_bandwidth_Bps = 10e9;
  s.dcn_latency = sim::Time::zero();
  return topo::build_torus(s);
}

topo::HardwareProfile free_software() {
  topo::HardwareProfile p = test::ideal_profile();
  p.nccl_protocols = "Simple";
  p.step_overhead = p.simple_launch = sim::Time::zero();
  return p;
}

double simulate(const topo::Topology& t, Algorithm a, const std::vector<uint32_t>& group, double bytes) {
  CollectiveBenchConfig cfg;
  cfg.iterations = 1;
  cfg.warmup = 0;
  CollectiveTest test;
  test.op = CollectiveOp::kAllReduce;
  test.algorithm = a;
  test.group = group;
  test.sizes = {bytes};
  cfg.tests.push_back(test);
  sim::Simulation sim(1);
  topo::ClusterResources res(sim, t, topo::find_gpu("tpu-v5p"), free_software());
  return run_collective_benchmark(res, cfg).at(0).time_s;
}

TEST(MultiPod, AllReduceOverTwoPodsWorkedByHand) {
  // S = 1e9 over all 8 chips with the torus algorithm (pods as the last dimension):
  //   RS along each pod's ring, both ways: 3/4 x S/2 = 375 MB per ICI link at 100 GB/s = 3.75 ms;
  //   RS across pods (data S/4 = 250 MB, 2 pods): each way 1/2 x 250/2 = 62.5 MB, both ways out
  //   of one chip's DCN link: 125 MB at 10 GB/s = 12.5 ms;
  //   AG across pods 12.5 ms, AG along the rings 3.75 ms. Total 32.5 ms.
  const topo::Topology t = two_pods();
  const std::vector<uint32_t> all = {0, 1, 2, 3, 4, 5, 6, 7};
  EXPECT_NEAR(simulate(t, Algorithm::kTorus, all, 1e9), 32.5e-3, 1e-9);
  // The data-parallel group across pods (chip 1 of each pod): one ring of 2 over the DCN, each
  // way 1/2 x S/2 = 250 MB, both out of one DCN link: 500 MB at 10 GB/s = 50 ms, RS and AG: 100 ms.
  EXPECT_NEAR(simulate(t, Algorithm::kTorus, {1, 5}, 1e9), 100e-3, 1e-9);
  // A flat ring over all 8 crosses the DCN twice per lap: 2 x 7/8 x S = 1.75 GB through chip 3's
  // DCN link at 10 GB/s = 175 ms at least, so the hierarchical torus plan is more than 5x faster.
  EXPECT_GT(simulate(t, Algorithm::kRing, all, 1e9), 175e-3 * (1 - 1e-9));
}

}  // namespace
}  // namespace wl
