// workloads/diloco/timeline.cc: the DiLoCo outer-round timeline on a sim::Simulation.
//
// One event handler drives everything: arg < M is "island arg finished an inner step", arg >= M is
// "the latency wait of the current phase of sync (arg - M) is over". Fluid activities of a sync
// report back through on_activity_done with tag = sync index << 8 | flow index.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "sim/error.h"
#include "sim/simulation.h"
#include "workloads/diloco/diloco.h"

namespace wl {

namespace {

// One flow of an all-reduce phase: a share of the sync's bytes moved at one rate through the up
// and down links of the islands it touches, with a weight per link (how many times it crosses it).
struct PlanFlow {
  double bytes_fraction = 0;  // of the sync's bytes
  std::vector<double> up_weight;
  std::vector<double> down_weight;
  std::vector<sim::Use> uses;  // filled once the constraints exist
};

struct PlanPhase {
  int64_t latency_steps = 0;
  std::vector<PlanFlow> flows;
};

PlanFlow empty_flow(int64_t m, double fraction) {
  PlanFlow f;
  f.bytes_fraction = fraction;
  f.up_weight.assign(static_cast<size_t>(m), 0.0);
  f.down_weight.assign(static_cast<size_t>(m), 0.0);
  return f;
}

// Bandwidth-optimal ring: the reduce-scatter and all-gather halves stream 2(M-1) chunks of bytes/M
// through every ring edge i -> i+1 (up of i, down of i+1) at one common rate.
std::vector<PlanPhase> ring_plan(int64_t m) {
  PlanPhase p;
  p.latency_steps = 2 * (m - 1);
  PlanFlow f = empty_flow(m, 2.0 * static_cast<double>(m - 1) / static_cast<double>(m));
  std::fill(f.up_weight.begin(), f.up_weight.end(), 1.0);
  std::fill(f.down_weight.begin(), f.down_weight.end(), 1.0);
  p.flows.push_back(std::move(f));
  return {p};
}

// Double binary tree: tree 0 is the heap order (parent of i is (i-1)/2), tree 1 the mirror image
// (island i plays heap node M-1-i), so an island with two children in one tree is a leaf or has
// fewer children in the other. Each tree carries half the bytes; reduce (child -> parent) then
// broadcast (parent -> child), each floor(log2 M) latency steps deep.
std::vector<PlanPhase> tree_plan(int64_t m) {
  int64_t depth = 0;
  while ((int64_t{2} << depth) <= m) ++depth;  // floor(log2 m)
  std::vector<PlanPhase> phases(2);
  for (int phase = 0; phase < 2; ++phase) {
    phases[phase].latency_steps = depth;
    for (int tree = 0; tree < 2; ++tree) {
      PlanFlow f = empty_flow(m, 0.5);
      for (int64_t node = 1; node < m; ++node) {
        int64_t child = tree == 0 ? node : m - 1 - node;
        int64_t parent = tree == 0 ? (node - 1) / 2 : m - 1 - (node - 1) / 2;
        int64_t src = phase == 0 ? child : parent;
        int64_t dst = phase == 0 ? parent : child;
        f.up_weight[static_cast<size_t>(src)] += 1.0;
        f.down_weight[static_cast<size_t>(dst)] += 1.0;
      }
      phases[phase].flows.push_back(std::move(f));
    }
  }
  return phases;
}

class TimelineSim final : public sim::EventHandler, public sim::ActivityOwner, public sim::PendingWork {
 public:
  TimelineSim(const DilocoConfig& cfg, std::span<const double> step_time_s, double sync_bytes, uint64_t seed)
      : cfg_(cfg), sim_(seed) {
    const int64_t m = cfg.islands;
    const int64_t h = cfg.inner_steps;
    const int64_t f = cfg.sync.fragments;
    total_steps_ = h * cfg.outer_steps;
    fragment_bytes_ = sync_bytes / static_cast<double>(f);
    handler_ = sim_.add_handler(this);
    sim_.add_pending_work(this);
    plan_ = cfg.sync.algorithm == OuterAlgorithm::kRing ? ring_plan(m) : tree_plan(m);
    for (int64_t i = 0; i < m; ++i) {
      up_.push_back(sim_.fluid().add_constraint(cfg.sync.bandwidth_Bps, "island" + std::to_string(i) + ".wan.up"));
      down_.push_back(sim_.fluid().add_constraint(cfg.sync.bandwidth_Bps, "island" + std::to_string(i) + ".wan.down"));
    }
    for (auto& phase : plan_)
      for (auto& flow : phase.flows)
        for (int64_t i = 0; i < m; ++i) {
          if (flow.up_weight[i] > 0) flow.uses.push_back({up_[i], flow.up_weight[i]});
          if (flow.down_weight[i] > 0) flow.uses.push_back({down_[i], flow.down_weight[i]});
        }
    // Sync k = r*F + f is sent after step r*H + floor((f+1)*H/F) and needed tau steps later.
    const int64_t syncs = cfg.outer_steps * f;
    syncs_.resize(static_cast<size_t>(syncs));
    for (int64_t k = 0; k < syncs; ++k) {
      int64_t r = k / f, frag = k % f;
      syncs_[k].trigger = r * h + (frag + 1) * h / f;
      syncs_[k].deadline = syncs_[k].trigger + cfg.sync.overlap_steps;
    }
    islands_.resize(static_cast<size_t>(m));
    for (int64_t i = 0; i < m; ++i) islands_[i].step = sim::Time::from_seconds(step_time_s[i]);
    up_bytes_.assign(static_cast<size_t>(m), 0.0);
    down_bytes_.assign(static_cast<size_t>(m), 0.0);
  }

