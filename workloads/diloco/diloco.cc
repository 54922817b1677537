// workloads/diloco/diloco.cc: binding of `workload: {kind: diloco}`, the run (one island step, then
// the outer-round timelines) and the readable summary.
//
//   workload:
//     kind: diloco
//     islands: 4              # M >= 2 identical islands, each one copy of `cluster:`
//     inner_steps: 100        # H >= 1
//     outer_steps: 3          # rounds simulated (default 1)
//     island: {model: ..., training: ..., parallelism: ..., schedule: ...}   # as kind: training
//     outer_sync:
//       precision: bf16       # fp32 | bf16 | fp8 | fp4: 4 / 2 / 1 / 0.5 bytes per parameter (default bf16)
//       bandwidth: 400Gbps    # per island, per direction (required)
//       latency: 10ms         # one-way (default 0s)
//       algorithm: ring       # ring | tree (default ring)
//       streaming: {fragments: 4, overlap_steps: 1}   # optional; fragments <= layers
#include "workloads/diloco/diloco.h"

#include <algorithm>
#include <utility>
#include <cmath>
#include <cstdio>
#include <string>

#include "sim/config.h"
#include "sim/error.h"
#include "sim/simulation.h"
#include "sim/units.h"
#include "workloads/model/transformer.h"

