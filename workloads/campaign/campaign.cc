// workloads/campaign/campaign.cc: the campaign simulator (see campaign.h for the model).
//
// One trial is a set of lanes: one for a single job, one per island for DiLoCo. A lane holds its
// nodes (positions, the spare pool, nodes in repair), its failure clocks and its job state, and
// advances by events in time order: a failure, a repaired node coming back (only while positions
// are empty), the end of a recovery stage, the step that completes the lane's target, an elastic
// replica rejoining. Between events the job runs a periodic schedule (steps, then a checkpoint
// stall, ...) evaluated in closed form by Lane::advance, so a trial costs O(events).
#include "workloads/campaign/campaign.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sim/error.h"
#include "sim/parallel.h"
#include "sim/random.h"
#include "sim/units.h"
#include "workloads/job/format.h"

namespace wl {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// A trial that needs more than a century of wall time for its work never makes progress.
constexpr double kMaxWallS = 100.0 * 365.0 * kSecondsPerDay;
constexpr const char* kNoProgress =
    "campaign: a trial did not finish its work within a century of wall time (failures outpace checkpoints and "
    "restarts)";

// Whole steps in x step lengths, forgiving rounding noise of the closed forms (an event computed
// to fall exactly at a step's end must count that step).
int64_t floor_steps(double x) { return x <= 0 ? 0 : static_cast<int64_t>(std::floor(x + 1e-7)); }

// Step costs by replicas down, asked of the source once each and shared by all trials.
class CostCache {
 public:
  CostCache(StepCostSource& source, int64_t max_down)
      : source_(source),
        costs_(static_cast<size_t>(max_down) + 1),
        ready_(new std::atomic<bool>[static_cast<size_t>(max_down) + 1]) {
    for (size_t i = 0; i < costs_.size(); ++i) ready_[i].store(false);
  }
  const StepCost& get(int64_t down) {
    const auto i = static_cast<size_t>(down);
    SIM_ASSERT(i < costs_.size(), "campaign: replicas down out of range");
    if (ready_[i].load(std::memory_order_acquire)) return costs_[i];
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready_[i].load(std::memory_order_relaxed)) {
      StepCost c = source_.step(down);
      // {0 s, 0 tokens}: the job cannot run in this state (elastic: the job restarts in full
      // instead of going on with that many replicas dropped).
      const bool cannot_run = c.seconds == 0 && c.tokens == 0 && down > 0;
      if (!cannot_run &&
          (!(c.seconds > 0) || !std::isfinite(c.seconds) || !(c.tokens >= 0) || !std::isfinite(c.tokens)))
        throw sim::UserError("campaign: the step with " + std::to_string(down) + " replicas down costs " +
                             std::to_string(c.seconds) + " s for " + std::to_string(c.tokens) +
                             " tokens; need a finite time > 0 and tokens >= 0");
      costs_[i] = c;
      ready_[i].store(true, std::memory_order_release);
    }
    return costs_[i];
  }
  bool runnable(int64_t down) { return get(down).seconds > 0; }

 private:
  StepCostSource& source_;
  std::vector<StepCost> costs_;
  std::unique_ptr<std::atomic<bool>[]> ready_;
  std::mutex mutex_;
};

// What every trial of a run shares: the spec resolved against the full job's step.
struct Plan {
  const CampaignSpec* spec = nullptr;
  CostCache* costs = nullptr;
  int64_t n = 0;      // positions per lane (job nodes; one island's for islands)
  int64_t lanes = 1;  // islands
  int64_t k = 1;      // steps per checkpoint
  double snap = 0;    // stall per checkpoint before any wait (sync: the write; async: the snapshot)
  double bg = 0;      // background write after the snapshot (async)
  double peer = 0;    // in-memory peer copy after the snapshot (0 without in_memory)
  double write_s = 0, load_storage_s = 0, load_peer_s = 0;
  double t_end = kInf;  // duration
  int64_t work = 0;     // steps (per lane), 0 for a duration
  bool elastic = false, islands = false, in_memory = false;
  // Failure processes: exponential ones superposed (cumulative rates for the choice), Weibull
  // ones with their scale.
  double exp_rate = 0;  // per node per second
  std::vector<double> exp_cum;
  std::vector<uint16_t> exp_proc;
  std::vector<uint16_t> weibull_proc;
  std::vector<double> weibull_scale;  // by process index
  // Elastic units: the replicas that have ranks on the same set of nodes, which fail, drop and
  // rejoin together (from CampaignDefaults::replicas_by_node). Unit u holds unit_replicas[u]
  // replicas with ranks on the nodes unit_nodes[u]; node s holds ranks of the units node_units[s].
  // Without elastic, one unit of every node.
  int64_t units = 1;
  std::vector<int64_t> unit_replicas;
  std::vector<std::vector<int32_t>> unit_nodes, node_units;
  StepCost full;
};

struct Progress {
  int64_t steps = 0;
  double step_s = 0, tokens = 0;
};

enum class Phase : uint8_t { kRunning, kHold, kDown };
enum class Stage : uint8_t { kPlanned, kDetect, kTeardown, kWait, kRestart, kReconfigure };
enum Bucket : uint8_t { kDetection, kRestartB, kWaiting, kCheckpointB, kIslandWait, kOuterSync, kNumBuckets };
enum class Stop : uint8_t { kTime, kHold, kRoundFailed };

struct WClock {
  double t;
  int32_t slot;
  uint16_t proc;
  uint32_t gen;
};
struct WLater {
  bool operator()(const WClock& a, const WClock& b) const { return a.t > b.t; }
};
struct Ready {
  double t;
  int32_t unit;
  uint32_t epoch;
};
struct ReadyLater {
  bool operator()(const Ready& a, const Ready& b) const { return a.t > b.t; }
};

class Lane {
 public:
  Lane(const Plan& plan, const sim::RandomStreams& rs, const std::string& suffix)
      : plan_(plan),
        spec_(*plan.spec),
        rng_fail_(rs.stream("campaign.failures" + suffix)),
        rng_pick_(rs.stream("campaign.victims" + suffix)),
        rng_repair_(rs.stream("campaign.repairs" + suffix)) {
    const auto n = static_cast<size_t>(plan.n);
    installed_.assign(n, 1);
    gen_.assign(n, 0);
    installed_count_ = plan.n;
    pool_ = spec_.spares;
    unit_active_.assign(static_cast<size_t>(plan.units), 1);
    unit_empty_.assign(static_cast<size_t>(plan.units), 0);
    unit_epoch_.assign(static_cast<size_t>(plan.units), 0);
    node_live_units_.assign(n, 0);
    for (size_t s = 0; s < n; ++s) node_live_units_[s] = static_cast<int32_t>(plan.node_units[s].size());
    exposed_ = plan.n;
    hz_rate_ = plan.exp_rate * static_cast<double>(exposed_);
    hz_left_ = exponential1(rng_fail_);
    if (!plan.weibull_proc.empty()) {
      wheap_.reserve(n * plan.weibull_proc.size());
      for (int64_t s = 0; s < plan.n; ++s)
        for (uint16_t p : plan.weibull_proc) wheap_.push_back(weibull_clock(0, static_cast<int32_t>(s), p));
      std::make_heap(wheap_.begin(), wheap_.end(), WLater{});
    }
    mem_valid_ = plan.in_memory;
    start_segment(0, 0);
  }

  double now() const { return t_; }
  bool holding() const { return phase_ == Phase::kHold; }
  bool round_failed() const { return round_failed_; }
  void set_hold_bucket(Bucket b) { hold_bucket_ = b; }
  void set_target(int64_t steps) { target_ = steps; }

  // Processes events in time order until `stop`; with stop_at_hold it returns as soon as the lane
  // enters Hold (its target reached, or recovered from a dropped round), with stop_at_round_failure
  // as soon as the lane's round fails (islands, proceed).
  Stop run(double stop, bool stop_at_hold, bool stop_at_round_failure) {
    SIM_ASSERT(stop >= t_, "campaign: a lane cannot go back in time");
    for (;;) {
      if (stop_at_hold && phase_ == Phase::kHold) return Stop::kHold;
      if (stop_at_round_failure && round_failed_) return Stop::kRoundFailed;
      const double tf = next_failure();
      const double tn = next_node_event();
      const double tr = next_rejoin();
      double tg = kInf;
      if (phase_ == Phase::kRunning) {
        if (target_ > 0) tg = finish_time(target_);
      } else if (phase_ == Phase::kDown) {
        tg = stage_end_;
      }
      if (tg <= tf && tg <= tn && tg <= tr && tg <= stop) {
        on_goal(tg);
      } else if (tn <= tf && tn <= tr && tn <= stop) {
        on_node_event(tn);
      } else if (tr <= tf && tr <= stop) {
        on_rejoin(tr);
      } else if (tf < stop) {
        on_failure(tf);
      } else {
        if (phase_ != Phase::kRunning) account_to(stop);
        t_ = stop;
        return Stop::kTime;
      }
    }
  }

  // Islands: a new round at R (the lane is at R) with `steps` inner steps; the synced parameters
  // are the recovery point.
  void begin_round(double r, int64_t steps) {
    SIM_ASSERT(t_ == r, "campaign: a round must start at the lane's time");
    durable_ = mem_ = round_start_ = cur_;
    mem_valid_ = plan_.in_memory;
    pend_.valid = false;
    round_failed_ = phase_ == Phase::kDown;
    target_ = cur_.steps + steps;
    if (phase_ == Phase::kHold) {
      account_to(r);
      phase_ = Phase::kRunning;
      start_segment(r, 0);
    }
  }
  // Islands: the round's work is in the sync at the lane's time; a failure from now on loses
  // none of it. A lane whose round failed (proceed) has its round's work dropped.
  void commit_round(bool dropped) {
    if (dropped) {
      ++out_.dropped_rounds;
      rollback_to(round_start_);
    }
    durable_ = mem_ = cur_;
    mem_valid_ = plan_.in_memory;
    pend_.valid = false;
  }
  // Proceed: this lane's round is dropped (it started down); after its recovery it holds.
  void set_drop_after_restart(bool v) { drop_after_restart_ = v; }
  // When a running lane completes its round's target if nothing interrupts it (else infinity).
  double planned_finish() const { return phase_ == Phase::kRunning ? finish_time(target_) : kInf; }
  // Proceed: the lane misses this round's sync. Its round's work is lost; it stops computing (or
  // finishes its recovery) and holds until the next round.
  void drop_round() {
    round_failed_ = true;
    drop_after_restart_ = true;
    if (phase_ == Phase::kRunning) {
      out_.recompute_s += advance(t_).partial;
      phase_ = Phase::kHold;
      acc_t_ = t_;
    }
    rollback_to(round_start_);
  }

