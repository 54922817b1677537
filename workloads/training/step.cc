#include "workloads/training/step.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "sim/error.h"
#include "sim/units.h"
#include "workloads/collectives/benchmark.h"

namespace wl {

std::string describe_oom(const std::vector<StageMemory>& memory, double capacity) {
  std::string out;
  for (const auto& m : memory) {
    double total = m.bytes.total();
    if (total <= capacity) continue;
    const std::pair<const char*, double> parts[] = {{"parameters", m.bytes.params},
                                                     {"gradients", m.bytes.grads},
                                                     {"optimizer states", m.bytes.optimizer},
                                                     {"activations", m.bytes.activations},
                                                     {"communication buffers", m.bytes.comm_buffers}};
    auto biggest = *std::max_element(std::begin(parts), std::end(parts),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
    if (!out.empty()) out += "; ";
    out += "pipeline stage " + std::to_string(m.stage) + " ranks need " + sim::format_bytes(total) + " of " +
           sim::format_bytes(capacity) + " HBM (over by " + sim::format_bytes(total - capacity) + "); largest part: " +
           biggest.first + " " + sim::format_bytes(biggest.second);
    if (biggest.first == std::string("activations"))
      out += " (" + std::to_string(m.in_flight_chunks) + " chunk-forwards in flight)";
  }
  return out;
}

std::string step_fingerprint(const StepResult& r) {
  auto ns = [](double seconds) { return std::to_string(std::llround(seconds * 1e9)); };
  const Breakdown& b = r.mean;
  std::string out = "step_ns=" + ns(r.step_time_s) + " compute_ns=" + ns(b.compute) +
                    " tp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kTp)]) +
                    " cp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kCp)]) +
                    " pp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kPp)]) +
                    " dp_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kDp)]) +
                    " dp_outer_ns=" + ns(b.exposed[static_cast<size_t>(Dim::kDpOuter)]) + " bubble_ns=" + ns(b.bubble) +
                    " optimizer_ns=" + ns(b.optimizer) + " mem=";
  for (size_t i = 0; i < r.memory.size(); ++i)
    out += (i ? "/" : "") + std::to_string(std::llround(r.memory[i].bytes.total()));
  out += r.fits ? " fits" : " oom";
  return out;
}

double Breakdown::total() const {
  double t = compute + optimizer + bubble;
  for (double e : exposed) t += e;
  return t;
}

StepResult run_training_step(topo::ClusterResources& res, const TrainingSettings& ts,
                             const std::vector<uint32_t>& trace_ranks, StepHook* hook) {
  TrainingJob job = ts.job;
  job.profile = res.profile();  // the cluster's hardware profile is the one that counts
  TrainingPlan plan = build_training(job);
  StepResult r;
  r.memory = plan.memory;
  r.capacity_bytes = static_cast<double>(job.gpu.hbm_capacity_bytes);
  for (const auto& m : plan.memory)
    if (m.bytes.total() > r.capacity_bytes) r.fits = false;
  if (!r.fits && !ts.allow_oom)
    throw sim::UserError("out of memory: " + describe_oom(plan.memory, r.capacity_bytes) +
                         " (set workload.memory.allow_oom: true to simulate anyway)");

  std::array<std::string, kNumDims> algorithm_at = ts.algorithm_at;
  JobProgram jp = training_job_program(job, plan, algorithm_at);
  const Layout& layout = jp.layout;
  const auto& topo = res.topology();
  jp.rank_label = [&layout, &topo](uint32_t rank) {
    return "rank " + std::to_string(rank) + " (node " + std::to_string(topo.node_of(rank)) + ", tp " +
           std::to_string(layout.coord(rank, Dim::kTp)) + " pp " + std::to_string(layout.coord(rank, Dim::kPp)) +
           " dp " + std::to_string(layout.coord(rank, Dim::kDp)) + ")";
  };

  const ClusterShape shape = cluster_shape_of(topo);
  RuntimeOptions ro;
  ro.step_overhead = res.profile().step_overhead;
  CostHints hints = cost_hints_for(res, ro);
  CollectiveRuntime runtime(res, ro);
  ExecutorOptions eo;
  eo.trace_ranks = trace_ranks;
  ProgramExecutor exec(res, runtime, jp, shape, hints, eo);
  auto& sim = res.simulation();
  sim.add_pending_work(&exec);
  exec.start();
  if (hook) hook->before_run(exec);
  auto run = sim.run();
  if (!exec.error().empty()) {
    r.outcome = StepOutcome::kError;
    r.report = exec.error();
  } else if (run.deadlocked || !exec.finished()) {
    r.outcome = StepOutcome::kStuck;
    r.report = run.deadlock_report;
  }

  r.step_time_s = (exec.step_end() - exec.step_start()).seconds();
  r.tokens_per_step = plan.tokens_per_step;
  r.tokens_per_s = r.step_time_s > 0 ? plan.tokens_per_step / r.step_time_s : 0;
  r.peak_flops = job.peak_flops();
  double gpus = static_cast<double>(layout.world());
  r.tflops_per_gpu = r.step_time_s > 0 ? plan.model_flops_per_step / r.step_time_s / gpus / 1e12 : 0;
  r.mfu = r.tflops_per_gpu * 1e12 / r.peak_flops;
  r.micro_batches = job.micro_batches();
  r.per_stage.assign(static_cast<size_t>(job.pp), Breakdown{});
  std::vector<double> count(static_cast<size_t>(job.pp), 0);
  for (uint32_t rank = 0; rank < layout.world(); ++rank) {
    Breakdown b;
    b.compute = exec.category_seconds(rank, TrainingCategory::kCompute);
    b.optimizer = exec.category_seconds(rank, TrainingCategory::kOptimizer);
    b.bubble = exec.category_seconds(rank, TrainingCategory::kBubble);
    for (size_t d = 0; d < kNumDims; ++d) b.exposed[d] = exec.category_seconds(rank, category_of(static_cast<Dim>(d)));
    auto st = layout.coord(rank, Dim::kPp);
    auto add = [](Breakdown& into, const Breakdown& x) {
      into.compute += x.compute;
      into.optimizer += x.optimizer;
      into.bubble += x.bubble;
      for (size_t d = 0; d < kNumDims; ++d) into.exposed[d] += x.exposed[d];
    };
    add(r.mean, b);
    add(r.per_stage[st], b);
    count[st] += 1;
  }
  auto scale = [](Breakdown& b, double k) {
    b.compute *= k;
    b.optimizer *= k;
    b.bubble *= k;
    for (double& e : b.exposed) e *= k;
  };
  scale(r.mean, 1.0 / gpus);
  for (size_t s = 0; s < r.per_stage.size(); ++s) scale(r.per_stage[s], 1.0 / count[s]);
  r.events = sim.events_processed();
  r.ops = exec.ops_executed();
  r.rank_classes = jp.templates.size();
  r.plans = exec.plans_lowered();
  return r;
}

}  // namespace wl
