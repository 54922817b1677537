// workloads/job/scenario.h: one scenario file bound and run. A Scenario is the bound document
// (name, seed, cluster, built topology, the workload's Job, output settings); run_scenario runs it
// on a simulation the caller owns (so the caller attaches its observers: a trace, a fingerprint).
//
//   name: ...            seed: 1
//   cluster: {...}       topology/cluster_config.h
//   workload: {kind: training | collectives | diloco, ...}   (workload_kinds())
//   failures: {watchdog: 10min, recovery: elastic, events: [...]}   workloads/training/recovery.h
//   output: {trace: FILE, trace_ranks: [0, 8]}
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config.h"
#include "sim/simulation.h"
#include "topology/cluster_config.h"
#include "topology/topology.h"
#include "workloads/job/job.h"

namespace wl {

struct Scenario {
  sim::ConfigDoc doc;
  std::string name{};
  uint64_t seed = 1;
  topo::ClusterConfig cluster{};
  std::unique_ptr<topo::Topology> topology{};
  const WorkloadKind* kind = nullptr;
  std::unique_ptr<Job> job{};
  std::string trace{};
  std::vector<uint32_t> trace_ranks{};
};

// Binds a loaded document (overrides applied). Without `with_workload` only the cluster is bound
// (the rest is still checked for unknown keys where bound). Throws sim::ConfigError.
// `max_memory_bytes`: refuse a cluster whose network model alone would need more (0: the memory
// the system has available; topo::build_cluster_checked).
Scenario bind_scenario(sim::ConfigDoc doc, std::string_view default_name, bool with_workload,
                       uint64_t max_memory_bytes = 0);

// The scenario `clustersim run` uses when given no file.
const char* default_scenario_yaml();

struct ScenarioRun {
  std::unique_ptr<JobResult> result;
  uint64_t events = 0;  // of `sim` (a kind's own further simulations are not counted)
  uint64_t solves = 0, solved_activities = 0;
};

// Builds the cluster's resources on `sim`, starts the job (tracing `trace_ranks`, with link
// utilisation counters for them when an observer is attached), runs the simulation, finishes the
// job and then the observers (sim.finish()). Throws sim::UserError for errors found while
// setting up (e.g. a step that does not fit in memory).
ScenarioRun run_scenario(Scenario& sc, sim::Simulation& sim, const std::vector<uint32_t>& trace_ranks);
// The same with the job's whole context (threads, trials, progress for campaigns).
ScenarioRun run_scenario(Scenario& sc, sim::Simulation& sim, const JobContext& ctx);
// `run --check`: everything run_scenario finds before the first event (the job's prepare: its
// programs, memory, fidelity), on a simulation of its own; throws what run_scenario would.
void check_scenario(Scenario& sc);

}  // namespace wl
