#include "sim/app/commands.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/config.h"
#include "sim/error.h"
#include "sim/fingerprint.h"
#include "sim/simulation.h"
#include "sim/units.h"
#include "topology/catalog.h"
#include "topology/cluster_config.h"
#include "topology/cluster_resources.h"
#include "traces/chrome/chrome_trace.h"
#include "workloads/collectives/benchmark.h"
#include "workloads/diloco/diloco.h"
#include "workloads/model/transformer.h"
#include "workloads/training/step.h"
#include "workloads/training/training_config.h"

namespace app {

namespace {

void append_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::app);
  if (!f) throw sim::UserError("cannot write " + path);
  f << text;
  if (!f) throw sim::UserError("error while writing " + path);
}

int64_t to_ns(double seconds) { return std::llround(seconds * 1e9); }

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f) throw sim::UserError("cannot write " + path);
  f << text;
  if (!f) throw sim::UserError("error while writing " + path);
}

// Everything bound from one scenario before anything is simulated.
struct Scenario {
  sim::ConfigDoc doc;
  std::string name{};
  uint64_t seed = 1;
  topo::ClusterConfig cluster{};
  std::unique_ptr<topo::Topology> topology{};
  std::string workload_kind{};
  wl::CollectiveBenchConfig collectives{};
  wl::TrainingSettings training{};
  wl::DilocoSettings diloco{};
  std::string trace{};
  std::vector<uint32_t> trace_ranks{};
};

sim::ConfigDoc load_doc(const std::string& path, const std::vector<std::string>& overrides) {
  sim::ConfigDoc doc = path.empty() ? sim::ConfigDoc::load_string(default_scenario_yaml(), "<default scenario>")
                                    : sim::ConfigDoc::load_file(path);
  for (const auto& o : overrides) doc.apply_override(o);
  return doc;
}

Scenario bind_scenario(const std::string& path, const std::vector<std::string>& overrides, bool with_workload) {
  Scenario sc{load_doc(path, overrides)};
  auto root = sc.doc.root();
  if (!root.is_map()) root.fail("a scenario is a map with keys name, seed, cluster, workload, output");
  sc.name = root.get_string("name", path.empty() ? "default" : path);
  sc.seed = static_cast<uint64_t>(root.get_int_in("seed", 0, INT64_MAX, 1));
  auto cluster = root.child("cluster");
  sc.cluster = topo::bind_cluster(cluster);
  sc.topology = std::make_unique<topo::Topology>(topo::build_cluster_checked(sc.cluster, cluster));
  if (with_workload) {
    auto w = root.child("workload");
    sc.workload_kind = w.get_enum("kind", {"collectives", "training", "diloco"});
    if (sc.workload_kind == "collectives")
      sc.collectives = wl::bind_collective_benchmark(w, *sc.topology);
    else if (sc.workload_kind == "diloco")
      sc.diloco = wl::bind_diloco(w, sc.cluster.gpu, sc.topology->num_gpus());
    else
      sc.training = wl::bind_training(w, sc.cluster.gpu, sc.topology->num_gpus());
    if (auto out = root.find("output")) {
      sc.trace = out->get_string("trace", "");
      if (out->has("trace_ranks")) {
        auto ranks_node = out->child("trace_ranks");
        for (int64_t r : out->get_int_list("trace_ranks")) {
          if (r < 0 || r >= sc.topology->num_gpus())
            ranks_node.fail("rank " + std::to_string(r) + " is outside the cluster (0.." +
                            std::to_string(sc.topology->num_gpus() - 1) + ")");
          sc.trace_ranks.push_back(static_cast<uint32_t>(r));
        }
      }
    }
  } else {
    // `topology` looks at the cluster only; the rest is still checked for unknown keys where bound.
    if (auto w = root.find("workload")) (void)w->keys();
  }
  return sc;
}

std::string describe_size(double bytes) { return sim::format_bytes(bytes); }

void print_collectives(const wl::CollectiveBenchConfig& cfg, const std::vector<wl::CollectiveResult>& results) {
  std::printf("collective benchmark: %lld timed iterations after %lld warm-up (nccl-tests definitions:\n"
              "algbw = size / time, busbw = algbw x bus factor)\n\n",
              static_cast<long long>(cfg.iterations), static_cast<long long>(cfg.warmup));
  std::printf("%-15s %-17s %7s %10s %12s %10s %10s\n", "op", "algorithm", "ranks", "size", "time (us)", "algbw GB/s",
              "busbw GB/s");
  std::set<std::string> notes;
  for (const auto& r : results) {
    std::printf("%-15s %-17s %7u %10s %12.2f %10.2f %10.2f\n", std::string(wl::op_name(r.op)).c_str(),
                std::string(wl::algorithm_name(r.algorithm)).c_str(), r.ranks, describe_size(r.size_bytes).c_str(),
                r.time_s * 1e6, r.algbw_GBps, r.busbw_GBps);
    if (!r.note.empty()) notes.insert(r.note);
  }
  for (const auto& n : notes) std::printf("  note: %s\n", n.c_str());
}

