// Unit tests of the program IR and its executor on hand-written programs. Every time is worked out
// by hand in a comment from the cluster below: single-GPU nodes under one ideal switch (NIC
// bandwidth B = 1 GB/s per direction, zero wire latency, 100% link efficiency, no communication SM
// hold), a software step overhead of 1 us per collective or message step. So a message of S bytes
// takes 1 us + S / B, and a timed op of t seconds takes exactly t on an otherwise idle GPU.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "tests/workloads/ideal_cluster.h"
#include "workloads/collectives/benchmark.h"
#include "workloads/collectives/runtime.h"
#include "workloads/program/executor.h"
#include "workloads/program/failure_injector.h"
#include "workloads/program/program.h"

namespace wl {
namespace {

constexpr double kB = 1e9;  // bytes per second per direction

topo::Topology ideal_switch(uint32_t n) { return test::ideal_switch(n, kB, /*no_latency=*/true); }
topo::HardwareProfile ideal_options() { return test::ideal_profile(); }

Op timed(double seconds, uint16_t stream = 0) {
  Op op;
  op.kind = OpKind::kTimed;
  op.stream = stream;
  op.seconds = seconds;
  op.sm_load = 1.0;
  return op;
}

Op collective(uint32_t comm, CollectiveOp c, double bytes, uint16_t stream) {
  Op op;
  op.kind = OpKind::kCollective;
  op.coll = c;
  op.comm = comm;
  op.bytes = bytes;
  op.stream = stream;
  return op;
}

Op send(int32_t peer, double bytes, uint32_t tag, uint16_t stream) {
  Op op;
  op.kind = OpKind::kSend;
  op.peer = peer;
  op.bytes = bytes;
  op.tag = tag;
  op.stream = stream;
  return op;
}

Op recv(int32_t peer, uint32_t tag, uint16_t stream) {
  Op op;
  op.kind = OpKind::kRecv;
  op.peer = peer;
  op.tag = tag;
  op.stream = stream;
  return op;
}

// One program per rank (template r for rank r), explicit placement rank r -> GPU r.
JobProgram one_template_per_rank(std::vector<Program> programs) {
  JobProgram jp;
  for (auto& p : programs) p.finalize();
  jp.templates = std::move(programs);
  for (uint32_t r = 0; r < jp.templates.size(); ++r) jp.template_of_rank.push_back(r);
  return jp;
}

struct Outcome {
  int64_t end_ns = 0;
  bool finished = false;
  bool deadlocked = false;
  std::string error, report;
  std::vector<int64_t> rank_idle_ns;
  std::vector<int64_t> rank_end_ns;
  std::vector<std::vector<double>> category_s;  // per rank, per category
};

Outcome run(const JobProgram& jp, uint32_t gpus, double step_overhead_s = 1e-6) {
  sim::Simulation sim(1);
  auto topo = ideal_switch(gpus);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), ideal_options());
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::from_seconds(step_overhead_s);
  CollectiveRuntime runtime(res, ro);
  ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, ExecutorOptions{});
  sim.add_pending_work(&exec);
  exec.start();
  auto r = sim.run();
  Outcome o;
  o.end_ns = exec.step_end().count_ns();
  o.finished = exec.finished();
  o.deadlocked = r.deadlocked;
  o.error = exec.error();
  o.report = r.deadlock_report;
  for (uint32_t k = 0; k < jp.world(); ++k) {
    o.rank_idle_ns.push_back(std::llround(exec.category_seconds(k, jp.idle_category) * 1e9));
    o.rank_end_ns.push_back(exec.rank_end(k).count_ns());
    o.category_s.emplace_back();
    for (uint16_t c = 0; c < jp.categories.size(); ++c) o.category_s.back().push_back(exec.category_seconds(k, c));
  }
  return o;
}

TEST(ProgramExecutor, TwoRanksSendRecv) {
  // Rank 0 computes 1 ms, then sends 1 MB to rank 1, which then computes 1 ms.
  // The message leaves at 1 ms and takes 1 us + 1e6 / 1e9 s = 1.001 ms: rank 1 starts computing
  // at 2.001 ms and ends at 3.001 ms.
  Program p0, p1;
  for (Program* p : {&p0, &p1}) {
    p->add_stream("compute");
    p->add_stream("comm");
  }
  uint32_t c0 = p0.add(timed(1e-3));
  p0.add(send(1, 1e6, 7, 1), {c0});
  uint32_t rv = p1.add(recv(0, 7, 1));
  p1.add(timed(1e-3), {rv});
  auto o = run(one_template_per_rank({p0, p1}), 2);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 3'001'000);
  // Rank 1's compute stream waited 2.001 ms for a message whose sender started at 1 ms: 1 ms of
  // idle before the send started, then 1.001 ms charged to the recv's category (0, "compute"
  // here). Rank 0's last op, the send, ends at 2.001 ms; it is idle from then until the step
  // ends: 3.001 - 2.001 = 1 ms.
  EXPECT_EQ(o.rank_idle_ns[1], 1'000'000);
  EXPECT_EQ(o.rank_idle_ns[0], 1'000'000);
}

TEST(ProgramExecutor, CollectiveStartsWhenItsLateMemberArrives) {
  // Ranks 0 and 1 all-reduce 3 MB at once; rank 2 first computes 2 ms. The ring on 3 ranks takes
  // 2(n-1) = 4 steps of 1 us + (S/n)/B = 1 us + 1 ms, so 4.004 ms from the 2 ms arrival:
  // every rank ends at 6.004 ms.
  std::vector<Program> ps(3);
  for (auto& p : ps) p.add_stream("main");
  ps[0].add(collective(0, CollectiveOp::kAllReduce, 3e6, 0));
  ps[1].add(collective(0, CollectiveOp::kAllReduce, 3e6, 0));
  uint32_t c = ps[2].add(timed(2e-3));
  ps[2].add(collective(0, CollectiveOp::kAllReduce, 3e6, 0), {c});
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "world";
  comm.members = {0, 1, 2};
  comm.algorithm = Algorithm::kRing;
  jp.add_comm(comm);
  auto o = run(jp, 3);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_NEAR(static_cast<double>(o.end_ns), 6'004'000.0, 4.0);  // each ring step rounds up to a ns
}

