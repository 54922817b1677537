// workloads/job/campaign_kind.cc: `workload: {kind: campaign}`. A campaign runs a training (or
// DiLoCo) job for days to months under random failures (workloads/campaign/campaign.h); the step
// time of every state the job passes through (the full job, elastic data parallelism with k
// replicas dropped, one DiLoCo island) comes from the step simulator, simulated once per state and
// cached in memory and, with `step_cache: FILE`, in a file keyed by the resolved cluster and job.
//
//   workload:
//     kind: campaign
//     job: {kind: training, model: ..., parallelism: ...}   # or kind: diloco
//     duration: 54d
//     failures: {profile: llama3-405b}
//     policy: hot_spares
//     trials: 1000
//     step_cache: llama3-405b.stepcache
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/error.h"
#include "sim/random.h"
#include "sim/units.h"
#include "workloads/campaign/campaign.h"
#include "workloads/campaign/campaign_config.h"
#include "workloads/diloco/diloco.h"
#include "workloads/job/format.h"
#include "workloads/job/kinds.h"
#include "workloads/job/training_kind.h"
#include "workloads/model/transformer.h"
#include "workloads/training/recovery.h"

namespace wl {

namespace {

// Bump when the step simulator's timings change, so that cached step times are not reused.
constexpr const char* kStepModelVersion = "clustersim-step-2026-11-29-fsdp-prefetch";

// Step costs by state, simulated on their own simulations (one at a time: the topology's route
// caches are not shared across threads) and memoised; with a cache file, read at start and
// appended to as states are simulated.
class SimulatedStepCosts : public StepCostSource {
 public:
  SimulatedStepCosts(const topo::Topology& topo, const topo::ClusterConfig& cluster, uint64_t seed)
      : topo_(topo), cluster_(cluster), seed_(seed) {}

  void set_training(const TrainingSettings* ts) { ts_ = ts; }
  void set_diloco(const DilocoSettings* ds) { ds_ = ds; }
  void set_cache(std::string path, uint64_t key) {
    cache_path_ = std::move(path);
    key_ = key;
    if (cache_path_.empty()) return;
    std::ifstream in(cache_path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream ls(line);
      std::string key_hex;
      int64_t k = 0;
      StepCost c;
      if (!(ls >> key_hex >> k >> c.seconds >> c.tokens)) continue;
      if (key_hex == hex(key_)) memo_[k] = c;
    }
    from_cache_ = static_cast<int64_t>(memo_.size());
  }
  // A state simulated elsewhere (the full job in the scenario's own, traced simulation).
  void put(int64_t k, StepCost c, double cpu_s, const StepResult& r) {
    std::lock_guard<std::mutex> lock(mu_);
    if (memo_.count(k)) return;
    note_fidelity(r);
    memo_[k] = c;
    ++simulated_;
    cpu_s_ += cpu_s;
    append(k, c);
  }
  bool has(int64_t k) {
    std::lock_guard<std::mutex> lock(mu_);
    return memo_.count(k) != 0;
  }

  StepCost step(int64_t replicas_down) override {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = memo_.find(replicas_down);
    if (it != memo_.end()) return it->second;
    const auto t0 = std::chrono::steady_clock::now();
    StepCost c = simulate(replicas_down);
    cpu_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ++simulated_;
    memo_[replicas_down] = c;
    append(replicas_down, c);
    return c;
  }

  int64_t simulated() const { return simulated_; }
  // The steps simulated, by the fidelity that ran.
  const std::map<std::string, int64_t>& fidelity_counts() const { return fidelity_counts_; }
  // How the simulated steps ran: "symmetric", "expanded", or both as "expanded 2, symmetric 1";
  // an expanded step's reason (symmetric mode asked for where it does not hold) after it.
  std::string fidelities() const {
    std::string out;
    for (const auto& [name, count] : fidelity_counts_) {
      if (!out.empty()) out += ", ";
      out += name;
      if (fidelity_counts_.size() > 1) appendf(out, " %lld", static_cast<long long>(count));
    }
    if (!fidelity_note_.empty()) appendf(out, " (%s)", fidelity_note_.c_str());
    return out;
  }
  int64_t from_cache() const { return from_cache_; }
  double simulation_s() const { return cpu_s_; }
  std::string problem() const { return problem_; }

