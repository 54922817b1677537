// sim/app/replay.cc: `clustersim replay TRACE...`: PyTorch profiler traces, one per rank, replayed
// with their measured kernel and collective durations (traces/kineto/kineto.h); per rank, the
// measured and the replayed iteration time (first GPU activity to last).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include <nlohmann/json.hpp>

#include "sim/app/commands.h"
#include "sim/error.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "traces/chrome/chrome_trace.h"
#include "traces/chakra/chakra.h"
#include "traces/kineto/kineto.h"
#include "traces/pytorch_et/execution_trace.h"
#include "workloads/job/scenario.h"
#include "workloads/program/critical_path.h"
#include "workloads/program/executor.h"

namespace app {

namespace {

// Dense tensor peak for GEMM and attention kernels: BF16, else FP16 (V100 has no BF16).
double tensor_peak(const topo::GpuSpec& g) { return g.peak_bf16_flops > 0 ? g.peak_bf16_flops : g.peak_fp16_flops; }

// Measured kernels from `sg` with profile `sp` scaled to `dg` with `dp` (traces::KernelScaling).
traces::KernelScaling kernel_scaling(const topo::GpuSpec& sg, const topo::HardwareProfile& sp, const topo::GpuSpec& dg,
                                     const topo::HardwareProfile& dp) {
  traces::KernelScaling k;
  k.on = true;
  auto set = [&](traces::MeasuredClass c, double src_rate, double dst_rate, sim::Time src_lat, sim::Time dst_lat) {
    const auto i = static_cast<size_t>(c);
    if (!(src_rate > 0) || !(dst_rate > 0))
      throw sim::UserError(std::string("--measured-on: no ") + traces::measured_class_name(c) + " rate for " +
                           (src_rate > 0 ? dg.name : sg.name) + " in the catalog: cannot scale");
    k.ratio[i] = src_rate / dst_rate;
    k.src_latency_s[i] = src_lat.seconds();
    k.dst_latency_s[i] = dst_lat.seconds();
  };
  set(traces::MeasuredClass::kTensorGemm, tensor_peak(sg) * sp.gemm_efficiency, tensor_peak(dg) * dp.gemm_efficiency,
      sp.gemm_latency, dp.gemm_latency);
  set(traces::MeasuredClass::kFp32Gemm, sg.peak_fp32_flops * sp.gemm_efficiency, dg.peak_fp32_flops * dp.gemm_efficiency,
      sp.gemm_latency, dp.gemm_latency);
  // Attention by direction; the sequence overheads are not applied (a kernel's name gives no
  // sequence length), only the efficiencies' ratio.
  set(traces::MeasuredClass::kAttention, tensor_peak(sg) * sp.attention_efficiency,
      tensor_peak(dg) * dp.attention_efficiency, sp.attention_latency, dp.attention_latency);
  set(traces::MeasuredClass::kAttentionBackward, tensor_peak(sg) * topo::attention_efficiency(sp, true),
      tensor_peak(dg) * topo::attention_efficiency(dp, true), sp.attention_latency, dp.attention_latency);
  set(traces::MeasuredClass::kMemoryBound, sg.hbm_bandwidth_Bps * sp.memory_efficiency,
      dg.hbm_bandwidth_Bps * dp.memory_efficiency, sp.kernel_latency, dp.kernel_latency);
  // Foreach kernels at their own fraction of the HBM where the profile has one.
  auto foreach_eff = [](const topo::HardwareProfile& p) {
    return p.foreach_efficiency > 0 ? p.foreach_efficiency : p.memory_efficiency;
  };
  set(traces::MeasuredClass::kForeach, sg.hbm_bandwidth_Bps * foreach_eff(sp), dg.hbm_bandwidth_Bps * foreach_eff(dp),
      sp.kernel_latency, dp.kernel_latency);
  // Unvectorized elementwise kernels at their element rates where both profiles have one, else as
  // the memory-bound ones.
  const bool rates = sp.unvectorized_elementwise_rate > 0 && dp.unvectorized_elementwise_rate > 0;
  set(traces::MeasuredClass::kUnvectorized,
      rates ? sp.unvectorized_elementwise_rate : sg.hbm_bandwidth_Bps * sp.memory_efficiency,
      rates ? dp.unvectorized_elementwise_rate : dg.hbm_bandwidth_Bps * dp.memory_efficiency, sp.kernel_latency,
      dp.kernel_latency);
  return k;
}

}  // namespace

int cmd_replay(const ReplayOptions& opt) {
  refuse_stdout(opt.trace, "--trace", "a trace is big, and gzip'ed when its name ends in .gz");
  // --json - : the JSON is all that stdout holds (no report, as with --quiet).
  const bool quiet = output_to_stdout({{opt.json, "--json"}}) || opt.quiet;
  check_output(opt.json, "--json");
  check_output(opt.trace, "--trace");
  const bool chakra = traces::is_chakra_path(opt.traces.front());
  for (const auto& f : opt.traces)
    if (traces::is_chakra_path(f) != chakra)
      throw sim::UserError(f + ": give either Chakra traces (.et) or PyTorch profiler traces, not both");
  std::vector<traces::KinetoRank> ranks;
  traces::ReplayOptions ro;
  traces::ReplayProgram rp;
  if (chakra) {
    // Chakra: nodes carry compute durations; collectives are simulated, except in one trace alone,
    // where they keep their measured time (timed ops of the communication category).
    std::vector<traces::ChakraRank> cr;
    for (const auto& f : opt.traces) cr.push_back(traces::read_chakra(f));
    rp.job = traces::chakra_program(cr);
    // Per rank, as rank 0 has them (chakra_program refuses ranks whose all-rank collectives differ).
    for (const wl::Op& op : rp.job.templates[rp.job.template_of_rank[0]].ops())
      rp.collectives += op.kind == wl::OpKind::kCollective || (op.kind == wl::OpKind::kTimed && op.category == 2);
    rp.measured_s.assign(cr.size(), 0);
    rp.offset_s.assign(cr.size(), 0);
    for (const auto& c : cr) {
      traces::KinetoRank k;
      k.file = c.file;
      ranks.push_back(std::move(k));
    }
    if (!opt.execution_traces.empty()) throw sim::UserError("--et: Chakra traces carry their collectives' sizes already");
  }
  traces::KinetoReadOptions kro;
  kro.log = opt.log;
  if (!chakra) for (const auto& f : opt.traces) ranks.push_back(traces::read_kineto(f, kro));
  if (!chakra && !opt.execution_traces.empty() && opt.cluster.empty())
    throw sim::UserError("--et gives collective sizes to simulate on a cluster: give --cluster SCENARIO too");
  if (!chakra && !opt.cluster.empty()) {
    // Sizes from the execution traces, else from the profiler traces where they record them.
    ro.collective_sizes = traces::read_paired_execution_traces(ranks, opt.execution_traces);
    ro.simulate_recorded = opt.execution_traces.empty();
  }
  std::unique_ptr<wl::Scenario> sc, src;
  if (!opt.cluster.empty())
    sc = std::make_unique<wl::Scenario>(
        wl::bind_scenario(sim::ConfigDoc::load_file(opt.cluster), opt.cluster, /*with_workload=*/false));
  if (!opt.measured_on.empty()) {
    if (chakra) throw sim::UserError("--measured-on scales measured kernels: Chakra traces hold no measurements");
    if (!sc) throw sim::UserError("--measured-on needs --cluster: the cluster to scale the measured kernels to");
    src = std::make_unique<wl::Scenario>(
        wl::bind_scenario(sim::ConfigDoc::load_file(opt.measured_on), opt.measured_on, /*with_workload=*/false));
    ro.scaling = kernel_scaling(src->cluster.gpu, src->cluster.profile, sc->cluster.gpu, sc->cluster.profile);
    // The scaling starts from --measured-on's accelerator: traces from another model start wrong.
    for (const auto& r : ranks)
      if (!r.device.empty() && !topo::device_is(src->cluster.gpu, r.device)) {
        std::fprintf(stderr, "clustersim replay: warning: %s was measured on '%s', not on %s's %s\n", r.file.c_str(),
                     r.device.c_str(), opt.measured_on.c_str(), src->cluster.gpu.name.c_str());
        break;
      }
  }
  if (!chakra) rp = traces::replay_program(ranks, ro);
  const uint32_t world = static_cast<uint32_t>(ranks.size());
  // One profiler trace alone keeps its collectives as measured (traces/kineto/kineto.h).
  const bool simulated_collectives = world > 1 && (chakra || sc);
  if (sc) {
    if (sc->topology->num_gpus() < world)
      throw sim::UserError(opt.cluster + ": its cluster has " + std::to_string(sc->topology->num_gpus()) +
                           " GPUs for " + std::to_string(world) + " ranks");
  }

  // Measured collectives need no network: one node of `world` accelerators stands for the job.
  sim::Simulation sim(1);
  sim.set_log(opt.log);
  std::unique_ptr<traces::ChromeTraceWriter> trace;
  if (!opt.trace.empty()) {
    traces::ChromeTraceOptions to;
    to.path = opt.trace;
    for (uint32_t r = 0; r < 2 * world; ++r) to.processes.insert(r);  // replayed ranks, then measured
    trace = std::make_unique<traces::ChromeTraceWriter>(to);
    trace->set_metadata("generator", "clustersim replay");
    sim.observers().attach(trace.get());
  }
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  std::unique_ptr<topo::Topology> own;
  if (!sc) own = std::make_unique<topo::Topology>(topo::build_scale_up(world, su));
  const topo::Topology& topo = sc ? *sc->topology : *own;
  const topo::GpuSpec gpu = sc ? sc->cluster.gpu : topo::find_gpu("h100-sxm");
  const topo::HardwareProfile profile = sc ? sc->cluster.profile : topo::default_profile(gpu);
  wl::ExecutorOptions eo;
  for (uint32_t r = 0; r < world; ++r) eo.trace_ranks.push_back(r);
  eo.record_op_times = true;  // for the critical paths
  const wl::ProgramRun run = wl::run_program(sim, topo, gpu, profile, rp.job, eo);
  // Per profiler step (traces that record ProfilerStep#N annotations).
  std::vector<std::vector<traces::StepTime>> steps(world);
  bool several_steps = false;
  if (!chakra && run.finished)
    for (uint32_t r = 0; r < world; ++r) {
      steps[r] = traces::step_times(ranks[r], rp.op_of_activity[r], run.op_times[r]);
      several_steps = several_steps || steps[r].size() > 1;
    }
  if (!chakra) {
    traces::emit_measured(ranks, rp.t0_ns, world, sim.observers());  // beside the replay
    for (uint32_t r = 0; r < world; ++r) traces::emit_steps(steps[r], rp.t0_ns, r, world + r, sim.observers());
  }
  sim.finish();
  if (!run.finished) {
    std::fprintf(stderr, "clustersim: the replay did not complete: %s\n", run.problem.c_str());
    return 3;
  }
  nlohmann::ordered_json j;
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  if (!quiet) {
    if (chakra) {
      std::printf("replay of %s, %s per rank %s\n\n", count_noun(world, "Chakra trace", "Chakra traces").c_str(),
                  count_noun(rp.collectives, "collective", "collectives").c_str(),
                  !simulated_collectives ? "as measured (one trace: its peers' traces are needed to simulate them)"
                  : sc                   ? ("simulated on the cluster of " + opt.cluster).c_str()
                                         : "simulated on one H100 NVSwitch node (--cluster to choose)");
    } else {
      std::printf("replay of %s, %s per rank %s\n\n", count_noun(world, "rank trace", "rank traces").c_str(),
                  count_noun(rp.collectives, "collective", "collectives").c_str(),
                  simulated_collectives ? ("simulated on the cluster of " + opt.cluster).c_str()
                  : sc && rp.collectives > 0
                      ? "as measured (one trace: its peers' traces are needed to simulate them)"
                      : "as measured");
    }
    if (src) {
      std::printf("what-if: measured on %s (%s), replayed on %s (%s). Assumed: each kernel is scaled by its class\n"
                  "(from its name) through both hardware profiles; the idle gap before each kernel on its stream\n"
                  "(host time, launch latency) stays as measured; "
                  "collectives are %s.\n\n",
                  opt.measured_on.c_str(), src->cluster.gpu.name.c_str(), opt.cluster.c_str(), sc->cluster.gpu.name.c_str(),
                  simulated_collectives ? "simulated on the new cluster" : "as measured");
      std::printf("  %-24s %8s %14s %14s %8s\n", "class", "kernels", "measured ms", "replayed ms", "x");
      for (size_t c = 0; c < traces::kMeasuredClasses; ++c) {
        if (rp.class_count[c] == 0) continue;
        std::printf("  %-24s %8zu %14.3f %14.3f %8.3f\n", traces::measured_class_name(static_cast<traces::MeasuredClass>(c)),
                    rp.class_count[c], rp.class_measured_s[c] * 1e3, rp.class_replayed_s[c] * 1e3,
                    rp.class_measured_s[c] > 0 ? rp.class_replayed_s[c] / rp.class_measured_s[c] : 0.0);
      }
      std::printf("\n");
    }
    // The exposed communication is the trace's own (measured_exposed_comm_s in the JSON), whatever
    // the replay simulated.
    std::printf("  %4s  %14s  %14s  %8s  %15s  %s\n", "rank", "measured ms", "replayed ms", src ? "change" : "error",
                "meas. exp. comm", "file");
  }
  std::vector<wl::CriticalPath> paths;
  for (uint32_t r = 0; r < world; ++r) paths.push_back(wl::critical_path(rp.job, run.op_times, r));
  for (uint32_t r = 0; r < world; ++r) {
    const double sim_s = run.rank_end[r].seconds() - rp.offset_s[r];
    const double err = rp.measured_s[r] > 0 ? sim_s / rp.measured_s[r] - 1 : 0;
    if (!quiet && chakra)
      std::printf("  %4u  %14s  %14.6f  %8s  %15s  %s\n", r, "-", sim_s * 1e3, "-", "-", ranks[r].file.c_str());
    else if (!quiet)
      std::printf("  %4u  %14.3f  %14.3f  %+7.2f%%  %12.3f ms  %s\n", r, rp.measured_s[r] * 1e3, sim_s * 1e3, err * 100,
                  rp.exposed_comm_s[r] * 1e3, ranks[r].file.c_str());
    nlohmann::ordered_json row;
    row["rank"] = r;
    row["file"] = ranks[r].file;
    row["measured_s"] = rp.measured_s[r];
    row["replayed_s"] = sim_s;
    row["error"] = err;
    if (!chakra) row["measured_exposed_comm_s"] = rp.exposed_comm_s[r];
    if (!steps[r].empty()) {
      nlohmann::ordered_json sj = nlohmann::ordered_json::array();
      for (const traces::StepTime& st : steps[r]) {
        nlohmann::ordered_json e;
        e["step"] = st.number;
        e["activities"] = st.activities;
        e["measured_s"] = st.measured_s;
        e["replayed_s"] = st.replayed_s;
        e["error"] = st.measured_s > 0 ? st.replayed_s / st.measured_s - 1 : 0.0;
        sj.push_back(e);
      }
      row["steps"] = sj;
    }
    const wl::CriticalPath& cp = paths[r];
    nlohmann::ordered_json cj;
    cj["length_s"] = cp.length_s;
    for (size_t c = 0; c < cp.category_s.size(); ++c) cj[rp.job.categories[c] + "_s"] = cp.category_s[c];
    cj["waiting_s"] = cp.waiting_s;
    cj["ops"] = cp.ops;
    nlohmann::ordered_json on = nlohmann::ordered_json::object();
    for (uint32_t q = 0; q < world; ++q)
      if (cp.rank_s[q] > 0) on[std::to_string(q)] = cp.rank_s[q];
    cj["seconds_on_rank"] = on;
    row["critical_path"] = cj;
    rows.push_back(row);
  }
  // Every step of every rank while that stays a short table; past it, a line per rank (--json has
  // every step).
  constexpr size_t kStepRows = 24;
  size_t step_rows = 0;
  for (const auto& s : steps) step_rows += s.size();
  if (!quiet && several_steps && step_rows > kStepRows) {
    std::printf("\nprofiler steps per rank (the traces' ProfilerStep#N; on the GPU, a step runs from its first activity's\n"
                "start to the next step's first, the last one to its last activity's end): mean (least-most) in ms;\n"
                "the step whose replay is furthest from its measurement; --json has every step:\n");
    std::printf("  %4s  %5s  %28s  %28s  %9s  %s\n", "rank", "steps", "measured ms", "replayed ms", src ? "change" : "error",
                "furthest step");
    for (uint32_t r = 0; r < world; ++r) {
      if (steps[r].empty()) continue;
      const traces::StepSummary sm = traces::summarize_steps(steps[r]);
      char measured[64], replayed[64];
      std::snprintf(measured, sizeof measured, "%.3f (%.3f-%.3f)", sm.measured_mean_s * 1e3, sm.measured_least_s * 1e3,
                    sm.measured_most_s * 1e3);
      std::snprintf(replayed, sizeof replayed, "%.3f (%.3f-%.3f)", sm.replayed_mean_s * 1e3, sm.replayed_least_s * 1e3,
                    sm.replayed_most_s * 1e3);
      std::printf("  %4u  %5zu  %28s  %28s  %+8.2f%%  ProfilerStep#%lld (%+.2f%%)\n", r, sm.steps, measured, replayed,
                  sm.measured_mean_s > 0 ? (sm.replayed_mean_s / sm.measured_mean_s - 1) * 100 : 0.0,
                  static_cast<long long>(sm.worst_step), sm.worst_error * 100);
    }
  } else if (!quiet && several_steps) {
    std::printf("\nper profiler step (the traces' ProfilerStep#N; on the GPU, a step runs from its first activity's start\n"
                "to the next step's first, the last one to its last activity's end):\n");
    std::printf("  %4s  %6s  %10s  %14s  %14s  %8s\n", "rank", "step", "activities", "measured ms", "replayed ms",
                src ? "change" : "error");
    for (uint32_t r = 0; r < world; ++r)
      for (const traces::StepTime& st : steps[r])
        std::printf("  %4u  %6lld  %10zu  %14.3f  %14.3f  %+7.2f%%\n", r, static_cast<long long>(st.number),
                    st.activities, st.measured_s * 1e3, st.replayed_s * 1e3,
                    st.measured_s > 0 ? (st.replayed_s / st.measured_s - 1) * 100 : 0.0);
  }
  if (!quiet) {
    // Why each rank ended when it did (workloads/program/critical_path.h).
    std::printf("\ncritical path per rank, from the job's first activity (ms): op time on the path by category,\n"
                "gaps where no op on it ran, and the share of the path spent on other ranks' ops\n");
    std::printf("  %4s", "rank");
    for (const auto& c : rp.job.categories) std::printf("  %12s", c.c_str());
    std::printf("  %12s  %s\n", "waiting", "on other ranks");
    for (uint32_t r = 0; r < world; ++r) {
      const wl::CriticalPath& cp = paths[r];
      std::printf("  %4u", r);
      for (double v : cp.category_s) std::printf("  %12.3f", v * 1e3);
      double other = 0, most = 0;
      uint32_t most_rank = r;
      for (uint32_t q = 0; q < world; ++q) {
        if (q == r) continue;
        other += cp.rank_s[q];
        if (cp.rank_s[q] > most) most = cp.rank_s[q], most_rank = q;
      }
      std::printf("  %12.3f  %5.1f%%", cp.waiting_s * 1e3, cp.length_s > 0 ? 100 * other / cp.length_s : 0.0);
      if (most > 0) std::printf(" (most on rank %u: %.1f%%)", most_rank, 100 * most / cp.length_s);
      std::printf("\n");
    }
  }
  if (!opt.json.empty()) {
    j["ranks"] = rows;
    j["collectives_per_rank"] = rp.collectives;
    j["collectives"] = simulated_collectives ? "simulated" : "measured";
    if (src) {
      nlohmann::ordered_json w;
      w["measured_on"] = opt.measured_on;
      w["measured_gpu"] = src->cluster.gpu.name;
      w["replayed_on"] = opt.cluster;
      w["replayed_gpu"] = sc->cluster.gpu.name;
      nlohmann::ordered_json cls = nlohmann::ordered_json::array();
      for (size_t c = 0; c < traces::kMeasuredClasses; ++c) {
        nlohmann::ordered_json e;
        e["class"] = traces::measured_class_name(static_cast<traces::MeasuredClass>(c));
        e["kernels"] = rp.class_count[c];
        e["measured_s"] = rp.class_measured_s[c];
        e["replayed_s"] = rp.class_replayed_s[c];
        e["ratio"] = ro.scaling.ratio[c];
        cls.push_back(e);
      }
      w["classes"] = cls;
      w["assumptions"] = "kernels scaled by class (from their names) through both hardware profiles; the idle gap "
                         "before each kernel on its stream stays as measured";
      j["what_if"] = w;
    }
    write_output(opt.json, j.dump(2) + "\n");
  }
  say_written(opt.trace, "trace", quiet, kOpenInPerfetto);
  say_written(opt.json, "JSON", quiet);
  return 0;
}

}  // namespace app