  // Islands: the next time anything happens to a holding lane (a failure; a repaired node).
  double next_event() { return std::min(next_failure(), next_node_event()); }
  // Islands: the time from a round's start until its `steps` inner steps are done, with nothing
  // interrupting (the schedule of a fresh segment: checkpoint stalls every k steps).
  double round_compute_time(int64_t steps) const {
    const StepCost& c = plan_.costs->get(0);
    const int64_t k = plan_.k;
    if (steps <= k) return static_cast<double>(steps) * c.seconds;
    const double ks = static_cast<double>(k) * c.seconds;
    const double p = ks + std::max(0.0, std::max(plan_.bg, plan_.peer) - ks) + plan_.snap;
    const int64_t m2 = steps - k, b = (m2 + k - 1) / k, q = m2 - (b - 1) * k;
    return ks + plan_.snap + static_cast<double>(b - 1) * p + static_cast<double>(q) * c.seconds;
  }
  // Islands: n rounds of `steps` steps in which nothing happens to any island, in one go: the
  // holding lane gains their steps, checkpoint stalls and outer syncs and ends holding at t_ +
  // n x round_s, its work committed (O(1) instead of O(n)).
  void skip_rounds(int64_t n, int64_t steps, double round_s, double sync_s) {
    SIM_ASSERT(phase_ == Phase::kHold, "campaign: only a holding island skips rounds");
    const StepCost& c = plan_.costs->get(0);
    const double nd = static_cast<double>(n);
    const int64_t add = n * steps;
    cur_.steps += add;
    cur_.step_s += static_cast<double>(add) * c.seconds;
    cur_.tokens += static_cast<double>(add) * c.tokens;
    bucket_[kCheckpointB] += nd * std::max(0.0, round_s - sync_s - static_cast<double>(steps) * c.seconds);
    bucket_[kOuterSync] += nd * sync_s;
    t_ = acc_t_ = t_ + nd * round_s;
    durable_ = mem_ = round_start_ = cur_;
    mem_valid_ = plan_.in_memory;
    pend_.valid = false;
  }

  // Closes the lane at time t and fills its result.
  TrialResult finish(double t) {
    SIM_ASSERT(t >= t_, "campaign: finish before the lane's time");
    double extra = 0;
    if (phase_ == Phase::kRunning) {
      extra = advance(t).partial;  // the step in progress counts: the job goes on after the window
      t_ = t;
    } else {
      account_to(t);
      t_ = t;
    }
    out_.wall_s = t;
    out_.productive_s = cur_.step_s + extra;
    out_.useful_tokens = cur_.tokens;
    out_.steps = static_cast<double>(cur_.steps);
    out_.detection_s = bucket_[kDetection];
    out_.restart_s = bucket_[kRestartB];
    out_.waiting_s = bucket_[kWaiting];
    out_.checkpoint_s = bucket_[kCheckpointB];
    out_.island_wait_s = bucket_[kIslandWait];
    out_.outer_sync_s = bucket_[kOuterSync];
    return out_;
  }

 private:
  // --- nodes and failure clocks -------------------------------------------------------------

  const std::vector<int32_t>& units_of(int64_t slot) const { return plan_.node_units[static_cast<size_t>(slot)]; }
  // A node fails while it is in place and holds ranks of a unit that runs.
  bool exposed(int64_t slot) const {
    const auto s = static_cast<size_t>(slot);
    return installed_[s] && node_live_units_[s] > 0;
  }

  WClock weibull_clock(double t, int32_t slot, uint16_t proc) {
    const double dt = weibull(rng_fail_, spec_.failures.processes[proc].weibull_shape, plan_.weibull_scale[proc]);
    return WClock{t + dt, slot, proc, gen_[static_cast<size_t>(slot)]};
  }
  void push_clock(const WClock& c) {
    wheap_.push_back(c);
    std::push_heap(wheap_.begin(), wheap_.end(), WLater{});
  }
  double next_weibull() {
    while (!wheap_.empty()) {
      const WClock& c = wheap_.front();
      if (c.gen == gen_[static_cast<size_t>(c.slot)] && installed_[static_cast<size_t>(c.slot)]) return c.t;
      std::pop_heap(wheap_.begin(), wheap_.end(), WLater{});
      wheap_.pop_back();
    }
    return kInf;
  }
  double next_exponential() const { return hz_rate_ > 0 ? hz_t_ + hz_left_ / hz_rate_ : kInf; }
  double next_failure() { return std::min(next_exponential(), next_weibull()); }

  // The exposed count changes at t: the hazard accumulated so far is spent from the threshold.
  void change_exposed(int64_t delta, double t) {
    hz_left_ = std::max(0.0, hz_left_ - (t - hz_t_) * hz_rate_);
    hz_t_ = t;
    exposed_ += delta;
    hz_rate_ = plan_.exp_rate * static_cast<double>(exposed_);
  }

  double repair_time() {
    return spec_.repair == RepairDistribution::kFixed ? spec_.repair_mean_s
                                                      : spec_.repair_mean_s * exponential1(rng_repair_);
  }

  void remove_node(int64_t slot, double t) {
    const auto s = static_cast<size_t>(slot);
    const bool was_exposed = exposed(slot);
    installed_[s] = 0;
    ++gen_[s];
    --installed_count_;
    for (int32_t u : units_of(slot)) {
      ++unit_empty_[static_cast<size_t>(u)];
      // A dropped unit getting ready to rejoin loses that readiness: it starts over once the
      // node's replacement is in.
      if (!unit_active_[static_cast<size_t>(u)]) ++unit_epoch_[static_cast<size_t>(u)];
    }
    empties_.push_back(static_cast<int32_t>(slot));
    if (was_exposed) change_exposed(-1, t);
    repairs_.push_back(t + repair_time());
    std::push_heap(repairs_.begin(), repairs_.end(), std::greater<double>{});
  }

  void install(int64_t slot, double t) {
    const auto s = static_cast<size_t>(slot);
    installed_[s] = 1;
    ++installed_count_;
    if (node_live_units_[s] > 0) change_exposed(+1, t);
    for (uint16_t p : plan_.weibull_proc) push_clock(weibull_clock(t, static_cast<int32_t>(slot), p));
    for (int32_t i : units_of(slot)) {
      const auto u = static_cast<size_t>(i);
      --unit_empty_[u];
      if (plan_.elastic && !unit_active_[u] && unit_empty_[u] == 0) push_ready(t + spec_.init_s, u);
    }
  }

  // Repaired nodes back in the pool by t, then empty positions filled from it.
  void fill(double t) {
    while (!repairs_.empty() && repairs_.front() <= t) {
      std::pop_heap(repairs_.begin(), repairs_.end(), std::greater<double>{});
      repairs_.pop_back();
      ++pool_;
    }
    while (pool_ > 0 && !empties_.empty()) {
      const int32_t s = empties_.back();
      empties_.pop_back();
      --pool_;
      install(s, t);
    }
  }
  // A repaired node back while positions are empty (one already back is put in now).
  double next_node_event() const {
    return empties_.empty() || repairs_.empty() ? kInf : std::max(repairs_.front(), t_);
  }

  // --- elastic units -------------------------------------------------------------------------

  void push_ready(double t, size_t u) {
    ready_.push_back(Ready{t, static_cast<int32_t>(u), unit_epoch_[u]});
    std::push_heap(ready_.begin(), ready_.end(), ReadyLater{});
  }
  // A unit stops or starts running: its nodes that hold no other running unit go idle or back to
  // work (change_exposed is called even for no change, so that the hazard is settled at t alike).
  void drop_unit(size_t u, double t) {
    if (!unit_active_[u]) return;
    int64_t idle = 0;
    for (int32_t s : plan_.unit_nodes[u])
      if (--node_live_units_[static_cast<size_t>(s)] == 0) idle += installed_[static_cast<size_t>(s)];
    change_exposed(-idle, t);
    unit_active_[u] = 0;
    ++units_down_;
    replicas_down_of_units_ += plan_.unit_replicas[u];
    ++unit_epoch_[u];
    if (unit_empty_[u] == 0) push_ready(t + spec_.init_s, u);
  }
  void activate_unit(size_t u, double t) {
    if (unit_active_[u]) return;
    unit_active_[u] = 1;
    --units_down_;
    replicas_down_of_units_ -= plan_.unit_replicas[u];
    ++unit_epoch_[u];
    int64_t working = 0;
    for (int32_t s : plan_.unit_nodes[u])
      if (node_live_units_[static_cast<size_t>(s)]++ == 0) working += installed_[static_cast<size_t>(s)];
    change_exposed(working, t);
  }
  double next_ready() {
    while (!ready_.empty()) {
      const Ready& r = ready_.front();
      const auto u = static_cast<size_t>(r.unit);
      if (!unit_active_[u] && r.epoch == unit_epoch_[u] && unit_empty_[u] == 0) return r.t;
      std::pop_heap(ready_.begin(), ready_.end(), ReadyLater{});
      ready_.pop_back();
    }
    return kInf;
  }
  double next_rejoin() {
    if (!plan_.elastic || phase_ != Phase::kRunning || units_down_ == 0) return kInf;
    const double r = next_ready();
    if (r == kInf) return kInf;
    const double at = std::max(r, t_);
    return spec_.rejoin == RejoinRule::kImmediately ? at : next_checkpoint_start(at);
  }

  // --- the running schedule ------------------------------------------------------------------

  // A segment of running from t with j0 steps of the current checkpoint cycle done (j0 = k: a
  // checkpoint is due now): steps of s seconds, snapshot i starting at ts_i (ts_1 = A), the job
  // stalled sigma_i (the first one also waits for a write still in flight), then k steps.
  void start_segment(double t, int64_t j0) {
    const StepCost& c = plan_.costs->get(replicas_down_);
    SIM_ASSERT(c.seconds > 0, "campaign: a state with fewer replicas down than a runnable one cannot run");
    seg_t0_ = t;
    t_ = t;
    seg_j0_ = j0;
    seg_s_ = c.seconds;
    seg_tok_ = c.tokens;
    seg_base_ = cur_;
    const double ks = static_cast<double>(plan_.k) * seg_s_;
    seg_a_ = t + static_cast<double>(plan_.k - j0) * seg_s_;
    seg_sigma_ = std::max(0.0, std::max(plan_.bg, plan_.peer) - ks) + plan_.snap;
    double wait1 = 0;
    if (pend_.valid) {
      const double done = plan_.in_memory ? std::max(pend_.storage_at, pend_.mem_at) : pend_.storage_at;
      wait1 = std::max(0.0, done - seg_a_);
    }
    seg_sigma1_ = wait1 + plan_.snap;
    seg_p_ = ks + seg_sigma_;
    const double full_rate = plan_.full.tokens / plan_.full.seconds;
    seg_degraded_ = replicas_down_ > 0 && full_rate > 0 ? 1.0 - (seg_tok_ / seg_s_) / full_rate : 0.0;
  }