 private:
  static std::string hex(uint64_t v) {
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016" PRIx64, v);
    return buf;
  }
  void append(int64_t k, StepCost c) {
    if (cache_path_.empty()) return;
    std::ofstream out(cache_path_, std::ios::app);
    char buf[128];
    std::snprintf(buf, sizeof buf, "%s %" PRId64 " %.17g %.17g\n", hex(key_).c_str(), k, c.seconds, c.tokens);
    out << buf;
  }
  void note_fidelity(const StepResult& r) {
    ++fidelity_counts_[r.fidelity];
    if (fidelity_note_.empty()) fidelity_note_ = r.fidelity_note;
  }
  StepCost simulate(int64_t k) {
    const TrainingSettings ts = ds_ ? ds_->island : without_replicas(*ts_, k);
    sim::Simulation sim(seed_);
    // Prepared first, so that a step in symmetric mode gets resources for the GPUs it models only;
    // the resources are declared before it, so that it goes first however the block is left.
    std::optional<topo::ClusterResources> res;
    TrainingStep step(topo_, cluster_.gpu, cluster_.profile, ts, std::vector<uint32_t>{});
    res.emplace(sim, topo_, cluster_.gpu, cluster_.profile, step.modelled_gpus());
    step.attach(*res);
    step.start();
    const StepResult r = step.finish(sim.run());
    sim.finish();
    note_fidelity(r);
    if (r.outcome != StepOutcome::kCompleted) {
      // A state whose step cannot run is reported; the campaign sees it as a stop of the job.
      if (problem_.empty()) problem_ = "the step with " + std::to_string(k) + " replicas dropped did not complete: " + r.report;
      return StepCost{};
    }
    return StepCost{r.step_time_s, r.tokens_per_step};
  }