void add_collectives_json(nlohmann::ordered_json& j, const std::vector<wl::CollectiveResult>& results) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& r : results) {
    nlohmann::ordered_json e;
    e["op"] = std::string(wl::op_name(r.op));
    e["algorithm"] = std::string(wl::algorithm_name(r.algorithm));
    e["ranks"] = r.ranks;
    e["size_bytes"] = static_cast<int64_t>(r.size_bytes);
    e["time_s"] = r.time_s;
    e["algbw_GBps"] = r.algbw_GBps;
    e["busbw_GBps"] = r.busbw_GBps;
    if (!r.note.empty()) e["note"] = r.note;
    arr.push_back(e);
  }
  j["collectives"] = arr;
}

const char* schedule_name(wl::PipelineSchedule s) {
  switch (s) {
    case wl::PipelineSchedule::kGPipe: return "gpipe";
    case wl::PipelineSchedule::kOneFOneB: return "1f1b";
    case wl::PipelineSchedule::kInterleaved1F1B: return "interleaved-1f1b";
    case wl::PipelineSchedule::kZeroBubbleH1: return "zb-h1";
  }
  return "?";
}

const char* dp_name(wl::DataParallel d) {
  switch (d) {
    case wl::DataParallel::kDdp: return "ddp";
    case wl::DataParallel::kZero1: return "zero1";
    case wl::DataParallel::kZero2: return "zero2";
    case wl::DataParallel::kFsdp: return "fsdp";
  }
  return "?";
}

// The parts of a step in report order, with their labels.
std::vector<std::pair<std::string, double>> breakdown_parts(const wl::Breakdown& b) {
  return {{"compute", b.compute},
          {"exposed tp comm", b.exposed[static_cast<size_t>(wl::Dim::kTp)]},
          {"exposed cp comm", b.exposed[static_cast<size_t>(wl::Dim::kCp)]},
          {"exposed pp comm", b.exposed[static_cast<size_t>(wl::Dim::kPp)]},
          {"exposed dp comm", b.exposed[static_cast<size_t>(wl::Dim::kDp)] +
                                  b.exposed[static_cast<size_t>(wl::Dim::kDpOuter)]},
          {"pipeline bubble", b.bubble},
          {"optimizer", b.optimizer}};
}

std::string collectives_fingerprint(const std::vector<wl::CollectiveResult>& results) {
  std::string out = "collectives=";
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (i) out += ",";
    out += std::string(wl::op_name(r.op)) + "/" + std::string(wl::algorithm_name(r.algorithm)) + "/" +
           std::to_string(r.ranks) + "/" + std::to_string(static_cast<int64_t>(r.size_bytes)) + ":" +
           std::to_string(to_ns(r.time_s));
  }
  return out;
}