  Progress progress_after(int64_t steps) const {
    Progress p = seg_base_;
    p.steps += steps;
    p.step_s += static_cast<double>(steps) * seg_s_;
    p.tokens += static_cast<double>(steps) * seg_tok_;
    return p;
  }

  // When the lane's progress reaches `target` steps in this segment.
  double finish_time(int64_t target) const {
    const int64_t m = target - seg_base_.steps;
    if (m <= 0) return seg_t0_;
    const int64_t k = plan_.k, first = k - seg_j0_;
    if (m <= first) return seg_t0_ + static_cast<double>(m) * seg_s_;
    const int64_t m2 = m - first;
    const int64_t b = (m2 + k - 1) / k;
    const int64_t p = m2 - (b - 1) * k;
    return seg_a_ + seg_sigma1_ + static_cast<double>(b - 1) * seg_p_ + static_cast<double>(p) * seg_s_;
  }

  // The first snapshot start at or after x.
  double next_checkpoint_start(double x) const {
    if (x <= seg_a_) return seg_a_;
    const double first_block = seg_sigma1_ + static_cast<double>(plan_.k) * seg_s_;
    const double ts2 = seg_a_ + first_block;
    if (x <= ts2) return ts2;
    return ts2 + std::ceil((x - ts2) / seg_p_) * seg_p_;
  }

  struct Closed {
    int64_t j = 0;       // steps of the current cycle done (k: a checkpoint is due)
    double partial = 0;  // time into the interrupted step
  };

  // Closes the running segment at te: progress, checkpoints taken and made durable, stall time.
  Closed advance(double te) {
    const int64_t k = plan_.k, first = k - seg_j0_;
    const double s = seg_s_;
    Closed c;
    int64_t steps = 0, m = 0;  // m: the latest snapshot completed in the segment (0: none)
    double stall = 0, taken_m = 0;
    if (te < seg_a_) {
      steps = std::min(first, floor_steps((te - seg_t0_) / s));
      c.j = seg_j0_ + steps;
      c.partial = std::max(0.0, te - seg_t0_ - static_cast<double>(steps) * s);
    } else {
      const double y = te - seg_a_;
      const double first_block = seg_sigma1_ + static_cast<double>(k) * s;
      int64_t n = 1;
      double r = y;
      if (y >= first_block) {
        n = 2 + static_cast<int64_t>(std::floor((y - first_block) / seg_p_));
        r = y - first_block - static_cast<double>(n - 2) * seg_p_;
      }
      const double sig_n = n == 1 ? seg_sigma1_ : seg_sigma_;
      const double ts_n = n == 1 ? seg_a_ : seg_a_ + first_block + static_cast<double>(n - 2) * seg_p_;
      stall =
          (n >= 2 ? seg_sigma1_ + static_cast<double>(n - 2) * seg_sigma_ : 0.0) + std::min(std::max(r, 0.0), sig_n);
      steps = first + (n - 1) * k;
      if (r >= sig_n) {
        const int64_t q = std::min(k, floor_steps((r - sig_n) / s));
        steps += q;
        c.j = q;
        c.partial = std::max(0.0, r - sig_n - static_cast<double>(q) * s);
        m = n;
        taken_m = ts_n + sig_n;
      } else {
        c.j = k;  // the snapshot under way is abandoned; it is due again
        m = n - 1;
        if (m == 1) taken_m = seg_a_ + seg_sigma1_;
        if (m >= 2) taken_m = seg_a_ + first_block + static_cast<double>(m - 2) * seg_p_ + seg_sigma_;
      }
    }
    if (m >= 1) {
      // Snapshot m completed, so everything before it is durable (a snapshot waits for the write
      // before it).
      if (pend_.valid) make_durable(pend_.p);
      if (m >= 2) make_durable(progress_after(first + (m - 2) * k));
      pend_.valid = true;
      pend_.p = progress_after(first + (m - 1) * k);
      pend_.storage_at = taken_m + plan_.bg;
      pend_.mem_at = taken_m + plan_.peer;
    }
    cur_ = progress_after(steps);
    promote(te);
    bucket_[kCheckpointB] += stall;
    if (replicas_down_ > 0) {
      out_.degraded_wall_s += te - seg_t0_;
      out_.degraded_loss_s += (te - seg_t0_) * seg_degraded_;
    }
    t_ = te;
    return c;
  }

  void make_durable(const Progress& p) {
    if (p.steps >= durable_.steps) durable_ = p;
    if (plan_.in_memory && (!mem_valid_ || p.steps >= mem_.steps)) {
      mem_ = p;
      mem_valid_ = true;
    }
  }
  // The checkpoint in flight, as far as it got by t.
  void promote(double t) {
    if (!pend_.valid) return;
    const bool mem_done = !plan_.in_memory || t >= pend_.mem_at;
    if (plan_.in_memory && t >= pend_.mem_at && (!mem_valid_ || pend_.p.steps >= mem_.steps)) {
      mem_ = pend_.p;
      mem_valid_ = true;
    }
    if (t >= pend_.storage_at && pend_.p.steps >= durable_.steps) durable_ = pend_.p;
    if (mem_done && t >= pend_.storage_at) pend_.valid = false;
  }

  // --- accounting ----------------------------------------------------------------------------

  Bucket stage_bucket() const {
    switch (stage_) {
      case Stage::kPlanned:
        return kCheckpointB;
      case Stage::kDetect:
        return kDetection;
      case Stage::kWait:
        return kWaiting;
      case Stage::kTeardown:
      case Stage::kRestart:
      case Stage::kReconfigure:
        return kRestartB;
    }
    return kRestartB;
  }
  // Down and Hold time up to t goes to its bucket (running time is accounted by advance).
  void account_to(double t) {
    if (t <= acc_t_) return;
    if (phase_ == Phase::kDown) bucket_[stage_bucket()] += t - acc_t_;
    if (phase_ == Phase::kHold) bucket_[hold_bucket_] += t - acc_t_;
    acc_t_ = t;
  }

  void rollback_to(const Progress& rp) {
    if (cur_.steps > rp.steps) out_.recompute_s += cur_.step_s - rp.step_s;
    cur_ = rp;
  }

  // --- events ----------------------------------------------------------------------------------

  void enter_stage(Stage st, double t, double duration) {
    phase_ = Phase::kDown;
    stage_ = st;
    acc_t_ = t;
    t_ = t;
    stage_end_ = t + duration;
  }
  double detection(Manifestation m) const {
    return m == Manifestation::kHang ? spec_.detect_hang_s : m == Manifestation::kCrash ? spec_.detect_crash_s : 0;
  }

  void on_goal(double t) {
    if (phase_ == Phase::kRunning) {  // the target's last step is done
      advance(t);
      phase_ = Phase::kHold;
      acc_t_ = t;
      return;
    }
    account_to(t);
    t_ = t;
    switch (stage_) {
      case Stage::kPlanned:  // the on-demand checkpoint is written: nothing to recompute
        make_durable(cur_);
        pend_.valid = false;
        enter_stage(Stage::kTeardown, t, spec_.teardown_s);
        break;
      case Stage::kDetect:
        if (elastic_pause_)
          enter_stage(Stage::kReconfigure, t, spec_.reconfigure_s);
        else
          enter_stage(Stage::kTeardown, t, spec_.teardown_s);
        break;
      case Stage::kTeardown:
        enter_wait(t);
        break;
      case Stage::kWait:
        break;  // left by on_node_event
      case Stage::kRestart:
        pend_.valid = false;
        mem_ = cur_;
        mem_valid_ = plan_.in_memory;
        // Every replica, except (elastic) those dropped before a planned stop, which rejoin later.
        replicas_down_ = replicas_down_of_units_;
        if (drop_after_restart_ || round_failed_dropping()) {
          phase_ = Phase::kHold;
          acc_t_ = t;
        } else {
          phase_ = Phase::kRunning;
          start_segment(t, 0);
        }
        break;
      case Stage::kReconfigure:
        elastic_pause_ = false;
        replicas_down_ = replicas_down_of_units_;
        phase_ = Phase::kRunning;
        start_segment(t, resume_j_);
        break;
    }
  }
  bool round_failed_dropping() const { return plan_.islands && spec_.outer == OuterRule::kProceed && round_failed_; }

  // An empty position the job needs to restart: one in a replica that runs (elastic: a dropped
  // replica rejoins on its own once its nodes are back; without elastic every position runs).
  bool active_empty() const {
    for (int32_t s : empties_)
      if (node_live_units_[static_cast<size_t>(s)] > 0) return true;
    return false;
  }

  void enter_wait(double t) {
    fill(t);
    if (!active_empty()) {
      enter_stage(Stage::kRestart, t, spec_.init_s + (load_from_peer_ ? plan_.load_peer_s : plan_.load_storage_s));
    } else {
      enter_stage(Stage::kWait, t, kInf);
    }
  }

  void on_node_event(double t) {
    if (phase_ != Phase::kRunning) account_to(t);
    t_ = t;
    fill(t);
    if (phase_ == Phase::kDown && stage_ == Stage::kWait && !active_empty()) enter_wait(t);
  }

  void on_rejoin(double t) {
    const Closed c = advance(t);
    out_.recompute_s += c.partial;
    resume_j_ = c.j;
    // Every unit ready by now rejoins in this reconfiguration.
    while (next_ready() <= t) {
      const auto u = static_cast<size_t>(ready_.front().unit);
      std::pop_heap(ready_.begin(), ready_.end(), ReadyLater{});
      ready_.pop_back();
      activate_unit(u, t);
    }
    elastic_pause_ = true;
    enter_stage(Stage::kReconfigure, t, spec_.reconfigure_s);
  }