namespace wl {

namespace {

// The data-parallel reference syncs every step; its timeline is periodic, so a bounded number of
// steps gives the same averages as the full run at a fraction of the events.
constexpr int64_t kMaxDataParallelSteps = 1000;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

}  // namespace

DilocoSettings bind_diloco(const sim::ConfigNode& w, const topo::GpuSpec& gpu, uint32_t gpus,
                           uint64_t memory_limit, SpareNodes spares) {
  DilocoSettings s;
  DilocoConfig& c = s.config;
  c.islands = w.get_int("islands");
  if (c.islands < 2) w.child("islands").fail("DiLoCo needs at least 2 islands, got " + std::to_string(c.islands));
  if (c.islands > 4096) w.child("islands").fail("must be <= 4096, got " + std::to_string(c.islands));
  c.inner_steps = w.get_int("inner_steps");
  if (c.inner_steps < 1) w.child("inner_steps").fail("must be >= 1, got " + std::to_string(c.inner_steps));
  if (c.inner_steps > (int64_t{1} << 30)) w.child("inner_steps").fail("must be <= 2^30");
  c.outer_steps = w.get_int_in("outer_steps", 1, 100000, 1);
  // Each inner step is an event of each island: 10^14 of them (2^30 x 100,000) never finish.
  if (static_cast<__int128>(c.inner_steps) * c.outer_steps > (int64_t{1} << 32))
    w.child("outer_steps").fail("inner_steps x outer_steps = " + std::to_string(c.inner_steps) + " x " +
                                std::to_string(c.outer_steps) + " is more than 2^32 simulated inner steps");
  s.island = bind_training(w.child("island"), gpu, gpus, memory_limit, spares);

  auto o = w.child("outer_sync");
  OuterSyncConfig& sc = c.sync;
  // fp4: Streaming DiLoCo sends its outer gradients quantised to 4 bits (E3M0) with no loss it
  // could measure (Douillard et al., arXiv 2501.18512, section 3.3).
  sc.precision = o.get_enum("precision", {"fp32", "bf16", "fp8", "fp4"}, "bf16");
  sc.bytes_per_param = sc.precision == "fp32" ? 4.0 : sc.precision == "bf16" ? 2.0 : sc.precision == "fp8" ? 1.0 : 0.5;
  sc.bandwidth_Bps = o.get_bandwidth("bandwidth");
  if (!(sc.bandwidth_Bps > 0)) o.child("bandwidth").fail("the inter-island bandwidth must be > 0");
  sc.latency = o.get_duration("latency", sim::Time::zero());
  sc.algorithm =
      o.get_enum("algorithm", {"ring", "tree"}, "ring") == "ring" ? OuterAlgorithm::kRing : OuterAlgorithm::kTree;
  if (auto st = o.find("streaming")) {
    sc.streaming = true;
    sc.fragments = st->get_int("fragments");
    const int64_t layers = s.island.job.model.layers;
    if (sc.fragments < 1 || sc.fragments > layers)
      st->child("fragments")
          .fail("must be between 1 and the model's " + std::to_string(layers) +
                " layers (a fragment is a group of whole layers), got " + std::to_string(sc.fragments));
    if (sc.fragments > c.inner_steps)
      st->child("fragments")
          .fail("must be <= inner_steps (" + std::to_string(c.inner_steps) +
                "): each fragment is sent after its own inner step, got " + std::to_string(sc.fragments));
    sc.overlap_steps = st->get_int("overlap_steps", 0);
    if (sc.overlap_steps < 0) st->child("overlap_steps").fail("must be >= 0, got " + std::to_string(sc.overlap_steps));
    // Streaming DiLoCo sends a fragment every H/F steps; overlapping past the next one would let a
    // fragment's next sync start before its previous one was applied.
    if (sc.overlap_steps > 0 &&
        static_cast<__int128>(sc.overlap_steps) * sc.fragments >= static_cast<__int128>(c.inner_steps))
      st->child("overlap_steps")
          .fail("must be < inner_steps / fragments = " + std::to_string(c.inner_steps) + " / " +
                std::to_string(sc.fragments) + ", got " + std::to_string(sc.overlap_steps));
  }
  return s;
}

DilocoResult run_diloco(topo::ClusterResources& res, const DilocoSettings& s) {
  StepResult step = run_training_step(res, s.island, {});
  if (step.outcome != StepOutcome::kCompleted)
    throw sim::UserError("the island's training step did not complete: " + step.report);
  return diloco_after_island_step(s, std::move(step), res.simulation().seed());
}

DilocoResult diloco_after_island_step(const DilocoSettings& s, StepResult island_step, uint64_t seed) {
  DilocoResult r;
  const DilocoConfig& c = s.config;
  r.step = std::move(island_step);
  r.params = static_cast<double>(count_params(s.island.job.model).total);
  r.sync_bytes = r.params * c.sync.bytes_per_param;
  const double lat = c.sync.latency.seconds();
  r.idle_sync_s = ring_sync_seconds(c.islands, r.sync_bytes, c.sync.bandwidth_Bps, lat);
  r.appendix_a_bound_s =
      appendix_a_allreduce_bound_seconds(c.islands, r.sync_bytes, c.sync.bandwidth_Bps, 2.0 * (c.islands - 1) * lat);

  // Islands are identical: one simulated island step stands for every island's inner step.
  std::vector<double> steps(static_cast<size_t>(c.islands), r.step.step_time_s);
  r.diloco = simulate_diloco_timeline(c, steps, r.sync_bytes, seed);
  const double islands = static_cast<double>(c.islands);
  r.tokens_per_s =
      islands * r.step.tokens_per_step * static_cast<double>(c.inner_steps * c.outer_steps) / r.diloco.total_time_s;

  DilocoConfig dp = c;
  dp.inner_steps = 1;
  dp.outer_steps = std::min(c.inner_steps * c.outer_steps, kMaxDataParallelSteps);
  dp.sync.fragments = 1;
  dp.sync.overlap_steps = 0;
  dp.sync.streaming = false;
  r.data_parallel_steps = dp.outer_steps;
  r.data_parallel = simulate_diloco_timeline(dp, steps, r.sync_bytes, seed);
  r.data_parallel_tokens_per_s =
      islands * r.step.tokens_per_step * static_cast<double>(dp.outer_steps) / r.data_parallel.total_time_s;
  return r;
}

std::string format_diloco_summary(const DilocoSettings& s, const DilocoResult& r) {
  const DilocoConfig& c = s.config;
  const auto& job = s.island.job;
  std::string out;
  auto line = [&](const std::string& l) { out += l + "\n"; };
  auto mean = [](const std::vector<double>& v) {
    double t = 0;
    for (double x : v) t += x;
    return v.empty() ? 0.0 : t / static_cast<double>(v.size());
  };
  line("DiLoCo: " + std::to_string(c.islands) + " islands x " + std::to_string(job.world()) +
       " GPUs, H = " + std::to_string(c.inner_steps) + " inner steps per outer round, " +
       std::to_string(c.outer_steps) + " outer round(s) simulated");
  line("  islands are identical: ONE island step was simulated on the island cluster and stands for all");
  line("  inner step T       " + fmt("%10.4f s", r.step.step_time_s) + "   (" + fmt("%.0f", r.step.tokens_per_step) +
       " tokens per island per step, MFU " + fmt("%.1f %%", r.step.mfu * 100) + ")");
  std::string alg = c.sync.algorithm == OuterAlgorithm::kRing ? "ring" : "double binary tree";
  line("  outer sync         " + alg + " all-reduce of " + fmt("%.3g", r.params) + " params x " +
       fmt("%g", c.sync.bytes_per_param) + " B (" + c.sync.precision + ") = " + sim::format_bytes(r.sync_bytes) +
       " per island, over " + sim::format_bandwidth(c.sync.bandwidth_Bps) + " per island per direction, " +
       sim::format_duration(c.sync.latency) + " one-way latency");
  if (c.sync.streaming)
    line("  streaming          " + std::to_string(c.sync.fragments) + " fragments of " +
         sim::format_bytes(r.sync_bytes / static_cast<double>(c.sync.fragments)) + ", staggered every " +
         fmt("%.3g", static_cast<double>(c.inner_steps) / static_cast<double>(c.sync.fragments)) +
         " steps, each may overlap " + std::to_string(c.sync.overlap_steps) + " inner step(s)");
  else
    line("  streaming          none: every island waits for the whole outer all-reduce");
  line("  idle-WAN ring sync " + fmt("%10.4f s", r.idle_sync_s) + "   2(M-1)(latency + bytes/(M x bandwidth))");
  line("  Appendix A bound   " + fmt("%10.4f s", r.appendix_a_bound_s) +
       "   2N/W (1 - 1/M) + eps, arXiv 2503.09799 App. A with R = M islands, eps = 2(M-1) x latency");
  line("");
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-34s %16s %16s", "", "DiLoCo", "data-parallel");
  line(buf);
  auto row = [&](const char* label, double a, double b, const char* f) {
    char x[64], y[64];
    std::snprintf(x, sizeof x, f, a);
    std::snprintf(y, sizeof y, f, b);
    std::snprintf(buf, sizeof buf, "  %-34s %16s %16s", label, x, y);
    line(buf);
  };
  const auto& d = r.diloco;
  const auto& p = r.data_parallel;
  row("inner steps simulated per island", static_cast<double>(c.inner_steps * c.outer_steps),
      static_cast<double>(r.data_parallel_steps), "%.0f");
  row("total time (s)", d.total_time_s, p.total_time_s, "%.3f");
  row("compute utilisation (mean)", mean(d.utilization) * 100, mean(p.utilization) * 100, "%.2f %%");
  row("waiting for outer syncs", d.wait_share * 100, p.wait_share * 100, "%.2f %%");
  row("outer sync time per round (s)", d.outer_sync_time_s, p.outer_sync_time_s, "%.4f");
  row("tokens/s, all islands", r.tokens_per_s, r.data_parallel_tokens_per_s, "%.0f");
  std::snprintf(buf, sizeof buf, "  %-34s %16s %16s", "WAN bytes sent per island per round",
                sim::format_bytes(d.wan_up_bytes[0] / static_cast<double>(c.outer_steps)).c_str(),
                sim::format_bytes(p.wan_up_bytes[0] / static_cast<double>(r.data_parallel_steps)).c_str());
  line(buf);
  std::string per = "  compute utilisation per island:";
  for (double u : d.utilization) per += fmt(" %.4f", u);
  line(per);
  if (d.syncs_in_flight_at_end > 0)
    line("  " + std::to_string(d.syncs_in_flight_at_end) +
         " fragment sync(s) still in flight at the end (needed only in the next round); last one done at " +
         fmt("%.3f s", d.drain_time_s));
  line("  data-parallel = the same islands with H = 1 and no streaming: the full gradient all-reduced across");
  line("  the WAN after every step, not overlapped with compute (cf. the Data-Parallel rows of Table 6 of");
  line("  arXiv 2503.09799, whose simulator may overlap it with the backward pass)");
  line("  assumed: gathering the shards to each island's gateway is hidden; the outer optimizer step is free");
  line("  (" + std::to_string(d.events) + " events in the outer-round timeline, " + std::to_string(p.events) +
       " in the data-parallel reference)");
  return out;
}

}  // namespace wl