TEST(ProgramExecutor, CrossStreamDependencies) {
  // Stream a: A1 (1 ms) then A2 (1 ms); stream b: B1 (2 ms, issued at 0, shares the GPU with A1)
  // then B2 waits for A2. Two timed ops each loading the SM pool fully share it max-min fairly:
  // A1 and B1 run at half speed, A1 ends at 2 ms; then A2 and B1 (1 ms of 2 left) share: both
  // need 1 ms at half speed, so both end at 4 ms; B2 (1 ms, waits for A2) runs alone 4-5 ms.
  Program p;
  uint16_t a = p.add_stream("a"), b = p.add_stream("b");
  p.add(timed(1e-3, a));
  uint32_t a2 = p.add(timed(1e-3, a));
  p.add(timed(2e-3, b));
  p.add(timed(1e-3, b), {a2});
  auto o = run(one_template_per_rank({p}), 1);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 5'000'000);
}

TEST(ProgramExecutor, DependencyOnlyOpJoinsStreams) {
  // A join marker on no stream waits for X (1 ms, stream a) and Y (3 ms, stream b, sharing the GPU:
  // both at half speed until X ends at 2 ms, then Y alone: 1 ms of its 3 done, 2 ms left, ends at
  // 4 ms); Z (1 ms, stream a) waits for the join: 4-5 ms.
  Program p;
  uint16_t a = p.add_stream("a"), b = p.add_stream("b");
  uint32_t x = p.add(timed(1e-3, a));
  uint32_t y = p.add(timed(3e-3, b));
  Op join;
  join.kind = OpKind::kMarker;
  join.stream = kNoStream;
  uint32_t j = p.add(join, {x, y});
  p.add(timed(1e-3, a), {j});
  auto o = run(one_template_per_rank({p}), 1);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 5'000'000);
}

TEST(Program, FinalizeListsTheStreamsEachOpMayWake) {
  // Streams 0, 1, 2. A (s0); B (s1) after A; C (s2) after A and B; a join J on no stream after C;
  // D (s0) after J. An op wakes its own stream and the streams of the ops that depend on it: A
  // wakes s0 (itself), s1 (B) and s2 (C): 0b111; B wakes s1 and s2 (C): 0b110; C wakes s2 only (J
  // is on no stream: the executor looks at dependency-only ops on every pass): 0b100; J wakes s0
  // (D): 0b001; D wakes s0: 0b001.
  Program p;
  for (const char* name : {"s0", "s1", "s2"}) p.add_stream(name);
  const uint32_t a = p.add(timed(1e-3, 0));
  const uint32_t b = p.add(timed(1e-3, 1), {a});
  const uint32_t c = p.add(timed(1e-3, 2), {a, b});
  Op join;
  join.kind = OpKind::kMarker;
  join.stream = kNoStream;
  const uint32_t j = p.add(join, {c});
  const uint32_t d = p.add(timed(1e-3, 0), {j});
  p.finalize();
  EXPECT_EQ(p.op(a).wakes, 0b111u);
  EXPECT_EQ(p.op(b).wakes, 0b110u);
  EXPECT_EQ(p.op(c).wakes, 0b100u);
  EXPECT_EQ(p.op(j).wakes, 0b001u);
  EXPECT_EQ(p.op(d).wakes, 0b001u);
  // 65 streams do not fit the mask: every op wakes every stream.
  Program wide;
  for (int s = 0; s < 65; ++s) wide.add_stream(std::to_string(s));
  const uint32_t w = wide.add(timed(1e-3, 64));
  wide.finalize();
  EXPECT_EQ(wide.op(w).wakes, ~uint64_t{0});
}

TEST(ProgramExecutor, AZeroTimeOpWakesAStreamLaterInTheSamePass) {
  // Stream 0: X (timed 1 ms), then marker M. Stream 1: Y (timed 1 ms) after X. Stream 2: Z (delay
  // 2 ms, no GPU) after M; stream 3: W (timed 1 ms) after Z. X's completion at 1 ms wakes streams
  // 0 and 1 only; issuing M (stream 0) completes it at once, which wakes stream 2 in the middle of
  // that pass: Z must start at 1 ms and end at 3 ms. Y runs alone on the GPU 1-2 ms; W 3-4 ms.
  // Had finalize left stream 2 out of M's wakes, Z would never start: a deadlock.
  Program p;
  for (const char* name : {"s0", "s1", "s2", "s3"}) p.add_stream(name);
  const uint32_t x = p.add(timed(1e-3, 0));
  Op m;
  m.kind = OpKind::kMarker;
  m.stream = 0;
  const uint32_t mi = p.add(m, {x});
  p.add(timed(1e-3, 1), {x});
  Op z;
  z.kind = OpKind::kDelay;
  z.stream = 2;
  z.seconds = 2e-3;
  const uint32_t zi = p.add(z, {mi});
  p.add(timed(1e-3, 3), {zi});
  auto o = run(one_template_per_rank({p}), 1);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 4'000'000);
}

TEST(ProgramExecutor, TwoOutstandingSendsToDifferentPeers) {
  // Rank 0 sends 1 MB to rank 1 and 2 MB to rank 2 from two streams at once. Its NIC uplink (1 GB/s)
  // is shared: both messages start after 1 us; at 0.5 GB/s each the 1 MB one ends at
  // 1 us + 2 ms; the 2 MB one has 1 MB left, now alone at 1 GB/s: ends at 1 us + 3 ms.
  std::vector<Program> ps(3);
  for (auto& p : ps) {
    p.add_stream("s0");
    p.add_stream("s1");
  }
  ps[0].add(send(1, 1e6, 0, 0));
  ps[0].add(send(2, 2e6, 0, 1));
  ps[1].add(recv(0, 0, 0));
  ps[2].add(recv(0, 0, 0));
  auto o = run(one_template_per_rank(ps), 3);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 3'001'000);
}

TEST(ProgramExecutor, MessagesWithTheSameTagMatchInOrder) {
  // Two messages 0 -> 1 with the same tag: the first recv gets the first send. Sends on one stream
  // go one after the other: 1.001 ms each (1 MB then 2 MB: 1.001 and 2.001 ms), so rank 1's
  // recvs end at 1.001 and 3.002 ms, its 1 ms compute after the second recv ends at 4.002 ms.
  std::vector<Program> ps(2);
  for (auto& p : ps) {
    p.add_stream("compute");
    p.add_stream("comm");
  }
  ps[0].add(send(1, 1e6, 5, 1));
  ps[0].add(send(1, 2e6, 5, 1));
  ps[1].add(recv(0, 5, 1));
  uint32_t r2 = ps[1].add(recv(0, 5, 1));
  ps[1].add(timed(1e-3), {r2});
  auto o = run(one_template_per_rank(ps), 2);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 4'002'000);
}