  void on_failure(double t) {
    // Which process, which position.
    const bool from_exp = next_exponential() <= next_weibull();
    uint16_t proc = 0;
    int64_t slot = 0;
    if (from_exp) {
      hz_t_ = t;  // the threshold is reached: draw the next one
      hz_left_ = exponential1(rng_fail_);
      const double u = uniform01(rng_pick_) * plan_.exp_rate;
      size_t i = 0;
      while (i + 1 < plan_.exp_cum.size() && u >= plan_.exp_cum[i]) ++i;
      proc = plan_.exp_proc[i];
      do {
        slot = static_cast<int64_t>(uniform01(rng_pick_) * static_cast<double>(plan_.n));
      } while (!exposed(slot));
    } else {
      const WClock c = wheap_.front();
      std::pop_heap(wheap_.begin(), wheap_.end(), WLater{});
      wheap_.pop_back();
      proc = c.proc;
      slot = c.slot;
      const FailureProcess& fp = spec_.failures.processes[proc];
      if (!exposed(slot) || !fp.replace) push_clock(weibull_clock(t, c.slot, proc));  // renewal
      if (!exposed(slot)) {  // an idle node (a dropped replica's) does not fail
        t_ = std::max(t_, t);
        return;
      }
    }
    const FailureProcess& fp = spec_.failures.processes[proc];
    ++out_.interruptions;
    ++out_.by_category[static_cast<size_t>(fp.category)];
    if (fp.manifests != Manifestation::kPlanned) ++out_.unexpected;

    // Close what was going on at t.
    const Phase was = phase_;
    if (was == Phase::kRunning) {
      const Closed c = advance(t);
      out_.recompute_s += c.partial;
      resume_j_ = c.j;
    } else {
      account_to(t);
      t_ = t;
    }
    promote(t);

    // The struck group: its exposed positions are interrupted, its nodes go to repair (hardware).
    struck_units_.clear();
    bool peer_lost = false;
    const int64_t g0 = slot - slot % fp.nodes, g1 = std::min(plan_.n, g0 + fp.nodes);
    for (int64_t s = g0; s < g1; ++s) {
      if (!exposed(s)) continue;
      for (int32_t u : units_of(s))
        if (unit_active_[static_cast<size_t>(u)]) struck_units_.push_back(u);
    }
    if (fp.replace) {
      for (int64_t s = g0; s < g1; ++s)
        if (installed_[static_cast<size_t>(s)]) remove_node(s, t);
      // In-memory copies: positions 2i and 2i+1 hold each other's; lost when both are gone (the
      // last position of an odd job has no peer: always from storage).
      for (int64_t s = g0; s < g1; ++s) {
        const int64_t peer = s ^ 1;
        if (!installed_[static_cast<size_t>(s)] && (peer >= plan_.n || !installed_[static_cast<size_t>(peer)]))
          peer_lost = true;
      }
    }

    if (fp.manifests == Manifestation::kPlanned) {
      if (was == Phase::kDown) return;  // already down: the maintenance rides along
      // Announced: stop, write a checkpoint synchronously, restart. The interrupted step is lost.
      pend_.valid = false;
      elastic_pause_ = false;
      load_from_peer_ = false;
      enter_stage(Stage::kPlanned, t, plan_.write_s);
      return;
    }

    const bool elastic_path = plan_.elastic && (was == Phase::kRunning || elastic_pause_);
    if (elastic_path) {
      for (int32_t u : struck_units_) drop_unit(static_cast<size_t>(u), t);
      fill(t);  // a free spare goes in at once
      if (spec_.job.dp_replicas - replicas_down_of_units_ >= spec_.min_replicas &&
          plan_.costs->runnable(replicas_down_of_units_)) {
        elastic_pause_ = true;
        enter_stage(Stage::kDetect, t, detection(fp.manifests));
        return;
      }
      // Too few replicas left: a full restart with every replica.
      for (size_t u = 0; u < unit_active_.size(); ++u) activate_unit(u, t);
      ready_.clear();
      elastic_pause_ = false;
    }

    // Restart from the last checkpoint that survived.
    if (plan_.in_memory && peer_lost) mem_valid_ = false;
    if (plan_.islands && spec_.outer == OuterRule::kProceed) {
      round_failed_ = true;
      rollback_to(round_start_);
      load_from_peer_ = mem_valid_;
    } else {
      const bool use_mem = mem_valid_ && mem_.steps >= durable_.steps;
      load_from_peer_ = use_mem;
      rollback_to(use_mem ? mem_ : durable_);
    }
    pend_.valid = false;
    if (was == Phase::kDown && stage_ == Stage::kWait && !elastic_pause_) {
      enter_stage(Stage::kWait, t, kInf);  // nothing runs: keep waiting, for more nodes now
      return;
    }
    elastic_pause_ = false;
    enter_stage(Stage::kDetect, t, detection(fp.manifests));
  }

  const Plan& plan_;
  const CampaignSpec& spec_;
  std::mt19937_64 rng_fail_, rng_pick_, rng_repair_;

  // Nodes.
  std::vector<uint8_t> installed_;
  std::vector<uint32_t> gen_;
  int64_t installed_count_ = 0;
  std::vector<int32_t> empties_;
  int64_t pool_ = 0;
  std::vector<double> repairs_;  // min-heap of return times
  // Failure clocks.
  int64_t exposed_ = 0;
  double hz_t_ = 0, hz_left_ = 0, hz_rate_ = 0;
  std::vector<WClock> wheap_;
  // Elastic units.
  std::vector<uint8_t> unit_active_;
  std::vector<int32_t> unit_empty_;
  std::vector<uint32_t> unit_epoch_;
  std::vector<int32_t> node_live_units_;  // by position: its units that run
  std::vector<Ready> ready_;
  // Units dropped, the replicas they hold, and the replicas down in the running state (the
  // latter catches up with the former when the job resumes).
  int64_t units_down_ = 0, replicas_down_of_units_ = 0, replicas_down_ = 0;
  std::vector<int32_t> struck_units_;

  // Job state.
  double t_ = 0;
  Phase phase_ = Phase::kRunning;
  Stage stage_ = Stage::kDetect;
  double stage_end_ = kInf, acc_t_ = 0;
  bool elastic_pause_ = false, load_from_peer_ = false;
  int64_t resume_j_ = 0;
  int64_t target_ = 0;
  Progress cur_, durable_, mem_, round_start_;
  bool mem_valid_ = false;
  struct Pending {
    bool valid = false;
    Progress p;
    double storage_at = 0, mem_at = 0;
  } pend_;
  bool round_failed_ = false, drop_after_restart_ = false;
  Bucket hold_bucket_ = kIslandWait;
  // Segment.
  double seg_t0_ = 0, seg_a_ = 0, seg_s_ = 1, seg_tok_ = 0, seg_sigma_ = 0, seg_sigma1_ = 0, seg_p_ = 1;
  double seg_degraded_ = 0;
  int64_t seg_j0_ = 0;
  Progress seg_base_;

  std::array<double, kNumBuckets> bucket_{};
  TrialResult out_;
};

TrialResult run_single_trial(const Plan& plan, uint64_t seed) {
  sim::RandomStreams rs(seed);
  Lane lane(plan, rs, "");
  lane.set_target(plan.work);
  const double stop = plan.work > 0 ? kMaxWallS : plan.t_end;
  lane.run(stop, /*stop_at_hold=*/true, false);
  if (plan.work > 0 && !lane.holding()) throw sim::UserError(kNoProgress);
  return lane.finish(plan.work > 0 ? lane.now() : plan.t_end);
}

TrialResult run_islands_trial(const Plan& plan, uint64_t seed) {
  const CampaignSpec& spec = *plan.spec;
  sim::RandomStreams rs(seed);
  std::vector<std::unique_ptr<Lane>> lanes;
  for (int64_t i = 0; i < plan.lanes; ++i) {
    std::string suffix = ".";
    suffix += std::to_string(i);  // appended, not "." + ..., which GCC 12's -Wrestrict misreads (bug 105329)
    lanes.push_back(std::make_unique<Lane>(plan, rs, suffix));
  }
  const int64_t h = spec.job.inner_steps_per_round;
  const int64_t rounds = plan.work > 0 ? (plan.work + h - 1) / h : 0;
  const double t_end = plan.work > 0 ? kMaxWallS : plan.t_end;
  const bool proceed = spec.outer == OuterRule::kProceed;
  double r = 0;
  int64_t done = 0;
  bool ended = false;
  while (!ended) {
    if (plan.work > 0 && done >= rounds) break;
    if (r >= t_end) break;
    // Rounds in which nothing happens to any island are skipped in one go (all islands hold at r:
    // the last round ended cleanly): O(failures), not O(rounds).
    if (std::all_of(lanes.begin(), lanes.end(), [](const auto& l) { return l->holding(); })) {
      double next = t_end;
      for (auto& l : lanes) next = std::min(next, l->next_event());
      const double round_s = lanes[0]->round_compute_time(h) + spec.job.outer_sync_s;
      int64_t n = static_cast<int64_t>(std::floor((next - r) / round_s));
      if (plan.work > 0) n = std::min(n, rounds - done - 1);              // the last round may be short
      while (n > 0 && r + static_cast<double>(n) * round_s >= next) --n;  // rounding
      if (n > 0) {
        for (auto& l : lanes) l->skip_rounds(n, h, round_s, spec.job.outer_sync_s);
        r = lanes[0]->now();
        done += n;
        continue;
      }
    }
    const int64_t steps = plan.work > 0 ? std::min(h, plan.work - done * h) : h;
    for (auto& l : lanes) {
      l->set_hold_bucket(kIslandWait);
      l->begin_round(r, steps);
      l->set_drop_after_restart(proceed && l->round_failed());
    }
    double s = r;
    if (!proceed) {
      for (;;) {
        double s_new = s;
        for (auto& l : lanes) l->run(s, false, false);
        for (auto& l : lanes)
          if (!l->holding()) {
            l->run(t_end, true, false);
            s_new = std::max(s_new, l->now());
          }
        if (s_new == s || s_new >= t_end) {
          s = s_new;
          break;
        }
        s = s_new;
      }
    } else {
      // Islands not interrupted in the round all finish it at the same time f0 (same start, same
      // schedule); the sync proceeds then without the others, whose round is dropped (an island
      // still behind at f0, e.g. after a planned stop, is dropped too).
      double f0 = kInf;
      for (auto& l : lanes)
        if (!l->round_failed()) f0 = std::min(f0, l->planned_finish());
      if (f0 != kInf && f0 >= t_end) {  // the campaign ends inside this round
        for (auto& l : lanes) l->run(t_end, false, false);
        break;
      }
      bool any_healthy = false;
      if (f0 < t_end) {
        for (auto& l : lanes) {
          if (l->round_failed()) continue;
          if (l->run(f0, true, true) == Stop::kHold && !l->round_failed()) {
            any_healthy = true;
          } else {
            l->drop_round();
          }
        }
      }
      if (any_healthy) {
        s = f0;
      } else {  // every island failed: the round is dropped; the next starts once all recovered
        for (auto& l : lanes) {
          if (!l->round_failed()) l->drop_round();
          l->run(t_end, true, false);
          s = std::max(s, l->now());
        }
      }
      for (auto& l : lanes)
        if (l->now() < s) l->run(std::min(s, t_end), false, false);
      if (!any_healthy && s < t_end) {
        for (auto& l : lanes) l->commit_round(true);
        r = s;
        continue;
      }
    }
    if (s >= t_end) {
      ended = true;
      break;
    }
    for (auto& l : lanes) {
      l->commit_round(proceed && l->round_failed());
      l->set_hold_bucket(kOuterSync);
    }
    const double sync_end = std::min(s + spec.job.outer_sync_s, t_end);
    for (auto& l : lanes) l->run(sync_end, false, false);
    r = sync_end;
    ++done;
    if (sync_end >= t_end) ended = true;
  }
  if (plan.work > 0 && done < rounds) throw sim::UserError(kNoProgress);
  const double wall = plan.work > 0 ? r : plan.t_end;
  TrialResult sum;
  const double nl = static_cast<double>(plan.lanes);
  for (auto& l : lanes) {
    if (l->now() < wall) l->run(wall, false, false);
    const TrialResult t = l->finish(wall);
    sum.wall_s = wall;
    sum.productive_s += t.productive_s / nl;
    sum.useful_tokens += t.useful_tokens;
    sum.steps += t.steps;
    sum.interruptions += t.interruptions;
    sum.unexpected += t.unexpected;
    for (size_t c = 0; c < kNumFailureCategories; ++c) sum.by_category[c] += t.by_category[c];
    sum.detection_s += t.detection_s / nl;
    sum.restart_s += t.restart_s / nl;
    sum.recompute_s += t.recompute_s / nl;
    sum.checkpoint_s += t.checkpoint_s / nl;
    sum.waiting_s += t.waiting_s / nl;
    sum.island_wait_s += t.island_wait_s / nl;
    sum.outer_sync_s += t.outer_sync_s / nl;
    sum.dropped_rounds += t.dropped_rounds;
  }
  return sum;
}

