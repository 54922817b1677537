// sim/app/calibrate.cc: `clustersim calibrate TRACE... --cluster SCENARIO -o PROFILE.yaml`: the
// hardware profile fitted to the kernels and collectives of profiler traces
// (workloads/calibration/calibrate.h, samples from traces/kineto/samples.h).
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "sim/app/commands.h"
#include "sim/error.h"
#include "sim/units.h"
#include "topology/catalog.h"
#include "traces/chakra/chakra.h"
#include "traces/kineto/kineto.h"
#include "traces/kineto/samples.h"
#include "traces/pytorch_et/execution_trace.h"
#include "workloads/calibration/calibrate.h"
#include "workloads/job/scenario.h"

namespace app {

namespace {

const char* class_label(wl::KernelClass c) {
  switch (c) {
    case wl::KernelClass::kGemm: return "GEMM";
    case wl::KernelClass::kAttention: return "attention";
    default: return "memory-bound";
  }
}

nlohmann::ordered_json stats_json(const wl::ErrorStats& e) {
  nlohmann::ordered_json j;
  j["samples"] = e.n;
  j["median_abs_error"] = e.median;
  j["p90_abs_error"] = e.p90;
  return j;
}

// 2nd, 3rd, 4th, 11th, 21st.
std::string ordinal(uint32_t n) {
  const uint32_t tens = n % 100, ones = n % 10;
  const char* suffix = tens >= 11 && tens <= 13 ? "th" : ones == 1 ? "st" : ones == 2 ? "nd" : ones == 3 ? "rd" : "th";
  return std::to_string(n) + suffix;
}

std::string stats_text(const wl::ErrorStats& e) {
  if (e.n == 0) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%5.1f%% %5.1f%% (%zu)", e.median * 100, e.p90 * 100, e.n);
  return buf;
}

}  // namespace

int cmd_calibrate(const CalibrateOptions& opt) {
  if (opt.holdout == 1) throw sim::UserError("--holdout 1 would hold out every shape: give 0 (none) or N >= 2");
  // An output to stdout ("-") is all that stdout holds: no report, as with --quiet.
  const bool quiet =
      output_to_stdout({{opt.output, "--output"}, {opt.json, "--json"}, {opt.samples, "--samples"}}) || opt.quiet;
  check_output(opt.output, "--output");
  check_output(opt.json, "--json");
  check_output(opt.samples, "--samples");
  for (const auto* list : {&opt.traces, &opt.test})
    for (const auto& f : *list)
      if (traces::is_chakra_path(f))
        throw sim::UserError(f + ": calibrate reads PyTorch profiler traces (Chakra traces hold no measured kernels)");
  wl::Scenario sc =
      wl::bind_scenario(sim::ConfigDoc::load_file(opt.cluster), opt.cluster, /*with_workload=*/false);
  const topo::GpuSpec& gpu = sc.cluster.gpu;

  traces::KinetoReadOptions ro;
  ro.ops = true;
  ro.log = opt.log;
  std::vector<traces::KinetoRank> ranks;
  std::vector<wl::KernelSample> samples;
  std::vector<double> intervals, gaps;  // host launch intervals, queued kernel gaps of the fitted traces
  wl::CalibrationOptions co;
  co.holdout_every = opt.holdout;
  auto read = [&](const std::string& f, bool test) {
    traces::KinetoRank r = traces::read_kineto(f, ro);
    const uint32_t source = static_cast<uint32_t>(ranks.size());
    for (auto& s : traces::kernel_samples(r, source)) samples.push_back(std::move(s));
    if (test) co.test_sources.push_back(source);
    if (!test) {
      for (double d : traces::launch_intervals(r)) intervals.push_back(d);
      for (double d : traces::queued_kernel_gaps(r)) gaps.push_back(d);
    }
    ranks.push_back(std::move(r));
  };
  for (const auto& f : opt.traces) read(f, false);
  const size_t job_ranks = ranks.size();
  for (const auto& f : opt.test) read(f, true);

  const std::vector<traces::KinetoRank> job(ranks.begin(), ranks.begin() + static_cast<std::ptrdiff_t>(job_ranks));
  const std::vector<std::vector<traces::EtCollective>> sizes = traces::read_paired_execution_traces(job, opt.execution_traces);
  std::vector<wl::CollectiveSample> colls;
  std::string coll_note;
  if (static_cast<int64_t>(job.size()) < job[0].world) {
    // Some ranks of a larger job: their NCCL kernels include the wait for the missing members.
    coll_note = std::to_string(job.size()) + " trace(s) of a " + std::to_string(job[0].world) +
                "-rank job: collectives include waiting for the missing ranks, not fitted (give every rank's trace)";
  } else if (sizes.empty() && job.size() > 1) {
    // Traces of several runs (one rank each) are not one job: their collectives are not matched.
    bool one_job = true;
    for (const auto& r : job) one_job = one_job && r.world == static_cast<int64_t>(job.size());
    if (one_job) colls = traces::collective_samples(job, sizes);
    else coll_note = "the traces are not the ranks of one job (distributedInfo): collectives not fitted";
  } else {
    colls = traces::collective_samples(job, sizes);
  }
  // Only the collectives run on the cluster: independent single-rank runs fit any size of it.
  if (!colls.empty() && job.size() > sc.topology->num_gpus())
    throw sim::UserError(opt.cluster + ": its cluster has " + std::to_string(sc.topology->num_gpus()) + " GPUs for " +
                         std::to_string(job.size()) + " ranks");

  wl::Calibration cal = wl::calibrate_kernels(samples, gpu, sc.cluster.profile, co);
  wl::calibrate_collectives(colls, *sc.topology, gpu, cal);
  if (!coll_note.empty()) cal.collectives.note = coll_note;
  wl::calibrate_host(std::move(intervals), std::move(gaps), cal);

  // Traces measured on another model than --cluster's accelerator fit that other device: say so.
  std::string other_device;
  for (const auto& r : ranks)
    if (!r.device.empty() && !topo::device_is(gpu, r.device)) other_device = r.device;
  const std::string mismatch =
      other_device.empty() ? ""
                           : "the traces were measured on '" + other_device + "', not on " + opt.cluster + "'s " +
                                 gpu.name + ": the profile describes the traces' device under " + gpu.name + "'s name";
  if (!mismatch.empty()) std::fprintf(stderr, "clustersim calibrate: warning: %s\n", mismatch.c_str());
  std::string header = "# Hardware profile fitted by `clustersim calibrate` (load it with cluster.profile.file).\n";
  if (!mismatch.empty()) header += "# Warning: " + mismatch + ".\n";
  header += "# GPU " + gpu.name + ", cluster of " + opt.cluster + "; fitted on:";
  for (size_t i = 0; i < ranks.size(); ++i)
    header.append(i == job_ranks ? "\n# tested on: " : " ").append(ranks[i].file);
  header += "\n# Errors are |predicted / measured - 1| over samples: median, 90th percentile (count).\n";
  write_output(opt.output, wl::profile_yaml(cal, header));

  if (!opt.samples.empty()) {
    std::string f = "class,shape,precision,flops,bytes,source,measured_s,before_s,after_s\n";
    for (const auto& s : samples) {
      char line[512];
      std::snprintf(line, sizeof line, "%s,%s,%s,%.17g,%.17g,%u,%.9g,%.9g,%.9g\n", class_label(s.cls), s.shape.c_str(),
                    s.cls == wl::KernelClass::kMemory ? "" : std::string(wl::precision_name(s.precision)).c_str(),
                    s.flops, s.bytes, s.source, s.seconds, wl::predict_seconds(s, gpu, sc.cluster.profile),
                    wl::predict_seconds(s, gpu, cal.profile));
      f += line;
    }
    write_output(opt.samples, f);
  }
  if (!quiet) {
    std::printf("calibration of the %s profile from %s: %s, %s\n", gpu.name.c_str(),
                count_noun(ranks.size(), "trace", "traces").c_str(),
                count_noun(samples.size(), "kernel sample", "kernel samples").c_str(),
                count_noun(colls.size(), "collective", "collectives").c_str());
    if (opt.holdout == 0)
      std::printf("held out: %s\n\n", opt.test.empty() ? "nothing (--holdout 0): no held-out errors"
                                                        : "every kernel of the --test traces (no shape: --holdout 0)");
    else
      std::printf("held out: every %s distinct shape%s\n\n", ordinal(opt.holdout).c_str(),
                  opt.test.empty() ? "" : ", and every kernel of the --test traces");
    std::printf("  %-13s %7s %10s %10s   %-22s %-22s %-22s\n", "class", "shapes", "efficiency", "latency*",
                "fitted: median p90", "held out: median p90", "held out, before");
    auto label = [](const wl::ClassFit& f) {
      return f.backward ? "attention bwd" : f.unvectorized ? "unvectorized" : f.fp8 ? "GEMM FP8" : class_label(f.cls);
    };
    for (const auto& f : cal.kernels) {
      const bool att = f.cls == wl::KernelClass::kAttention;
      char overhead[32], eff[32];
      std::snprintf(overhead, sizeof overhead, "%.0f keys", f.seq_overhead);  // attention: per sequence
      // Unvectorized kernels: their rate in G elements per second (its latency is the memory class's).
      if (f.unvectorized) std::snprintf(eff, sizeof eff, "%.0f G/s", f.efficiency * 1e-9);
      else std::snprintf(eff, sizeof eff, "%.4f", f.efficiency);
      std::printf("  %-13s %7zu %10s %10s   %-22s %-22s %-22s\n", label(f), f.shapes, eff, att ? overhead : sim::format_duration(f.latency).c_str(),
                  stats_text(f.fit).c_str(), stats_text(f.held_out).c_str(), stats_text(f.held_out_before).c_str());
      if (!f.note.empty()) std::printf("      %s: %s\n", label(f), f.note.c_str());
      // A fit that predicts the kernels it did not see worse than the profile it replaces is
      // written all the same (the user decides), but not silently.
      if (f.fitted && f.held_out.n > 0 && f.held_out_before.n > 0 && f.held_out.median > f.held_out_before.median)
        std::printf("      %s: warning: the fit misses the held-out kernels by more than the profile before it "
                    "(median %.1f%% against %.1f%%); look at the samples (--samples) before using it\n",
                    label(f), f.held_out.median * 100, f.held_out_before.median * 100);
    }
    bool attention_rows = false;
    for (const auto& f : cal.kernels) attention_rows = attention_rows || (f.cls == wl::KernelClass::kAttention && f.fitted);
    if (attention_rows)
      std::printf("  * attention: its fixed work per block of queries in keys (attention[_backward]_seq_overhead)\n");
    const auto& k = cal.collectives;
    if (k.fitted) {
      std::printf("\n  collectives: %s on %s: %s %.4f, step_overhead %s; error %s (before %s)\n",
                  count_noun(k.samples, "distinct size", "distinct sizes").c_str(), opt.cluster.c_str(),
                  k.efficiency_key.c_str(), k.efficiency, sim::format_duration(k.step_overhead).c_str(),
                  stats_text(k.after).c_str(), stats_text(k.before).c_str());
    }
    if (!k.note.empty()) std::printf("  collectives: %s\n", k.note.c_str());
    if (cal.host.fitted)
      std::printf("  host: host_overhead %s (10th percentile of %zu launch intervals; median %.1f us)\n",
                  sim::format_duration(cal.host.host_overhead).c_str(), cal.host.intervals, cal.host.median_s * 1e6);
    else
      std::printf("  host: not fitted (%s)\n", cal.host.note.c_str());
    if (cal.host.gap_fitted)
      std::printf("  kernel gap: %s (median of %zu gaps between queued kernels)\n",
                  sim::format_duration(cal.host.kernel_gap).c_str(), cal.host.gaps);
    else
      std::printf("  kernel gap: not fitted (%s)\n", cal.host.gap_note.c_str());
    std::printf("\n");  // the files written follow (say_written, at the end)
  }
  if (!opt.json.empty()) {
    nlohmann::ordered_json j;
    j["gpu"] = gpu.name;
    j["cluster"] = opt.cluster;
    j["kernel_samples"] = samples.size();
    j["holdout_every"] = opt.holdout;
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& f : cal.kernels) {
      nlohmann::ordered_json e;
      e["class"] = f.backward ? std::string("attention backward")
                   : f.unvectorized ? std::string("unvectorized elementwise")
                   : f.fp8          ? std::string("GEMM FP8")
                                    : std::string(class_label(f.cls));
      e["fitted"] = f.fitted;
      e["shapes"] = f.shapes;
      if (f.unvectorized) e["rate_elements_per_s"] = f.efficiency;
      else e["efficiency"] = f.efficiency;
      e["latency_s"] = f.latency.seconds();
      if (f.cls == wl::KernelClass::kAttention) e["seq_overhead_keys"] = f.seq_overhead;
      e["fit"] = stats_json(f.fit);
      e["held_out"] = stats_json(f.held_out);
      e["held_out_before"] = stats_json(f.held_out_before);
      if (!f.note.empty()) e["note"] = f.note;
      arr.push_back(e);
    }
    j["kernels"] = arr;
    const auto& k = cal.collectives;
    nlohmann::ordered_json c;
    c["fitted"] = k.fitted;
    c["samples"] = k.samples;
    c["efficiency_key"] = k.efficiency_key;
    c["efficiency"] = k.efficiency;
    c["step_overhead_s"] = k.step_overhead.seconds();
    c["after"] = stats_json(k.after);
    c["before"] = stats_json(k.before);
    if (!k.note.empty()) c["note"] = k.note;
    j["collectives"] = c;
    nlohmann::ordered_json h;
    h["fitted"] = cal.host.fitted;
    h["intervals"] = cal.host.intervals;
    h["host_overhead_s"] = cal.host.host_overhead.seconds();
    h["median_interval_s"] = cal.host.median_s;
    if (!cal.host.note.empty()) h["note"] = cal.host.note;
    h["kernel_gap_fitted"] = cal.host.gap_fitted;
    h["queued_gaps"] = cal.host.gaps;
    h["kernel_gap_s"] = cal.host.kernel_gap.seconds();
    if (!cal.host.gap_note.empty()) h["kernel_gap_note"] = cal.host.gap_note;
    j["host"] = h;
    write_output(opt.json, j.dump(2) + "\n");
  }
  say_written(opt.output, "profile", quiet, " (load it with cluster.profile.file)");
  say_written(opt.samples, "samples", quiet);
  say_written(opt.json, "JSON", quiet);
  return 0;
}

}  // namespace app