TEST(ProgramExecutor, MismatchedCollectiveIsAClearError) {
  // Rank 0 all-reduces 1 MB, rank 1 all-gathers 1 MB on the same communicator: NCCL would hang;
  // the executor stops with an error naming both ranks and ops, and nothing throws.
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("main");
  Op a = collective(0, CollectiveOp::kAllReduce, 1e6, 0);
  a.name = ps[0].intern("grad sync");
  ps[0].add(a);
  Op b = collective(0, CollectiveOp::kAllGather, 1e6, 0);
  b.name = ps[1].intern("param gather");
  ps[1].add(b);
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "dp";
  comm.members = {0, 1};
  jp.add_comm(comm);
  auto o = run(jp, 2);
  EXPECT_FALSE(o.finished);
  EXPECT_NE(o.error.find("communicator 'dp'"), std::string::npos) << o.error;
  EXPECT_NE(o.error.find("rank 0 runs 'grad sync' (collective all-reduce of 1000000 bytes)"), std::string::npos)
      << o.error;
  EXPECT_NE(o.error.find("rank 1 runs 'param gather' (collective all-gather of 1000000 bytes)"), std::string::npos)
      << o.error;
}

TEST(ProgramExecutor, DelayMemoryAndStartOffset) {
  // Rank 0 starts 2 ms late (offset), then a 3 ms delay: ends at 5 ms. Rank 1 allocates 10 bytes,
  // then 5, frees 10: peak 15 bytes, ends at 0.
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("main");
  Op d;
  d.kind = OpKind::kDelay;
  d.seconds = 3e-3;
  ps[0].add(d);
  for (double bytes : {10.0, 5.0, -10.0}) {
    Op m;
    m.kind = OpKind::kMemory;
    m.bytes = bytes;
    ps[1].add(m);
  }
  JobProgram jp = one_template_per_rank(ps);
  jp.start_offset = {sim::Time::ns(2'000'000), sim::Time::zero()};
  sim::Simulation sim(1);
  auto topo = ideal_switch(2);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), ideal_options());
  CollectiveRuntime runtime(res, RuntimeOptions{});
  ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, ExecutorOptions{});
  exec.start();
  sim.run();
  ASSERT_TRUE(exec.finished());
  EXPECT_EQ(exec.step_end().count_ns(), 5'000'000);
  EXPECT_EQ(exec.peak_memory(1), 15);
  EXPECT_EQ(exec.peak_memory(0), 0);
}

TEST(ProgramExecutor, PlacementMapMovesARankToAnotherGpu) {
  // Rank 1 runs on GPU 3 (a spare): the message 0 -> 1 crosses GPU 0 -> GPU 3, same time as
  // before (1.001 ms for 1 MB); while GPU 1 is loaded by another job's 10 ms kernel that rank 1
  // never shares: rank 1's 1 ms compute ends at 2.001 ms.
  std::vector<Program> ps(2);
  for (auto& p : ps) {
    p.add_stream("compute");
    p.add_stream("comm");
  }
  ps[0].add(send(1, 1e6, 0, 1));
  uint32_t rv = ps[1].add(recv(0, 0, 1));
  ps[1].add(timed(1e-3), {rv});
  JobProgram jp = one_template_per_rank(ps);
  jp.gpu_of_rank = {0, 3};
  sim::Simulation sim(1);
  auto topo = ideal_switch(4);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), ideal_options());
  CollectiveRuntime runtime(res, RuntimeOptions{});
  class Sink : public sim::ActivityOwner {
    void on_activity_done(sim::ActivityId, uint64_t) override {}
  } sink;
  res.start_timed_kernel(1, 10e-3, 1.0, 0.0, &sink, 0);
  ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, ExecutorOptions{});
  exec.start();
  sim.run();
  ASSERT_TRUE(exec.finished());
  EXPECT_EQ(exec.step_end().count_ns(), 2'001'000);
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

// Records the end time of every span (one per finished op) of one process.
class SpanEnds : public sim::Observer {
 public:
  explicit SpanEnds(uint32_t process) : process_(process) {}
  void on_span(const sim::SpanRecord& r, const sim::NameTable&) override {
    if (r.process == process_) ends.push_back(r.end);
  }
  std::vector<sim::Time> ends;

 private:
  uint32_t process_;
};

topo::Topology two_dgx_h100() {
  topo::ClusterSpec cs;
  cs.nodes = 2;
  cs.gpus_per_node = 8;
  cs.scale_up.kind = topo::ScaleUpKind::kNvSwitch;
  cs.scale_out.kind = topo::ScaleOutKind::kFatTree;
  cs.scale_out.fat_tree.nic_bandwidth_Bps = 50e9;
  cs.scale_out.fat_tree.rails = 8;
  cs.scale_out.fat_tree.tiers = {topo::FatTreeTier{"leaf", 2, 1.0, 1}, topo::FatTreeTier{"spine", 1, 1.0, 1}};
  return topo::build_cluster(cs);
}

TEST(ProgramExecutor, CollectiveBenchmarkTimesEqualAHandWrittenProgram) {
  // The nccl-tests style benchmark (warm-up then timed iterations of each size, back to back) and
  // the same collectives written by hand as a program on explicit communicators, run by the
  // executor: every time per iteration is identical.
  auto topo = two_dgx_h100();
  CollectiveBenchConfig cfg;
  cfg.iterations = 3;
  cfg.warmup = 2;
  std::vector<uint32_t> all(16), node(8);
  for (uint32_t i = 0; i < 16; ++i) all[i] = i;
  for (uint32_t i = 0; i < 8; ++i) node[i] = i;
  cfg.tests.push_back(CollectiveTest{CollectiveOp::kAllReduce, Algorithm::kRing, node, {1 << 20, 64 << 20}});
  cfg.tests.push_back(CollectiveTest{CollectiveOp::kAllReduce, Algorithm::kAuto, all, {1 << 20, 256 << 20}});
  cfg.tests.push_back(CollectiveTest{CollectiveOp::kAllGather, Algorithm::kRing, {0, 8}, {16 << 20}});
  std::vector<CollectiveResult> bench;
  {
    sim::Simulation sim(1);
    topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), topo::HardwareProfile{});
    bench = run_collective_benchmark(res, cfg);
  }
  ASSERT_EQ(bench.size(), 5u);

  // The program: rank r on GPU r; one communicator per test; every member runs each case's
  // warm-up and timed collectives in order on one stream.
  std::vector<Program> ps(16);
  for (auto& p : ps) p.add_stream("comm");
  JobProgram jp;
  for (size_t t = 0; t < cfg.tests.size(); ++t) {
    Communicator c;
    c.name = "test" + std::to_string(t);
    c.members = cfg.tests[t].group;
    c.algorithm = cfg.tests[t].algorithm;
    uint32_t id = jp.add_comm(c);
    for (double size : cfg.tests[t].sizes)
      for (int64_t i = 0; i < cfg.warmup + cfg.iterations; ++i)
        for (uint32_t m : c.members) ps[m].add(collective(id, cfg.tests[t].op, size, 0));
  }
  for (auto& p : ps) p.finalize();
  jp.templates = std::move(ps);
  for (uint32_t r = 0; r < 16; ++r) jp.template_of_rank.push_back(r);

  // GPU 0 is in every group: its op ends mark every iteration's end.
  sim::Simulation sim(1);
  SpanEnds ends(0);
  sim.observers().attach(&ends);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), topo::HardwareProfile{});
  RuntimeOptions ro = runtime_options_for(res);  // the profile's protocols, as the benchmark's
  CollectiveRuntime runtime(res, ro);
  ExecutorOptions eo;
  eo.trace_ranks = {0};
  ProgramExecutor exec(res, runtime, jp, cluster_shape_of(res), cost_hints_for(res, ro), eo);
  exec.start();
  sim.run();
  ASSERT_TRUE(exec.finished()) << exec.error();
  const size_t per_case = static_cast<size_t>(cfg.warmup + cfg.iterations);
  ASSERT_EQ(ends.ends.size(), bench.size() * per_case);
  for (size_t k = 0; k < bench.size(); ++k) {
    SCOPED_TRACE("case " + std::to_string(k));
    sim::Time timed_start = ends.ends[k * per_case + static_cast<size_t>(cfg.warmup) - 1];
    sim::Time last = ends.ends[(k + 1) * per_case - 1];
    EXPECT_EQ((last - timed_start).seconds() / static_cast<double>(cfg.iterations), bench[k].time_s);
  }
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

