#include "workloads/job/training_kind.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/error.h"

#include "sim/units.h"
#include "workloads/job/format.h"

namespace wl {

namespace {

// The parts of a step in report order, with their labels.
std::vector<std::pair<std::string, double>> breakdown_parts(const Breakdown& b) {
  return {{"compute", b.compute},
          {"exposed tp comm", b.exposed[static_cast<size_t>(Dim::kTp)]},
          {"exposed cp comm", b.exposed[static_cast<size_t>(Dim::kCp)]},
          {"exposed pp comm", b.exposed[static_cast<size_t>(Dim::kPp)]},
          {"exposed dp comm", b.exposed[static_cast<size_t>(Dim::kDp)] + b.exposed[static_cast<size_t>(Dim::kDpOuter)]},
          {"pipeline bubble", b.bubble},
          {"optimizer", b.optimizer}};
}

class TrainingJobImpl : public Job {
 public:
  explicit TrainingJobImpl(TrainingSettings ts) : ts_(std::move(ts)) {}
  void start(topo::ClusterResources& res, const JobContext& ctx) override {
    step_ = std::make_unique<TrainingStep>(res, ts_, ctx.trace_ranks);
    step_->start();
  }
  std::unique_ptr<JobResult> finish(const sim::RunResult& run) override {
    SIM_ASSERT(step_ != nullptr, "Job::finish() before start()");
    auto result = std::make_unique<TrainingResult>(ts_, step_->finish(run));
    step_.reset();  // while the simulation and resources still live (it unregisters from them)
    return result;
  }

 private:
  TrainingSettings ts_;
  std::unique_ptr<TrainingStep> step_;
};

}  // namespace

std::unique_ptr<Job> bind_training_job(const sim::ConfigNode& w, const topo::ClusterConfig& cluster,
                                       const topo::Topology& topology) {
  return std::make_unique<TrainingJobImpl>(bind_training(w, cluster.gpu, topology.num_gpus()));
}

std::string TrainingResult::problem() const {
  return std::string("the training step did not complete (") +
         (step_.outcome == StepOutcome::kStuck ? "stuck" : "error") + "): " + step_.report;
}

std::string training_summary(const TrainingSettings& ts, const StepResult& r) {
  const auto& j = ts.job;
  std::string o;
  appendf(o, "training step: %s, seq %lld, global batch %lld sequences (%.0f tokens), %lld GPUs\n", j.model.name.c_str(),
          static_cast<long long>(j.seq_len), static_cast<long long>(j.global_batch), r.tokens_per_step,
          static_cast<long long>(j.world()));
  appendf(o, "  tp %lld  cp %lld  pp %lld  dp %lld  dp_outer %lld   data parallel %s   schedule %s",
          static_cast<long long>(j.tp), static_cast<long long>(j.cp), static_cast<long long>(j.pp),
          static_cast<long long>(j.dp), static_cast<long long>(j.dp_outer), std::string(kDataParallelNames.name(j.data_parallel)).c_str(),
          std::string(kPipelineScheduleNames.name(j.schedule)).c_str());
  if (j.virtual_stages > 1) appendf(o, " (v = %lld)", static_cast<long long>(j.virtual_stages));
  appendf(o, ", %lld micro-batches of %lld\n\n", static_cast<long long>(r.micro_batches),
          static_cast<long long>(j.micro_batch));
  appendf(o, "  step time         %10.4f s\n", r.step_time_s);
  appendf(o, "  tokens/s          %10.0f\n", r.tokens_per_s);
  appendf(o, "  TFLOP/s per GPU   %10.1f   (model FLOPs: 6N + 12*L*H*Q*T per token, PaLM convention; no recompute)\n",
          r.tflops_per_gpu);
  appendf(o, "  MFU               %10.1f %%  of %.0f TFLOP/s peak\n\n", r.mfu * 100, r.peak_flops / 1e12);
  appendf(o, "  where the time goes (mean over ranks; parts add up to the step time):\n");
  for (const auto& [label, v] : breakdown_parts(r.mean))
    appendf(o, "    %-18s %10.4f s  %5.1f %%\n", label.c_str(), v, r.step_time_s > 0 ? v / r.step_time_s * 100 : 0);
  appendf(o, "\n  peak memory per rank, by pipeline stage (capacity %s):\n", sim::format_bytes(r.capacity_bytes).c_str());
  appendf(o, "    %5s %11s %11s %11s %11s %11s %11s  %s\n", "stage", "params", "grads", "optimizer", "activations",
          "buffers", "total", "");
  for (const auto& m : r.memory) {
    bool ok = m.bytes.total() <= r.capacity_bytes;
    appendf(o, "    %5lld %11s %11s %11s %11s %11s %11s  %s\n", static_cast<long long>(m.stage),
            sim::format_bytes(m.bytes.params).c_str(), sim::format_bytes(m.bytes.grads).c_str(),
            sim::format_bytes(m.bytes.optimizer).c_str(), sim::format_bytes(m.bytes.activations).c_str(),
            sim::format_bytes(m.bytes.comm_buffers).c_str(), sim::format_bytes(m.bytes.total()).c_str(),
            ok ? "fits" : "DOES NOT FIT");
  }
  appendf(o, "\n  %llu ops executed by %lld ranks sharing %zu rank-class programs; %zu collective plans\n",
          static_cast<unsigned long long>(r.ops), static_cast<long long>(j.world()), r.rank_classes, r.plans);
  return o;
}

void training_json(nlohmann::ordered_json& out, const TrainingSettings& ts, const StepResult& r) {
  out["step_time_s"] = r.step_time_s;
  out["tokens_per_s"] = r.tokens_per_s;
  out["tflops_per_gpu"] = r.tflops_per_gpu;
  out["mfu"] = r.mfu;
  out["mfu_convention"] = "model FLOPs 6N + 12*L*H*Q*T per token (PaLM), recompute excluded, dense peak of the precision";
  nlohmann::ordered_json b;
  for (const auto& [label, v] : breakdown_parts(r.mean)) b[label] = v;
  out["breakdown"] = b;
  double peak = 0;
  nlohmann::ordered_json stages = nlohmann::ordered_json::array();
  for (const auto& m : r.memory) {
    peak = std::max(peak, m.bytes.total());
    nlohmann::ordered_json e;
    e["stage"] = m.stage;
    e["params_bytes"] = m.bytes.params;
    e["grads_bytes"] = m.bytes.grads;
    e["optimizer_bytes"] = m.bytes.optimizer;
    e["activations_bytes"] = m.bytes.activations;
    e["buffers_bytes"] = m.bytes.comm_buffers;
    e["total_bytes"] = m.bytes.total();
    stages.push_back(e);
  }
  nlohmann::ordered_json mem;
  mem["peak_bytes"] = peak;
  mem["capacity_bytes"] = r.capacity_bytes;
  mem["fits"] = r.fits;
  mem["stages"] = stages;
  out["memory"] = mem;
  nlohmann::ordered_json w;
  w["ranks"] = ts.job.world();
  w["micro_batches"] = r.micro_batches;
  w["tokens_per_step"] = r.tokens_per_step;
  w["ops"] = r.ops;
  w["rank_classes"] = r.rank_classes;
  out["workload"] = w;
}

}  // namespace wl