  const topo::Topology& topo_;
  const topo::ClusterConfig& cluster_;
  uint64_t seed_;
  const TrainingSettings* ts_ = nullptr;
  const DilocoSettings* ds_ = nullptr;
  std::mutex mu_;
  std::map<int64_t, StepCost> memo_;
  std::map<std::string, int64_t> fidelity_counts_;  // steps simulated, by fidelity that ran
  std::string fidelity_note_;                       // the first expanded step's reason, if any
  std::string cache_path_;
  uint64_t key_ = 0;
  int64_t simulated_ = 0, from_cache_ = 0;
  double cpu_s_ = 0;
  std::string problem_;
};

// The trials' results are held all at once: one TrialResult per trial for the configured interval
// (CampaignSummary::per_trial) and as many again for each checkpoint-sweep point, which
// IntervalSweep keeps. `campaigns` x trials x sizeof(TrialResult) is a lower bound of what the
// trials take (the estimates' copies, one double per trial, and under MPI the trials' texts come
// on top); more than `limit` (BindContext::memory_limit; 0: none) is refused, named at `at` (the
// place of workload.trials, or --trials), instead of ending in std::bad_alloc. `sweep_points`:
// the sweep's intervals, known after the step is simulated; -1 at binding, where a sweep counts
// as one point at least (its intervals may round to the same number of steps).
void check_trials_memory(const std::string& at, int64_t trials, bool sweep, int64_t sweep_points, uint64_t limit) {
  if (limit == 0) return;
  const int64_t campaigns = 1 + (sweep ? std::max<int64_t>(1, sweep_points) : 0);
  constexpr uint64_t kBytesPerTrial = sizeof(TrialResult);
  const unsigned __int128 need = static_cast<unsigned __int128>(trials) * static_cast<unsigned __int128>(campaigns) *
                                 kBytesPerTrial;
  if (need <= limit) return;
  std::string what;
  appendf(what, "%lld trials", static_cast<long long>(trials));
  if (sweep && sweep_points >= 0)
    appendf(what, " x %lld campaigns (the configured checkpoint interval and %lld sweep intervals)",
            static_cast<long long>(campaigns), static_cast<long long>(sweep_points));
  else if (sweep)
    appendf(what, " x at least 2 campaigns (the configured checkpoint interval and the sweep's)");
  appendf(what, " x %llu bytes of results per trial need at least %s, more than the run's limit of %s "
          "(--max-memory, else MemAvailable): run fewer trials",
          static_cast<unsigned long long>(kBytesPerTrial), sim::format_bytes(static_cast<double>(need)).c_str(),
          sim::format_bytes(static_cast<double>(limit)).c_str());
  throw sim::ConfigError(at + ": " + what);
}

class CampaignResult : public JobResult {
 public:
  CampaignResult(const CampaignSpec& spec, CampaignSummary summary, std::optional<IntervalSweep> sweep,
                 std::string steps_note, int64_t simulated, int64_t cached, std::string problem,
                 std::map<std::string, int64_t> fidelities = {})
      : spec_(spec), summary_(std::move(summary)), sweep_(std::move(sweep)), steps_note_(std::move(steps_note)),
        simulated_(simulated), cached_(cached), problem_(std::move(problem)), fidelities_(std::move(fidelities)) {}
  bool completed() const override { return problem_.empty(); }
  std::string problem() const override { return problem_; }
  std::string summary() const override {
    std::string o = campaign_summary_text(spec_, summary_);
    if (sweep_) {
      o += '\n';
      o += campaign_sweep_text(spec_, *sweep_);
    }
    o += '\n';
    o += steps_note_;
    o += '\n';
    return o;
  }
  void to_json(nlohmann::ordered_json& out) const override {
    campaign_to_json(spec_, summary_, out);
    if (sweep_) campaign_sweep_to_json(spec_, *sweep_, out);
    // Counts only: wall times would make the JSON differ between identical runs.
    out["step_simulations"] = {{"run", simulated_}, {"from_cache", cached_}};
    // The steps simulated, by the fidelity that ran (workload.job.fidelity; README: Fidelity).
    nlohmann::ordered_json fid = nlohmann::ordered_json::object();
    for (const auto& [name, count] : fidelities_) fid[name] = count;
    out["step_simulations"]["fidelity"] = fid;
  }
  std::string fingerprint() const override {
    char buf[256];
    std::snprintf(buf, sizeof buf, "campaign trials=%lld ettr=%.9f goodput=%.6f interruptions=%.6f step_ns=%lld",
                  static_cast<long long>(summary_.trials), summary_.ettr.mean, summary_.goodput_tokens_per_s.mean,
                  summary_.interruptions.mean, static_cast<long long>(std::llround(summary_.step_s * 1e9)));
    return buf;
  }

 private:
  const CampaignSpec& spec_;
  CampaignSummary summary_;
  std::optional<IntervalSweep> sweep_;
  std::string steps_note_;
  int64_t simulated_ = 0, cached_ = 0;
  std::string problem_;
  std::map<std::string, int64_t> fidelities_;  // steps simulated by fidelity (none: all from the cache)
};

class CampaignJob : public Job {
 public:
  CampaignJob(CampaignSpec spec, std::optional<TrainingSettings> ts, std::optional<DilocoSettings> ds,
              std::string cache_path, uint64_t cache_key, const topo::Topology& topo, const topo::ClusterConfig& cluster,
              std::string trials_at, uint64_t memory_limit)
      : trials_at_(std::move(trials_at)),
        memory_limit_(memory_limit),
        spec_(std::move(spec)),
        ts_(std::move(ts)),
        ds_(std::move(ds)),
        cache_path_(std::move(cache_path)),
        cache_key_(cache_key),
        topo_(topo),
        cluster_(cluster) {}

  // The step costs (from the cache when it has them) and, unless its cost is cached, the full
  // job's step, prepared for the resources of the GPUs it models.
  std::vector<uint8_t> prepare(sim::Simulation& sim, const topo::Topology& topology, const topo::GpuSpec& gpu,
                               const topo::HardwareProfile& profile, const JobContext& ctx) override {
    set_up_costs(sim.random().seed());
    if (costs_->has(0)) return {};
    t0_ = std::chrono::steady_clock::now();
    step_ = std::make_unique<TrainingStep>(topology, gpu, profile, ts_ ? *ts_ : ds_->island, ctx.trace_ranks);
    return step_->modelled_gpus();
  }
  void start(topo::ClusterResources& res, const JobContext& ctx) override {
    SIM_ASSERT(costs_ != nullptr, "Job::start() before prepare()");
    ctx_ = ctx;
    // The full job's step runs in the scenario's own simulation (traced when asked), unless cached.
    if (step_) {
      step_->attach(res);
      step_->start();
    }
  }

