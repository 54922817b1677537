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
#include "traces/chrome/chrome_trace.h"
#include "traces/chakra/chakra.h"
#include "traces/kineto/kineto.h"
#include "traces/pytorch_et/execution_trace.h"
#include "workloads/job/scenario.h"
#include "workloads/program/executor.h"

namespace app {

int cmd_replay(const ReplayOptions& opt) {
  if (!opt.json.empty()) {
    std::ofstream probe(opt.json, std::ios::app);
    if (!probe) throw sim::UserError("--json: cannot write " + opt.json);
  }
  const bool chakra = traces::is_chakra_path(opt.traces.front());
  for (const auto& f : opt.traces)
    if (traces::is_chakra_path(f) != chakra)
      throw sim::UserError(f + ": give either Chakra traces (.et) or PyTorch profiler traces, not both");
  std::vector<traces::KinetoRank> ranks;
  traces::ReplayOptions ro;
  traces::ReplayProgram rp;
  if (chakra) {
    // Chakra: nodes carry compute durations; collectives are always simulated.
    std::vector<traces::ChakraRank> cr;
    for (const auto& f : opt.traces) cr.push_back(traces::read_chakra(f));
    rp.job = traces::chakra_program(cr);
    rp.measured_s.assign(cr.size(), 0);
    rp.offset_s.assign(cr.size(), 0);
    for (const auto& c : cr) {
      traces::KinetoRank k;
      k.file = c.file;
      ranks.push_back(std::move(k));
    }
    if (!opt.execution_traces.empty()) throw sim::UserError("--et: Chakra traces carry their collectives' sizes already");
  }
  if (!chakra) for (const auto& f : opt.traces) ranks.push_back(traces::read_kineto(f));
  if (!chakra && !opt.execution_traces.empty() && opt.cluster.empty())
    throw sim::UserError("--et gives collective sizes to simulate on a cluster: give --cluster SCENARIO too");
  if (!chakra && !opt.cluster.empty()) {
    // Sizes from the execution traces, else from the profiler traces where they record them.
    for (const auto& f : opt.execution_traces) ro.collective_sizes.push_back(traces::read_et_collectives(f));
    ro.simulate_recorded = opt.execution_traces.empty();
  }
  if (!chakra) rp = traces::replay_program(ranks, ro);
  const uint32_t world = static_cast<uint32_t>(ranks.size());
  std::unique_ptr<wl::Scenario> sc;
  if (!opt.cluster.empty()) {
    sc = std::make_unique<wl::Scenario>(
        wl::bind_scenario(sim::ConfigDoc::load_file(opt.cluster), opt.cluster, /*with_workload=*/false));
    if (sc->topology->num_gpus() < world)
      throw sim::UserError(opt.cluster + ": its cluster has " + std::to_string(sc->topology->num_gpus()) +
                           " GPUs for " + std::to_string(world) + " ranks");
  }

  // Measured collectives need no network: one node of `world` accelerators stands for the job.
  sim::Simulation sim(1);
  std::unique_ptr<traces::ChromeTraceWriter> trace;
  if (!opt.trace.empty()) {
    traces::ChromeTraceOptions to;
    to.path = opt.trace;
    for (uint32_t r = 0; r < 2 * world; ++r) to.processes.insert(r);  // replayed ranks, then measured
    trace = std::make_unique<traces::ChromeTraceWriter>(to);
    trace->set_metadata("generator", "clustersim replay");
    sim.observers().attach(trace.get());
  }
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  std::unique_ptr<topo::Topology> own;
  if (!sc) own = std::make_unique<topo::Topology>(topo::build_scale_up(world, su));
  const topo::Topology& topo = sc ? *sc->topology : *own;
  const topo::GpuSpec gpu = sc ? sc->cluster.gpu : topo::find_gpu("h100-sxm");
  const topo::HardwareProfile profile = sc ? sc->cluster.profile : topo::default_profile(gpu);
  wl::ExecutorOptions eo;
  for (uint32_t r = 0; r < world; ++r) eo.trace_ranks.push_back(r);
  const wl::ProgramRun run = wl::run_program(sim, topo, gpu, profile, rp.job, eo);
  if (!chakra) traces::emit_measured(ranks, rp.t0_ns, world, sim.observers());  // beside the replay
  sim.finish();
  if (!run.finished) {
    std::fprintf(stderr, "clustersim: the replay did not complete: %s\n", run.problem.c_str());
    return 3;
  }
  nlohmann::ordered_json j;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!opt.quiet) {
    if (chakra) {
      std::printf("replay of %u Chakra trace(s), collectives simulated on %s\n\n", world,
                  sc ? ("the cluster of " + opt.cluster).c_str() : "one H100 NVSwitch node (--cluster to choose)");
    } else {
      std::printf("replay of %u rank trace(s), %zu collectives per rank %s\n\n", world, rp.collectives,
                  sc ? ("simulated on the cluster of " + opt.cluster).c_str() : "as measured");
    }
    std::printf("  %4s  %14s  %14s  %8s  %12s  %s\n", "rank", "measured ms", "replayed ms", "error", "exposed comm",
                "file");
  }
  for (uint32_t r = 0; r < world; ++r) {
    const double sim_s = run.rank_end[r].seconds() - rp.offset_s[r];
    const double err = rp.measured_s[r] > 0 ? sim_s / rp.measured_s[r] - 1 : 0;
    if (!opt.quiet && chakra)
      std::printf("  %4u  %14s  %14.6f  %8s  %12s  %s\n", r, "-", sim_s * 1e3, "-", "-", ranks[r].file.c_str());
    else if (!opt.quiet)
      std::printf("  %4u  %14.3f  %14.3f  %+7.2f%%  %9.3f ms  %s\n", r, rp.measured_s[r] * 1e3, sim_s * 1e3, err * 100,
                  rp.exposed_comm_s[r] * 1e3, ranks[r].file.c_str());
    nlohmann::ordered_json row;
    row["rank"] = r;
    row["file"] = ranks[r].file;
    row["measured_s"] = rp.measured_s[r];
    row["replayed_s"] = sim_s;
    row["error"] = err;
    if (!chakra) row["measured_exposed_comm_s"] = rp.exposed_comm_s[r];
    rows.push_back(row);
  }
  if (!opt.json.empty()) {
    j["ranks"] = rows;
    j["collectives_per_rank"] = rp.collectives;
    j["collectives"] = sc || chakra ? "simulated" : "measured";
    std::ofstream f(opt.json);
    f << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace app