TEST(Layout, GroupIdsRepackTheOtherCoordinatesDensely) {
  // Definition: drop coordinate d, re-pack the other coordinates in layout order (innermost
  // first) as a mixed-radix number. Checked for every rank and axis of an irregular layout.
  const std::array<int64_t, kNumDims> sizes{2, 3, 4, 1, 5};  // tp, cp, pp, dp, dp_outer
  const std::array<Dim, kNumDims> order{Dim::kPp, Dim::kTp, Dim::kDpOuter, Dim::kCp, Dim::kDp};
  Layout l(sizes, order);
  ASSERT_EQ(l.world(), 120u);
  for (size_t di = 0; di < kNumDims; ++di) {
    const Dim d = static_cast<Dim>(di);
    std::vector<int> seen(l.world() / static_cast<uint32_t>(sizes[di]), 0);
    for (uint32_t r = 0; r < l.world(); ++r) {
      uint64_t id = 0, mult = 1;
      for (Dim e : order) {
        if (e == d) continue;
        id += l.coord(r, e) * mult;
        mult *= static_cast<uint64_t>(sizes[static_cast<size_t>(e)]);
      }
      ASSERT_EQ(l.group_id(r, d), id) << "rank " << r << " axis " << di;
      ASSERT_LT(id, seen.size());
      ++seen[id];
    }
    for (int count : seen) EXPECT_EQ(count, sizes[di]);  // every group has size(d) members
  }
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

TEST(ProgramExecutor, AllToAllVSendsEachMembersOwnSizes) {
  // Rank 0 sends 1 MB to rank 1 and 2 MB to rank 2; rank 1 sends 3 MB to rank 0; rank 2 nothing.
  // After the 1 us step latency, 0->1 and 0->2 share GPU 0's NIC uplink at 0.5 GB/s each while
  // 1->0 runs alone at 1 GB/s. 0->1 ends at 1 us + 2 ms; 0->2 then has 1 MB left at 1 GB/s and
  // ends at 1 us + 3 ms, as does 1->0 (3 MB at 1 GB/s): the collective ends at 3.001 ms.
  std::vector<Program> ps(3);
  const std::vector<std::vector<double>> sizes = {{0, 1e6, 2e6}, {3e6, 0, 0}, {0, 0, 0}};
  for (size_t r = 0; r < 3; ++r) {
    ps[r].add_stream("ep");
    Op a = collective(0, CollectiveOp::kAllToAll, 0, 0);
    a.index = ps[r].add_peer_sizes(sizes[r]);
    ps[r].add(a);
  }
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "ep";
  comm.members = {0, 1, 2};
  jp.add_comm(comm);
  auto o = run(jp, 3);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 3'001'000);
}

TEST(ProgramExecutor, AllToAllVWithTheWrongNumberOfSizesIsAClearError) {
  std::vector<Program> ps(2);
  for (size_t r = 0; r < 2; ++r) {
    ps[r].add_stream("ep");
    Op a = collective(0, CollectiveOp::kAllToAll, 0, 0);
    a.index = ps[r].add_peer_sizes(r == 0 ? std::vector<double>{0, 1e6} : std::vector<double>{1e6});
    ps[r].add(a);
  }
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "ep";
  comm.members = {0, 1};
  jp.add_comm(comm);
  auto o = run(jp, 2);
  EXPECT_FALSE(o.finished);
  EXPECT_NE(o.error.find("rank 1 op '' gives 1 per-peer sizes for an all-to-all-v on communicator 'ep' of 2 members"),
            std::string::npos)
      << o.error;
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

TEST(ProgramExecutor, KernelOpsAreCostedWhenIssuedFromTheHardwareProfile) {
  // H100 (989 TFLOP/s BF16, 3.35 TB/s): a GEMM kernel of 989e9 x 0.5 FLOPs at gemm_efficiency 0.5
  // takes 0.4945e12 / (989e12 x 0.5) = 1 ms; a memory kernel of 3.35e9 x 0.85 x 2 bytes at
  // memory_efficiency 0.85 takes 2 ms. In sequence on one stream: 3 ms. Changing the profile
  // re-costs them without touching the program: gemm_efficiency 0.25 makes the GEMM 2 ms: 4 ms.
  for (double gemm_eff : {0.5, 0.25}) {
    Program p;
    p.add_stream("compute");
    Op g;
    g.kind = OpKind::kKernel;
    g.op_class = static_cast<uint8_t>(KernelClass::kGemm);
    g.flops = 989e12 * 0.5 * 1e-3;
    p.add(g);
    Op m;
    m.kind = OpKind::kKernel;
    m.op_class = static_cast<uint8_t>(KernelClass::kMemory);
    m.bytes = 3.35e12 * 0.85 * 2e-3;
    p.add(m);
    JobProgram jp = one_template_per_rank({p});
    sim::Simulation sim(1);
    auto topo = ideal_switch(1);
    topo::HardwareProfile prof = ideal_options();
    prof.gemm_efficiency = gemm_eff;
    prof.memory_efficiency = 0.85;
    topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), prof);
    CollectiveRuntime runtime(res, RuntimeOptions{});
    ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, ExecutorOptions{});
    exec.start();
    sim.run();
    ASSERT_TRUE(exec.finished()) << exec.error();
    EXPECT_NEAR(static_cast<double>(exec.step_end().count_ns()), gemm_eff == 0.5 ? 3e6 : 4e6, 2.0) << gemm_eff;
  }
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

