// workloads/job/job.h: the job layer. A workload kind binds its `workload:` section into a Job; a
// Job starts its work on a simulation, and after the run produces a JobResult that prints,
// serialises and fingerprints itself. The command (and validation, sweeps) drive every kind the
// same way: bind -> prepare -> resources -> start -> sim.run() -> finish -> result; adding a kind is one entry in
// workload_kinds() (registry.cc) and touches no dispatch code.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sim/config.h"
#include "sim/simulation.h"
#include "topology/cluster_config.h"
#include "topology/cluster_resources.h"
#include "topology/topology.h"
#include "workloads/program/executor.h"
#include "workloads/program/program.h"

namespace wl {

class JobResult {
 public:
  virtual ~JobResult() = default;
  // Every piece of work finished. Otherwise problem() says what waits on what (a dead rank, a
  // hang) and the times are those reached.
  virtual bool completed() const = 0;
  // A failure hung the job and its watchdog aborted it (and no recovery went on): a result to
  // report in full (summary, JSON), with its own exit status.
  virtual bool aborted() const { return false; }
  virtual std::string problem() const { return {}; }
  // The human-readable report printed by `clustersim run`.
  virtual std::string summary() const = 0;
  // The result's fields, added to the run's JSON object.
  virtual void to_json(nlohmann::ordered_json& out) const = 0;
  // Golden fingerprint fields (tests/golden/): every simulated time in integer ns, memory.
  virtual std::string fingerprint() const = 0;
};

struct JobContext {
  std::vector<uint32_t> trace_ranks;  // ranks whose ops become trace spans
  // For kinds that run many independent simulations (a campaign's trials): threads to use, the
  // number of trials (0: the scenario's), and a progress report (trials done of the total).
  int threads = 1;
  int64_t trials = 0;
  std::function<void(int64_t done, int64_t total)> progress;
  // Spreads n independent tasks over processes (a campaign's trials under `mpirun`): every process
  // gets every task's result text, in task order. Empty: the kind runs its tasks on `threads`
  // threads itself.
  std::function<std::vector<std::string>(size_t n, const std::function<std::string(size_t)>& task)> distribute;
  // Called by kinds that build a program (training) once it is built, before it runs: an exporter
  // (`run --chakra`). Kinds that build none leave it uncalled.
  std::function<void(const JobProgram& program, const KernelCoster& coster)> export_program;
  // Called by run_scenario with the job's result, before the observers are told the run ended
  // (sim::Simulation::finish): a trace writer can still take the summary into its metadata.
  std::function<void(const JobResult& result)> on_result;
};

class Job {
 public:
  virtual ~Job() = default;
  // Once, before start(), from the simulation (its seed) and the cluster's description alone: does
  // what needs no resources (a training step builds its programs and decides its fidelity) and
  // returns the GPUs the job will model individually, 1 per GPU of the topology (empty: every GPU),
  // so that the caller builds the resources of those only (topo::ClusterResources' `modelled`) on
  // that `sim` for start(): a step in symmetric mode models one data-parallel replica.
  virtual std::vector<uint8_t> prepare(sim::Simulation& /*sim*/, const topo::Topology& /*topology*/,
                                       const topo::GpuSpec& /*gpu*/, const topo::HardwareProfile& /*profile*/,
                                       const JobContext& /*ctx*/) {
    return {};
  }
  // Sets the work up on res's simulation, after prepare() (nothing runs until the caller runs the
  // simulation).
  virtual void start(topo::ClusterResources& res, const JobContext& ctx) = 0;
  // After the simulation ran: the result (a kind may run further simulations of its own here).
  // Releases what start() set up on the simulation, so call it while the simulation and the
  // resources given to start() still live.
  virtual std::unique_ptr<JobResult> finish(const sim::RunResult& run) = 0;
  // The ranks a trace shows when the user names none: one per distinct program where the kind
  // knows them (a training step: one per pipeline stage); empty: the caller's default.
  virtual std::vector<uint32_t> default_trace_ranks() const { return {}; }
};

// What a kind binds its `workload:` section against.
struct BindContext {
  const topo::ClusterConfig& cluster;
  const topo::Topology& topology;
  std::optional<sim::ConfigNode> failures;  // the scenario's `failures:` section, when it has one
  std::string cluster_yaml;                 // the resolved `cluster:` section (a key for cached results)
  // Bytes the run may take (--max-memory, else the system's MemAvailable; 0: not known): a job
  // whose programs alone would need more is refused at binding, naming the key that makes it so.
  uint64_t memory_limit = 0;
  // A kind that cannot take failures refuses the section (naming itself).
  void refuse_failures(std::string_view kind) const;
};

struct WorkloadKind {
  std::string_view name;
  std::string_view description;
  // Binds `workload:` against the bound cluster; throws sim::ConfigError with file:line:col.
  std::unique_ptr<Job> (*bind)(const sim::ConfigNode& workload, const BindContext& ctx);
};

// Every workload kind, in the order `workload.kind` lists them.
std::span<const WorkloadKind> workload_kinds();

}  // namespace wl