Estimate estimate_of(std::vector<double> v) {
  Estimate e;
  if (v.empty()) return e;
  double sum = 0;
  for (double x : v) sum += x;
  e.mean = sum / static_cast<double>(v.size());
  std::sort(v.begin(), v.end());
  auto pct = [&](double q) {
    const double h = (static_cast<double>(v.size()) - 1) * q;
    const auto lo = static_cast<size_t>(std::floor(h));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (h - static_cast<double>(lo)) * (v[hi] - v[lo]);
  };
  e.lo = pct(0.025);
  e.hi = pct(0.975);
  return e;
}

template <class F>
Estimate over_trials(const std::vector<TrialResult>& trials, F&& f) {
  std::vector<double> v;
  v.reserve(trials.size());
  for (const TrialResult& t : trials) v.push_back(f(t));
  return estimate_of(std::move(v));
}

// CampaignDefaults::replicas_by_node when the job kind gives none: data parallelism outermost,
// each replica on n / dp contiguous nodes (dp <= n), or dp / n replicas on each node (dp > n).
std::vector<std::vector<int32_t>> contiguous_replicas(int64_t n, int64_t dp) {
  std::vector<std::vector<int32_t>> by_node(static_cast<size_t>(n));
  for (int64_t s = 0; s < n; ++s) {
    if (dp <= n) {
      by_node[static_cast<size_t>(s)].push_back(static_cast<int32_t>(s / (n / dp)));
    } else {
      const int64_t per_node = dp / n;
      for (int64_t r = s * per_node; r < (s + 1) * per_node; ++r)
        by_node[static_cast<size_t>(s)].push_back(static_cast<int32_t>(r));
    }
  }
  return by_node;
}

// The plan's units. Elastic: the replicas grouped by the set of nodes they have ranks on,
// numbered by their first replica (with data parallelism outermost, unit u is the u-th block of
// contiguous nodes); otherwise one unit of every node.
void set_units(const CampaignSpec& spec, Plan& p) {
  const auto n = static_cast<size_t>(p.n);
  p.node_units.assign(n, {});
  if (!p.elastic) {
    p.units = 1;
    p.unit_replicas = {spec.job.dp_replicas};
    p.unit_nodes.assign(1, {});
    for (size_t s = 0; s < n; ++s) {
      p.unit_nodes[0].push_back(static_cast<int32_t>(s));
      p.node_units[s] = {0};
    }
    return;
  }
  const int64_t dp = spec.job.dp_replicas;
  const std::vector<std::vector<int32_t>> by_node =
      spec.job.replicas_by_node.empty() ? contiguous_replicas(p.n, dp) : spec.job.replicas_by_node;
  std::vector<std::vector<int32_t>> nodes_of(static_cast<size_t>(dp));  // increasing node order
  for (size_t s = 0; s < n; ++s)
    for (int32_t r : by_node[s]) nodes_of[static_cast<size_t>(r)].push_back(static_cast<int32_t>(s));
  std::map<std::vector<int32_t>, int32_t> unit_with_nodes;
  std::vector<int32_t> unit_of_replica(static_cast<size_t>(dp));
  p.unit_nodes.clear();
  p.unit_replicas.clear();
  for (size_t r = 0; r < nodes_of.size(); ++r) {
    auto [it, added] = unit_with_nodes.emplace(nodes_of[r], static_cast<int32_t>(p.unit_nodes.size()));
    if (added) {
      p.unit_nodes.push_back(nodes_of[r]);
      p.unit_replicas.push_back(0);
    }
    ++p.unit_replicas[static_cast<size_t>(it->second)];
    unit_of_replica[r] = it->second;
  }
  p.units = static_cast<int64_t>(p.unit_nodes.size());
  for (size_t s = 0; s < n; ++s) {
    std::vector<int32_t>& units = p.node_units[s];
    for (int32_t r : by_node[s]) units.push_back(unit_of_replica[static_cast<size_t>(r)]);
    std::sort(units.begin(), units.end());
    units.erase(std::unique(units.begin(), units.end()), units.end());
  }
}

Plan make_plan(const CampaignSpec& spec, CostCache& costs) {
  validate_campaign(spec);
  Plan p;
  p.spec = &spec;
  p.costs = &costs;
  p.n = spec.job.job_nodes;
  p.islands = spec.policy == CampaignPolicy::kIslands;
  p.elastic = spec.policy == CampaignPolicy::kElastic;
  p.lanes = p.islands ? spec.job.islands : 1;
  p.full = costs.get(0);
  const CheckpointSpec& c = spec.checkpoint;
  p.k = c.every_steps > 0 ? c.every_steps
                          : std::max<int64_t>(1, static_cast<int64_t>(std::llround(c.interval_s / p.full.seconds)));
  const double nodes = static_cast<double>(p.n);
  p.write_s = c.size_bytes / (nodes * c.write_bandwidth_per_node_Bps);
  p.load_storage_s = c.size_bytes / (nodes * c.read_bandwidth_per_node_Bps);
  p.load_peer_s = c.size_bytes / nodes / c.peer_bandwidth_Bps;
  if (c.mode == CheckpointMode::kSync) {
    p.snap = p.write_s;
    p.bg = 0;
  } else {
    p.snap = c.size_bytes / (nodes * static_cast<double>(spec.job.gpus_per_node)) / c.snapshot_bandwidth_Bps;
    p.bg = p.write_s;
  }
  p.in_memory = c.in_memory;
  p.peer = c.in_memory ? p.load_peer_s : 0;
  p.t_end = spec.duration_s > 0 ? spec.duration_s : kInf;
  p.work = spec.work_steps;
  p.weibull_scale.assign(spec.failures.processes.size(), 0);
  for (size_t i = 0; i < spec.failures.processes.size(); ++i) {
    const FailureProcess& fp = spec.failures.processes[i];
    if (fp.rate_per_node_s <= 0) continue;
    if (fp.distribution == FailureDistribution::kExponential) {
      p.exp_rate += fp.rate_per_node_s;
      p.exp_cum.push_back(p.exp_rate);
      p.exp_proc.push_back(static_cast<uint16_t>(i));
    } else {
      p.weibull_proc.push_back(static_cast<uint16_t>(i));
      p.weibull_scale[i] = weibull_scale_for_mean(1.0 / fp.rate_per_node_s, fp.weibull_shape);
    }
  }
  set_units(spec, p);
  return p;
}

double steady_stall(const Plan& p) {
  const double ks = static_cast<double>(p.k) * p.full.seconds;
  return std::max(0.0, std::max(p.bg, p.peer) - ks) + p.snap;
}

}  // namespace

const char* policy_name(CampaignPolicy p) {
  switch (p) {
    case CampaignPolicy::kRestart:
      return "restart";
    case CampaignPolicy::kHotSpares:
      return "hot_spares";
    case CampaignPolicy::kElastic:
      return "elastic";
    case CampaignPolicy::kIslands:
      return "islands";
  }
  return "?";
}

