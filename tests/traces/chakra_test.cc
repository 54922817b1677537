// Chakra execution traces read and run. ASTRA-sim's all-reduce microbenchmark (8 ranks, one
// ALL_REDUCE of 1,048,576 bytes each) decoded by hand from its bytes: version "0.0.4", node id =
// the rank, type COMM_COLL_NODE, attributes is_cpu_op false, comm_type 0 (ALL_REDUCE), comm_size 1048576.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "tests/traces/node_run.h"
#include "traces/chakra/chakra.h"
#include "traces/chakra/et_def.pb.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/runtime.h"
#include "workloads/program/executor.h"

namespace traces {
namespace {

using test_util::run_on_h100_node;

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
  // 369 GB/s; two 0.25 us hops per step). A ring all-reduce of S = 1 MiB on n = 8 runs NCCL's LL
  // protocol (the fastest of the three here): its launch 6.6 us, 2(n-1) = 14 steps of 0.1 us
  // (LL's software part) + 0.5 us, and 2(n-1)/n x S = 1,835,008 payload bytes through each GPU's
  // link at LL's cap of 141 GB/s (NCCL tuning.cc llMaxBws, Hopper; below LL's 369/2 GB/s of
  // payload): 6.6 + 8.4 + 13.01424 = 28.01424 us.
  wl::JobProgram jp = chakra_program(micro());
  jp.comms[0].algorithm = wl::Algorithm::kRing;
  const wl::ProgramRun run = run_on_h100_node(jp, 8);
  ASSERT_TRUE(run.finished) << run.problem;
  EXPECT_NEAR(run.end.seconds() * 1e6, 15 + 1835008.0 / 141e9 * 1e6, 0.002);
}

// One trace alone (one rank of a larger job) keeps its collectives' measured time: its peers are not
// there to simulate them with. Rank 0 of the microbenchmark with duration_micros 40: the step is the
// 40 us all-reduce, where it was 0 (a one-member group, done at once).
TEST(Chakra, OneTraceAloneKeepsItsCollectivesMeasuredTime) {
  std::vector<ChakraRank> one = {micro()[0]};
  one[0].nodes[0].duration_s = 40e-6;
  const wl::JobProgram jp = chakra_program(one);
  const wl::ProgramRun run = run_on_h100_node(jp, 8);
  ASSERT_TRUE(run.finished) << run.problem;
  EXPECT_EQ(run.end.count_ns(), 40000);
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
  // A file cut short inside its last message: ASTRA-sim's all_reduce.0.et is 81 bytes (read with
  // xxd): length 0x07 and a 7-byte GlobalMetadata (version "0.0.4"), then length 0x48 and a 72-byte
  // node. Without its last 5 bytes the node announces 72 bytes and 76 - 9 = 67 are left.
  {
    std::ifstream in(kMicro / "all_reduce.0.et", std::ios::binary);
    std::string whole((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(whole.size(), 81u);
    std::ofstream(dir / "cut.et", std::ios::binary) << whole.substr(0, 76);
    const std::string m = message((dir / "cut.et").string());
    EXPECT_NE(m.find("cut.et: message 1 is cut short (72 bytes announced, 67 left)"), std::string::npos) << m;
    EXPECT_NE(m.find("truncated"), std::string::npos) << m;
  }
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
      wl::bind_training(doc.root().child("workload"), sc.cluster.gpu, sc.topology->num_gpus(), 0);
  const fs::path dir = fs::temp_directory_path() / "clustersim_chakra_roundtrip";
  fs::create_directories(dir);
  int64_t original_ns = 0;
  // Exported traces carry the GPU's ops, not the host's launches: compare with a step whose host
  // never holds the GPU back.
  sc.cluster.profile.host_overhead = sim::Time::zero();
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
  // ASTRA-sim's contract (Workload.cc, Statistics.cc at its commit 518bd51): no METADATA_NODE; a
  // collective's pg_name is a decimal id listed in comm_group.json; a recv has a size. The groups
  // collectives run on: 64 / 8 = 8 tensor-parallel groups and 64 / 2 = 32 data-parallel pairs
  // (pipeline stages talk by send/recv).
  std::ifstream cg(dir / "comm_group.json");
  ASSERT_TRUE(cg.good());
  const nlohmann::json groups = nlohmann::json::parse(cg);
  EXPECT_EQ(groups.size(), 40u);
  size_t of8 = 0, of2 = 0;
  for (const auto& [id, members] : groups.items()) {
    EXPECT_GE(std::stoi(id), 1);
    of8 += members.size() == 8;
    of2 += members.size() == 2;
  }
  EXPECT_EQ(of8, 8u);
  EXPECT_EQ(of2, 32u);
  size_t recvs = 0;
  for (const auto& cr : ranks)
    for (const auto& n : cr.nodes) {
      EXPECT_NE(n.type, ChakraProtoMsg::METADATA_NODE) << cr.file << " node " << n.id;
      if (n.type == ChakraProtoMsg::COMM_COLL_NODE) { EXPECT_TRUE(groups.contains(n.pg_name)) << n.pg_name; }
      if (n.type == ChakraProtoMsg::COMM_RECV_NODE) {
        ++recvs;
        EXPECT_GT(n.comm_size, 0) << cr.file << " node " << n.id;
      }
    }
  EXPECT_GT(recvs, 0u);
  wl::JobProgram jp = chakra_program(ranks);
  sim::Simulation sim(1);
  const wl::ProgramRun run = wl::run_program(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, jp);
  ASSERT_TRUE(run.finished) << run.problem;
  EXPECT_EQ(run.end.count_ns(), original_ns);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace traces
