#include "workloads/job/scenario.h"

#include <string>
#include <utility>

#include "sim/log.h"
#include "sim/error.h"
#include "topology/cluster_resources.h"

namespace wl {

void BindContext::refuse_failures(std::string_view kind) const {
  if (failures)
    failures->fail("the '" + std::string(kind) +
                   "' workload kind cannot take failures (the training kind can; a campaign has its own)");
}

Scenario bind_scenario(sim::ConfigDoc doc, std::string_view default_name, bool with_workload,
                       uint64_t max_memory_bytes) {
  Scenario sc{std::move(doc)};
  auto root = sc.doc.root();
  if (!root.is_map()) root.fail("a scenario is a map with keys name, seed, cluster, workload, output");
  sc.name = root.get_string("name", default_name);
  sc.seed = static_cast<uint64_t>(root.get_int_in("seed", 0, INT64_MAX, 1));
  auto cluster = root.child("cluster");
  sc.cluster = topo::bind_cluster(cluster);
  sc.topology = std::make_unique<topo::Topology>(topo::build_cluster_checked(sc.cluster, cluster, max_memory_bytes));
  if (!with_workload) {
    // `topology` looks at the cluster only; the rest is still checked for unknown keys where bound.
    if (auto w = root.find("workload")) (void)w->keys();
    return sc;
  }
  auto w = root.child("workload");
  std::vector<std::string> names;
  for (const WorkloadKind& k : workload_kinds()) names.emplace_back(k.name);
  const std::string kind = w.get_enum("kind", names);
  for (const WorkloadKind& k : workload_kinds())
    if (k.name == kind) sc.kind = &k;
  BindContext ctx{sc.cluster, *sc.topology, root.find("failures"), cluster.resolved_yaml(),
                  max_memory_bytes > 0 ? max_memory_bytes : topo::available_memory_bytes()};
  sc.job = sc.kind->bind(w, ctx);
  if (auto out = root.find("output")) {
    sc.trace = out->get_string("trace", "");
    if (out->has("trace_ranks")) {
      auto ranks_node = out->child("trace_ranks");
      for (int64_t r : out->get_int_list("trace_ranks")) {
        if (r < 0 || r >= sc.topology->num_gpus())
          ranks_node.fail("rank " + std::to_string(r) + " is outside the cluster (0.." +
                          std::to_string(sc.topology->num_gpus() - 1) + ")");
        sc.trace_ranks.push_back(static_cast<uint32_t>(r));
      }
    }
  }
  return sc;
}

ScenarioRun run_scenario(Scenario& sc, sim::Simulation& sim, const std::vector<uint32_t>& trace_ranks) {
  JobContext ctx;
  ctx.trace_ranks = trace_ranks;
  return run_scenario(sc, sim, ctx);
}

ScenarioRun run_scenario(Scenario& sc, sim::Simulation& sim, const JobContext& ctx) {
  const std::vector<uint32_t>& trace_ranks = ctx.trace_ranks;
  // The observers are finished once, when the job is done. When setting up or running throws (a
  // bad input found late), they are not: a trace writer then leaves an earlier file as it was.
  sim::Log* log = sim.log();
  if (log)
    log->at(sim::Layer::kWorkloads)
        .info("scenario '{}': a {} job on {} GPUs, seed {}", sc.name, sc.kind->name, sc.topology->num_gpus(), sc.seed);
  std::vector<uint8_t> modelled = sc.job->prepare(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, ctx);
  topo::ClusterResources res(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, std::move(modelled));
  if (!trace_ranks.empty()) res.enable_link_counters(trace_ranks);
  ScenarioRun out;
  sim::RunResult run;
  try {
    sc.job->start(res, ctx);
    run = sim.run();
    out.result = sc.job->finish(run);
  } catch (...) {
    sc.job.reset();  // a started job refers to `res`: it must go first
    throw;
  }
  if (log)
    log->at(sim::Layer::kWorkloads)
        .info("scenario '{}': {} after {} events, {:.9f} s simulated", sc.name,
              out.result->completed() ? "completed" : "did not complete", sim.events_processed(), run.end_time.seconds());
  if (ctx.on_result) ctx.on_result(*out.result);
  sim.finish();
  out.events = sim.events_processed();
  out.solves = sim.fluid().solves();
  out.solved_activities = sim.fluid().solved_activities();
  return out;
}

void check_scenario(Scenario& sc) {
  sim::Simulation sim(sc.seed);
  (void)sc.job->prepare(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile, JobContext{});
}

const char* default_scenario_yaml() {
  return R"(# Built-in default: one training step of Llama 3 8B on 64 H100 (8 DGX nodes, 400 Gb/s per GPU,
# rail-optimized leaf + spine), TP 8 inside each node, PP 4 with 1F1B, DP 2 with DDP.
# The same scenario is workloads/scenarios/llama3-8b-64xh100-1f1b.yaml.
name: default-llama3-8b-64xh100-1f1b
seed: 1
cluster:
  gpu: h100-sxm
  nodes: 8
  gpus_per_node: 8
  scale_up: {kind: nvswitch}
  scale_out:
    kind: fat-tree
    nic_bandwidth: 400Gbps
    rails: 8
    tiers:
      - {name: leaf, nodes: 8}
      - {name: spine, leafs: 8}
workload:
  kind: training
  model: {preset: llama3-8b}
  training: {seq_len: 8192, global_batch: 64, micro_batch: 1, precision: bf16}
  parallelism: {tp: 8, pp: 4, dp: 2, data_parallel: ddp}
  schedule: {kind: 1f1b}
)";
}

}  // namespace wl