void print_training(const wl::TrainingSettings& ts, const wl::StepResult& r) {
  const auto& j = ts.job;
  std::printf("training step: %s, seq %lld, global batch %lld sequences (%.0f tokens), %lld GPUs\n", j.model.name.c_str(),
              static_cast<long long>(j.seq_len), static_cast<long long>(j.global_batch), r.tokens_per_step,
              static_cast<long long>(j.world()));
  std::printf("  tp %lld  cp %lld  pp %lld  dp %lld  dp_outer %lld   data parallel %s   schedule %s", static_cast<long long>(j.tp),
              static_cast<long long>(j.cp), static_cast<long long>(j.pp), static_cast<long long>(j.dp),
              static_cast<long long>(j.dp_outer), dp_name(j.data_parallel), schedule_name(j.schedule));
  if (j.virtual_stages > 1) std::printf(" (v = %lld)", static_cast<long long>(j.virtual_stages));
  std::printf(", %lld micro-batches of %lld\n\n", static_cast<long long>(r.micro_batches),
              static_cast<long long>(j.micro_batch));
  std::printf("  step time         %10.4f s\n", r.step_time_s);
  std::printf("  tokens/s          %10.0f\n", r.tokens_per_s);
  std::printf("  TFLOP/s per GPU   %10.1f   (model FLOPs: 6N + 12*L*H*Q*T per token, PaLM convention; no recompute)\n",
              r.tflops_per_gpu);
  std::printf("  MFU               %10.1f %%  of %.0f TFLOP/s peak\n\n", r.mfu * 100, r.peak_flops / 1e12);
  std::printf("  where the time goes (mean over ranks; parts add up to the step time):\n");
  for (const auto& [label, v] : breakdown_parts(r.mean))
    std::printf("    %-18s %10.4f s  %5.1f %%\n", label.c_str(), v, r.step_time_s > 0 ? v / r.step_time_s * 100 : 0);
  std::printf("\n  peak memory per rank, by pipeline stage (capacity %s):\n", sim::format_bytes(r.capacity_bytes).c_str());
  std::printf("    %5s %11s %11s %11s %11s %11s %11s  %s\n", "stage", "params", "grads", "optimizer", "activations",
              "buffers", "total", "");
  for (const auto& m : r.memory) {
    bool ok = m.bytes.total() <= r.capacity_bytes;
    std::printf("    %5lld %11s %11s %11s %11s %11s %11s  %s\n", static_cast<long long>(m.stage),
                sim::format_bytes(m.bytes.params).c_str(), sim::format_bytes(m.bytes.grads).c_str(),
                sim::format_bytes(m.bytes.optimizer).c_str(), sim::format_bytes(m.bytes.activations).c_str(),
                sim::format_bytes(m.bytes.comm_buffers).c_str(), sim::format_bytes(m.bytes.total()).c_str(),
                ok ? "fits" : "DOES NOT FIT");
  }
  std::printf("\n  %llu ops executed by %lld ranks sharing %zu rank-class programs; %zu collective plans\n",
              static_cast<unsigned long long>(r.ops), static_cast<long long>(j.world()), r.rank_classes, r.plans);
}

void add_training_json(nlohmann::ordered_json& out, const wl::TrainingSettings& ts, const wl::StepResult& r) {
  out["step_time_s"] = r.step_time_s;
  out["tokens_per_s"] = r.tokens_per_s;
  out["tflops_per_gpu"] = r.tflops_per_gpu;
  out["mfu"] = r.mfu;
  out["mfu_convention"] = "model FLOPs 6N + 12*L*H*Q*T per token (PaLM), recompute excluded, dense peak of the precision";
  nlohmann::ordered_json b;
  for (const auto& [label, v] : breakdown_parts(r.mean)) b[label] = v;
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
  mem["fits"] = r.fits;
  mem["stages"] = stages;
  out["memory"] = mem;
  nlohmann::ordered_json w;
  w["ranks"] = ts.job.world();
  w["micro_batches"] = r.micro_batches;
  w["tokens_per_step"] = r.tokens_per_step;
  w["ops"] = r.ops;
  w["rank_classes"] = r.rank_classes;
  out["workload"] = w;
}

// kind: diloco -- one island's step (printed like kind: training), then the outer rounds.
void run_diloco_workload(topo::ClusterResources& res, const wl::DilocoSettings& ds, bool quiet,
                         nlohmann::ordered_json& j, std::string& fingerprint) {
  auto r = wl::run_diloco(res, ds);
  fingerprint = wl::step_fingerprint(r.step) + " diloco_total_ns=" + std::to_string(to_ns(r.diloco.total_time_s)) +
                " diloco_outer_sync_ns=" + std::to_string(to_ns(r.diloco.outer_sync_time_s)) +
                " diloco_events=" + std::to_string(r.diloco.events) +
                " dp_total_ns=" + std::to_string(to_ns(r.data_parallel.total_time_s)) +
                " dp_events=" + std::to_string(r.data_parallel.events);
  if (!quiet) {
    print_training(ds.island, r.step);
    std::printf("\n%s", wl::format_diloco_summary(ds, r).c_str());
  }
  add_training_json(j, ds.island, r.step);  // the island's inner step, as for kind: training
  auto timeline = [](const wl::DilocoTimeline& t) {
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
  };
  const auto& c = ds.config;
  nlohmann::ordered_json d;
  d["islands"] = c.islands;
  d["inner_steps"] = c.inner_steps;
  d["outer_steps"] = c.outer_steps;
  d["identical_islands"] = true;  // one island step simulated, used for every island
  d["inner_step_time_s"] = r.step.step_time_s;
  d["params"] = r.params;
  d["sync_bytes"] = r.sync_bytes;
  d["precision"] = c.sync.precision;
  d["bandwidth_Bps"] = c.sync.bandwidth_Bps;
  d["latency_s"] = c.sync.latency.seconds();
  d["algorithm"] = c.sync.algorithm == wl::OuterAlgorithm::kRing ? "ring" : "tree";
  d["fragments"] = c.sync.fragments;
  d["overlap_steps"] = c.sync.overlap_steps;
  d["outer_sync_time_s"] = r.diloco.outer_sync_time_s;
  d["idle_wan_sync_time_s"] = r.idle_sync_s;
  d["appendix_a_bound_s"] = r.appendix_a_bound_s;
  d["compute_utilization"] = r.diloco.utilization;
  d["wait_share"] = r.diloco.wait_share;
  d["total_time_s"] = r.diloco.total_time_s;
  d["tokens_per_s"] = r.tokens_per_s;
  d["timeline"] = timeline(r.diloco);
  nlohmann::ordered_json dp = timeline(r.data_parallel);
  dp["inner_steps_simulated"] = r.data_parallel_steps;
  dp["tokens_per_s"] = r.data_parallel_tokens_per_s;
  d["data_parallel"] = dp;
  d["assumptions"] = "identical islands; intra-island gathering to the gateway hidden; outer optimizer step free";
  j["diloco"] = d;
}

}  // namespace

