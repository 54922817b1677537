#include "workloads/job/training_kind.h"

#include <algorithm>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/error.h"

#include "sim/units.h"
#include "workloads/job/format.h"
#include "workloads/job/kinds.h"

namespace wl {

namespace {

class TrainingJobImpl : public Job {
 public:
  TrainingJobImpl(TrainingSettings ts, std::optional<FailureSettings> failures, uint32_t spare_nodes)
      : ts_(std::move(ts)), failures_(std::move(failures)), spare_nodes_(spare_nodes) {}
  // One rank per pipeline stage: stage s's first rank (every other coordinate 0) runs the same
  // program as the rest of its stage.
  std::vector<uint32_t> default_trace_ranks() const override {
    const TrainingJob& j = ts_.job;
    const Layout layout({j.tp, j.cp, j.pp, j.dp, j.dp_outer}, j.order);
    std::vector<uint32_t> ranks;
    for (int64_t s = 0; s < j.pp; ++s) ranks.push_back(static_cast<uint32_t>(s) * layout.stride(Dim::kPp));
    return ranks;
  }
  std::vector<uint8_t> prepare(sim::Simulation&, const topo::Topology& topology, const topo::GpuSpec& gpu,
                               const topo::HardwareProfile& profile, const JobContext& ctx) override {
    step_ = std::make_unique<TrainingStep>(topology, gpu, profile, ts_, ctx.trace_ranks, step_options());
    return step_->modelled_gpus();
  }
  void start(topo::ClusterResources& res, const JobContext& ctx) override {
    SIM_ASSERT(step_ != nullptr, "Job::start() before prepare()");
    res_ = &res;
    step_->attach(res);
    if (ctx.export_program) ctx.export_program(step_->program(), step_->coster());
    step_->start();
  }
  std::unique_ptr<JobResult> finish(const sim::RunResult& run) override {
    SIM_ASSERT(step_ != nullptr, "Job::finish() before start()");
    StepResult step = step_->finish(run);
    step_.reset();  // while the simulation and resources still live (it unregisters from them)
    if (failures_ && step.outcome == StepOutcome::kCompleted)
      for (const auto& e : failures_->events)
        if (e.at.seconds() > step.step_time_s)
          throw sim::UserError(e.where + ": " + sim::format_duration(e.at) + " is after the step ended (" +
                               sim::format_duration(sim::Time::from_seconds(step.step_time_s)) +
                               "): this failure never happens; give a time inside the step");
    std::optional<RecoveryOutcome> rec;
    if (step.outcome == StepOutcome::kAborted && failures_ && failures_->recovery != Recovery::kNone)
      rec = recover_and_run(step);
    return std::make_unique<TrainingResult>(ts_, std::move(step), std::move(rec));
  }

 private:
  StepOptions step_options() const {
    StepOptions opt;
    if (failures_) {
      opt.failures = failures_->events;
      opt.watchdog = failures_->watchdog;
    }
    return opt;
  }
  // The next step after the abort, simulated on its own on the degraded cluster (what failed
  // before the abort stays dead), from the same seed.
  RecoveryOutcome recover_and_run(const StepResult& failed) {
    std::vector<uint32_t> dead_gpus, dead_links;
    for (const auto& e : failures_->events) {
      if (e.at.seconds() > failed.aborted_at_s) continue;
      if (e.action == topo::FailureEvent::Action::kKillGpus) dead_gpus.insert(dead_gpus.end(), e.gpus.begin(), e.gpus.end());
      if (e.action == topo::FailureEvent::Action::kKillLinks)
        dead_links.insert(dead_links.end(), e.links.begin(), e.links.end());
    }
    RecoveredJob rj = recover(failures_->recovery, ts_, {}, dead_gpus, dead_links, res_->topology(), spare_nodes_);
    RecoveryOutcome out;
    out.how = failures_->recovery;
    out.change = rj.change;
    out.impossible = rj.impossible;
    out.ts = rj.ts;
    if (!out.impossible.empty()) return out;
    try {
      sim::Simulation sim(res_->simulation().random().seed());
      sim.set_log(res_->simulation().log());
      topo::ClusterResources res(sim, res_->topology(), res_->gpu_spec(), res_->profile());
      rj.options.watchdog = failures_->watchdog;
      TrainingStep step(res, out.ts, {}, std::move(rj.options));
      step.start();
      out.step = step.finish(sim.run());
      sim.finish();
    } catch (const sim::UserError& e) {
      out.impossible = std::string("the recovered job cannot run: ") + e.what();
    }
    return out;
  }