// The executor lays out per-rank state (streams, breakdown, call counters, kernel slots, the GPUs'
// records) grouped by pipeline stage, not by rank: none of it may end up on another rank. Four
// ranks on PP 2 x DP 2 (rank = pp + 2 dp: state order 0, 2, 1, 3). Rank r computes (r + 1) ms on
// stream 0; its DP group ({0, 2}, {1, 3}: a generated communicator) all-reduces 2 MB on stream 1
// (ring on 2 ranks: 2 steps of 1 us + 1 MB / 1 GB/s = 2.002 ms once the later member arrives);
// then each rank computes 1 ms more. Group {0, 2}: all-reduce 3 to 5.002 ms, last compute to
// 6.002 ms; group {1, 3}: 4 to 6.002 ms, then to 7.002 ms, the step's end. Stream 0's gap before
// the last compute waited for the all-reduce (category "comm"); after a rank's end, idle.
TEST(ProgramExecutor, AStreamWithoutOpsChangesNothing) {
  // Streams compute, empty, side; only compute and side have ops. Rank r computes (r + 1) ms, then side runs 2 ms after
  // it, then compute 1 ms after side: rank r ends at r + 4 ms. Compute waited 2 ms for side,
  // charged to side's category; compute ran r + 2 ms; rank 0 is idle from its end to the step's
  // (1 ms), rank 1 not at all.
  std::vector<Program> ps(2);
  for (uint32_t r = 0; r < 2; ++r) {
    Program& p = ps[r];
    p.add_stream("compute");
    p.add_stream("empty");
    p.add_stream("side");
    const uint32_t a = p.add(timed((r + 1) * 1e-3));
    Op side = timed(2e-3, 2);
    side.category = 2;
    const uint32_t b = p.add(side, {a});
    p.add(timed(1e-3), {b});
  }
  JobProgram jp = one_template_per_rank(ps);
  jp.categories = {"compute", "idle", "side"};
  jp.idle_category = 1;
  auto o = run(jp, 2);
  ASSERT_TRUE(o.finished) << o.error;
  EXPECT_EQ(o.end_ns, 5'000'000);
  for (uint32_t r = 0; r < 2; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(o.rank_end_ns[r], (r + 4) * 1'000'000);
    EXPECT_NEAR(o.category_s[r][0], (r + 2) * 1e-3, 1e-12);
    EXPECT_NEAR(o.category_s[r][2], 2e-3, 1e-12);
    EXPECT_NEAR(o.category_s[r][1], (1.0 - r) * 1e-3, 1e-12);
  }
}

TEST(ProgramExecutor, StateGroupedByStageKeepsEachRanksBreakdown) {
  JobProgram jp;
  Program p;
  p.add_stream("compute");
  p.add_stream("dp");
  jp.categories = {"compute", "idle", "comm"};
  for (uint32_t r = 0; r < 4; ++r) {
    Program q = p;
    const uint32_t c = q.add(timed((r + 1) * 1e-3));
    Op ar = collective(0, CollectiveOp::kAllReduce, 2e6, 1);
    ar.category = 2;
    const uint32_t a = q.add(ar, {c});
    q.add(timed(1e-3), {a});
    q.finalize();
    jp.templates.push_back(std::move(q));
    jp.template_of_rank.push_back(r);
  }
  jp.layout = Layout({1, 1, 2, 2, 1}, Layout::default_order());
  Communicator dp;
  dp.name = "dp";
  dp.generated = true;
  dp.axis = Dim::kDp;
  dp.algorithm = Algorithm::kRing;
  jp.add_comm(dp);

  sim::Simulation sim(1);
  auto topo = ideal_switch(4);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), ideal_options());
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::us(1);
  CollectiveRuntime runtime(res, ro);
  ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, ExecutorOptions{});
  sim.add_pending_work(&exec);
  exec.start();
  sim.run();
  ASSERT_TRUE(exec.finished()) << exec.error();
  EXPECT_EQ(exec.step_end().count_ns(), 7'002'000);
  struct Expected {
    int64_t compute, comm, idle, end;
  };
  const Expected want[4] = {
      {2'000'000, 4'002'000, 1'000'000, 6'002'000},  // gap 1 -> 5.002 ms
      {3'000'000, 4'002'000, 0, 7'002'000},          // gap 2 -> 6.002 ms
      {4'000'000, 2'002'000, 1'000'000, 6'002'000},  // gap 3 -> 5.002 ms
      {5'000'000, 2'002'000, 0, 7'002'000},          // gap 4 -> 6.002 ms
  };
  for (uint32_t r = 0; r < 4; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    EXPECT_EQ(std::llround(exec.category_seconds(r, 0) * 1e9), want[r].compute);
    EXPECT_EQ(std::llround(exec.category_seconds(r, 2) * 1e9), want[r].comm);
    EXPECT_EQ(std::llround(exec.category_seconds(r, 1) * 1e9), want[r].idle);
    EXPECT_EQ(exec.rank_end(r).count_ns(), want[r].end);
  }
  // A kernel's tag names its rank's slot and its stream; deadlock reports print the rank: rank 1
  // is at slot 2 (state order 0, 2, 1, 3), rank 2 at slot 1.
  EXPECT_EQ(exec.describe_activity((uint64_t{2} << 16) | 1), "a kernel of rank 1 on stream 'dp'");
  EXPECT_EQ(exec.describe_activity((uint64_t{1} << 16) | 0), "a kernel of rank 2 on stream 'compute'");
}

