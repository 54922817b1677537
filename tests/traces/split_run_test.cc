// A run split at horizons writes the same Chrome trace bytes as one unsplit run: observers are
// finished once, when the whole simulation ends (sim::Simulation::finish), not at every return
// from run(). The workload is a real training step (Llama-like, TP 2 x PP 2 on 4 GPUs, 1F1B) run
// by the program executor, traced on every rank with link counters.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "traces/chrome/chrome_trace.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/program/executor.h"
#include "workloads/training/training.h"

namespace {

namespace fs = std::filesystem;

wl::TrainingJob small_job() {
  wl::TrainingJob j;
  j.model = wl::find_model_preset("llama3-8b");
  j.model.layers = 4;
  j.gpu = topo::find_gpu("h100-sxm");
  j.profile = topo::default_profile(j.gpu);
  j.seq_len = 1024;
  j.global_batch = 4;
  j.tp = 2;
  j.pp = 2;
  return j;
}

// Runs the step, stopping at each of `horizons` (ns) before running to the end; returns the trace.
std::string traced_step(const std::vector<int64_t>& horizons, const fs::path& path) {
  sim::Simulation sim(1);
  traces::ChromeTraceOptions to;
  to.path = path.string();
  traces::ChromeTraceWriter writer(to);
  sim.observers().attach(&writer);
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  auto topo = topo::build_scale_up(4, su);
  topo::ClusterResources res(sim, topo, topo::find_gpu("h100-sxm"), topo::HardwareProfile{});
  std::vector<uint32_t> ranks{0, 1, 2, 3};
  res.enable_link_counters(ranks);
  auto job = small_job();
  auto plan = wl::build_training(job);
  wl::JobProgram jp = wl::training_job_program(job, plan, {});
  wl::RuntimeOptions ro;
  wl::CollectiveRuntime runtime(res, ro);
  wl::ExecutorOptions eo;
  eo.trace_ranks = ranks;
  wl::ProgramExecutor exec(res, runtime, jp, wl::cluster_shape_of(topo), wl::cost_hints_for(res, ro), eo);
  exec.start();
  for (int64_t h : horizons) {
    auto r = sim.run(sim::Time::ns(h));
    EXPECT_TRUE(r.hit_horizon) << "horizon " << h << " ns lies beyond the step";
  }
  sim.run();
  EXPECT_TRUE(exec.finished());
  sim.finish();
  writer.on_finish(sim.now());
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

TEST(SplitRun, TraceBytesIdenticalToAnUnsplitRun) {
  fs::path dir = fs::temp_directory_path() / ("clustersim_split_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string whole = traced_step({}, dir / "whole.json");
  ASSERT_GT(whole.size(), 1000u);
  // Horizons at 1 ns, in the middle of the step and at 1 ms steps through it.
  std::string split = traced_step({1, 1'000'000, 2'000'000, 3'000'000, 5'000'000, 10'000'000}, dir / "split.json");
  EXPECT_EQ(whole.size(), split.size());
  EXPECT_TRUE(whole == split) << "the split run's trace differs";
  fs::remove_all(dir);
}

}  // namespace
