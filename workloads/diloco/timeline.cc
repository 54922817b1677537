// workloads/diloco/timeline.cc: the DiLoCo outer rounds as a JobProgram on the WAN topology, run by
// the ProgramExecutor and the CollectiveRuntime on a sim::Simulation of their own; the timeline is
// read off the executor (category seconds) and its op spans (an observer on the simulation's bus).
#include <algorithm>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "sim/error.h"
#include "sim/observer.h"
#include "sim/simulation.h"
#include "topology/cluster_resources.h"
#include "topology/hardware_profile.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/runtime.h"
#include "workloads/diloco/diloco.h"
#include "workloads/program/executor.h"

namespace wl {

namespace {

constexpr uint16_t kComputeStream = 0;
constexpr const char* kSyncCategory = "outer sync";

// When each sync is sent and when it is due, in inner steps counted from 1: sync k = r*F + f is
// sent after step r*H + floor((f+1)*H/F) and must be done before step (that + tau + 1) begins.
// Both are strictly increasing in k (F <= H).
struct SyncSchedule {
  int64_t total_steps = 0;
  std::vector<int64_t> sent_after, due_after;
};

SyncSchedule schedule_of(const DilocoConfig& c) {
  SyncSchedule s;
  const int64_t h = c.inner_steps, f = c.sync.fragments;
  s.total_steps = h * c.outer_steps;
  const int64_t syncs = c.outer_steps * f;
  for (int64_t k = 0; k < syncs; ++k) {
    s.sent_after.push_back((k / f) * h + (k % f + 1) * h / f);
    s.due_after.push_back(s.sent_after.back() + c.sync.overlap_steps);
  }
  return s;
}

// One island's program. Sync k waits for step sent_after[k]; step c + 1 waits for the sync due
// after step c; the closing marker on the compute stream waits for the sync due after the last
// step, if any. Sync k runs on stream 1 + k % 2: a sync may be sent in the step its predecessor
// is due (tau equal to the spacing of two fragments), so two can be in flight, but never three
// (sync k is sent after every island began step sent_after[k] > due_after[k-2], so sync k-2 is
// done): neither stream ever makes a sync wait behind another.
Program island_program(const SyncSchedule& s, double step_s, double fragment_bytes, uint16_t sync_category) {
  Program p;
  p.add_stream("compute");
  p.add_stream("sync");
  p.add_stream("sync.next");
  const uint32_t step_name = p.intern("inner step");
  const uint32_t sync_name = p.intern("outer sync");
  const uint32_t end_name = p.intern("rounds done");
  const size_t syncs = s.sent_after.size();
  std::vector<uint32_t> sync_op(syncs);
  size_t next_sent = 0, next_due = 0;
  std::vector<uint32_t> deps;
  for (int64_t step = 1; step <= s.total_steps; ++step) {
    deps.clear();
    while (next_due < syncs && s.due_after[next_due] == step - 1) deps.push_back(sync_op[next_due++]);
    Op d;
    d.kind = OpKind::kDelay;
    d.stream = kComputeStream;
    d.category = 0;  // JobProgram's "compute"
    d.seconds = step_s;
    d.name = step_name;
    const uint32_t step_op = p.add(d, deps);
    while (next_sent < syncs && s.sent_after[next_sent] == step) {
      Op c;
      c.kind = OpKind::kCollective;
      c.coll = CollectiveOp::kAllReduce;
      c.comm = 0;
      c.stream = static_cast<uint16_t>(1 + next_sent % 2);
      c.category = sync_category;
      c.bytes = fragment_bytes;
      c.name = sync_name;
      c.external_id = next_sent + 1;
      sync_op[next_sent] = p.add(c, {step_op});
      ++next_sent;
    }
  }
  deps.clear();
  while (next_due < syncs && s.due_after[next_due] <= s.total_steps) deps.push_back(sync_op[next_due++]);
  Op end;
  end.kind = OpKind::kMarker;
  end.stream = kComputeStream;
  end.category = sync_category;
  end.name = end_name;
  p.add(end, deps);
  p.finalize();
  return p;
}

// The executor's op spans, as the timeline needs them: per rank the end of its compute stream
// (the closing marker is its last op), per sync its last member's arrival (the latest start of its
// members' spans: a collective op starts when its rank issues it) and its end.
class SpanLog final : public sim::Observer {
 public:
  SpanLog(uint32_t ranks, size_t syncs, uint32_t external_id_key)
      : compute_end(ranks, sim::Time::zero()),
        sync_start(syncs, sim::Time::zero()),
        sync_end(syncs, sim::Time::zero()),
        sync_spans(syncs, 0),
        key_(external_id_key) {}