void validate_campaign(const CampaignSpec& s) {
  auto bad = [](const std::string& what) { throw sim::ConfigError("campaign: " + what); };
  if (s.job.job_nodes < 1) bad("the job needs at least one node");
  if (s.job.gpus_per_node < 1) bad("gpus_per_node must be >= 1");
  if ((s.duration_s > 0) == (s.work_steps > 0)) bad("give exactly one of a duration > 0 and work_steps > 0");
  if (s.spares < 0 || s.spares > s.job.job_nodes) bad("spares must be between 0 and the job's nodes");
  if (s.checkpoint.every_steps < 0 || (s.checkpoint.every_steps == 0 && !(s.checkpoint.interval_s > 0)))
    bad("the checkpoint interval must be > 0");
  if (!(s.checkpoint.size_bytes >= 0)) bad("the checkpoint size must be >= 0");
  if (!(s.checkpoint.write_bandwidth_per_node_Bps > 0) || !(s.checkpoint.read_bandwidth_per_node_Bps > 0) ||
      !(s.checkpoint.snapshot_bandwidth_Bps > 0) || !(s.checkpoint.peer_bandwidth_Bps > 0))
    bad("checkpoint bandwidths must be > 0");
  if (!(s.repair_mean_s >= 0)) bad("the repair time must be >= 0");
  for (const FailureProcess& p : s.failures.processes) {
    if (!(p.rate_per_node_s >= 0) || !std::isfinite(p.rate_per_node_s)) bad(p.name + ": the rate must be >= 0");
    if (p.distribution == FailureDistribution::kWeibull && !(p.weibull_shape > 0))
      bad(p.name + ": the Weibull shape must be > 0");
    if (p.nodes < 1) bad(p.name + ": nodes must be >= 1");
  }
  if (s.failures.processes.size() > 65535) bad("too many failure processes");
  if (s.policy == CampaignPolicy::kRestart && s.spares > 0) bad("policy restart has no spares (use hot_spares)");
  if (s.policy == CampaignPolicy::kElastic) {
    const int64_t n = s.job.job_nodes, dp = s.job.dp_replicas;
    if (dp < 2) bad("policy elastic needs at least 2 data-parallel replicas");
    const std::vector<std::vector<int32_t>>& by_node = s.job.replicas_by_node;
    if (by_node.empty() && dp % n != 0 && n % dp != 0)
      bad("policy elastic needs the replicas to tile the nodes (" + std::to_string(dp) + " replicas on " +
          std::to_string(n) + " nodes), or the replicas on each node (replicas_by_node)");
    if (!by_node.empty()) {
      if (static_cast<int64_t>(by_node.size()) != n)
        bad("replicas_by_node lists " + std::to_string(by_node.size()) + " nodes; the job has " + std::to_string(n));
      std::vector<uint8_t> placed(static_cast<size_t>(dp), 0);
      for (size_t node = 0; node < by_node.size(); ++node) {
        if (by_node[node].empty()) bad("node " + std::to_string(node) + " holds ranks of no replica");
        for (int32_t r : by_node[node]) {
          if (r < 0 || r >= dp)
            bad("node " + std::to_string(node) + " holds replica " + std::to_string(r) + " of " + std::to_string(dp));
          placed[static_cast<size_t>(r)] = 1;
        }
      }
      for (size_t r = 0; r < placed.size(); ++r)
        if (!placed[r]) bad("replica " + std::to_string(r) + " has ranks on no node");
    }
    if (s.min_replicas < 1 || s.min_replicas > dp) bad("elastic.min_replicas must be between 1 and the replicas");
  }
  if (s.policy == CampaignPolicy::kIslands) {
    if (!s.job.diloco) bad("policy islands needs a DiLoCo job");
    if (s.job.islands < 1 || s.job.inner_steps_per_round < 1 || !(s.job.outer_sync_s >= 0))
      bad("policy islands needs islands >= 1, inner steps per round >= 1 and an outer sync time >= 0");
  }
}

uint64_t trial_seed(uint64_t seed, uint64_t trial) { return sim::splitmix64(sim::splitmix64(seed) ^ trial); }

double young_interval(double delta_s, double mtbf_s) { return std::sqrt(2.0 * delta_s * mtbf_s); }

double daly_interval(double delta_s, double mtbf_s) {
  if (!(delta_s < 2.0 * mtbf_s)) return mtbf_s;
  const double x = delta_s / (2.0 * mtbf_s);
  return std::sqrt(2.0 * delta_s * mtbf_s) * (1.0 + std::sqrt(x) / 3.0 + x / 9.0) - delta_s;
}

std::string encode_trial(const TrialResult& r) {
  std::string out;
  char buf[64];
  auto num = [&](double x) {
    std::snprintf(buf, sizeof buf, "%a ", x);
    out += buf;
  };
  auto integer = [&](int64_t x) { out += std::to_string(x) + " "; };
  num(r.wall_s);
  num(r.productive_s);
  num(r.useful_tokens);
  num(r.steps);
  integer(r.interruptions);
  integer(r.unexpected);
  for (int64_t c : r.by_category) integer(c);
  for (double x : {r.detection_s, r.restart_s, r.recompute_s, r.checkpoint_s, r.waiting_s, r.degraded_loss_s,
                   r.degraded_wall_s, r.island_wait_s, r.outer_sync_s})
    num(x);
  integer(r.dropped_rounds);
  return out;
}

TrialResult decode_trial(const std::string& text) {
  TrialResult r;
  const char* p = text.c_str();
  char* end = nullptr;
  auto num = [&]() {
    const double x = std::strtod(p, &end);
    SIM_ASSERT(end != p, "decode_trial: malformed trial text");
    p = end;
    return x;
  };
  auto integer = [&]() {
    const long long x = std::strtoll(p, &end, 10);
    SIM_ASSERT(end != p, "decode_trial: malformed trial text");
    p = end;
    return static_cast<int64_t>(x);
  };
  r.wall_s = num();
  r.productive_s = num();
  r.useful_tokens = num();
  r.steps = num();
  r.interruptions = integer();
  r.unexpected = integer();
  for (int64_t& c : r.by_category) c = integer();
  for (double* x : {&r.detection_s, &r.restart_s, &r.recompute_s, &r.checkpoint_s, &r.waiting_s, &r.degraded_loss_s,
                    &r.degraded_wall_s, &r.island_wait_s, &r.outer_sync_s})
    *x = num();
  r.dropped_rounds = integer();
  return r;
}

CampaignSummary run_campaign(const CampaignSpec& spec, StepCostSource& source, int64_t trials, uint64_t seed,
                             int threads, const std::function<void(int64_t)>& progress,
                             const TrialDistributor& distribute) {
  if (trials < 1) throw sim::ConfigError("campaign: trials must be >= 1");
  const int64_t max_down = spec.policy == CampaignPolicy::kElastic ? std::max<int64_t>(0, spec.job.dp_replicas) : 0;
  CostCache costs(source, max_down);
  const Plan plan = make_plan(spec, costs);

  CampaignSummary sum;
  sum.trials = trials;
  sum.seed = seed;
  sum.per_trial.resize(static_cast<size_t>(trials));
  auto trial = [&](size_t t) {
    const uint64_t ts = trial_seed(seed, t);
    return plan.islands ? run_islands_trial(plan, ts) : run_single_trial(plan, ts);
  };
  if (distribute) {
    const std::vector<std::string> texts =
        distribute(static_cast<size_t>(trials), [&](size_t t) { return encode_trial(trial(t)); });
    SIM_ASSERT(texts.size() == static_cast<size_t>(trials), "a trial distributor returned another number of results");
    for (size_t t = 0; t < texts.size(); ++t) sum.per_trial[t] = decode_trial(texts[t]);
    if (progress) progress(trials);
  } else {
    std::atomic<int64_t> done{0};
    std::mutex progress_mutex;
    sim::parallel_for(static_cast<size_t>(trials), threads, [&](size_t t) {
      sum.per_trial[t] = trial(t);
      const int64_t d = done.fetch_add(1) + 1;
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        progress(d);
      }
    });
  }

  sum.step_s = plan.full.seconds;
  sum.tokens_per_step = plan.full.tokens;
  sum.every_steps = plan.k;
  sum.checkpoint_interval_s = static_cast<double>(plan.k) * plan.full.seconds;
  sum.checkpoint_stall_s = steady_stall(plan);
  sum.checkpoint_write_s = plan.write_s;
  sum.checkpoint_load_s = plan.load_storage_s;
  const double rate = job_failure_rate(spec.failures, plan.n, false);
  sum.job_mtbf_s = rate > 0 ? 1.0 / rate : kInf;
  sum.young_s = young_interval(sum.checkpoint_stall_s, sum.job_mtbf_s);
  sum.daly_s = daly_interval(sum.checkpoint_stall_s, sum.job_mtbf_s);
  sum.ideal_tokens_per_s = plan.full.tokens / plan.full.seconds * static_cast<double>(plan.lanes);

  const auto& v = sum.per_trial;
  constexpr double h = 1.0 / 3600.0;
  sum.ettr = over_trials(v, [](const TrialResult& t) { return t.ettr(); });
  sum.goodput_tokens_per_s = over_trials(v, [](const TrialResult& t) { return t.goodput(); });
  sum.wall_h = over_trials(v, [&](const TrialResult& t) { return t.wall_s * h; });
  sum.interruptions = over_trials(v, [](const TrialResult& t) { return static_cast<double>(t.interruptions); });
  sum.unexpected_interruptions = over_trials(v, [](const TrialResult& t) { return static_cast<double>(t.unexpected); });
  for (size_t c = 0; c < kNumFailureCategories; ++c)
    sum.by_category[c] = over_trials(v, [&](const TrialResult& t) { return static_cast<double>(t.by_category[c]); });
  sum.lost_detection_h = over_trials(v, [&](const TrialResult& t) { return t.detection_s * h; });
  sum.lost_restart_h = over_trials(v, [&](const TrialResult& t) { return t.restart_s * h; });
  sum.lost_recompute_h = over_trials(v, [&](const TrialResult& t) { return t.recompute_s * h; });
  sum.checkpoint_h = over_trials(v, [&](const TrialResult& t) { return t.checkpoint_s * h; });
  sum.lost_waiting_h = over_trials(v, [&](const TrialResult& t) { return t.waiting_s * h; });
  sum.lost_degraded_h = over_trials(v, [&](const TrialResult& t) { return t.degraded_loss_s * h; });
  sum.degraded_h = over_trials(v, [&](const TrialResult& t) { return t.degraded_wall_s * h; });
  sum.island_wait_h = over_trials(v, [&](const TrialResult& t) { return t.island_wait_s * h; });
  sum.outer_sync_h = over_trials(v, [&](const TrialResult& t) { return t.outer_sync_s * h; });
  sum.dropped_rounds = over_trials(v, [](const TrialResult& t) { return static_cast<double>(t.dropped_rounds); });
  return sum;
}

std::vector<double> auto_sweep_intervals(const CampaignSpec& spec, StepCostSource& source) {
  CostCache costs(source, 0);
  const Plan plan = make_plan(spec, costs);
  // Daly's interval for the stall of a checkpoint taken at about that interval (an async write
  // longer than the interval adds a wait; evaluate at the configured interval).
  const double rate = job_failure_rate(spec.failures, plan.n, false);
  const double mtbf = rate > 0 ? 1.0 / rate : kInf;
  double center = daly_interval(steady_stall(plan), mtbf);
  if (!std::isfinite(center) || !(center > 0)) center = static_cast<double>(plan.k) * plan.full.seconds;
  center = std::max(center, plan.full.seconds);
  std::vector<double> out;
  for (int i = -6; i <= 6; ++i) out.push_back(std::max(plan.full.seconds, center * std::pow(2.0, i / 2.0)));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<double> sweep_intervals(const CampaignSpec& spec, StepCostSource& source) {
  const std::vector<double> asked =
      spec.checkpoint.sweep_auto ? auto_sweep_intervals(spec, source) : spec.checkpoint.sweep_intervals_s;
  // A checkpoint is taken every whole number of steps: intervals that round to the same count are
  // one point (the first of them).
  const double step_s = source.step(0).seconds;
  std::vector<double> out;
  std::vector<int64_t> seen;
  for (double interval : asked) {
    const int64_t k = std::max<int64_t>(1, static_cast<int64_t>(std::llround(interval / step_s)));
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) continue;
    seen.push_back(k);
    out.push_back(interval);
  }
  return out;
}