const char* default_scenario_yaml() {
  return R"(# Built-in default: one training step of Llama 3 8B on 64 H100 (8 DGX nodes, 400 Gb/s per GPU,
# rail-optimized leaf + spine), TP 8 inside each node, PP 4 with 1F1B, DP 2 with DDP.
# The same scenario is workloads/scenarios/llama3-8b-64xh100-1f1b.yaml.
name: default-llama3-8b-64xh100-1f1b
seed: 1
cluster:
  gpu: h100-sxm
  nodes: 8
  gpus_per_node: 8
  scale_up: {kind: nvswitch}
  scale_out:
    kind: fat-tree
    nic_bandwidth: 400Gbps
    rails: 8
    tiers:
      - {name: leaf, nodes: 8}
      - {name: spine, leafs: 8}
workload:
  kind: training
  model: {preset: llama3-8b}
  training: {seq_len: 8192, global_batch: 64, micro_batch: 1, precision: bf16}
  parallelism: {tp: 8, pp: 4, dp: 2, data_parallel: ddp}
  schedule: {kind: 1f1b}
)";
}

int cmd_run(const RunOptions& opt) {
  auto wall0 = std::chrono::steady_clock::now();
  // --seed goes into the document like a --set, so that --resolved records the seed actually used.
  std::vector<std::string> overrides = opt.overrides;
  if (opt.seed) overrides.push_back("seed=" + std::to_string(*opt.seed));
  Scenario sc = bind_scenario(opt.scenario, overrides, true);
  if (opt.seed) sc.seed = *opt.seed;
  sc.doc.check_all_used();  // unknown keys are errors before anything is simulated
  if (!opt.resolved.empty()) write_file(opt.resolved, sc.doc.resolved_yaml());

  sim::Simulation sim(sc.seed);
  std::string trace_path = opt.trace.empty() ? sc.trace : opt.trace;
  std::unique_ptr<traces::ChromeTraceWriter> trace;
  std::unique_ptr<sim::FingerprintObserver> fingerprint;
  std::vector<uint32_t> ranks;
  if (!trace_path.empty() || !opt.fingerprint.empty()) {
    ranks = !opt.trace_ranks.empty() ? opt.trace_ranks : sc.trace_ranks;
    if (ranks.empty())
      for (uint32_t g = 0; g < std::min<uint32_t>(16, sc.topology->num_gpus()); ++g) ranks.push_back(g);
    for (uint32_t r : ranks) {
      if (r >= sc.topology->num_gpus())
        throw sim::UserError("--trace-ranks: rank " + std::to_string(r) + " is outside the cluster (0.." +
                             std::to_string(sc.topology->num_gpus() - 1) + ")");
    }
  }
  if (!opt.fingerprint.empty()) {
    fingerprint = std::make_unique<sim::FingerprintObserver>();
    sim.observers().attach(fingerprint.get());
  }
  if (!trace_path.empty()) {
    traces::ChromeTraceOptions to;
    to.path = trace_path;
    to.processes.insert(ranks.begin(), ranks.end());
    trace = std::make_unique<traces::ChromeTraceWriter>(to);
    trace->set_metadata("scenario", sc.name);
    trace->set_metadata("seed", sc.seed);
    trace->set_metadata("generator", "clustersim");
    sim.observers().attach(trace.get());
  }

  // The observers are finished once, at the end of the workload; when the workload throws (a
  // deadlocked step), still before the trace writer is destroyed, so the file ends at the time the
  // run stopped. Errors of the trace writer are swallowed on that path only.
  struct FinishOnExit {
    sim::Simulation& sim;
    ~FinishOnExit() {
      try {
        sim.finish();
      } catch (...) {
      }
    }
  } finish_on_exit{sim};

  topo::ClusterResources res(sim, *sc.topology, sc.cluster.gpu, sc.cluster.profile);
  if (!ranks.empty()) res.enable_link_counters(ranks);
  nlohmann::ordered_json j;
  j["scenario"] = sc.name;
  j["seed"] = sc.seed;
  if (!opt.quiet) {
    std::printf("clustersim: %s (seed %llu)\n", sc.name.c_str(), static_cast<unsigned long long>(sc.seed));
    std::printf("%s\n\n", sc.topology->describe().c_str());
  }
  std::string fp;  // the workload's fingerprint fields
  if (sc.workload_kind == "training") {
    auto r = wl::run_training_step(res, sc.training, ranks);
    if (r.outcome != wl::StepOutcome::kCompleted) {
      // A result, not a crash: the report says what waits on what; status 3 tells scripts.
      std::fflush(stdout);
      std::fprintf(stderr, "clustersim: the training step did not complete (%s at t=%lld ns): %s\n",
                   r.outcome == wl::StepOutcome::kStuck ? "stuck" : "error",
                   static_cast<long long>(sim.now().count_ns()), r.report.c_str());
      return 3;
    }
    if (!opt.quiet) print_training(sc.training, r);
    add_training_json(j, sc.training, r);
    fp = wl::step_fingerprint(r);
  } else if (sc.workload_kind == "diloco") {
    run_diloco_workload(res, sc.diloco, opt.quiet, j, fp);
  } else {
    auto results = wl::run_collective_benchmark(res, sc.collectives);
    if (!opt.quiet) print_collectives(sc.collectives, results);
    add_collectives_json(j, results);
    fp = collectives_fingerprint(results);
  }
  sim.finish();  // the whole workload has run: observers learn the end time (the trace is closed)
  if (fingerprint) {
    std::string name = opt.scenario.empty() ? "default" : std::filesystem::path(opt.scenario).filename().string();
    append_file(opt.fingerprint, name + " events=" + std::to_string(sim.events_processed()) +
                                     " end_ns=" + std::to_string(sim.now().count_ns()) + " " + fp +
                                     " trace=" + fingerprint->summary() + "\n");
  }
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!opt.quiet)
    std::printf("\n%llu events simulated in %.3f s of wall time (%llu sharing solves over %llu activities)\n",
                static_cast<unsigned long long>(sim.events_processed()), wall_s,
                static_cast<unsigned long long>(sim.fluid().solves()),
                static_cast<unsigned long long>(sim.fluid().solved_activities()));
  if (!opt.json.empty()) {
    nlohmann::ordered_json run;
    run["seed"] = sc.seed;
    run["events"] = sim.events_processed();
    run["simulated_time_s"] = sim.now().seconds();
    if (!opt.reproducible) run["wall_time_s"] = wall_s;
    j["run"] = run;
    write_file(opt.json, j.dump(2) + "\n");
  }
  return 0;
}

