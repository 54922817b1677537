// Chakra execution traces read and run. ASTRA-sim's all-reduce microbenchmark (8 ranks, one
// ALL_REDUCE of 1,048,576 bytes each) decoded by hand from its bytes: version "0.0.4", node id =
// the rank, type COMM_COLL_NODE, attributes is_cpu_op false, comm_type 0 (ALL_REDUCE), comm_size 1048576.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "traces/chakra/chakra.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/runtime.h"
#include "workloads/program/executor.h"

namespace traces {
namespace {

namespace fs = std::filesystem;
const fs::path kMicro = fs::path(CLUSTERSIM_SOURCE_DIR) / "tests" / "data" / "astra-sim-all-reduce-8npus-1mb";

std::vector<ChakraRank> micro() {
  std::vector<ChakraRank> ranks;
  for (int r = 0; r < 8; ++r) ranks.push_back(read_chakra((kMicro / ("all_reduce." + std::to_string(r) + ".et")).string()));
  return ranks;
}

TEST(Chakra, ReadsAstraSimsAllReduceMicrobenchmark) {
  auto ranks = micro();
  for (size_t k = 0; k < ranks.size(); ++k) {
    const auto& r = ranks[k];
    EXPECT_EQ(r.version, "0.0.4");
    ASSERT_EQ(r.nodes.size(), 1u);
    EXPECT_EQ(r.nodes[0].id, k);  // rank 0's file omits id 0 (81 bytes); rank k's holds `08 0k` (83 bytes)
    EXPECT_EQ(r.nodes[0].type, 7);  // COMM_COLL_NODE
    EXPECT_EQ(r.nodes[0].comm_type, 0);
    EXPECT_EQ(r.nodes[0].comm_size, 1048576.0);
    EXPECT_FALSE(r.nodes[0].cpu);
    EXPECT_EQ(r.nodes[0].name, "all_reduce_8npus_1MB");
  }
}

TEST(Chakra, TheMicrobenchmarkRunsInTheRingClosedFormOnADgxH100) {
  // One DGX H100 (8 GPUs, NVSwitch, 450 GB/s per direction at the default 0.82 efficiency =
  // 369 GB/s; 1 us of step overhead and two 0.25 us hops per step). A ring all-reduce of S bytes on
  // n = 8: 2(n-1) = 14 steps of 1.5 us, and 2(n-1)/n x S = 1,835,008 bytes through each GPU's link:
  // 21 us + 1,835,008 / 369e9 s = 25.97295 us.
  wl::JobProgram jp = chakra_program(micro());
  jp.comms[0].algorithm = wl::Algorithm::kRing;
  sim::Simulation sim(1);
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  topo::Topology t = topo::build_scale_up(8, su);
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  const wl::ProgramRun run = wl::run_program(sim, t, gpu, topo::default_profile(gpu), jp);
  ASSERT_TRUE(run.finished) << run.problem;
  EXPECT_NEAR(run.end.seconds() * 1e6, 21 + 1835008.0 / 369e9 * 1e6, 0.002);
}

TEST(Chakra, BadFilesAreOneClearLine) {
  auto message = [](const std::string& path) {
    try {
      read_chakra(path);
    } catch (const sim::UserError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const fs::path dir = fs::temp_directory_path() / "clustersim_chakra_test";
  fs::create_directories(dir);
  std::ofstream(dir / "empty.et").close();
  EXPECT_NE(message((dir / "empty.et").string()).find("empty"), std::string::npos);
  std::ofstream(dir / "json.et") << "{\"traceEvents\": []}";
  EXPECT_NE(message((dir / "json.et").string()).find("not a Chakra"), std::string::npos);
  // A node depending on one the file does not hold.
  auto ranks = micro();
  ranks[3].nodes[0].data_deps = {42};
  try {
    chakra_program(ranks);
    ADD_FAILURE() << "accepted";
  } catch (const sim::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("depends on node 42, which the file does not hold"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace traces

#include "sim/config.h"
#include "workloads/job/scenario.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"

namespace traces {
namespace {

TEST(Chakra, AGeneratedTrainingStepExportedAndReadBackSimulatesToTheSameStepTime) {
  // The built-in default: Llama 3 8B on 64 H100, TP 8, PP 4 (1F1B), DP 2. Its step, exported as
  // 64 Chakra files and read back, runs on the same cluster to the same step time, to the
  // nanosecond: the files keep every op, stream, dependency, kernel time and load, message and
  // process group.
  wl::Scenario sc =
      wl::bind_scenario(sim::ConfigDoc::load_string(wl::default_scenario_yaml(), "<default>"), "default", false);
  auto doc = sim::ConfigDoc::load_string(wl::default_scenario_yaml(), "<default>");
  const wl::TrainingSettings ts =
      wl::bind_training(doc.root().child("workload"), sc.cluster.gpu, sc.topology->num_gpus());
  const fs::path dir = fs::temp_directory_path() / "clustersim_chakra_roundtrip";
  fs::create_directories(dir);
  int64_t original_ns = 0;
  {
    sim::Simulation sim(1);
    topo::ClusterResources res(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile);
    wl::TrainingStep step(res, ts, {});
    step.start();
    wl::StepResult r = step.finish(sim.run());
    ASSERT_EQ(r.outcome, wl::StepOutcome::kCompleted) << r.report;
    original_ns = sim::Time::from_seconds(r.step_time_s).count_ns();
    write_chakra(step.program(), (dir / "step").string(), step.coster());
  }
  std::vector<ChakraRank> ranks;
  for (int r = 0; r < 64; ++r) ranks.push_back(read_chakra((dir / ("step." + std::to_string(r) + ".et")).string()));
  wl::JobProgram jp = chakra_program(ranks);
  sim::Simulation sim(1);
  const wl::ProgramRun run = wl::run_program(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, jp);
  ASSERT_TRUE(run.finished) << run.problem;
  EXPECT_EQ(run.end.count_ns(), original_ns);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace traces