IntervalSweep sweep_checkpoint_interval(const CampaignSpec& spec, StepCostSource& source,
                                        const std::vector<double>& intervals_s, int64_t trials, uint64_t seed,
                                        int threads, const std::function<void(int64_t)>& progress,
                                        const TrialDistributor& distribute) {
  if (intervals_s.empty()) throw sim::ConfigError("campaign: the checkpoint sweep needs at least one interval");
  IntervalSweep sw;
  sw.fixed_work = spec.work_steps > 0;
  const StepCost full = source.step(0);
  int64_t base = 0;
  std::vector<int64_t> seen;  // every_steps already run: intervals that round to the same step count run once
  for (double interval : intervals_s) {
    if (!(interval > 0)) throw sim::ConfigError("campaign: a sweep interval must be > 0");
    CampaignSpec s = spec;
    s.checkpoint.every_steps = std::max<int64_t>(1, static_cast<int64_t>(std::llround(interval / full.seconds)));
    if (std::find(seen.begin(), seen.end(), s.checkpoint.every_steps) != seen.end()) continue;
    seen.push_back(s.checkpoint.every_steps);
    std::function<void(int64_t)> p;
    if (progress) p = [&, base](int64_t d) { progress(base + d); };
    SweepPoint pt;
    pt.interval_s = interval;
    pt.summary = run_campaign(s, source, trials, seed, threads, p, distribute);
    sw.points.push_back(std::move(pt));
    base += trials;
  }
  auto score = [&](const SweepPoint& p) {
    return sw.fixed_work ? -p.summary.wall_h.mean : p.summary.goodput_tokens_per_s.mean;
  };
  for (size_t i = 1; i < sw.points.size(); ++i)
    if (score(sw.points[i]) > score(sw.points[sw.best])) sw.best = i;
  const CampaignSummary& b = sw.points[sw.best].summary;
  sw.best_interval_s = b.checkpoint_interval_s;
  sw.refined_best_s = sw.best_interval_s;
  if (sw.best > 0 && sw.best + 1 < sw.points.size()) {
    // Vertex of the parabola through the three points (x = log interval).
    const double x0 = std::log(sw.points[sw.best - 1].summary.checkpoint_interval_s);
    const double x1 = std::log(b.checkpoint_interval_s);
    const double x2 = std::log(sw.points[sw.best + 1].summary.checkpoint_interval_s);
    const double y0 = score(sw.points[sw.best - 1]), y1 = score(sw.points[sw.best]), y2 = score(sw.points[sw.best + 1]);
    const double d = (x0 - x1) * (x0 - x2) * (x1 - x2);
    if (d != 0) {
      const double a = (x2 * (y1 - y0) + x1 * (y0 - y2) + x0 * (y2 - y1)) / d;
      const double bb = (x2 * x2 * (y0 - y1) + x1 * x1 * (y2 - y0) + x0 * x0 * (y1 - y2)) / d;
      if (a < 0) sw.refined_best_s = std::exp(std::clamp(-bb / (2 * a), x0, x2));
    }
  }
  sw.checkpoint_stall_s = b.checkpoint_stall_s;
  sw.job_mtbf_s = b.job_mtbf_s;
  sw.young_s = young_interval(sw.checkpoint_stall_s, sw.job_mtbf_s);
  sw.daly_s = daly_interval(sw.checkpoint_stall_s, sw.job_mtbf_s);
  return sw;
}

namespace {

std::string dur(double s) {
  if (!std::isfinite(s)) return "never";
  return sim::format_duration(sim::Time::from_seconds(s));
}
std::string est_h(const Estimate& e) {
  std::string o;
  appendf(o, "%.1f h [%.1f, %.1f]", e.mean, e.lo, e.hi);
  return o;
}
std::string mode_name(CheckpointMode m) { return m == CheckpointMode::kSync ? "sync" : "async"; }
std::string distribution_name(FailureDistribution d) {
  return d == FailureDistribution::kExponential ? "exponential" : "weibull";
}
std::string manifest_name(Manifestation m) {
  return m == Manifestation::kCrash ? "crash" : m == Manifestation::kHang ? "hang" : "planned";
}
nlohmann::ordered_json est_json(const Estimate& e) {
  nlohmann::ordered_json j;
  j["mean"] = e.mean;
  j["p2_5"] = e.lo;
  j["p97_5"] = e.hi;
  return j;
}
nlohmann::ordered_json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::ordered_json(x) : nullptr; }

}  // namespace

bool no_checkpoints(const CampaignSpec& spec, const CampaignSummary& s) {
  return spec.policy == CampaignPolicy::kIslands && s.every_steps >= spec.job.inner_steps_per_round;
}

std::string campaign_summary_text(const CampaignSpec& spec, const CampaignSummary& s) {
  std::string o;
  const CampaignDefaults& j = spec.job;
  const bool islands = spec.policy == CampaignPolicy::kIslands;
  appendf(o, "Campaign: policy %s, %s x %s%s, %s%s, ", policy_name(spec.policy),
          sim::count_noun(static_cast<uint64_t>(j.job_nodes), "node", "nodes").c_str(),
          sim::count_noun(static_cast<uint64_t>(j.gpus_per_node), "GPU", "GPUs").c_str(),
          islands ? (" per island, " + std::to_string(j.islands) + " islands").c_str() : "",
          spec.spares > 0 ? sim::count_noun(static_cast<uint64_t>(spec.spares), "hot spare node", "hot spare nodes").c_str()
                          : "no spare nodes",
          islands && spec.spares > 0 ? " per island" : "");
  if (spec.duration_s > 0)
    appendf(o, "%s of wall time", dur(spec.duration_s).c_str());
  else
    appendf(o, "%lld steps of work%s", static_cast<long long>(spec.work_steps), islands ? " per island" : "");
  appendf(o, ", %lld trials (seed %llu)\n", static_cast<long long>(s.trials), static_cast<unsigned long long>(s.seed));
  appendf(o, "  failures: %s, %zu processes; job MTBF %s (unexpected failures of %s); repair: %s %s\n",
          spec.failures.profile.empty() ? "explicit" : spec.failures.profile.c_str(), spec.failures.processes.size(),
          dur(s.job_mtbf_s).c_str(), islands ? "one island" : "the whole job",
          spec.repair == RepairDistribution::kFixed ? "fixed" : "exponential, mean", dur(spec.repair_mean_s).c_str());
  if (no_checkpoints(spec, s)) {
    // An island's checkpoints restart with every round: with k >= H none is ever taken, and the
    // outer sync's parameters are the only recovery point, so Young's and Daly's optima, which
    // place checkpoints, say nothing here.
    const int64_t h = j.inner_steps_per_round;
    appendf(o,
            "  step %s, %.4g tokens; no checkpoints: the interval of %lld steps (%s) is not shorter than a round "
            "of %lld inner steps, so an island that fails restarts from the round's outer parameters\n",
            dur(s.step_s).c_str(), s.tokens_per_step, static_cast<long long>(s.every_steps),
            dur(s.checkpoint_interval_s).c_str(), static_cast<long long>(h));
    appendf(o,
            "  Young's and Daly's optimum intervals do not apply (no checkpoints); for checkpoints inside rounds "
            "give checkpoint.every_steps below %lld\n",
            static_cast<long long>(h));
  } else {
    appendf(o, "  step %s, %.4g tokens; checkpoint every %lld steps (%s), %s, %s, stall %s, write %s, load %s%s\n",
            dur(s.step_s).c_str(), s.tokens_per_step, static_cast<long long>(s.every_steps),
            dur(s.checkpoint_interval_s).c_str(), mode_name(spec.checkpoint.mode).c_str(),
            sim::format_bytes(spec.checkpoint.size_bytes).c_str(), dur(s.checkpoint_stall_s).c_str(),
            dur(s.checkpoint_write_s).c_str(), dur(s.checkpoint_load_s).c_str(),
            spec.checkpoint.in_memory ? ", in-memory peer copies" : "");
    appendf(o, "  optimum interval for delta = %s, M = %s: Young %s, Daly %s\n", dur(s.checkpoint_stall_s).c_str(),
            dur(s.job_mtbf_s).c_str(), dur(s.young_s).c_str(), dur(s.daly_s).c_str());
  }
  // A mean outside its own 2.5-97.5th percentile band: fewer than 2.5% of the trials lie far out
  // on one side (a heavy tail), which a reader would otherwise take for an error.
  auto tail = [](const auto& e) -> std::string {
    if (e.mean < e.lo) return "; the mean lies below the band: a few trials fared far worse than the rest";
    if (e.mean > e.hi) return "; the mean lies above the band: a few trials fared far better than the rest";
    return "";
  };
  appendf(o, "  ETTR %.2f%% [%.2f%%, %.2f%%] (mean and 2.5-97.5th percentile over trials%s)\n", 100 * s.ettr.mean,
          100 * s.ettr.lo, 100 * s.ettr.hi, tail(s.ettr).c_str());
  appendf(o, "  goodput %.4g tokens/s [%.4g, %.4g], %.1f%% of the failure-free %.4g tokens/s%s\n",
          s.goodput_tokens_per_s.mean, s.goodput_tokens_per_s.lo, s.goodput_tokens_per_s.hi,
          s.ideal_tokens_per_s > 0 ? 100 * s.goodput_tokens_per_s.mean / s.ideal_tokens_per_s : 0.0,
          s.ideal_tokens_per_s, tail(s.goodput_tokens_per_s).empty() ? "" : " (the mean lies outside the band)");
  appendf(o, "  wall time %s\n", est_h(s.wall_h).c_str());
  appendf(o, "  interruptions %.1f [%.0f, %.0f], unexpected %.1f [%.0f, %.0f]:", s.interruptions.mean,
          s.interruptions.lo, s.interruptions.hi, s.unexpected_interruptions.mean, s.unexpected_interruptions.lo,
          s.unexpected_interruptions.hi);
  for (size_t c = 0; c < kNumFailureCategories; ++c)
    if (s.by_category[c].mean > 0)
      appendf(o, " %s %.1f", std::string(failure_category_name(static_cast<FailureCategory>(c))).c_str(),
              s.by_category[c].mean);
  o += "\n";
  appendf(o, "  hours%s: detection %s, teardown+restart %s, recomputation %s, checkpointing %s, waiting for nodes %s\n",
          islands ? " per island" : "", est_h(s.lost_detection_h).c_str(), est_h(s.lost_restart_h).c_str(),
          est_h(s.lost_recompute_h).c_str(), est_h(s.checkpoint_h).c_str(), est_h(s.lost_waiting_h).c_str());
  if (spec.policy == CampaignPolicy::kElastic) {
    appendf(o,
            "  degraded running %s of wall time, worth %s of full-job throughput. Elastic data parallelism "
            "changes training semantics: fewer replicas train a smaller global batch (ETTR counts their steps as "
            "productive; goodput counts their tokens)\n",
            est_h(s.degraded_h).c_str(), est_h(s.lost_degraded_h).c_str());
    // Where the layout puts ranks of several replicas on a node (parallelism.order with data
    // parallelism inside another dimension), one node's failure takes all of them down.
    size_t fewest = SIZE_MAX, most = 0;
    for (const std::vector<int32_t>& on_node : j.replicas_by_node) {
      fewest = std::min(fewest, on_node.size());
      most = std::max(most, on_node.size());
    }
    if (most > 1) {
      appendf(o,
              "  a node holds ranks of %zu%s of the %lld data-parallel replicas (the job's parallelism.order), and "
              "its failure takes them all down",
              fewest, fewest == most ? "" : (" to " + std::to_string(most)).c_str(),
              static_cast<long long>(j.dp_replicas));
      if (j.dp_replicas - static_cast<int64_t>(fewest) < spec.min_replicas)
        appendf(o,
                ": fewer than elastic.min_replicas = %lld are left after any node failure, so every failure "
                "restarts the job in full",
                static_cast<long long>(spec.min_replicas));
      o += "\n";
    }
  }
  if (islands) {
    appendf(o, "  islands (outer: %s): waiting for other islands %s, outer syncs %s",
            spec.outer == OuterRule::kWait ? "wait" : "proceed", est_h(s.island_wait_h).c_str(),
            est_h(s.outer_sync_h).c_str());
    if (spec.outer == OuterRule::kProceed)
      appendf(o,
              ", island-rounds dropped %.1f [%.0f, %.0f] (a round synced without an island trains a smaller "
              "effective batch)",
              s.dropped_rounds.mean, s.dropped_rounds.lo, s.dropped_rounds.hi);
    o += "\n";
  }
  return o;
}