int cmd_topology(const TopologyOptions& opt) {
  Scenario sc = bind_scenario(opt.scenario, opt.overrides, false);
  std::printf("%s\n", sc.topology->describe().c_str());
  if (!opt.dot.empty()) write_file(opt.dot, sc.topology->to_dot());
  return 0;
}

int cmd_catalog() {
  std::printf("accelerators:\n");
  for (const auto& n : topo::gpu_names()) {
    auto g = topo::find_gpu(n);
    std::printf("  %-10s %7.0f TFLOP/s bf16  %6.1f GiB HBM  %6.0f GB/s HBM  %5.0f GB/s scale-up/dir\n", n.c_str(),
                g.peak_bf16_flops / 1e12, static_cast<double>(g.hbm_capacity_bytes) / (1ull << 30),
                g.hbm_bandwidth_Bps / 1e9, g.scale_up_bandwidth_Bps / 1e9);
  }
  std::printf("NICs:\n");
  for (const auto& n : topo::nic_names()) std::printf("  %s (%.0f Gb/s)\n", n.c_str(), topo::find_nic(n).bandwidth_Bps * 8 / 1e9);
  std::printf("switches:\n");
  for (const auto& n : topo::switch_names()) std::printf("  %s\n", n.c_str());
  std::printf("model presets:\n");
  for (const auto& n : wl::model_preset_names()) std::printf("  %s\n", n.c_str());
  return 0;
}

}  // namespace app
