// Tests of topology/cluster_resources.h: what communication takes from a GPU's compute, worked by
// hand from the hardware profile's comm_sms and comm_hbm_fraction.
#include <gtest/gtest.h>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"

namespace topo {
namespace {

// One kernel alone on GPU 0 of a 2-GPU node while a communication of the given kind runs there
// (holds_sms: NCCL's kernels; false: copy-engine copies); returns when it ends.
sim::Time kernel_end(bool communicating, bool holds_sms, double flops, double bytes) {
  auto t = build_scale_up(2, ScaleUpSpec{ScaleUpKind::kNvSwitch, 100e9, sim::Time::zero()});
  sim::Simulation s(1);
  HardwareProfile o;
  o.comm_sms = 16;
  o.comm_hbm_fraction = 0.05;
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
  HardwareProfile o;
  o.comm_sms = 16;
  o.comm_hbm_fraction = 0.05;
  ClusterResources res(s, t, find_gpu("h100-sxm"), o);
  res.comm_begin(0, false);
  res.comm_begin(0, true);
  res.comm_end(0, true);
  res.start_kernel(0, 1e12, 1e15, 0, 1.0, nullptr, 0);
  s.run();
  EXPECT_EQ(s.now(), sim::Time::ms(1));
  res.comm_end(0, false);
}

}  // namespace
}  // namespace topo