  void on_span(const sim::SpanRecord& r, const sim::NameTable&) override {
    if (r.thread == kComputeStream) {
      compute_end[r.process] = std::max(compute_end[r.process], r.end);
      return;
    }
    for (const sim::SpanArg& a : r.args) {
      if (a.key != key_) continue;
      const auto k = static_cast<size_t>(a.value) - 1;
      sync_start[k] = std::max(sync_start[k], r.start);
      sync_end[k] = r.end;
      ++sync_spans[k];
    }
  }

  std::vector<sim::Time> compute_end, sync_start, sync_end;
  std::vector<uint32_t> sync_spans;  // members whose span of the sync ended

 private:
  uint32_t key_;
};

}  // namespace

topo::Topology build_wan_topology(int64_t islands, double bandwidth_Bps, sim::Time latency) {
  SIM_ASSERT(islands >= 1, "the WAN needs at least one island");
  const auto m = static_cast<uint32_t>(islands);
  const sim::Time down = sim::Time::ns(latency.count_ns() / 2);
  const sim::Time up = latency - down;
  topo::EdgeListSpec spec;
  spec.num_gpus = m;
  spec.gpus_per_node = 1;
  spec.other_vertices = {"wan"};
  for (uint32_t i = 0; i < m; ++i) {
    spec.edges.push_back(topo::EdgeSpec{i, m, bandwidth_Bps, up, false, false});
    spec.edges.push_back(topo::EdgeSpec{m, i, bandwidth_Bps, down, false, false});
  }
  return topo::build_edge_list(spec);
}

JobProgram diloco_outer_program(const DilocoConfig& config, std::span<const double> step_time_s, double sync_bytes) {
  const SyncSchedule s = schedule_of(config);
  const double fragment_bytes = sync_bytes / static_cast<double>(config.sync.fragments);
  JobProgram jp;
  const uint16_t sync_category = jp.add_category(kSyncCategory);
  Communicator wan;
  wan.name = "wan";
  wan.algorithm = config.sync.algorithm == OuterAlgorithm::kRing ? Algorithm::kRing : Algorithm::kTree;
  for (uint32_t i = 0; i < static_cast<uint32_t>(config.islands); ++i) wan.members.push_back(i);
  jp.add_comm(std::move(wan));
  std::map<double, uint32_t> template_of_step;  // identical islands share one program
  for (int64_t i = 0; i < config.islands; ++i) {
    const double t = step_time_s[static_cast<size_t>(i)];
    auto [it, inserted] = template_of_step.emplace(t, static_cast<uint32_t>(jp.templates.size()));
    if (inserted) jp.templates.push_back(island_program(s, t, fragment_bytes, sync_category));
    jp.template_of_rank.push_back(it->second);
  }
  jp.rank_label = [](uint32_t rank) { return "island " + std::to_string(rank); };
  return jp;
}

DilocoTimeline simulate_diloco_timeline(const DilocoConfig& config, std::span<const double> step_time_s,
                                        double sync_bytes, uint64_t seed, const topo::GpuSpec& gateway) {
  SIM_ASSERT(config.islands >= 2 && config.inner_steps >= 1 && config.outer_steps >= 1, "bad DiLoCo config");
  SIM_ASSERT(config.sync.fragments >= 1 && config.sync.fragments <= config.inner_steps, "bad fragment count");
  SIM_ASSERT(config.sync.overlap_steps >= 0 && (config.sync.overlap_steps == 0 ||
                                                config.sync.overlap_steps * config.sync.fragments < config.inner_steps),
             "overlap_steps must be < inner_steps / fragments");
  SIM_ASSERT(static_cast<int64_t>(step_time_s.size()) == config.islands, "one step time per island");
  SIM_ASSERT(config.sync.bandwidth_Bps > 0, "bandwidth must be > 0");

  const JobProgram job = diloco_outer_program(config, step_time_s, sync_bytes);
  const uint32_t m = job.world();
  const size_t syncs = static_cast<size_t>(config.outer_steps * config.sync.fragments);
  const topo::Topology wan = build_wan_topology(config.islands, config.sync.bandwidth_Bps, config.sync.latency);
  // The WAN latency is the whole cost of an algorithm step: no NCCL software overhead on top.
  topo::HardwareProfile profile = topo::default_profile(gateway);
  profile.step_overhead = sim::Time::zero();

  sim::Simulation sim(seed);
  SpanLog log(m, syncs, sim.observers().names().intern("external_id"));
  sim.observers().attach(&log);
  topo::ClusterResources res(sim, wan, gateway, profile);
  RuntimeOptions ro;
  ro.step_overhead = profile.step_overhead;
  CollectiveRuntime runtime(res, ro);
  ExecutorOptions eo;
  for (uint32_t r = 0; r < m; ++r) eo.trace_ranks.push_back(r);  // every rank's spans feed the log
  ProgramExecutor exec(res, runtime, job, cluster_shape_of(wan), cost_hints_for(res, ro), eo);
  sim.add_pending_work(&exec);
  exec.start();
  const sim::RunResult rr = sim.run();
  sim.finish();
  SIM_ASSERT(exec.error().empty(), "DiLoCo outer program failed: " + exec.error());
  SIM_ASSERT(!rr.deadlocked && exec.finished(), "DiLoCo outer rounds deadlocked: " + rr.deadlock_report);

  DilocoTimeline out;
  const uint16_t compute_cat = 0;
  const uint16_t sync_cat = static_cast<uint16_t>(
      std::find(job.categories.begin(), job.categories.end(), kSyncCategory) - job.categories.begin());
  for (uint32_t i = 0; i < m; ++i) {
    const double compute = exec.category_seconds(i, compute_cat);
    const double wait = exec.category_seconds(i, sync_cat);
    const double elapsed = (log.compute_end[i] - exec.step_start()).seconds();
    out.compute_s.push_back(compute);
    out.wait_s.push_back(wait);
    out.elapsed_s.push_back(elapsed);
    out.utilization.push_back(elapsed > 0 ? compute / elapsed : 1.0);
    out.total_time_s = std::max(out.total_time_s, elapsed);
    out.wait_share += (elapsed > 0 ? wait / elapsed : 0.0) / static_cast<double>(m);
  }

  // Bytes one sync puts on each gateway's up and down link: its plan (lowered as the executor
  // lowers it) routed over the WAN.
  CollectiveRequest req;
  req.op = CollectiveOp::kAllReduce;
  req.algorithm = job.comms[0].algorithm;
  req.group = job.comms[0].members;
  req.bytes = sync_bytes / static_cast<double>(config.sync.fragments);
  const CollectivePlan plan = lower_collective(req, cluster_shape_of(wan));
  std::vector<double> up(m, 0.0), down(m, 0.0);
  topo::Route route;
  for (const Phase& ph : plan.phases)
    for (const Transfer& tr : ph.transfers)
      for (auto [src, dst] : tr.hops) {
        wan.route(src, dst, 0, route);
        for (uint32_t l : route.links) {
          const topo::Link& link = wan.links()[l];
          if (link.src < m) up[link.src] += tr.bytes;
          if (link.dst < m) down[link.dst] += tr.bytes;
        }
      }

  out.wan_up_bytes.assign(m, 0.0);
  out.wan_down_bytes.assign(m, 0.0);
  double sum = 0;
  for (size_t k = 0; k < syncs; ++k) {
    SIM_ASSERT(log.sync_spans[k] == m, "an outer sync did not finish on every island");
    const double end = (log.sync_end[k] - exec.step_start()).seconds();
    sum += (log.sync_end[k] - log.sync_start[k]).seconds();
    out.drain_time_s = std::max(out.drain_time_s, end);
    if (end > out.total_time_s) ++out.syncs_in_flight_at_end;
    for (uint32_t i = 0; i < m; ++i) {
      out.wan_up_bytes[i] += up[i];
      out.wan_down_bytes[i] += down[i];
    }
  }
  out.syncs = static_cast<int64_t>(syncs);
  out.fragment_sync_time_s = sum / static_cast<double>(syncs);
  out.outer_sync_time_s = sum / static_cast<double>(config.outer_steps);
  out.events = sim.events_processed();
  return out;
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
