// Tests of topology/cluster_resources.h: what communication takes from a GPU's compute, worked by
// hand from the hardware profile's comm_sms and comm_hbm_fraction.
#include <gtest/gtest.h>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"

namespace topo {
namespace {

// NCCL's kernels hold 16 SMs; any communication takes 5% of HBM.
HardwareProfile comm_profile() {
  HardwareProfile o;
  o.comm_sms = 16;
  o.comm_hbm_fraction = 0.05;
  return o;
}

// When each kernel ended, by tag (the GPU it ran on).
struct KernelEnds : sim::ActivityOwner {
  explicit KernelEnds(sim::Simulation& sim) : s(sim) {}
  sim::Simulation& s;
  sim::Time end[4];
  void on_activity_done(sim::ActivityId, uint64_t tag) override { end[tag] = s.now(); }
};

// One kernel alone on GPU 0 of a 2-GPU node while a communication of the given kind runs there
// (holds_sms: NCCL's kernels; false: copy-engine copies); returns when it ends.
sim::Time kernel_end(bool communicating, bool holds_sms, double flops, double bytes) {
  auto t = build_scale_up(2, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  const HardwareProfile o = comm_profile();
  const GpuSpec gpu = find_gpu("h100-sxm");  // 132 SMs, 3.35 TB/s
  ClusterResources res(s, t, gpu, o);
  if (communicating) res.comm_begin(0, holds_sms);
  res.start_kernel(0, flops, 1e15, bytes, 1.0, nullptr, 0);
  s.run();
  if (communicating) res.comm_end(0, holds_sms);
  return s.now();
}

TEST(ClusterResourcesComm, CopyEnginesTakeHbmButNoSms) {
  // A compute-bound kernel of 1e12 FLOPs at 1e15 FLOP/s: 1 ms alone; beside NCCL's kernels it
  // has 132 - 16 = 116 of 132 SMs, 1 ms x 132 / 116 = 1,137,931.03 ns (the engine rounds a
  // completion up to the next ns: 1,137,932); beside copy-engine copies all of them, 1 ms.
  EXPECT_EQ(kernel_end(false, true, 1e12, 0), sim::Time::ms(1));
  EXPECT_EQ(kernel_end(true, true, 1e12, 0), sim::Time::ns(1137932));
  EXPECT_EQ(kernel_end(true, false, 1e12, 0), sim::Time::ms(1));
  // A memory-bound kernel of 3.35e9 bytes: 1 ms alone, 1 ms / 0.95 = 1,052,631.58 ns, 1,052,632, beside either
  // (both move bytes through HBM).
  EXPECT_EQ(kernel_end(false, true, 0, 3.35e9), sim::Time::ms(1));
  EXPECT_EQ(kernel_end(true, true, 0, 3.35e9), sim::Time::ns(1052632));
  EXPECT_EQ(kernel_end(true, false, 0, 3.35e9), sim::Time::ns(1052632));
}

TEST(ClusterResourcesComm, NestedKindsRestoreTheCapacityTheyTook) {
  // Copy engines first, then NCCL kernels, then the kernels end: the SMs come back while the
  // copies still hold HBM; the compute-bound kernel started after that runs at full SM speed.
  auto t = build_scale_up(2, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  const HardwareProfile o = comm_profile();
  ClusterResources res(s, t, find_gpu("h100-sxm"), o);
  res.comm_begin(0, false);
  res.comm_begin(0, true);
  res.comm_end(0, true);
  res.start_kernel(0, 1e12, 1e15, 0, 1.0, nullptr, 0);
  s.run();
  EXPECT_EQ(s.now(), sim::Time::ms(1));
  res.comm_end(0, false);
}

// While no kernel runs on a GPU, communication changes its SM pool's capacity only when the next
// kernel starts (the record is not touched before); while one runs, at once. Compute-bound
// kernels of 1 ms alone (1e12 FLOPs at 1e15 FLOP/s), 1,137,932 ns beside NCCL's kernels
// (CopyEnginesTakeHbmButNoSms). GPU 0: communication begins while its kernel runs. GPU 1:
// communication begins and ends on an idle GPU, then its kernel starts. GPU 2: it begins on an
// idle GPU, its kernel starts while it runs.
TEST(ClusterResourcesComm, ACapacityChangeReachesRunningAndLaterKernels) {
  auto t = build_scale_up(4, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  const HardwareProfile o = comm_profile();
  ClusterResources res(s, t, find_gpu("h100-sxm"), o);
  KernelEnds ends(s);
  res.start_kernel(0, 1e12, 1e15, 0, 1.0, &ends, 0);
  res.comm_begin(0);
  EXPECT_DOUBLE_EQ(s.fluid().effective_capacity(res.sm_pool(0)), 116.0 / 132.0);
  res.comm_begin(1);
  res.comm_begin(2);
  EXPECT_DOUBLE_EQ(s.fluid().effective_capacity(res.sm_pool(1)), 1.0) << "idle: noted, not yet set";
  res.comm_end(1);
  res.start_kernel(1, 1e12, 1e15, 0, 1.0, &ends, 1);
  res.start_kernel(2, 1e12, 1e15, 0, 1.0, &ends, 2);
  EXPECT_DOUBLE_EQ(s.fluid().effective_capacity(res.sm_pool(2)), 116.0 / 132.0);
  s.run();
  res.comm_end(0);
  res.comm_end(2);
  EXPECT_EQ(ends.end[0], sim::Time::ns(1137932));
  EXPECT_EQ(ends.end[1], sim::Time::ms(1));
  EXPECT_EQ(ends.end[2], sim::Time::ns(1137932));
}

// The GPU order moves where a GPU's records lie, not what they do: after reversing the order of a
// 4-GPU node, communication on GPU 1 slows GPU 1's kernel (1 ms x 132 / 116 = 1,137,932 ns, as
// CopyEnginesTakeHbmButNoSms works out) and no other GPU's, the names follow the GPUs, and once
// something runs the order can no longer change.
TEST(ClusterResourcesOrder, ReorderedGpusKeepTheirOwnCapacitiesAndNames) {
  auto t = build_scale_up(4, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  const HardwareProfile o = comm_profile();
  ClusterResources res(s, t, find_gpu("h100-sxm"), o);
  const sim::ConstraintId sm1_before = res.sm_pool(1);
  const std::vector<uint32_t> order = {3, 2, 1, 0};
  EXPECT_TRUE(res.order_gpus(order));
  EXPECT_NE(res.sm_pool(0), res.sm_pool(3));
  EXPECT_EQ(res.sm_pool(3).value + 6, res.sm_pool(0).value);  // GPU 3 first, GPU 0 three places on
  EXPECT_EQ(res.hbm(3).value, res.sm_pool(3).value + 1);
  EXPECT_EQ(s.fluid().name(res.sm_pool(1)), "gpu1 SMs");
  EXPECT_EQ(s.fluid().name(res.hbm(0)), "gpu0 HBM");
  EXPECT_EQ(s.fluid().name(sm1_before), "gpu2 SMs");  // GPU 1's old record is GPU 2's now

  KernelEnds ends(s);
  res.comm_begin(1);
  for (uint32_t g = 0; g < 4; ++g) res.start_kernel(g, 1e12, 1e15, 0, 1.0, &ends, g);
  EXPECT_FALSE(res.order_gpus(std::vector<uint32_t>{0, 1, 2, 3}));  // kernels are running
  s.run();
  res.comm_end(1);
  EXPECT_EQ(ends.end[0], sim::Time::ms(1));
  EXPECT_EQ(ends.end[1], sim::Time::ns(1137932));
  EXPECT_EQ(ends.end[2], sim::Time::ms(1));
  EXPECT_EQ(ends.end[3], sim::Time::ms(1));
}

// A run that models GPUs 2 and 3 of a 4-GPU NVSwitch node only (symmetric mode's use): GPUs 0
// and 1 get no SM pool, no HBM and no link constraints (their links to and from the switch), so
// of the 8 directed links and 2 x 4 GPU pools, 4 links and 2 x 2 pools are made. What is made
// works as in a full run: 1 GB from GPU 2 to GPU 3 crosses two 100 GB/s links (at efficiency 1),
// 10 ms; a kernel of
// 1 ms beside communication on its GPU takes 1 ms x 132 / 116 = 1,137,932 ns (as
// CopyEnginesTakeHbmButNoSms works out).
TEST(ClusterResourcesModelled, GpusNotModelledGetNoConstraints) {
  auto t = build_scale_up(4, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  ASSERT_EQ(t.links().size(), 8u);
  sim::Simulation s(1);
  HardwareProfile o = comm_profile();
  o.scale_up_efficiency = 1.0;
  ClusterResources res(s, t, find_gpu("h100-sxm"), o, std::vector<uint8_t>{0, 0, 1, 1});
  EXPECT_EQ(s.fluid().num_constraints(), 4u + 2u * 2u);
  EXPECT_FALSE(res.models_every_gpu());
  EXPECT_FALSE(res.modelled(0));
  EXPECT_TRUE(res.modelled(3));
  for (uint32_t l = 0; l < 8; ++l) {
    const bool gpu01 = t.links()[l].src < 2 || t.links()[l].dst < 2;
    EXPECT_EQ(res.has_link(l), !gpu01) << "link " << l;
  }
  EXPECT_EQ(s.fluid().name(res.sm_pool(2)), "gpu2 SMs");
  EXPECT_EQ(s.fluid().name(res.hbm(3)), "gpu3 HBM");
  // Modelled GPUs keep the first places: an order putting GPU 0 there is refused.
  EXPECT_FALSE(res.order_gpus(std::vector<uint32_t>{0, 2, 3, 1}));
  EXPECT_TRUE(res.order_gpus(std::vector<uint32_t>{3, 2, 0, 1}));
  EXPECT_EQ(s.fluid().name(res.sm_pool(3)), "gpu3 SMs");
  EXPECT_EQ(res.hbm(2).value, res.sm_pool(3).value + 3);

  Route r;
  t.route(2, 3, 0, r);
  ASSERT_EQ(r.links.size(), 2u);
  std::vector<sim::Use> uses;
  for (uint32_t l : r.links) {
    uses.push_back(sim::Use{res.link(l), 1.0});
    EXPECT_EQ(s.fluid().name(res.link(l)), t.vertex_name(t.links()[l].src) + "->" + t.vertex_name(t.links()[l].dst));
  }
  KernelEnds ends(s);
  s.fluid().start(1e9, uses, sim::kUnbounded, &ends, 0);
  res.comm_begin(3);
  res.start_kernel(3, 1e12, 1e15, 0, 1.0, &ends, 3);
  s.run();
  res.comm_end(3);
  EXPECT_EQ(ends.end[0], sim::Time::ms(10));
  EXPECT_EQ(ends.end[3], sim::Time::ns(1137932));
}

}  // namespace
}  // namespace topo
