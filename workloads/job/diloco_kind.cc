// `workload: {kind: diloco}` as a Job: one island's inner step on the simulation, then the outer
// rounds and the data-parallel reference on their own simulations (workloads/diloco/).
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/error.h"

#include "workloads/diloco/diloco.h"
#include "workloads/job/format.h"
#include "workloads/job/kinds.h"
#include "workloads/job/training_kind.h"

namespace wl {

namespace {

nlohmann::ordered_json timeline_json(const DilocoTimeline& t) {
  nlohmann::ordered_json o;
  o["total_time_s"] = t.total_time_s;
  o["compute_utilization"] = t.utilization;
  o["wait_share"] = t.wait_share;
  o["outer_sync_time_s"] = t.outer_sync_time_s;
  o["fragment_sync_time_s"] = t.fragment_sync_time_s;
  o["drain_time_s"] = t.drain_time_s;
  o["syncs"] = t.syncs;
  o["syncs_in_flight_at_end"] = t.syncs_in_flight_at_end;
  o["wan_up_bytes"] = t.wan_up_bytes;
  o["events"] = t.events;
  return o;
}

class DilocoJobResult : public JobResult {
 public:
  DilocoJobResult(const DilocoSettings& ds, DilocoResult r) : ds_(ds), r_(std::move(r)) {}
  bool completed() const override { return true; }
  std::string summary() const override { return training_summary(ds_.island, r_.step) + "\n" + format_diloco_summary(ds_, r_); }

  void to_json(nlohmann::ordered_json& j) const override {
    training_json(j, ds_.island, r_.step);  // the island's inner step, as for kind: training
    const auto& c = ds_.config;
    nlohmann::ordered_json d;
    d["islands"] = c.islands;
    d["inner_steps"] = c.inner_steps;
    d["outer_steps"] = c.outer_steps;
    d["identical_islands"] = true;  // one island step simulated, used for every island
    d["inner_step_time_s"] = r_.step.step_time_s;
    d["params"] = r_.params;
    d["sync_bytes"] = r_.sync_bytes;
    d["precision"] = c.sync.precision;
    d["bandwidth_Bps"] = c.sync.bandwidth_Bps;
    d["latency_s"] = c.sync.latency.seconds();
    d["algorithm"] = c.sync.algorithm == OuterAlgorithm::kRing ? "ring" : "tree";
    d["fragments"] = c.sync.fragments;
    d["overlap_steps"] = c.sync.overlap_steps;
    d["outer_sync_time_s"] = r_.diloco.outer_sync_time_s;
    d["idle_wan_sync_time_s"] = r_.idle_sync_s;
    d["appendix_a_bound_s"] = r_.appendix_a_bound_s;
    d["compute_utilization"] = r_.diloco.utilization;
    d["wait_share"] = r_.diloco.wait_share;
    d["total_time_s"] = r_.diloco.total_time_s;
    d["tokens_per_s"] = r_.tokens_per_s;
    d["timeline"] = timeline_json(r_.diloco);
    nlohmann::ordered_json dp = timeline_json(r_.data_parallel);
    dp["inner_steps_simulated"] = r_.data_parallel_steps;
    dp["tokens_per_s"] = r_.data_parallel_tokens_per_s;
    d["data_parallel"] = dp;
    d["assumptions"] = "identical islands; intra-island gathering to the gateway hidden; outer optimizer step free";
    j["diloco"] = d;
  }

  std::string fingerprint() const override {
    return step_fingerprint(r_.step) + " diloco_total_ns=" + std::to_string(to_ns(r_.diloco.total_time_s)) +
           " diloco_outer_sync_ns=" + std::to_string(to_ns(r_.diloco.outer_sync_time_s)) +
           " diloco_events=" + std::to_string(r_.diloco.events) +
           " dp_total_ns=" + std::to_string(to_ns(r_.data_parallel.total_time_s)) +
           " dp_events=" + std::to_string(r_.data_parallel.events);
  }

 private:
  const DilocoSettings& ds_;
  DilocoResult r_;
};

class DilocoJob : public Job {
 public:
  explicit DilocoJob(DilocoSettings ds) : ds_(std::move(ds)) {}
  std::vector<uint8_t> prepare(sim::Simulation&, const topo::Topology& topology, const topo::GpuSpec& gpu,
                               const topo::HardwareProfile& profile, const JobContext& ctx) override {
    step_ = std::make_unique<TrainingStep>(topology, gpu, profile, ds_.island, ctx.trace_ranks);
    return step_->modelled_gpus();
  }
  void start(topo::ClusterResources& res, const JobContext&) override {
    SIM_ASSERT(step_ != nullptr, "Job::start() before prepare()");
    seed_ = res.simulation().seed();
    step_->attach(res);
    step_->start();
  }
  std::unique_ptr<JobResult> finish(const sim::RunResult& run) override {
    SIM_ASSERT(step_ != nullptr, "Job::finish() before start()");
    StepResult island = step_->finish(run);
    step_.reset();  // while the simulation and resources still live (it unregisters from them)
    if (island.outcome != StepOutcome::kCompleted) return std::make_unique<TrainingResult>(ds_.island, island);
    return std::make_unique<DilocoJobResult>(ds_, diloco_after_island_step(ds_, std::move(island), seed_));
  }

 private:
  DilocoSettings ds_;
  uint64_t seed_ = 1;
  std::unique_ptr<TrainingStep> step_;
};

}  // namespace

std::unique_ptr<Job> bind_diloco_job(const sim::ConfigNode& w, const BindContext& ctx) {
  ctx.refuse_failures("diloco");
  return std::make_unique<DilocoJob>(
      bind_diloco(w, ctx.cluster.gpu, ctx.cluster.job_gpus(), ctx.memory_limit, spare_nodes(ctx.cluster)));
}

}  // namespace wl
