// sim/app/replay.cc: `clustersim replay TRACE...`: PyTorch profiler traces, one per rank, replayed
// with their measured kernel and collective durations (traces/kineto/kineto.h); per rank, the
// measured and the replayed iteration time (first GPU activity to last).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "sim/app/commands.h"
#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/cluster_resources.h"
#include "traces/chrome/chrome_trace.h"
#include "traces/kineto/kineto.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/runtime.h"
#include "workloads/program/executor.h"

namespace app {

int cmd_replay(const ReplayOptions& opt) {
  if (!opt.json.empty()) {
    std::ofstream probe(opt.json, std::ios::app);
    if (!probe) throw sim::UserError("--json: cannot write " + opt.json);
  }
  std::vector<traces::KinetoRank> ranks;
  for (const auto& f : opt.traces) ranks.push_back(traces::read_kineto(f));
  traces::ReplayProgram rp = traces::replay_program(ranks);
  const uint32_t world = static_cast<uint32_t>(ranks.size());

  // Measured collectives need no network: one node of `world` accelerators stands for the job.
  sim::Simulation sim(1);
  std::unique_ptr<traces::ChromeTraceWriter> trace;
  if (!opt.trace.empty()) {
    traces::ChromeTraceOptions to;
    to.path = opt.trace;
    for (uint32_t r = 0; r < world; ++r) to.processes.insert(r);
    trace = std::make_unique<traces::ChromeTraceWriter>(to);
    trace->set_metadata("generator", "clustersim replay");
    sim.observers().attach(trace.get());
  }
  topo::ScaleUpSpec su;
  su.kind = world > 1 ? topo::ScaleUpKind::kNvSwitch : topo::ScaleUpKind::kNone;
  topo::Topology topo = topo::build_scale_up(world, su);
  const topo::GpuSpec gpu = topo::find_gpu("h100-sxm");
  topo::ClusterResources res(sim, topo, gpu, topo::default_profile(gpu));
  wl::CollectiveRuntime runtime(res, wl::RuntimeOptions{});
  wl::ExecutorOptions eo;
  for (uint32_t r = 0; r < world; ++r) eo.trace_ranks.push_back(r);
  wl::ProgramExecutor exec(res, runtime, rp.job, wl::ClusterShape{}, wl::CostHints{}, eo);
  sim.add_pending_work(&exec);
  exec.start();
  auto run = sim.run();
  sim.remove_pending_work(&exec);
  sim.finish();
  if (!exec.error().empty() || !exec.finished()) {
    std::fprintf(stderr, "clustersim: the replay did not complete: %s%s\n", exec.error().c_str(),
                 run.deadlock_report.c_str());
    return 3;
  }
  nlohmann::ordered_json j;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!opt.quiet) {
    std::printf("replay of %u rank trace(s), collectives as measured (%zu per rank)\n\n", world, rp.collectives);
    std::printf("  %4s  %14s  %14s  %8s  %s\n", "rank", "measured ms", "replayed ms", "error", "file");
  }
  for (uint32_t r = 0; r < world; ++r) {
    const double sim_s = exec.rank_end(r).seconds() - rp.offset_s[r];
    const double err = rp.measured_s[r] > 0 ? sim_s / rp.measured_s[r] - 1 : 0;
    if (!opt.quiet)
      std::printf("  %4u  %14.3f  %14.3f  %+7.2f%%  %s\n", r, rp.measured_s[r] * 1e3, sim_s * 1e3, err * 100,
                  ranks[r].file.c_str());
    nlohmann::ordered_json row;
    row["rank"] = r;
    row["file"] = ranks[r].file;
    row["measured_s"] = rp.measured_s[r];
    row["replayed_s"] = sim_s;
    row["error"] = err;
    rows.push_back(row);
  }
  if (!opt.json.empty()) {
    j["ranks"] = rows;
    j["collectives_per_rank"] = rp.collectives;
    j["collectives"] = "measured";
    std::ofstream f(opt.json);
    f << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace app