TEST(ProgramExecutor, EveryMemberThatRanAheadJoinsTheNextCollective) {
  // Three members, two collectives X then Y of 3 MB on one communicator, X on stream 0 and Y on
  // stream 1 (Y after X on the late rank 2, which first computes 1 ms). Ranks 0 and 1 issue both
  // at once, so their Ys wait (parked) until X starts at 1 ms; both must then join Y. Each ring
  // all-reduce on 3 ranks takes 4 x (1 us + 1 MB / 1 GB/s) = 4.004 ms: X ends at 5.004 ms and Y
  // at 9.008 ms.
  std::vector<Program> ps(3);
  for (size_t r = 0; r < 3; ++r) {
    ps[r].add_stream("s0");
    ps[r].add_stream("s1");
  }
  for (size_t r = 0; r < 2; ++r) {
    ps[r].add(collective(0, CollectiveOp::kAllReduce, 3e6, 0));
    ps[r].add(collective(0, CollectiveOp::kAllReduce, 3e6, 1));
  }
  uint32_t c = ps[2].add(timed(1e-3));
  uint32_t x = ps[2].add(collective(0, CollectiveOp::kAllReduce, 3e6, 0), {c});
  ps[2].add(collective(0, CollectiveOp::kAllReduce, 3e6, 1), {x});
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "world";
  comm.members = {0, 1, 2};
  comm.algorithm = Algorithm::kRing;
  jp.add_comm(comm);
  auto o = run(jp, 3);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_NEAR(static_cast<double>(o.end_ns), 9'008'000.0, 8.0);
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

// Runs `jp` on the ideal switch with GPU `dead_gpu` failing at `kill_at` (through the failure
// injector, as a scenario's failures: do) and the given watchdog.
struct Aborted {
  bool aborted = false, finished = false;
  int64_t failed_ns = -1, aborted_ns = -1, end_ns = 0, sim_end_ns = 0;
  std::string report;
  std::string deadlock_report;  // the simulation's, when the run drained with work pending
  size_t in_flight_after = 0;
};
Aborted run_with_failures(const JobProgram& jp, uint32_t gpus, std::vector<topo::FailureEvent> events,
                          sim::Time watchdog) {
  sim::Simulation sim(1);
  auto topo = ideal_switch(gpus);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), ideal_options());
  RuntimeOptions ro;
  ro.step_overhead = sim::Time::us(1);
  CollectiveRuntime runtime(res, ro);
  ExecutorOptions eo;
  eo.watchdog = watchdog;
  ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, eo);
  sim.add_pending_work(&exec);
  FailureInjector inject(res, exec, std::move(events));
  exec.start();
  auto r = sim.run();
  Aborted a;
  a.aborted = exec.aborted();
  a.finished = exec.finished();
  a.failed_ns = exec.failed_at().is_infinite() ? -1 : exec.failed_at().count_ns();
  a.aborted_ns = exec.aborted_at().is_infinite() ? -1 : exec.aborted_at().count_ns();
  a.end_ns = exec.step_end().count_ns();
  a.sim_end_ns = r.end_time.count_ns();
  a.report = exec.abort_report();
  a.deadlock_report = r.deadlock_report;
  a.in_flight_after = runtime.in_flight();
  return a;
}

Aborted run_with_death(const JobProgram& jp, uint32_t gpus, uint32_t dead_gpu, sim::Time kill_at, sim::Time watchdog) {
  topo::FailureEvent e;
  e.at = kill_at;
  e.gpus = {dead_gpu};
  e.what = "GPU " + std::to_string(dead_gpu);
  return run_with_failures(jp, gpus, {e}, watchdog);
}

// The links of the ideal switch that start or end at GPU g (its NIC's up and down links).
std::vector<uint32_t> links_of_gpu(uint32_t n, uint32_t g) {
  auto t = ideal_switch(n);
  std::vector<uint32_t> out;
  for (uint32_t l = 0; l < t.links().size(); ++l)
    if (t.links()[l].src == g || t.links()[l].dst == g) out.push_back(l);
  return out;
}

TEST(ProgramExecutorWatchdog, FiresOneTimeoutAfterTheFirstMemberOfTheHungCollectiveArrived) {
  // Rank 0 computes 1 ms and joins an all-reduce with rank 1 at 1 ms; rank 1 computes 3 ms but its
  // GPU dies at 2 ms (its kernel fails: rank 1 is dead). The all-reduce can never finish. The
  // watchdog (10 ms) counts from rank 0's arrival: the job aborts at 1 + 10 = 11 ms exactly, and
  // the simulation ends there (everything withdrawn, nothing left in flight).
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("main");
  uint32_t a = ps[0].add(timed(1e-3));
  ps[0].add(collective(0, CollectiveOp::kAllReduce, 1e6, 0), {a});
  uint32_t b = ps[1].add(timed(3e-3));
  ps[1].add(collective(0, CollectiveOp::kAllReduce, 1e6, 0), {b});
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "world";
  comm.members = {0, 1};
  jp.add_comm(comm);
  auto o = run_with_death(jp, 2, 1, sim::Time::ms(2), sim::Time::ms(10));
  ASSERT_TRUE(o.aborted) << o.report;
  EXPECT_FALSE(o.finished);
  EXPECT_EQ(o.failed_ns, 2'000'000);
  EXPECT_EQ(o.aborted_ns, 11'000'000);
  EXPECT_EQ(o.end_ns, 11'000'000);
  EXPECT_EQ(o.sim_end_ns, 11'000'000);
  EXPECT_EQ(o.in_flight_after, 0u);
  EXPECT_NE(o.report.find("rank 0 waited 10 ms"), std::string::npos) << o.report;
  EXPECT_NE(o.report.find("1 of 2 arrived; e.g. rank 0 misses rank 1 (dead)"), std::string::npos) << o.report;
}

TEST(ProgramExecutorWatchdog, AnOpThatCompletesIsNotTimedOutAndTheNextHungOneIs) {
  // Rank 0 sends 1 MB to rank 1 at 0 (done at 1 us + 1 ms = 1.001 ms), then computes 5 ms
  // (1.001-6.001 ms) and waits for a reply. Rank 1 receives, then its GPU dies at 2 ms while it
  // computes 5 ms before replying. Watchdog 3 ms. At the failure no communication op is in flight
  // (the send completed; rank 0 computes), so nothing is timed yet; rank 0's recv issued at
  // 6.001 ms hangs: abort at 6.001 + 3 = 9.001 ms.
  std::vector<Program> ps(2);
  for (auto& p : ps) {
    p.add_stream("compute");
    p.add_stream("comm");
  }
  uint32_t s = ps[0].add(send(1, 1e6, 1, 1));
  uint32_t c = ps[0].add(timed(5e-3, 0), {s});
  ps[0].add(recv(1, 2, 1), {c});
  uint32_t rv = ps[1].add(recv(0, 1, 1));
  uint32_t w = ps[1].add(timed(5e-3, 0), {rv});
  ps[1].add(send(0, 1e6, 2, 1), {w});
  auto o = run_with_death(one_template_per_rank(ps), 2, 1, sim::Time::ms(2), sim::Time::ms(3));
  ASSERT_TRUE(o.aborted) << o.report;
  EXPECT_EQ(o.aborted_ns, 9'001'000);
  EXPECT_NE(o.report.find("from rank 1 (dead)"), std::string::npos) << o.report;
}

