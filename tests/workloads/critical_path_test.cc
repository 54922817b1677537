// Critical paths (workloads/program/critical_path.h) of hand-made two-rank programs whose timings
// are worked out by hand in the comments.
#include <gtest/gtest.h>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"
#include "workloads/program/critical_path.h"
#include "workloads/program/executor.h"

namespace wl {
namespace {

Op timed(double s, uint16_t category = 0) {
  Op o;
  o.kind = OpKind::kTimed;
  o.seconds = s;
  o.category = category;
  return o;
}

Op measured_collective(double s) {
  Op o;
  o.kind = OpKind::kCollective;
  o.comm = 0;
  o.seconds = s;  // takes this long once the last member arrived
  o.category = 2;
  return o;
}

// Rank 0: 10 us of compute, then the collective (5 us), then 1 us. Rank 1: a 4 us gap (delay,
// category 1), 26 us of compute, the collective, 1 us. The collective starts when rank 1 arrives
// at 30 us and ends at 35 us; both ranks end at 36 us.
JobProgram two_ranks() {
  JobProgram jp;
  jp.categories = {"compute", "gaps", "collective"};
  Communicator c;
  c.name = "world";
  c.members = {0, 1};
  jp.add_comm(c);
  for (int r = 0; r < 2; ++r) {
    Program p;
    p.add_stream("s");
    if (r == 0) {
      p.add(timed(10e-6));
    } else {
      Op d;
      d.kind = OpKind::kDelay;
      d.seconds = 4e-6;
      d.category = 1;
      p.add(d);
      p.add(timed(26e-6));
    }
    p.add(measured_collective(5e-6));
    p.add(timed(1e-6));
    p.finalize();
    jp.templates.push_back(std::move(p));
    jp.template_of_rank.push_back(static_cast<uint32_t>(r));
  }
  return jp;
}

TEST(CriticalPath, CrossesToTheMemberThatArrivedLast) {
  const JobProgram jp = two_ranks();
  sim::Simulation sim(1);
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  const topo::Topology t = topo::build_scale_up(2, su);
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  ExecutorOptions eo;
  eo.record_op_times = true;
  const ProgramRun run = run_program(sim, t, gpu, topo::default_profile(gpu), jp, eo);
  ASSERT_TRUE(run.finished) << run.problem;
  EXPECT_EQ(run.rank_end[0].count_ns(), 36'000);
  // Rank 0: its last 1 us, the collective from rank 1's arrival (5 us), then rank 1's 26 us of
  // compute and 4 us gap. Its own 10 us of compute is not on the path (it waited 20 us).
  const CriticalPath a = critical_path(jp, run.op_times, 0);
  EXPECT_NEAR(a.length_s, 36e-6, 1e-12);
  EXPECT_NEAR(a.category_s[0], 27e-6, 1e-12);
  EXPECT_NEAR(a.category_s[1], 4e-6, 1e-12);
  EXPECT_NEAR(a.category_s[2], 5e-6, 1e-12);
  EXPECT_NEAR(a.waiting_s, 0, 1e-12);
  EXPECT_NEAR(a.rank_s[0], 6e-6, 1e-12);   // its last op and the collective
  EXPECT_NEAR(a.rank_s[1], 30e-6, 1e-12);  // the gap and the compute
  EXPECT_EQ(a.ops, 4u);
  // Rank 1 arrived last: its path stays on itself.
  const CriticalPath b = critical_path(jp, run.op_times, 1);
  EXPECT_NEAR(b.rank_s[1], 36e-6, 1e-12);
  EXPECT_NEAR(b.rank_s[0], 0, 1e-12);
}

}  // namespace
}  // namespace wl