  DilocoTimeline run() {
    for (uint32_t i = 0; i < islands_.size(); ++i) try_advance(i);
    auto rr = sim_.run();
    SIM_ASSERT(!rr.deadlocked, "DiLoCo timeline deadlocked: " + rr.deadlock_report);
    DilocoTimeline out;
    const double m = static_cast<double>(islands_.size());
    for (const auto& isl : islands_) {
      SIM_ASSERT(isl.finished, "an island did not finish its rounds");
      double compute = (isl.step * total_steps_).seconds();
      double elapsed = isl.end.seconds();
      out.compute_s.push_back(compute);
      out.elapsed_s.push_back(elapsed);
      out.wait_s.push_back(elapsed - compute);
      out.utilization.push_back(elapsed > 0 ? compute / elapsed : 1.0);
      out.total_time_s = std::max(out.total_time_s, elapsed);
      out.wait_share += (elapsed > 0 ? (elapsed - compute) / elapsed : 0.0) / m;
    }
    double sum = 0;
    for (const auto& s : syncs_) {
      SIM_ASSERT(s.done, "an outer sync did not finish");
      sum += (s.end - s.start).seconds();
      out.drain_time_s = std::max(out.drain_time_s, s.end.seconds());
      if (s.end.seconds() > out.total_time_s) ++out.syncs_in_flight_at_end;
    }
    out.syncs = static_cast<int64_t>(syncs_.size());
    out.fragment_sync_time_s = sum / static_cast<double>(syncs_.size());
    out.outer_sync_time_s = sum / static_cast<double>(cfg_.outer_steps);
    out.wan_up_bytes = up_bytes_;
    out.wan_down_bytes = down_bytes_;
    out.events = sim_.events_processed();
    return out;
  }

  void on_event(uint32_t arg) override {
    const uint32_t m = static_cast<uint32_t>(islands_.size());
    if (arg < m) {
      Island& isl = islands_[arg];
      isl.computing = false;
      ++isl.steps_done;
      // Arrive at the sync this step completes, if any; the last arrival starts it.
      if (isl.next_arrival < syncs_.size() && syncs_[isl.next_arrival].trigger == isl.steps_done) {
        Sync& s = syncs_[isl.next_arrival];
        if (++s.arrived == islands_.size()) start_sync(isl.next_arrival);
        ++isl.next_arrival;
      }
      try_advance(arg);
    } else {
      start_phase_flows(arg - m);
    }
  }

  void on_activity_done(sim::ActivityId, uint64_t tag) override {
    uint32_t k = static_cast<uint32_t>(tag >> 8);
    uint32_t flow = static_cast<uint32_t>(tag & 0xFF);
    Sync& s = syncs_[k];
    const PlanFlow& pf = plan_[s.phase].flows[flow];
    double bytes = pf.bytes_fraction * fragment_bytes_;
    for (size_t i = 0; i < islands_.size(); ++i) {
      up_bytes_[i] += pf.up_weight[i] * bytes;
      down_bytes_[i] += pf.down_weight[i] * bytes;
    }
    if (--s.flows_left > 0) return;
    ++s.phase;
    if (s.phase < plan_.size()) {
      begin_phase(k);
      return;
    }
    s.done = true;
    s.end = sim_.now();
    // Islands blocked on this sync (or on an earlier one that just unblocked) may go on.
    for (uint32_t i = 0; i < islands_.size(); ++i)
      if (islands_[i].blocked) try_advance(i);
  }

  size_t pending_count() const override {
    size_t n = 0;
    for (const auto& isl : islands_) n += isl.finished ? 0 : 1;
    return n;
  }
  void describe_pending(std::string& out, size_t max_lines) const override {
    for (size_t i = 0; i < islands_.size() && max_lines > 0; ++i, --max_lines)
      if (!islands_[i].finished)
        out += "island " + std::to_string(i) + " after " + std::to_string(islands_[i].steps_done) +
               " inner steps waits on outer sync " + std::to_string(islands_[i].next_deadline) + "\n";
  }