  TrainingSettings ts_;
  std::optional<FailureSettings> failures_;
  uint32_t spare_nodes_ = 0;
  topo::ClusterResources* res_ = nullptr;
  std::unique_ptr<TrainingStep> step_;
};

const char* recovery_name(Recovery r) {
  switch (r) {
    case Recovery::kNone: return "none";
    case Recovery::kSpare: return "spare";
    case Recovery::kElastic: return "elastic";
  }
  return "none";
}

}  // namespace

std::unique_ptr<Job> bind_training_job(const sim::ConfigNode& w, const BindContext& ctx) {
  TrainingSettings ts =
      bind_training(w, ctx.cluster.gpu, ctx.cluster.job_gpus(), ctx.memory_limit, spare_nodes(ctx.cluster));
  std::optional<FailureSettings> f;
  if (ctx.failures) f = bind_failures(*ctx.failures, ctx.topology, ts, ctx.cluster.spare_nodes);
  return std::make_unique<TrainingJobImpl>(std::move(ts), std::move(f), ctx.cluster.spare_nodes);
}

bool TrainingResult::completed() const {
  if (step_.outcome == StepOutcome::kCompleted) return true;
  return step_.outcome == StepOutcome::kAborted && recovery_ && recovery_->impossible.empty() &&
         recovery_->step.outcome == StepOutcome::kCompleted;
}

std::string TrainingResult::problem() const {
  if (step_.outcome == StepOutcome::kAborted) {
    std::string p = "aborted: " + step_.failure + " at " + sim::format_duration(sim::Time::from_seconds(step_.failed_at_s)) +
                    "; the watchdog aborted the job at " +
                    sim::format_duration(sim::Time::from_seconds(step_.aborted_at_s));
    if (recovery_ && !recovery_->impossible.empty()) p += "; no recovery: " + recovery_->impossible;
    if (recovery_ && recovery_->impossible.empty() && recovery_->step.outcome != StepOutcome::kCompleted)
      p += "; the recovered step did not complete either: " + recovery_->step.report;
    return p;
  }
  return std::string("the training step did not complete (") +
         (step_.outcome == StepOutcome::kStuck ? "stuck" : "error") + "): " + step_.report;
}

namespace {

// The failure part of a report: what died when, when the watchdog caught it, the work lost, and
// what waited on whom.
std::string failure_summary(const TrainingSettings& ts, const StepResult& r) {
  std::string o;
  const double gpus = static_cast<double>(ts.job.world());
  appendf(o, "  FAILURE\n");
  appendf(o, "    first failure     %s at t = %.6f s\n", r.failure.c_str(), r.failed_at_s);
  appendf(o, "    watchdog          %s (NCCL process-group timeout)\n",
          sim::format_duration(sim::Time::from_seconds(r.watchdog_s)).c_str());
  appendf(o, "    detected, aborted t = %.6f s (%.6f s after the failure)\n", r.aborted_at_s, r.aborted_at_s - r.failed_at_s);
  appendf(o, "    work lost         the whole step: %.3f s x %.0f GPUs = %.2f GPU-hours (%llu of %llu ops had run)\n",
          r.aborted_at_s, gpus, r.aborted_at_s * gpus / 3600, static_cast<unsigned long long>(r.ops),
          static_cast<unsigned long long>(r.ops_total));
  appendf(o, "    what waited on whom:\n");
  size_t start = 0;
  while (start < r.report.size()) {
    size_t end = r.report.find('\n', start);
    if (end == std::string::npos) end = r.report.size();
    appendf(o, "      %s\n", r.report.substr(start, end - start).c_str());
    start = end + 1;
  }
  return o;
}

}  // namespace

std::string TrainingResult::summary() const {
  if (step_.outcome != StepOutcome::kAborted) return training_summary(ts_, step_);
  std::string o;
  appendf(o, "training step: %s, %lld GPUs: ABORTED by the watchdog\n\n", ts_.job.model.name.c_str(),
          static_cast<long long>(ts_.job.world()));
  o += failure_summary(ts_, step_);
  if (!recovery_) {
    appendf(o, "\n  no recovery configured (failures.recovery: spare or elastic simulates the next step)\n");
    return o;
  }
  appendf(o, "\n  RECOVERY (%s): %s\n", recovery_name(recovery_->how),
          recovery_->impossible.empty() ? recovery_->change.c_str() : recovery_->impossible.c_str());
  if (!recovery_->impossible.empty()) return o;
  appendf(o, "  the next step, simulated on the degraded cluster (restart and checkpoint load not included):\n\n");
  o += training_summary(recovery_->ts, recovery_->step);
  return o;
}

void TrainingResult::to_json(nlohmann::ordered_json& out) const {
  if (step_.outcome != StepOutcome::kAborted) {
    training_json(out, ts_, step_);
    return;
  }
  out["status"] = completed() ? "recovered" : "aborted";
  nlohmann::ordered_json f;
  f["failure"] = step_.failure;
  f["failed_at_s"] = step_.failed_at_s;
  f["aborted_at_s"] = step_.aborted_at_s;
  f["watchdog_s"] = step_.watchdog_s;
  f["work_lost_gpu_s"] = step_.aborted_at_s * static_cast<double>(ts_.job.world());
  f["ops_done"] = step_.ops;
  f["ops_total"] = step_.ops_total;
  f["report"] = step_.report;
  out["failure"] = f;
  if (!recovery_) return;
  nlohmann::ordered_json rj;
  rj["policy"] = recovery_name(recovery_->how);
  rj["change"] = recovery_->change;
  if (!recovery_->impossible.empty()) {
    rj["impossible"] = recovery_->impossible;
  } else {
    nlohmann::ordered_json step;
    training_json(step, recovery_->ts, recovery_->step);
    rj["step"] = step;
  }
  out["recovery"] = rj;
}

std::string TrainingResult::fingerprint() const {
  if (step_.outcome != StepOutcome::kAborted) return step_fingerprint(step_);
  std::string f = "aborted failed_ns=" + std::to_string(sim::Time::from_seconds(step_.failed_at_s).count_ns()) +
                  " aborted_ns=" + std::to_string(sim::Time::from_seconds(step_.aborted_at_s).count_ns()) +
                  " ops=" + std::to_string(step_.ops);
  if (recovery_ && recovery_->impossible.empty()) f += " recovered " + step_fingerprint(recovery_->step);
  return f;
}

std::string training_summary(const TrainingSettings& ts, const StepResult& r) {
  const auto& j = ts.job;
  std::string o;
  const bool tpu = j.gpu.kind == topo::AcceleratorKind::kTpu;  // TPUs are "chips" here, not GPUs
  appendf(o, "training step: %s, seq %lld, global batch %lld sequences (%.0f tokens), %lld %s\n", j.model.name.c_str(),
          static_cast<long long>(j.seq_len), static_cast<long long>(j.global_batch), r.tokens_per_step,
          static_cast<long long>(j.world()), tpu ? "chips" : "GPUs");
  appendf(o, "  tp %lld  cp %lld  pp %lld  dp %lld  dp_outer %lld   data parallel %s   schedule %s",
          static_cast<long long>(j.tp), static_cast<long long>(j.cp), static_cast<long long>(j.pp),
          static_cast<long long>(j.dp), static_cast<long long>(j.dp_outer), std::string(kDataParallelNames.name(j.data_parallel)).c_str(),
          std::string(kPipelineScheduleNames.name(j.schedule)).c_str());
  if (j.virtual_stages > 1) appendf(o, " (v = %lld)", static_cast<long long>(j.virtual_stages));
  appendf(o, ", %s of %lld\n", sim::count_noun(static_cast<uint64_t>(r.micro_batches), "micro-batch", "micro-batches").c_str(),
          static_cast<long long>(j.micro_batch));
  if (j.sp_keeps_gathered)
    appendf(o, "  sequence parallelism keeps each GEMM's gathered input (PyTorch DTensor): no regather in the backward\n");
  if (j.tp_comm_overlap())
    appendf(o, "  tp comm overlapped with its GEMMs in %lld chunks (%s)\n", static_cast<long long>(j.tp),
            j.tp_overlap == TrainingJob::TpOverlap::kAsyncTp
                ? "PyTorch AsyncTP: shard copies and partial-sum kernels of its own"
                : "userbuffers, as Megatron-LM --tp-comm-overlap");
  // The loss and the optimizer are named where they differ from the kernels' default.
  std::string apart;
  if (j.loss_eager() != j.eager_kernels) apart += j.loss_eager() ? ", loss eager" : ", loss fused";
  if (j.optimizer_foreach() != j.eager_kernels) apart += j.optimizer_foreach() ? ", optimizer foreach" : ", optimizer fused";
  appendf(o, "  precision %s%s   recompute %s   kernels %s%s   gradients %s\n", std::string(kPrecisionNames.name(j.precision)).c_str(),
          j.precision == Precision::kFp8 ? (j.fp8_tensorwise ? " (tensorwise)" : " (delayed)") : "",
          std::string(kRecomputeNames.name(j.recompute)).c_str(), j.eager_kernels ? "eager" : "fused", apart.c_str(),
          j.gradients_lazy() ? "lazy" : "persistent");
  if (j.data_parallel == DataParallel::kFsdp && j.grad_group() > 1)
    appendf(o, "  fsdp: layers%s %s after forward, gradients reduce-scattered in %s %s%s\n",
            j.fsdp_float8_all_gather ? " (linear weights gathered in FP8)" : "",
            j.fsdp_reshard_after_forward() ? "resharded" : "kept gathered",
            std::string(kPrecisionNames.name(j.fsdp_reduce)).c_str(),
            j.fsdp_defers_grad_sync() ? "after each chunk's last backward (accumulated unsharded until then)"
                                      : "after every backward",
            j.fsdp_copies ? "; FSDP2's copy-out and copy-in kernels" : "");
  if (!j.master_weights)
    appendf(o, "  optimizer: no fp32 master weights; Adam's m and v in %s (training.master_weights: false)\n",
            std::string(kPrecisionNames.name(j.precision == Precision::kFp16 ? Precision::kFp16 : Precision::kBf16)).c_str());
  for (const std::string& n : r.notes) appendf(o, "  note: %s\n", n.c_str());
  appendf(o, "\n");
  if (r.fidelity == "symmetric") {
    const long long others = static_cast<long long>(j.dp * j.dp_outer - 1);
    appendf(o, "  fidelity: symmetric (one data-parallel replica of %u ranks simulated; %s\n"
            "  identical: %s collectives' bytes and %s copies' load on shared links are modelled exactly)\n\n",
            r.ranks_simulated,
            others == 1 ? "the other replica is" : ("the other " + std::to_string(others) + " replicas are").c_str(),
            others == 1 ? "its" : "their", others == 1 ? "its" : "their");
  }
  else if (!r.fidelity_note.empty())
    appendf(o, "  fidelity: expanded (%s)\n\n", r.fidelity_note.c_str());
  else
    appendf(o, "  fidelity: expanded (every rank simulated)\n\n");
  appendf(o, "  step time         %10.4f s\n", r.step_time_s);
  appendf(o, "  tokens/s          %10.0f\n", r.tokens_per_s);
  appendf(o, "  TFLOP/s per %-5s %10.1f   (model FLOPs: 6N + 12*L*H*Q*T per token, PaLM convention; no recompute)\n",
          tpu ? "chip" : "GPU",
          r.tflops_per_gpu);
  appendf(o, "  MFU               %10.1f %%  of %.0f TFLOP/s peak\n\n", r.mfu * 100, r.peak_flops / 1e12);
  appendf(o, "  where the time goes (mean over ranks; parts add up to the step time):\n");
  for (const BreakdownPart& p : breakdown_parts(r.mean))
    appendf(o, "    %-18s %10.4f s  %5.1f %%\n", p.label, p.seconds, r.step_time_s > 0 ? p.seconds / r.step_time_s * 100 : 0);
  // The reserve is the profile's context_memory and nccl_memory per communicator: GPU words for
  // them on GPUs, neutral ones on TPUs (which run neither CUDA nor NCCL).
  appendf(o, "\n  peak memory per rank, by pipeline stage (capacity %s: %s on the device less %s for the %s\n"
          "  and %d %s):\n",
          sim::format_bytes(r.capacity_bytes).c_str(), sim::format_bytes(r.device_bytes).c_str(),
          sim::format_bytes(r.reserved_bytes).c_str(), tpu ? "runtime's context" : "CUDA context", r.communicators,
          tpu ? "communicator buffer(s) (profile context_memory, nccl_memory)" : "NCCL communicator(s)");
  appendf(o, "    %5s %11s %11s %11s %11s %11s %11s\n", "stage", "params", "grads", "optimizer", "activations",
          "buffers", "total");
  for (const auto& m : r.memory) {
    bool ok = m.bytes.total() <= r.capacity_bytes;
    appendf(o, "    %5lld %11s %11s %11s %11s %11s %11s  %s\n", static_cast<long long>(m.stage),
            sim::format_bytes(m.bytes.params).c_str(), sim::format_bytes(m.bytes.grads).c_str(),
            sim::format_bytes(m.bytes.optimizer).c_str(), sim::format_bytes(m.bytes.activations).c_str(),
            sim::format_bytes(m.bytes.comm_buffers).c_str(), sim::format_bytes(m.bytes.total()).c_str(),
            ok ? "fits" : "DOES NOT FIT");
  }
  appendf(o, "    (the largest sum along each stage's pipeline order%s)\n",
          ts.job.gradients_lazy() ? "; gradients: lazy, so they count from the stage's first backward on" : "");
  appendf(o, "\n  %llu ops executed by %lld ranks sharing %zu rank-class programs; %zu collective plans\n",
          static_cast<unsigned long long>(r.ops), static_cast<long long>(r.ranks_simulated), r.rank_classes, r.plans);
  return o;
}

void training_json(nlohmann::ordered_json& out, const TrainingSettings& ts, const StepResult& r) {
  out["step_time_s"] = r.step_time_s;
  out["tokens_per_s"] = r.tokens_per_s;
  out["tflops_per_gpu"] = r.tflops_per_gpu;
  out["mfu"] = r.mfu;
  out["mfu_convention"] = "model FLOPs 6N + 12*L*H*Q*T per token (PaLM), recompute excluded, dense peak of the precision";
  nlohmann::ordered_json b;
  for (const BreakdownPart& p : breakdown_parts(r.mean)) b[p.key] = p.seconds;
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
  mem["device_bytes"] = r.device_bytes;
  mem["reserved_bytes"] = r.reserved_bytes;
  mem["fits"] = r.fits;
  mem["stages"] = stages;
  out["memory"] = mem;
  // The configuration that ran, so rows of runs and sweeps can be joined on it.
  const TrainingJob& j = ts.job;
  nlohmann::ordered_json c;
  c["model"] = j.model.name;
  c["gpu"] = j.gpu.name;
  c["gpus"] = j.world();
  c["tp"] = j.tp;
  c["cp"] = j.cp;
  c["pp"] = j.pp;
  c["dp"] = j.dp;
  c["dp_outer"] = j.dp_outer;
  c["data_parallel"] = std::string(kDataParallelNames.name(j.data_parallel));
  c["sequence_parallel_saves"] = j.sp_keeps_gathered ? "gathered" : "shard";
  c["tp_comm_overlap"] = j.tp_comm_overlap();
  c["tp_comm_overlap_kind"] = j.tp_overlap == TrainingJob::TpOverlap::kOff        ? "none"
                              : j.tp_overlap == TrainingJob::TpOverlap::kAsyncTp ? "asynctp"
                                                                                 : "userbuffers";
  if (j.data_parallel == DataParallel::kFsdp) {
    c["fsdp_reshard_after_forward"] = j.fsdp_reshard_after_forward() ? "always" : "never";
    c["fsdp_reduce_dtype"] = std::string(kPrecisionNames.name(j.fsdp_reduce));
    c["fsdp_float8_all_gather"] = j.fsdp_float8_all_gather && j.grad_group() > 1;  // what ran
    c["fsdp_copies"] = j.fsdp_copies && j.grad_group() > 1;  // what ran
    c["fsdp_grad_sync"] = j.fsdp_defers_grad_sync() ? "after each chunk's last backward" : "after every backward";
  }
  c["schedule"] = std::string(kPipelineScheduleNames.name(j.schedule));
  c["virtual_stages"] = j.virtual_stages;
  c["seq_len"] = j.seq_len;
  c["micro_batch"] = j.micro_batch;
  c["global_batch"] = j.global_batch;
  c["precision"] = std::string(kPrecisionNames.name(j.precision));
  c["recompute"] = std::string(kRecomputeNames.name(j.recompute));
  c["kernels"] = j.eager_kernels ? "eager" : "fused";
  c["loss"] = j.loss_eager() ? "eager" : "fused";
  c["optimizer"] = j.optimizer_foreach() ? "foreach" : "fused";
  c["gradients"] = j.gradients_lazy() ? "lazy" : "persistent";
  c["master_weights"] = j.master_weights;
  if (j.precision == Precision::kFp8) c["fp8_recipe"] = j.fp8_tensorwise ? "tensorwise" : "delayed";
  out["config"] = c;
  nlohmann::ordered_json w;
  w["ranks"] = ts.job.world();
  w["micro_batches"] = r.micro_batches;
  w["tokens_per_step"] = r.tokens_per_step;
  w["ops"] = r.ops;
  w["rank_classes"] = r.rank_classes;
  w["fidelity"] = r.fidelity;
  w["ranks_simulated"] = r.ranks_simulated;
  if (r.fidelity == "symmetric") w["fabric_links_folded"] = r.fabric_links_folded;
  if (!r.fidelity_note.empty()) w["fidelity_note"] = r.fidelity_note;
  if (!r.notes.empty()) w["notes"] = r.notes;
  out["workload"] = w;
}

}  // namespace wl