// Two ranks whose only op is a ring all-reduce of `bytes` on communicator "world" (stream 0).
JobProgram two_ranks_all_reducing(double bytes) {
  std::vector<Program> ps(2);
  for (auto& p : ps) {
    p.add_stream("main");
    p.add(collective(0, CollectiveOp::kAllReduce, bytes, 0));
  }
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "world";
  comm.members = {0, 1};
  comm.algorithm = Algorithm::kRing;
  jp.add_comm(comm);
  return jp;
}

TEST(ProgramExecutorWatchdog, NoFailureNoWatchdogEvents) {
  // Without a failure the watchdog is not armed: a healthy collective that takes longer than the
  // timeout (a 1 GB all-reduce: 2 steps of 1 us + 0.5 s on 2 ranks = 1.000002 s > 10 ms) finishes.
  auto o = run_with_death(two_ranks_all_reducing(1e9), 2, 1, sim::Time::sec(100), sim::Time::ms(10));
  EXPECT_TRUE(o.finished);
  EXPECT_FALSE(o.aborted);
  EXPECT_NEAR(static_cast<double>(o.end_ns), 1'000'002'000.0, 4.0);
}

TEST(ProgramExecutorFailures, AStragglerGpuRunsAtItsSlowerRateForItsWindow) {
  // One timed op of 2 ms alone on GPU 0; the GPU runs at half speed from 0.5 ms to 1.5 ms. Work
  // done: 0.5 ms by 0.5 ms, 0.5 ms more during the window, the last 1 ms after it: ends at 2.5 ms.
  std::vector<Program> ps(1);
  ps[0].add_stream("main");
  ps[0].add(timed(2e-3));
  topo::FailureEvent e;
  e.at = sim::Time::us(500);
  e.action = topo::FailureEvent::Action::kSlowGpus;
  e.gpus = {0};
  e.factor = 2;
  e.duration = sim::Time::ms(1);
  auto o = run_with_failures(one_template_per_rank(ps), 1, {e}, sim::Time::ms(10));
  EXPECT_TRUE(o.finished);
  EXPECT_FALSE(o.aborted);
  EXPECT_EQ(o.failed_ns, -1) << "a slowdown is not a failure";
  EXPECT_NEAR(static_cast<double>(o.end_ns), 2'500'000.0, 2.0);
}

TEST(ProgramExecutorFailures, ASlowLinkStretchesTheTransfer) {
  // Rank 0 sends 1 MB to rank 1: 1 us + 1e6 B / 1 GB/s = 1.001 ms. With GPU 0's NIC links at a
  // quarter of their bandwidth for the whole run: 1 us + 1e6 / 0.25e9 s = 4.001 ms.
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("comm");
  ps[0].add(send(1, 1e6, 1, 0));
  ps[1].add(recv(0, 1, 0));
  topo::FailureEvent e;
  e.action = topo::FailureEvent::Action::kSlowLinks;
  e.links = links_of_gpu(2, 0);
  e.factor = 4;
  auto o = run_with_failures(one_template_per_rank(ps), 2, {e}, sim::Time::ms(10));
  EXPECT_TRUE(o.finished);
  EXPECT_NEAR(static_cast<double>(o.end_ns), 4'001'000.0, 2.0);
}

// With no watchdog a hung collective drains the run, and the deadlock report says what cannot
// progress in the workload's terms: a transfer of the collective on GPUs 0 and 1 (whose NIC went
// down at 0.5 ms, mid-transfer), not a raw activity tag.
TEST(ProgramExecutorFailures, TheDeadlockReportNamesTheStalledCollectivesGpus) {
  topo::FailureEvent e;
  e.at = sim::Time::us(500);
  e.action = topo::FailureEvent::Action::kKillLinks;
  e.links = links_of_gpu(2, 1);
  e.what = "the NIC of GPU 1";
  auto o = run_with_failures(two_ranks_all_reducing(2e6), 2, {e}, sim::Time::infinite());
  EXPECT_FALSE(o.finished);
  EXPECT_FALSE(o.aborted);
  EXPECT_NE(o.deadlock_report.find("a transfer of a collective on GPUs 0, 1 cannot progress: constraint"),
            std::string::npos)
      << o.deadlock_report;
}

// GPU 1's NIC links (of two GPUs on the ideal switch) go down at 0.5 ms.
topo::FailureEvent nic_of_gpu_1_down_at_500us() {
  topo::FailureEvent e;
  e.at = sim::Time::us(500);
  e.action = topo::FailureEvent::Action::kKillLinks;
  e.links = links_of_gpu(2, 1);
  e.what = "the NIC of GPU 1";
  return e;
}

TEST(ProgramExecutorFailures, ADeadLinkHangsTheTransferUntilTheWatchdog) {
  // The same 1 MB message; GPU 1's NIC links go down at 0.5 ms, mid-transfer: the transfer stalls
  // (NCCL hangs, it does not fail). Both ranks issued their op at 0, so the watchdog (10 ms)
  // aborts at 10 ms; nothing is left in flight.
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("comm");
  ps[0].add(send(1, 1e6, 1, 0));
  ps[1].add(recv(0, 1, 0));
  auto o = run_with_failures(one_template_per_rank(ps), 2, {nic_of_gpu_1_down_at_500us()}, sim::Time::ms(10));
  ASSERT_TRUE(o.aborted) << o.report;
  EXPECT_EQ(o.failed_ns, 500'000);
  EXPECT_EQ(o.aborted_ns, 10'000'000);
  EXPECT_EQ(o.in_flight_after, 0u);
  EXPECT_NE(o.report.find("first failure: the NIC of GPU 1 went down"), std::string::npos) << o.report;
}

TEST(ProgramExecutorFailures, TheAbortCancelsKernelsStillRunning) {
  // The dead-link hang above, with a 50 ms kernel on rank 0's third stream from t = 0. The
  // watchdog aborts the job at 10 ms and withdraws what is in flight, the kernel among them: the
  // simulation ends there, not when the kernel would have ended at 50 ms, and nothing runs on.
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("comm");
  ps[0].add_stream("idle");  // no ops: the abort's walk over the streams passes it by
  ps[0].add_stream("work");
  ps[0].add(send(1, 1e6, 1, 0));
  ps[0].add(timed(50e-3, 2));
  ps[1].add(recv(0, 1, 0));
  auto o = run_with_failures(one_template_per_rank(ps), 2, {nic_of_gpu_1_down_at_500us()}, sim::Time::ms(10));
  ASSERT_TRUE(o.aborted) << o.report;
  EXPECT_EQ(o.aborted_ns, 10'000'000);
  EXPECT_EQ(o.sim_end_ns, 10'000'000);
  EXPECT_EQ(o.in_flight_after, 0u);
}

TEST(ProgramExecutor, AMeasuredCollectiveTakesItsTimeFromTheLastArrival) {
  // A replayed collective keeps its measured time (op.seconds > 0) and needs no network: rank 0
  // arrives at 1 ms, rank 1 at 3 ms; 0.5 ms from the last arrival both are done at 3.5 ms.
  std::vector<Program> ps(2);
  for (auto& p : ps) p.add_stream("main");
  uint32_t a = ps[0].add(timed(1e-3));
  uint32_t b = ps[1].add(timed(3e-3));
  Op c = collective(0, CollectiveOp::kAllReduce, 1e9, 0);
  c.seconds = 0.5e-3;
  ps[0].add(c, {a});
  ps[1].add(c, {b});
  JobProgram jp = one_template_per_rank(ps);
  Communicator comm;
  comm.name = "world";
  comm.members = {0, 1};
  jp.add_comm(comm);
  auto o = run(jp, 2);
  ASSERT_TRUE(o.finished) << o.report << o.error;
  EXPECT_EQ(o.end_ns, 3'500'000);
}

}  // namespace
}  // namespace wl