std::string campaign_sweep_text(const CampaignSpec& spec, const IntervalSweep& sw) {
  std::string o;
  appendf(o, "Checkpoint-interval sweep (%zu intervals, common random numbers; best = %s):\n", sw.points.size(),
          sw.fixed_work ? "lowest mean wall time" : "highest mean goodput");
  appendf(o, "  %12s %8s %10s %14s %12s\n", "interval", "steps", "ETTR", "goodput/s", "wall h");
  bool none_taken = false;  // some interval is not within an island's round: it takes no checkpoint
  for (size_t i = 0; i < sw.points.size(); ++i) {
    const CampaignSummary& s = sw.points[i].summary;
    const bool none = no_checkpoints(spec, s);
    none_taken = none_taken || none;
    appendf(o, "  %12s %8lld %9.2f%% %14.5g %12.2f%s%s\n", dur(s.checkpoint_interval_s).c_str(),
            static_cast<long long>(s.every_steps), 100 * s.ettr.mean, s.goodput_tokens_per_s.mean, s.wall_h.mean,
            none ? "  (no checkpoint)" : "", i == sw.best ? "  <- best" : "");
  }
  if (none_taken)
    appendf(o, "  (no checkpoint): an interval of %lld steps or more is not shorter than a round, so an island takes "
            "no checkpoint and a failed one restarts from the round's outer parameters\n",
            static_cast<long long>(spec.job.inner_steps_per_round));
  const bool edge = sw.points.size() > 1 && (sw.best == 0 || sw.best + 1 == sw.points.size());
  appendf(o, "  best %s (%s); for delta = %s, M = %s: Young (1974) %s, Daly (2006) %s\n",
          dur(sw.best_interval_s).c_str(),
          edge ? "at the edge of the grid: the optimum may lie beyond it"
               : ("parabolic vertex " + dur(sw.refined_best_s)).c_str(),
          dur(sw.checkpoint_stall_s).c_str(), dur(sw.job_mtbf_s).c_str(), dur(sw.young_s).c_str(),
          dur(sw.daly_s).c_str());
  if (spec.policy == CampaignPolicy::kElastic || spec.policy == CampaignPolicy::kIslands)
    o += "  (Young and Daly assume every failure rolls the job back to its last checkpoint; elastic replicas and "
         "islands mostly do not)\n";
  return o;
}

void campaign_to_json(const CampaignSpec& spec, const CampaignSummary& s, nlohmann::ordered_json& out) {
  nlohmann::ordered_json c;
  c["policy"] = policy_name(spec.policy);
  c["job"] = {{"nodes", spec.job.job_nodes},
              {"gpus_per_node", spec.job.gpus_per_node},
              {"gpus", spec.job.job_nodes * spec.job.gpus_per_node *
                           (spec.policy == CampaignPolicy::kIslands ? spec.job.islands : 1)},
              {"dp_replicas", spec.job.dp_replicas},
              {"nodes_per_replica", spec.job.nodes_per_replica},
              {"islands", spec.policy == CampaignPolicy::kIslands ? spec.job.islands : 1}};
  if (spec.duration_s > 0)
    c["duration_h"] = spec.duration_s / 3600;
  else
    c["work_steps"] = spec.work_steps;
  c["trials"] = s.trials;
  c["seed"] = s.seed;
  c["spares"] = spec.spares;
  nlohmann::ordered_json procs = nlohmann::ordered_json::array();
  for (const FailureProcess& p : spec.failures.processes) {
    nlohmann::ordered_json e;
    e["name"] = p.name;
    e["category"] = std::string(failure_category_name(p.category));
    e["rate_per_1000_node_days"] = per_1000_node_days(p.rate_per_node_s);
    e["distribution"] = distribution_name(p.distribution);
    if (p.distribution == FailureDistribution::kWeibull) e["weibull_shape"] = p.weibull_shape;
    e["nodes"] = p.nodes;
    e["replace"] = p.replace;
    e["manifests"] = manifest_name(p.manifests);
    procs.push_back(std::move(e));
  }
  c["failures"] = {{"profile", spec.failures.profile}, {"processes", std::move(procs)}};
  c["checkpoint"] = {{"mode", mode_name(spec.checkpoint.mode)},
                     {"size_bytes", spec.checkpoint.size_bytes},
                     {"in_memory", spec.checkpoint.in_memory}};
  c["detection_crash_s"] = spec.detect_crash_s;
  c["detection_watchdog_s"] = spec.detect_hang_s;
  c["teardown_s"] = spec.teardown_s;
  c["init_s"] = spec.init_s;
  c["repair_mean_h"] = spec.repair_mean_s / 3600;
  out["campaign"] = std::move(c);

  nlohmann::ordered_json r;
  r["ettr"] = est_json(s.ettr);
  r["goodput_tokens_per_s"] = est_json(s.goodput_tokens_per_s);
  r["ideal_tokens_per_s"] = s.ideal_tokens_per_s;
  r["wall_h"] = est_json(s.wall_h);
  r["interruptions"] = est_json(s.interruptions);
  r["unexpected_interruptions"] = est_json(s.unexpected_interruptions);
  nlohmann::ordered_json cats;
  for (size_t i = 0; i < kNumFailureCategories; ++i)
    cats[std::string(failure_category_name(static_cast<FailureCategory>(i)))] = est_json(s.by_category[i]);
  r["interruptions_by_category"] = std::move(cats);
  r["lost_detection_h"] = est_json(s.lost_detection_h);
  r["lost_restart_h"] = est_json(s.lost_restart_h);
  r["lost_recompute_h"] = est_json(s.lost_recompute_h);
  r["checkpoint_h"] = est_json(s.checkpoint_h);
  r["lost_waiting_h"] = est_json(s.lost_waiting_h);
  r["lost_degraded_h"] = est_json(s.lost_degraded_h);
  r["degraded_h"] = est_json(s.degraded_h);
  r["island_wait_h"] = est_json(s.island_wait_h);
  r["outer_sync_h"] = est_json(s.outer_sync_h);
  r["dropped_island_rounds"] = est_json(s.dropped_rounds);
  r["step_s"] = s.step_s;
  r["tokens_per_step"] = s.tokens_per_step;
  r["checkpoint_every_steps"] = s.every_steps;
  // Islands whose interval is not within a round take no checkpoint (campaign.h).
  r["checkpoints_taken"] = !no_checkpoints(spec, s);
  r["checkpoint_interval_s"] = s.checkpoint_interval_s;
  r["checkpoint_stall_s"] = s.checkpoint_stall_s;
  r["checkpoint_write_s"] = s.checkpoint_write_s;
  r["checkpoint_load_s"] = s.checkpoint_load_s;
  r["job_mtbf_h"] = finite_or_null(s.job_mtbf_s / 3600);
  r["young_interval_s"] = finite_or_null(s.young_s);
  r["daly_interval_s"] = finite_or_null(s.daly_s);
  out["results"] = std::move(r);
}

void campaign_sweep_to_json(const CampaignSpec& spec, const IntervalSweep& sw, nlohmann::ordered_json& out) {
  nlohmann::ordered_json j;
  j["metric"] = sw.fixed_work ? "wall_h" : "goodput_tokens_per_s";
  const int64_t islands = spec.policy == CampaignPolicy::kIslands ? spec.job.islands : 1;
  j["job"] = {{"nodes", spec.job.job_nodes * islands},
              {"gpus", spec.job.job_nodes * spec.job.gpus_per_node * islands},
              {"islands", islands},
              {"policy", policy_name(spec.policy)}};
  j["checkpoint_stall_s"] = sw.checkpoint_stall_s;
  j["job_mtbf_h"] = finite_or_null(sw.job_mtbf_s / 3600);
  j["young_interval_s"] = finite_or_null(sw.young_s);
  j["daly_interval_s"] = finite_or_null(sw.daly_s);
  j["best_interval_s"] = sw.best_interval_s;
  j["refined_best_interval_s"] = sw.refined_best_s;
  nlohmann::ordered_json pts = nlohmann::ordered_json::array();
  for (const SweepPoint& p : sw.points) {
    nlohmann::ordered_json e;
    e["interval_s"] = p.summary.checkpoint_interval_s;
    e["requested_interval_s"] = p.interval_s;
    e["every_steps"] = p.summary.every_steps;
    e["checkpoints_taken"] = !no_checkpoints(spec, p.summary);
    e["ettr"] = est_json(p.summary.ettr);
    e["goodput_tokens_per_s"] = est_json(p.summary.goodput_tokens_per_s);
    e["wall_h"] = est_json(p.summary.wall_h);
    pts.push_back(std::move(e));
  }
  j["points"] = std::move(pts);
  out["sweep"] = std::move(j);
}

}  // namespace wl