 private:
  struct Island {
    sim::Time step;
    int64_t steps_done = 0;
    size_t next_arrival = 0;   // first sync this island has not arrived at
    size_t next_deadline = 0;  // first sync whose completion it has not yet needed
    bool computing = false;
    bool blocked = false;
    bool finished = false;
    sim::Time end;
  };
  struct Sync {
    int64_t trigger = 0;   // sent after this many inner steps
    int64_t deadline = 0;  // must be done before inner step deadline + 1 begins
    size_t arrived = 0;
    size_t phase = 0;
    uint32_t flows_left = 0;
    bool done = false;
    sim::Time start, end;
  };

  // Starts island i's next inner step, or finishes it, unless a sync due by now is unfinished.
  void try_advance(uint32_t i) {
    Island& isl = islands_[i];
    if (isl.computing || isl.finished) return;
    while (isl.next_deadline < syncs_.size() && syncs_[isl.next_deadline].deadline <= isl.steps_done) {
      if (!syncs_[isl.next_deadline].done) {
        isl.blocked = true;
        return;
      }
      ++isl.next_deadline;
    }
    isl.blocked = false;
    if (isl.steps_done == total_steps_) {
      isl.finished = true;
      isl.end = sim_.now();
      return;
    }
    isl.computing = true;
    sim_.schedule_after(isl.step, handler_, i);
  }

  void start_sync(size_t k) {
    syncs_[k].start = sim_.now();
    syncs_[k].phase = 0;
    begin_phase(k);
  }

  void begin_phase(size_t k) {
    const PlanPhase& p = plan_[syncs_[k].phase];
    sim::Time wait = cfg_.sync.latency * p.latency_steps;
    if (wait > sim::Time::zero())
      sim_.schedule_after(wait, handler_, static_cast<uint32_t>(islands_.size() + k));
    else
      start_phase_flows(static_cast<uint32_t>(k));
  }

  void start_phase_flows(uint32_t k) {
    Sync& s = syncs_[k];
    const PlanPhase& p = plan_[s.phase];
    s.flows_left = static_cast<uint32_t>(p.flows.size());
    for (uint32_t j = 0; j < p.flows.size(); ++j)
      sim_.fluid().start(p.flows[j].bytes_fraction * fragment_bytes_, p.flows[j].uses, sim::kUnbounded, this,
                         (static_cast<uint64_t>(k) << 8) | j);
  }

  DilocoConfig cfg_;
  sim::Simulation sim_;
  sim::HandlerId handler_;
  std::vector<PlanPhase> plan_;
  std::vector<sim::ConstraintId> up_, down_;
  std::vector<Island> islands_;
  std::vector<Sync> syncs_;
  std::vector<double> up_bytes_, down_bytes_;
  int64_t total_steps_ = 0;
  double fragment_bytes_ = 0;
};

}  // namespace

DilocoTimeline simulate_diloco_timeline(const DilocoConfig& config, std::span<const double> step_time_s,
                                        double sync_bytes, uint64_t seed) {
  SIM_ASSERT(config.islands >= 2 && config.inner_steps >= 1 && config.outer_steps >= 1, "bad DiLoCo config");
  SIM_ASSERT(config.sync.fragments >= 1 && config.sync.fragments <= config.inner_steps, "bad fragment count");
  SIM_ASSERT(config.sync.overlap_steps >= 0 && (config.sync.overlap_steps == 0 ||
                                                config.sync.overlap_steps * config.sync.fragments < config.inner_steps),
             "overlap_steps must be < inner_steps / fragments");
  SIM_ASSERT(static_cast<int64_t>(step_time_s.size()) == config.islands, "one step time per island");
  SIM_ASSERT(config.sync.bandwidth_Bps > 0, "bandwidth must be > 0");
  TimelineSim t(config, step_time_s, sync_bytes, seed);
  return t.run();
}

double ring_sync_seconds(int64_t islands, double bytes, double bandwidth_Bps, double latency_s) {
  double m = static_cast<double>(islands);
  return 2.0 * (m - 1.0) * (latency_s + bytes / (m * bandwidth_Bps));
}

double appendix_a_allreduce_bound_seconds(int64_t nodes, double bytes, double bandwidth_Bps, double eps_s) {
  return 2.0 * bytes / bandwidth_Bps * (1.0 - 1.0 / static_cast<double>(nodes)) + eps_s;
}

double ring_bandwidth_for_utilization(int64_t islands, int64_t inner_steps, double step_time_s, double bytes,
                                      double latency_s, double utilization) {
  // H T / (H T + S) = u  <=>  S = H T (1 - u) / u, and S = 2(M-1) latency + 2(M-1)/M bytes / W.
  double m = static_cast<double>(islands);
  double allowed = static_cast<double>(inner_steps) * step_time_s * (1.0 - utilization) / utilization;
  double for_bytes = allowed - 2.0 * (m - 1.0) * latency_s;
  if (for_bytes <= 0) return std::numeric_limits<double>::infinity();
  return 2.0 * (m - 1.0) / m * bytes / for_bytes;
}

}  // namespace wl