namespace wl {
namespace {

// JobProgram::host_overhead: the host launches each kernel h after the previous launch, and a
// kernel cannot start before its launch. Returns (end, host wait, compute) in ns of rank 0.
struct HostRun {
  int64_t end_ns, host_ns, compute_ns;
};
HostRun run_with_host(const Program& prog, sim::Time h) {
  JobProgram jp = one_template_per_rank({prog});
  jp.categories = {"compute", "idle", "host"};
  jp.host_overhead = h;
  jp.host_category = 2;
  sim::Simulation sim(1);
  auto topo = ideal_switch(1);
  topo::HardwareProfile prof = ideal_options();
  prof.memory_efficiency = 0.85;
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), prof);
  CollectiveRuntime runtime(res, RuntimeOptions{});
  ProgramExecutor exec(res, runtime, jp, ClusterShape{}, CostHints{}, ExecutorOptions{});
  exec.start();
  sim.run();
  EXPECT_TRUE(exec.finished()) << exec.error();
  return {exec.step_end().count_ns(), std::llround(exec.category_seconds(0, 2) * 1e9),
          std::llround(exec.category_seconds(0, 0) * 1e9)};
}

TEST(ProgramExecutorHost, AFusedOpOfShortKernelsWaitsForItsLaunches) {
  // One fused op of three memory-bound kernels of 10 us each (3.35e12 x 0.85 x 10e-6 bytes at
  // memory_efficiency 0.85), h = 15 us: launches at 15, 30, 45 us, so the kernels run 15-25,
  // 30-40, 45-55: the op ends at 55 us, not 30. The executor starts the op at 55 - 30 = 25 us (the
  // same end on an idle GPU): 25 us waiting for the host, 30 us of compute.
  Program p;
  p.add_stream("compute");
  CostTerm t;
  t.cls = KernelClass::kMemory;
  t.bytes = 3.35e12 * 0.85 * 10e-6;
  Op op;
  op.kind = OpKind::kKernel;
  op.index = p.add_cost_terms({t, t, t});
  p.add(op);
  HostRun r = run_with_host(p, sim::Time::us(15));
  EXPECT_NEAR(r.end_ns, 55000, 2);
  EXPECT_NEAR(r.host_ns, 25000, 2);
  EXPECT_NEAR(r.compute_ns, 30000, 2);
  // No host model: 30 us.
  EXPECT_NEAR(run_with_host(p, sim::Time::zero()).end_ns, 30000, 2);
}

TEST(ProgramExecutorHost, TheHostRunsAheadOfALongKernel) {
  // A 100 us kernel, then five of 1 us; the host launches one every h.
  Program p;
  p.add_stream("compute");
  p.add(timed(100e-6));
  for (int i = 0; i < 5; ++i) p.add(timed(1e-6));
  // h = 15 us: launches at 15, 30, ..., 90 us. The long kernel runs 15-115; the others were all
  // launched by then and run back to back: end 120 us; the only host wait is the first 15 us.
  HostRun a = run_with_host(p, sim::Time::us(15));
  EXPECT_EQ(a.end_ns, 120000);
  EXPECT_EQ(a.host_ns, 15000);
  EXPECT_EQ(a.compute_ns, 105000);
  // h = 30 us: launches at 30, 60, 90, 120, 150, 180. Runs 30-130, 130-131, 131-132, 132-133,
  // then 150-151 and 180-181: end 181 us; host waits 30 + (150 - 133) + (180 - 151) = 76 us.
  HostRun b = run_with_host(p, sim::Time::us(30));
  EXPECT_EQ(b.end_ns, 181000);
  EXPECT_EQ(b.host_ns, 76000);
  EXPECT_EQ(b.compute_ns, 105000);
}

// Two ranks calling different collectives on one traced communicator (named by its id, as a
// Chakra trace's are): the run does not finish, and its problem gives the mismatch once, then
// what waits: each rank's collective, all of its group there and unable to start.
TEST(ProgramExecutorReport, AMismatchIsGivenOnceAndTheWaitersNameTheirCommunicator) {
  JobProgram jp;
  jp.categories = {"compute"};
  Communicator c;
  c.name = "7";
  c.members = {0, 1};
  jp.add_comm(c);
  for (uint32_t r = 0; r < 2; ++r) {
    Program p;
    p.add_stream("s");
    Op o;
    o.kind = OpKind::kCollective;
    o.comm = 0;
    o.coll = r == 0 ? CollectiveOp::kAllReduce : CollectiveOp::kAllGather;
    o.bytes = 1 << 20;
    p.add(o);
    p.finalize();
    jp.templates.push_back(std::move(p));
    jp.template_of_rank.push_back(r);
  }
  sim::Simulation sim(1);
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  const topo::Topology t = topo::build_scale_up(2, su);
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  const ProgramRun run = run_program(sim, t, gpu, topo::default_profile(gpu), jp, ExecutorOptions{});
  EXPECT_FALSE(run.finished);
  const std::string& p = run.problem;
  EXPECT_EQ(p.find("collective mismatch on communicator '7' (call 0)"), 0u) << p;
  EXPECT_EQ(p.find("collective mismatch", 1), std::string::npos) << p;  // once
  EXPECT_NE(p.find("(NCCL would hang or corrupt data)\ndeadlock at"), std::string::npos) << p;
  EXPECT_NE(p.find("waits for its group on communicator 7 (all 2 members arrived; it cannot start)"),
            std::string::npos)
      << p;
}

}  // namespace
}  // namespace wl