  std::unique_ptr<JobResult> finish(const sim::RunResult& run) override {
    std::string problem;
    if (step_) {
      StepResult r = step_->finish(run);
      step_.reset();
      const double cpu = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
      if (r.outcome != StepOutcome::kCompleted) {
        problem = "the job's step did not complete, so the campaign cannot run: " + r.report;
        return std::make_unique<CampaignResult>(spec_, CampaignSummary{}, std::nullopt, "", 0, 0, problem);
      }
      costs_->put(0, StepCost{r.step_time_s, r.tokens_per_step}, cpu, r);
    }
    if (ds_ && spec_.policy == CampaignPolicy::kIslands && spec_.job.outer_sync_s <= 0) {
      // The outer synchronisation of a round, from the DiLoCo timeline on the WAN.
      StepResult island;
      island.step_time_s = costs_->step(0).seconds;
      island.tokens_per_step = costs_->step(0).tokens;
      DilocoResult d = diloco_after_island_step(*ds_, island, seed_);
      spec_.job.outer_sync_s = d.diloco.fragment_sync_time_s * static_cast<double>(ds_->config.sync.fragments);
    }
    const int64_t trials = ctx_.trials > 0 ? ctx_.trials : spec_.trials;
    const uint64_t seed = seed_;
    const std::vector<double> intervals =
        spec_.checkpoint.sweep_requested() ? sweep_intervals(spec_, *costs_) : std::vector<double>{};
    // Checked again now that the sweep's intervals are known (binding counted one at least).
    check_trials_memory(trials_at_, trials, !intervals.empty(), static_cast<int64_t>(intervals.size()), memory_limit_);
    const int64_t total = trials * static_cast<int64_t>(1 + intervals.size());
    std::function<void(int64_t)> progress, sweep_progress;
    if (ctx_.progress) {
      progress = [this, total](int64_t done) { ctx_.progress(done, total); };
      sweep_progress = [this, total, trials](int64_t done) { ctx_.progress(trials + done, total); };
    }
    CampaignSummary summary = run_campaign(spec_, *costs_, trials, seed, ctx_.threads, progress, ctx_.distribute);
    std::optional<IntervalSweep> sweep;
    if (!intervals.empty())
      sweep = sweep_checkpoint_interval(spec_, *costs_, intervals, trials, seed, ctx_.threads, sweep_progress,
                                        ctx_.distribute);
    std::string note;
    appendf(note, "step simulations: %lld run (%.2f s of wall time), %lld read from the step cache%s%s",
            static_cast<long long>(costs_->simulated()), costs_->simulation_s(),
            static_cast<long long>(costs_->from_cache()), cache_path_.empty() ? "" : " ",
            cache_path_.empty() ? " (no step_cache file)" : cache_path_.c_str());
    if (const std::string fid = costs_->fidelities(); !fid.empty()) appendf(note, "\n  fidelity: %s", fid.c_str());
    if (!costs_->problem().empty()) problem = costs_->problem();
    return std::make_unique<CampaignResult>(spec_, std::move(summary), std::move(sweep), note, costs_->simulated(),
                                            costs_->from_cache(), problem, costs_->fidelity_counts());
  }

