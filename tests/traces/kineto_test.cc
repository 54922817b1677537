// Kineto (PyTorch profiler) traces read and replayed with their measured durations. The expected
// values were read from the files with another JSON reader (Python's json module), not from this
// program: rank 0 of the DLRM sample has 245 kernels and 16 memcpys on 4 streams (7, 22, 24, 84),
// 8 NCCL kernels on stream 84 (5 SendRecv, then AllReduce, SendRecv, AllReduce, AllReduce), the
// first at ts 1694128201429795 us for 2146 us; its GPU activity spans 1694128201428006 us to
// 1694128201441015 us (13.009 ms).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "traces/kineto/kineto.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/runtime.h"
#include "workloads/program/executor.h"

namespace traces {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> dlrm_files() {
  std::vector<std::string> files;
  const fs::path dir = fs::path(CLUSTERSIM_SOURCE_DIR) / "tests" / "data" / "param-dlrm-8rank-v100";
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().string().find(".pt.trace.json.gz") != std::string::npos) files.push_back(e.path().string());
  std::sort(files.begin(), files.end());  // worker0 .. worker7
  return files;
}

TEST(Kineto, ReadsTheGpuActivityOfARank) {
  KinetoRank r = read_kineto(dlrm_files()[0]);
  EXPECT_EQ(r.rank, 0);
  EXPECT_EQ(r.world, 8);
  ASSERT_EQ(r.activity.size(), 261u);
  std::set<uint32_t> streams;
  std::vector<const GpuActivity*> nccl;
  size_t memcpy = 0;
  for (const auto& a : r.activity) {
    streams.insert(a.stream);
    if (a.kind == GpuActivity::Kind::kCollective) nccl.push_back(&a);
    if (a.kind == GpuActivity::Kind::kMemcpy) ++memcpy;
  }
  EXPECT_EQ(streams, (std::set<uint32_t>{7, 22, 24, 84}));
  EXPECT_EQ(memcpy, 16u);
  ASSERT_EQ(nccl.size(), 8u);
  EXPECT_EQ(nccl[0]->start_ns, 1694128201429795LL * 1000);
  EXPECT_EQ(nccl[0]->dur_ns, 2146LL * 1000);
  EXPECT_EQ(nccl[0]->coll, wl::CollectiveOp::kAllToAll);
  EXPECT_EQ(nccl[4]->coll, wl::CollectiveOp::kAllReduce);
  for (const auto* a : nccl) EXPECT_EQ(a->stream, 84u);
  EXPECT_EQ(r.first_ns(), 1694128201428006LL * 1000);
  EXPECT_EQ(r.last_end_ns(), 1694128201441015LL * 1000);
}

TEST(Kineto, ReplayWithMeasuredCollectivesReproducesEveryRanksIteration) {
  // Every activity follows its stream's previous one after the measured gap, and a collective
  // lasts, from its last member's arrival, what it lasted on that member: each rank's replayed
  // iteration is its measured one (issue: within 3%; here the collectives' ends differ by the
  // few microseconds their measured ends differ across ranks).
  std::vector<KinetoRank> ranks;
  for (const auto& f : dlrm_files()) ranks.push_back(read_kineto(f));
  ASSERT_EQ(ranks.size(), 8u);
  ReplayProgram rp = replay_program(ranks);
  EXPECT_EQ(rp.collectives, 8u);
  EXPECT_NEAR(rp.measured_s[0], 13.009e-3, 1e-9);
  sim::Simulation sim(1);
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  topo::Topology topo = topo::build_scale_up(8, su);
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  topo::ClusterResources res(sim, topo, gpu, topo::default_profile(gpu));
  wl::CollectiveRuntime runtime(res, wl::RuntimeOptions{});
  wl::ProgramExecutor exec(res, runtime, rp.job, wl::ClusterShape{}, wl::CostHints{}, wl::ExecutorOptions{});
  exec.start();
  sim.run();
  ASSERT_TRUE(exec.finished()) << exec.error();
  for (uint32_t r = 0; r < 8; ++r) {
    SCOPED_TRACE(r);
    const double replayed = exec.rank_end(r).seconds() - rp.offset_s[r];
    EXPECT_NEAR(replayed / rp.measured_s[r], 1.0, 0.03);
    EXPECT_NEAR(replayed, rp.measured_s[r], 50e-6);  // and in fact within 50 us
  }
}

TEST(Kineto, UnreadableInputsAreOneClearLine) {
  const fs::path dir = fs::temp_directory_path() / "clustersim_kineto_test";
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  };
  auto message = [](const std::string& path) {
    try {
      read_kineto(path);
    } catch (const sim::UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message(write("a.json", "{not json")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(message(write("b.json", "{\"x\": 1}")).find("no traceEvents"), std::string::npos);
  EXPECT_NE(message(write("c.json", "{\"traceEvents\": [{\"cat\": \"kernel\", \"ts\": 1}]}")).find("traceEvents[0]"),
            std::string::npos);
  EXPECT_NE(message(write("d.json", "{\"traceEvents\": []}")).find("no GPU activity"), std::string::npos);
  EXPECT_NE(message((dir / "missing.json").string()).find("cannot open"), std::string::npos);
  // Ranks whose NCCL kernels cannot be matched.
  std::vector<KinetoRank> ranks = {read_kineto(dlrm_files()[0]), read_kineto(dlrm_files()[1])};
  ranks[1].world = 2;
  ranks[0].world = 2;
  ranks[1].activity.pop_back();
  while (!ranks[1].activity.empty() && ranks[1].activity.back().kind != GpuActivity::Kind::kCollective)
    ranks[1].activity.pop_back();
  ranks[1].activity.pop_back();
  try {
    replay_program(ranks);
    ADD_FAILURE() << "mismatched ranks accepted";
  } catch (const sim::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be matched"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace traces
