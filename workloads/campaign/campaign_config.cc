#include "workloads/campaign/campaign_config.h"

#include <algorithm>
#include <string>
#include <vector>

#include "sim/error.h"

namespace wl {

namespace {

constexpr double kMaxRatePer1000 = 1e9;  // a sanity bound: a million failures per node-day

std::vector<std::string> category_names() {
  std::vector<std::string> v;
  for (std::string_view n : failure_category_names()) v.emplace_back(n);
  return v;
}

double positive_duration_s(const sim::ConfigNode& n, std::string_view key, double def_s) {
  const double v = n.get_duration(key, sim::Time::from_seconds(def_s)).seconds();
  if (!(v > 0)) n.child(key).fail("must be > 0");
  return v;
}
double duration_s(const sim::ConfigNode& n, std::string_view key, double def_s) {
  return n.get_duration(key, sim::Time::from_seconds(def_s)).seconds();
}
double positive_bandwidth(const sim::ConfigNode& n, std::string_view key, double def) {
  const double v = n.get_bandwidth(key, def);
  if (!(v > 0)) n.child(key).fail("must be > 0");
  return v;
}

// One entry of failures.processes; `base` is the profile's entry of the same name, if any. An
// event takes `nodes` nodes of the job's `job_nodes` (per island for `islands`): more than the job
// has is refused (the model would silently take the whole job).
FailureProcess bind_process(const sim::ConfigNode& e, const FailureProcess* base, int64_t job_nodes, bool islands) {
  FailureProcess p = base ? *base : FailureProcess{};
  p.name = e.get_string("name");
  const bool has_rate = e.has("rate_per_1000_node_days"), has_mtbf = e.has("mtbf_per_node");
  if (has_rate && has_mtbf) e.child("mtbf_per_node").fail("give rate_per_1000_node_days or mtbf_per_node, not both");
  if (has_rate) {
    p.rate_per_node_s = rate_from_per_1000_node_days(e.get_double_in("rate_per_1000_node_days", 0, kMaxRatePer1000));
  } else if (has_mtbf) {
    const double mtbf = e.get_duration("mtbf_per_node").seconds();
    if (!(mtbf > 0)) e.child("mtbf_per_node").fail("must be > 0");
    p.rate_per_node_s = 1.0 / mtbf;
  } else if (!base) {
    e.fail("process \"" + p.name + "\" needs rate_per_1000_node_days or mtbf_per_node");
  }
  if (e.has("category") || !base) p.category = *parse_failure_category(e.get_enum("category", category_names()));
  const std::string dist = e.get_enum("distribution", {"exponential", "weibull"},
                                      p.distribution == FailureDistribution::kWeibull ? "weibull" : "exponential");
  p.distribution = dist == "weibull" ? FailureDistribution::kWeibull : FailureDistribution::kExponential;
  if (p.distribution == FailureDistribution::kWeibull) {
    if (!e.has("shape") && !(base && base->distribution == FailureDistribution::kWeibull))
      e.fail("a Weibull process needs shape (k > 0)");
    p.weibull_shape = e.get_double("shape", p.weibull_shape);
    if (!(p.weibull_shape > 0)) e.child("shape").fail("the Weibull shape must be > 0");
    if (p.weibull_shape < 0.05) e.child("shape").fail("the Weibull shape must be >= 0.05 (Gamma(1 + 1/k) overflows)");
  } else if (e.has("shape")) {
    e.child("shape").fail("shape is for distribution: weibull");
  }
  p.nodes = e.get_int_in("nodes", 1, int64_t{1} << 30, p.nodes);
  if (p.nodes > job_nodes)
    (e.has("nodes") ? e.child("nodes") : e)
        .fail(std::to_string(p.nodes) + " nodes per event, more than the job's " + std::to_string(job_nodes) +
              (job_nodes == 1 ? " node" : " nodes") + (islands ? " per island" : "") + ": an event takes at most " +
              (islands ? "an island" : "the whole job") + " (nodes: " + std::to_string(job_nodes) + ")");
  p.replace = e.get_bool("replace", p.replace);
  const char* m = p.manifests == Manifestation::kCrash  ? "crash"
                  : p.manifests == Manifestation::kHang ? "hang"
                                                        : "planned";
  const std::string mf = e.get_enum("manifests", {"crash", "hang", "planned"}, m);
  p.manifests = mf == "crash" ? Manifestation::kCrash : mf == "hang" ? Manifestation::kHang : Manifestation::kPlanned;
  return p;
}

FailureModel bind_failures(const sim::ConfigNode& f, int64_t job_nodes, bool islands) {
  FailureModel model;
  const bool planned = f.get_bool("planned", false);
  if (f.has("profile")) {
    const std::string name = f.get_enum("profile", failure_profile_names());
    model = *failure_profile(name, planned);
  } else if (!f.has("processes")) {
    std::string names;
    for (const std::string& n : failure_profile_names()) names += (names.empty() ? "" : ", ") + n;
    f.fail("give a profile (" + names + ") or a list of processes");
  }
  if (auto procs = f.find("processes")) {
    if (!procs->is_sequence()) procs->fail("must be a list of processes");
    for (size_t i = 0; i < procs->size(); ++i) {
      const sim::ConfigNode e = procs->at(i);
      if (!e.is_map()) e.fail("must be a map (name, category, rate_per_1000_node_days, ...)");
      const std::string name = e.get_string("name");
      auto it = std::find_if(model.processes.begin(), model.processes.end(),
                             [&](const FailureProcess& p) { return p.name == name; });
      if (it != model.processes.end()) {
        *it = bind_process(e, &*it, job_nodes, islands);
      } else {
        model.processes.push_back(bind_process(e, nullptr, job_nodes, islands));
      }
    }
  }
  if (model.processes.empty()) f.fail("no failure processes");
  if (model.processes.size() > 65535) f.child("processes").fail("at most 65535 processes");
  return model;
}

}  // namespace

CampaignSpec bind_campaign(const sim::ConfigNode& c, const CampaignDefaults& d) {
  CampaignSpec s;
  s.job = d;
  if (d.job_nodes < 1) c.fail("the job has no nodes");
  s.trials = c.get_int_in("trials", 1, int64_t{1} << 30, 1000);

  const bool has_duration = c.has("duration"), has_work = c.has("work_steps");
  if (has_duration && has_work) c.child("work_steps").fail("give duration or work_steps, not both");
  if (!has_duration && !has_work) c.fail("give duration (a fixed wall time) or work_steps (a fixed amount of work)");
  if (has_duration) {
    s.duration_s = c.get_duration("duration").seconds();
    if (!(s.duration_s > 0)) c.child("duration").fail("must be > 0");
  } else {
    s.work_steps = c.get_int_in("work_steps", 1, int64_t{1} << 50);
  }

  const std::string policy = c.get_enum("policy", {"restart", "hot_spares", "elastic", "islands"}, "hot_spares");
  s.policy = policy == "restart"      ? CampaignPolicy::kRestart
             : policy == "hot_spares" ? CampaignPolicy::kHotSpares
             : policy == "elastic"    ? CampaignPolicy::kElastic
                                      : CampaignPolicy::kIslands;
  if (s.policy == CampaignPolicy::kIslands) {
    if (!d.diloco)
      c.child("policy").fail("policy islands needs a DiLoCo job (workload kind diloco); this job is not one");
    if (d.islands < 1 || d.inner_steps_per_round < 1) c.child("policy").fail("the DiLoCo job has no islands or rounds");
  }
  // The cluster's spare nodes (cluster.spare_nodes) are the hot spare pool unless `spares` is
  // given; restart has none (the cluster's spare nodes then stay idle).
  const bool restart = s.policy == CampaignPolicy::kRestart;
  s.spares = c.get_int_in("spares", 0, int64_t{1} << 40, restart ? 0 : d.spare_nodes);
  if (!restart && c.has("spares") && d.spare_nodes > 0 && s.spares != d.spare_nodes)
    c.child("spares").fail("the cluster already sets aside " + std::to_string(d.spare_nodes) +
                           " spare nodes (cluster.spare_nodes), which are the hot spare pool; give the pool once");
  if (s.spares > d.job_nodes)
    c.child("spares").fail("more spares (" + std::to_string(s.spares) + ") than the job's " +
                           std::to_string(d.job_nodes) + " nodes" +
                           (s.policy == CampaignPolicy::kIslands ? " per island" : ""));
  if (s.policy == CampaignPolicy::kRestart && s.spares > 0)
    c.child("spares").fail("policy restart waits for repairs and has no spares; use policy hot_spares");

  s.failures = bind_failures(c.child("failures"), d.job_nodes, s.policy == CampaignPolicy::kIslands);

  const sim::ConfigNode det = c.child_map("detection");
  s.detect_crash_s = duration_s(det, "crash", kDefaultCrashDetectionS);
  // As the step's failures.watchdog (workloads/training/recovery.cc): a timeout of 0 would abort
  // every collective, hung or not, the moment it is issued.
  s.detect_hang_s = duration_s(det, "watchdog", kDefaultWatchdogS);
  if (!(s.detect_hang_s > 0)) det.child("watchdog").fail("the watchdog timeout must be positive");
  const sim::ConfigNode rs = c.child_map("restart");
  s.teardown_s = duration_s(rs, "teardown", kDefaultTeardownS);
  s.init_s = duration_s(rs, "init", kDefaultInitS);
  const sim::ConfigNode rp = c.child_map("repair");
  s.repair_mean_s = duration_s(rp, "mean", kDefaultRepairS);
  s.repair = rp.get_enum("distribution", {"exponential", "fixed"}, "exponential") == "fixed"
                 ? RepairDistribution::kFixed
                 : RepairDistribution::kExponential;

  const sim::ConfigNode ck = c.child_map("checkpoint");
  CheckpointSpec& k = s.checkpoint;
  if (ck.has("every_steps") && ck.has("interval")) ck.child("interval").fail("give every_steps or interval, not both");
  if (ck.has("every_steps")) {
    k.every_steps = ck.get_int_in("every_steps", 1, int64_t{1} << 50);
  } else {
    k.interval_s = positive_duration_s(ck, "interval", 1800);
  }
  k.size_bytes = ck.get_bytes("size", d.checkpoint_bytes);
  k.write_bandwidth_per_node_Bps = positive_bandwidth(ck, "write_bandwidth_per_node", kDefaultWriteBandwidthPerNode);
  k.read_bandwidth_per_node_Bps = positive_bandwidth(ck, "read_bandwidth_per_node", kDefaultReadBandwidthPerNode);
  k.mode = ck.get_enum("mode", {"sync", "async"}, "sync") == "async" ? CheckpointMode::kAsync : CheckpointMode::kSync;
  k.snapshot_bandwidth_Bps = positive_bandwidth(ck, "snapshot_bandwidth", kDefaultSnapshotBandwidth);
  k.in_memory = ck.get_bool("in_memory", false);
  k.peer_bandwidth_Bps = positive_bandwidth(ck, "peer_bandwidth", kDefaultPeerBandwidth);
  if (auto sw = ck.find("sweep")) {
    if (sw->is_scalar()) {
      if (sw->as_string() != "auto") sw->fail("must be auto or a list of intervals ([10min, 20min, ...])");
      k.sweep_auto = true;
    } else if (sw->is_sequence()) {
      if (sw->size() == 0) sw->fail("needs at least one interval");
      for (size_t i = 0; i < sw->size(); ++i) {
        const sim::ConfigNode e = sw->at(i);
        const double v = e.as_duration().seconds();
        if (!(v > 0)) e.fail("must be > 0");
        k.sweep_intervals_s.push_back(v);
      }
    } else {
      sw->fail("must be auto or a list of intervals ([10min, 20min, ...])");
    }
  }

  const sim::ConfigNode el = c.child_map("elastic");
  s.reconfigure_s = duration_s(el, "reconfigure", kDefaultReconfigureS);
  s.rejoin = el.get_enum("rejoin", {"immediately", "at_checkpoint"}, "immediately") == "at_checkpoint"
                 ? RejoinRule::kAtCheckpoint
                 : RejoinRule::kImmediately;
  s.min_replicas = el.get_int_in("min_replicas", 1, int64_t{1} << 40, 1);
  if (s.policy == CampaignPolicy::kElastic) {
    if (d.dp_replicas < 2)
      c.child("policy").fail(
          "policy elastic drops whole data-parallel replicas and this job has fewer than 2 (it needs "
          "data_parallel: ddp with dp >= 2, or hsdp with dp_outer >= 2; ZeRO and FSDP shard the state over every "
          "data-parallel rank)");
    // Without the replicas of each node (a job kind that gives none), they must tile the nodes.
    if (d.replicas_by_node.empty() && d.dp_replicas % d.job_nodes != 0 && d.job_nodes % d.dp_replicas != 0)
      c.child("policy").fail("policy elastic needs the " + std::to_string(d.dp_replicas) +
                             " data-parallel replicas to tile the " + std::to_string(d.job_nodes) + " nodes");
    if (s.min_replicas > d.dp_replicas)
      el.child("min_replicas").fail("more than the job's " + std::to_string(d.dp_replicas) + " replicas");
  }

  if (auto is = c.find("islands")) {
    const std::string outer = is->get_enum("outer", {"wait", "proceed"}, "wait");
    s.outer = outer == "proceed" ? OuterRule::kProceed : OuterRule::kWait;
    s.job.outer_sync_s = duration_s(*is, "outer_sync", d.outer_sync_s);
  } else if (s.policy == CampaignPolicy::kIslands) {
    const sim::ConfigNode i2 = c.child_map("islands");
    s.outer = i2.get_enum("outer", {"wait", "proceed"}, "wait") == "proceed" ? OuterRule::kProceed : OuterRule::kWait;
  }
  try {
    validate_campaign(s);
  } catch (const sim::ConfigError& e) {
    c.fail(e.what());
  }
  return s;
}

}  // namespace wl