 private:
  std::string trials_at_;  // where the trials were given, for check_trials_memory
  uint64_t memory_limit_ = 0;
  CampaignSpec spec_;
  std::optional<TrainingSettings> ts_;
  std::optional<DilocoSettings> ds_;
  std::string cache_path_;
  uint64_t cache_key_;
  const topo::Topology& topo_;
  const topo::ClusterConfig& cluster_;
  JobContext ctx_;
  std::unique_ptr<SimulatedStepCosts> costs_;
  std::unique_ptr<TrainingStep> step_;  // the full job's, unless its cost is cached
  void set_up_costs(uint64_t seed) {
    costs_ = std::make_unique<SimulatedStepCosts>(topo_, cluster_, seed);
    if (ts_) costs_->set_training(&*ts_);
    if (ds_) costs_->set_diloco(&*ds_);
    costs_->set_cache(cache_path_, sim::splitmix64(cache_key_ ^ seed));
    seed_ = seed;
  }
  std::chrono::steady_clock::time_point t0_;
  uint64_t seed_ = 1;
};

}  // namespace

std::unique_ptr<Job> bind_campaign_job(const sim::ConfigNode& w, const BindContext& ctx) {
  ctx.refuse_failures("campaign");
  const topo::ClusterConfig& cluster = ctx.cluster;
  const sim::ConfigNode job = w.child("job");
  if (!job.is_map()) job.fail("the job the campaign runs: {kind: training | diloco, ...}");
  const std::string kind = job.get_enum("kind", {"training", "diloco"});
  CampaignDefaults d;
  d.gpus_per_node = cluster.spec.gpus_per_node;
  std::optional<TrainingSettings> ts;
  std::optional<DilocoSettings> ds;
  const TrainingJob* tj = nullptr;
  if (kind == "training") {
    ts = bind_training(job, cluster.gpu, cluster.job_gpus(), ctx.memory_limit, spare_nodes(cluster));
    tj = &ts->job;
  } else {
    ds = bind_diloco(job, cluster.gpu, cluster.job_gpus(), ctx.memory_limit, spare_nodes(cluster));
    tj = &ds->island.job;
    d.diloco = true;
    d.islands = ds->config.islands;
    d.inner_steps_per_round = ds->config.inner_steps;
  }
  d.job_nodes = static_cast<int64_t>(cluster.spec.nodes - cluster.spare_nodes);
  d.spare_nodes = static_cast<int64_t>(cluster.spare_nodes);
  const Dim axis = replica_axis(*tj);
  d.dp_replicas = axis == Dim::kCount ? 1 : (axis == Dim::kDp ? tj->dp : tj->dp_outer);
  // Which replicas a failed node takes down follows parallelism.order: the replicas of the ranks
  // on its GPUs (the campaign's step runs rank r on GPU r).
  d.replicas_by_node = replicas_by_node(*tj, static_cast<uint32_t>(d.gpus_per_node));
  SIM_ASSERT(static_cast<int64_t>(d.replicas_by_node.size()) == d.job_nodes,
             "campaign: the job's ranks do not fill its nodes");
  // Reported in the JSON: the nodes replica 0 has ranks on.
  d.nodes_per_replica = 0;
  for (const std::vector<int32_t>& on_node : d.replicas_by_node)
    d.nodes_per_replica += on_node.front() == 0 ? 1 : 0;
  // A checkpoint holds the weights and the optimizer state (fp32 master weights, Adam's moments):
  // AdamBytes param + optimizer bytes per parameter, 2 + 12 = 14 by default (gradients are not saved).
  d.checkpoint_bytes = static_cast<double>(count_params(tj->model).total) * (tj->adam.param + tj->adam.optimizer);
  CampaignSpec spec = bind_campaign(w, d);
  // `clustersim faults --trials N` sets workload.trials, so that this names --trials.
  const std::string trials_at = w.has("trials") ? w.child("trials").where() : w.where() + ".trials";
  check_trials_memory(trials_at, spec.trials, spec.checkpoint.sweep_requested(), -1, ctx.memory_limit);
  std::string cache = w.get_string("step_cache", "");
  if (!cache.empty()) {
    std::ofstream probe(cache, std::ios::app);
    if (!probe) w.child("step_cache").fail("cannot open '" + cache + "' to append step times");
  }
  // Cached step times belong to this cluster and job (and the seed, mixed in at start).
  const uint64_t key =
      sim::hash_name(std::string(kStepModelVersion) + '\0' + ctx.cluster_yaml + '\0' + job.resolved_yaml());
  return std::make_unique<CampaignJob>(std::move(spec), std::move(ts), std::move(ds), cache, key, ctx.topology,
                                       cluster, trials_at, ctx.memory_limit);
}

}  // namespace wl
