#include "sim/app/commands.h"
#include "sim/app/mpi_points.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <algorithm>
#include <atomic>
#include <thread>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "sim/config.h"
#include "sim/error.h"
#include "sim/units.h"
#include "sim/fingerprint.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "traces/chakra/chakra.h"
#include "traces/chrome/chrome_trace.h"
#include "workloads/job/format.h"
#include "workloads/job/scenario.h"
#include "workloads/model/transformer.h"

namespace app {

void check_output(const std::string& path, const char* option) {
  if (path.empty() || path == "-") return;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw sim::UserError(std::string(option) + ": cannot write " + path + ": it is a directory");
  const std::string partial = path + ".partial";
  {
    std::ofstream probe(partial, std::ios::binary);
    if (!probe) throw sim::UserError(std::string(option) + ": cannot write " + path + ": " + std::strerror(errno));
  }
  std::filesystem::remove(partial, ec);
}

void write_output(const std::string& path, const std::string& text) {
  if (path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (std::fflush(stdout) != 0) throw sim::UserError("error while writing to stdout");
    return;
  }
  const std::string partial = path + ".partial";
  {
    std::ofstream f(partial, std::ios::binary);
    if (!f) throw sim::UserError("cannot write " + path + ": " + std::strerror(errno));
    f << text;
    if (!f.flush()) throw sim::UserError("error while writing " + path);
  }
  std::error_code ec;
  std::filesystem::rename(partial, path, ec);
  if (ec) throw sim::UserError("cannot rename " + partial + " to " + path + ": " + ec.message());
}

void say_written(const std::string& path, const char* what, bool quiet, const std::string& hint) {
  if (quiet || path.empty() || path == "-") return;
  std::printf("%s written: %s%s\n", what, path.c_str(), hint.c_str());
}

bool output_to_stdout(const std::vector<std::pair<std::string, const char*>>& outputs) {
  const char* first = nullptr;
  for (const auto& [path, option] : outputs) {
    if (path != "-") continue;
    if (first)
      throw sim::UserError(std::string(option) + " -: " + first +
                           " already writes to stdout ('-'); give one of them a file name");
    first = option;
  }
  return first != nullptr;
}

void refuse_stdout(const std::string& path, const char* option, const char* why) {
  if (path == "-")
    throw sim::UserError(std::string(option) + ": cannot write to stdout ('-'): " + why + "; give a file name");
}

uint64_t parse_seed(const std::string& text, const char* option) {
  // Digits only: std::stoull would take "-1" as 2^64-1 and " 7" as 7.
  const bool digits = !text.empty() && text.size() <= 19 && text.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || std::stoull(text) > static_cast<uint64_t>(INT64_MAX)) {
    if (!text.empty() && text.find_first_not_of("0123456789") == std::string::npos)
      throw sim::UserError(std::string(option) + ": at most 9223372036854775807 (2^63-1), got \"" + text + "\"");
    throw sim::UserError(std::string(option) + ": expected a non-negative integer, got \"" + text + "\"");
  }
  return std::stoull(text);
}

std::string unknown_subcommand(const std::string& word, const std::vector<std::string>& names) {
  std::string list, best;
  size_t best_d = 3;  // suggest only within an edit distance of 2
  size_t prefixed = 0;
  std::string prefix_of;
  for (const auto& n : names) {
    list += (list.empty() ? "" : ", ") + n;
    const size_t d = sim::edit_distance(word, n);
    if (d < best_d) best_d = d, best = n;
    if (word.size() >= 2 && n.rfind(word, 0) == 0) ++prefixed, prefix_of = n;
  }
  if (best.empty() && prefixed == 1) best = prefix_of;
  std::string msg = "unknown subcommand '" + word + "' (subcommands: " + list;
  if (!best.empty()) msg += "; did you mean '" + best + "'?";
  return msg + ")";
}

namespace {

void append_file(const std::string& path, const std::string& text) {
  if (path == "-") {
    write_output(path, text);
    return;
  }
  std::ofstream f(path, std::ios::binary | std::ios::app);
  if (!f) throw sim::UserError("cannot write " + path);
  f << text;
  if (!f) throw sim::UserError("error while writing " + path);
}

// `options`: keys set by a command-line option, each (assignment, the option named in errors).
wl::Scenario bind_file(const std::string& path, const std::vector<std::string>& overrides, bool with_workload,
                       const std::string& max_memory = "",
                       const std::vector<std::pair<std::string, std::string>>& options = {}) {
  const uint64_t limit = max_memory_bytes(max_memory);
  sim::ConfigDoc doc = load_scenario(path);
  for (const auto& o : overrides) doc.apply_override(o);
  for (const auto& [assignment, option] : options) doc.apply_override(assignment, option);
  return wl::bind_scenario(std::move(doc), path.empty() ? "default" : path, with_workload, limit);
}

}  // namespace

const char* default_scenario_yaml() { return wl::default_scenario_yaml(); }

sim::ConfigDoc load_scenario(const std::string& path) {
  return path.empty() ? sim::ConfigDoc::load_string(wl::default_scenario_yaml(), "<default scenario>")
                      : sim::ConfigDoc::load_file(path);
}

bool show_progress(bool quiet) { return !quiet && isatty(STDOUT_FILENO) && isatty(STDERR_FILENO); }

void print_warnings(const std::vector<std::string>& warnings, bool quiet) {
  if (quiet) return;
  for (const std::string& w : warnings) std::fprintf(stderr, "clustersim: warning: %s\n", w.c_str());
}

void TerminalProgress::on_progress(sim::Time now, uint64_t events) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t = std::chrono::steady_clock::now();
  if (shown_ && t - last_ < std::chrono::milliseconds(500)) return;
  const double wall = std::chrono::duration<double>(t - start_).count();
  std::fprintf(stderr, "\r  simulated %s, %.2f M events, %.2f M events/s   ", sim::format_duration(now).c_str(),
               static_cast<double>(events) / 1e6, wall > 0 ? static_cast<double>(events) / 1e6 / wall : 0.0);
  std::fflush(stderr);
  last_ = t;
  shown_ = true;
}

void TerminalProgress::count(const char* label, size_t done, size_t total) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto t = std::chrono::steady_clock::now();
  if (shown_ && done < total && t - last_ < std::chrono::milliseconds(500)) return;
  const double wall = std::chrono::duration<double>(t - start_).count();
  const double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
  std::fprintf(stderr, "\r  %s: %zu of %zu (%.0f%%), %.1f s, about %.0f s left   ", label, done, total, f * 100, wall,
               f > 0 ? wall * (1 - f) / f : 0.0);
  std::fflush(stderr);
  last_ = t;
  shown_ = true;
}

void TerminalProgress::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  if (shown_) std::fprintf(stderr, "\r%100s\r", "");
  shown_ = false;
}

uint64_t max_memory_bytes(const std::string& text) {
  if (text.empty()) return 0;
  double b = 0;
  try {
    b = sim::parse_bytes(text);
  } catch (const sim::ConfigError& e) {
    throw sim::UserError(std::string("--max-memory: ") + e.what());
  }
  if (b < 1) throw sim::UserError("--max-memory: must be at least 1 byte, got \"" + text + "\"");
  return static_cast<uint64_t>(b);
}

int cmd_run(const RunOptions& opt) {
  auto wall0 = std::chrono::steady_clock::now();
  // --seed goes into the document like a --set, so that --resolved records the seed actually used.
  std::vector<std::string> overrides = opt.overrides;
  std::optional<uint64_t> seed;
  if (opt.seed) seed = parse_seed(*opt.seed, "--seed");
  if (seed) overrides.push_back("seed=" + std::to_string(*seed));
  // An output to stdout ("-") is all that stdout holds: no report, as with --quiet.
  const bool quiet =
      output_to_stdout({{opt.resolved, "--resolved"}, {opt.json, "--json"}, {opt.fingerprint, "--fingerprint"}}) ||
      opt.quiet;
  refuse_stdout(opt.trace, "--trace", "a trace is big, and gzip'ed when its name ends in .gz");
  wl::Scenario sc = bind_file(opt.scenario, overrides, true, opt.max_memory);
  if (seed) sc.seed = *seed;
  sc.doc.check_all_used();  // unknown keys are errors before anything is simulated
  print_warnings(sc.doc.warnings(), opt.quiet);
  if (opt.trace.empty())
    refuse_stdout(sc.trace, "output.trace", "a trace is big, and gzip'ed when its name ends in .gz");
  check_output(opt.json, "--json");  // every output is checked before anything is simulated
  check_output(opt.resolved, "--resolved");
  check_output(opt.fingerprint, "--fingerprint");
  check_output(opt.trace.empty() ? sc.trace : opt.trace, opt.trace.empty() ? "output.trace" : "--trace");
  // --trace-ranks is checked like every other input, also by --check (output.trace_ranks was, at
  // binding); without a trace or a fingerprint it would select nothing, which is said.
  for (uint32_t r : opt.trace_ranks) {
    if (r >= sc.topology->num_gpus())
      throw sim::UserError("--trace-ranks: rank " + std::to_string(r) + " is outside the cluster (0.." +
                           std::to_string(sc.topology->num_gpus() - 1) + ")");
  }
  const std::string trace_path = opt.trace.empty() ? sc.trace : opt.trace;
  if (!opt.trace_ranks.empty() && trace_path.empty() && opt.fingerprint.empty())
    std::fprintf(stderr, "clustersim: note: --trace-ranks does nothing without --trace (or output.trace)\n");
  // The scenario actually run ("-": printed), to copy and edit.
  if (!opt.resolved.empty()) write_output(opt.resolved, sc.doc.resolved_yaml());
  if (opt.check) {
    wl::check_scenario(sc);
    if (!quiet)
      std::printf("%s: checked (workload kind %s, %s); nothing simulated\n", sc.name.c_str(),
                  std::string(sc.kind->name).c_str(),
                  sc.cluster.gpu.kind == topo::AcceleratorKind::kTpu
                      ? count_noun(sc.topology->num_gpus(), "chip", "chips").c_str()
                      : count_noun(sc.topology->num_gpus(), "GPU", "GPUs").c_str());
    if (!opt.fingerprint.empty()) {
      std::string name = opt.scenario.empty() ? "default" : std::filesystem::path(opt.scenario).filename().string();
      append_file(opt.fingerprint, name + " checked-only\n");
    }
    say_written(opt.resolved, "resolved scenario", quiet);
    return 0;
  }

  sim::Simulation sim(sc.seed);
  sim.set_log(opt.log);
  std::unique_ptr<traces::ChromeTraceWriter> trace;
  std::unique_ptr<sim::FingerprintObserver> fingerprint;
  std::vector<uint32_t> ranks;
  if (!trace_path.empty() || !opt.fingerprint.empty()) {
    ranks = !opt.trace_ranks.empty() ? opt.trace_ranks : sc.trace_ranks;
    if (ranks.empty()) ranks = sc.job->default_trace_ranks();  // a training step: one per pipeline stage
    if (ranks.empty())
      for (uint32_t g = 0; g < std::min<uint32_t>(16, sc.topology->num_gpus()); ++g) ranks.push_back(g);
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
    // The whole scenario as run (every default spelt out), so that a trace says what made it.
    trace->set_metadata("scenario_yaml", sc.doc.resolved_yaml());
    sim.observers().attach(trace.get());
  }

  if (!quiet) {
    std::printf("clustersim: %s (seed %llu)\n", sc.name.c_str(), static_cast<unsigned long long>(sc.seed));
    std::printf("%s\n\n", sc.topology->describe().c_str());
  }
  wl::JobContext ctx;
  ctx.trace_ranks = ranks;
  bool exported = false;
  if (!opt.chakra.empty()) {
    if (sc.kind->name != "training")
      throw sim::UserError("--chakra: only training steps export to Chakra so far (this scenario's kind is '" +
                           std::string(sc.kind->name) + "')");
    ctx.export_program = [&](const wl::JobProgram& p, const wl::KernelCoster& c) {
      traces::write_chakra(p, opt.chakra, c);
      exported = true;
    };
  }
  if (trace) {
    // The run's summary and result JSON (as --json writes it) go into the trace's otherData too,
    // so that a trace says what it shows without the terminal it was made on.
    ctx.on_result = [&trace](const wl::JobResult& r) {
      if (!r.completed() && !r.aborted()) {
        trace->set_metadata("problem", r.problem());
        return;
      }
      trace->set_metadata("summary", r.summary());
      nlohmann::ordered_json j;
      r.to_json(j);
      trace->set_metadata_json("result", j.dump());
    };
  }
  TerminalProgress progress;
  if (show_progress(quiet)) sim.set_progress(&progress);
  wl::ScenarioRun out = wl::run_scenario(sc, sim, ctx);
  progress.clear();
  const wl::JobResult& result = *out.result;
  if (exported && !quiet)
    std::printf("Chakra traces written: %s.0.et .. %s.%u.et\n\n", opt.chakra.c_str(), opt.chakra.c_str(),
                sc.topology->num_gpus() - 1);
  nlohmann::ordered_json j;
  j["scenario"] = sc.name;
  j["seed"] = sc.seed;
  if (!result.completed() && !result.aborted()) {
    // A result, not a crash: the report says what waits on what; status 3 tells scripts.
    std::fflush(stdout);
    std::fprintf(stderr, "clustersim: %s\n", result.problem().c_str());
    return 3;
  }
  if (!quiet) std::fputs(result.summary().c_str(), stdout);
  result.to_json(j);
  if (fingerprint) {
    std::string name = opt.scenario.empty() ? "default" : std::filesystem::path(opt.scenario).filename().string();
    append_file(opt.fingerprint, name + " events=" + std::to_string(out.events) + " end_ns=" +
                                     std::to_string(sim.now().count_ns()) + " " + result.fingerprint() +
                                     " trace=" + fingerprint->summary() + "\n");
  }
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!quiet)
    std::printf("\n%s simulated in %.3f s of wall time (%s over %s)\n",
                count_noun(out.events, "event", "events").c_str(), wall_s,
                count_noun(out.solves, "sharing solve", "sharing solves").c_str(),
                count_noun(out.solved_activities, "activity", "activities").c_str());
  if (!opt.json.empty()) {
    nlohmann::ordered_json run;
    run["seed"] = sc.seed;
    run["events"] = out.events;
    run["simulated_time_s"] = sim.now().seconds();
    if (!opt.reproducible) run["wall_time_s"] = wall_s;
    j["run"] = run;
    write_output(opt.json, j.dump(2) + "\n");
  }
  // Where the outputs went (stdout ones excepted: they are what stdout holds).
  say_written(trace_path, "trace", quiet, kOpenInPerfetto);
  say_written(opt.json, "JSON", quiet);
  say_written(opt.resolved, "resolved scenario", quiet);
  if (result.aborted()) {
    // A failure the watchdog caught: reported in full above; status 4 tells scripts.
    std::fflush(stdout);
    std::fprintf(stderr, "clustersim: %s\n", result.problem().c_str());
    return 4;
  }
  return 0;
}

int cmd_faults(const FaultsOptions& opt) {
  auto wall0 = std::chrono::steady_clock::now();
  std::vector<std::string> overrides = opt.overrides;
  if (opt.seed) overrides.push_back("seed=" + std::to_string(parse_seed(*opt.seed, "--seed")));
  refuse_stdout(opt.step_cache, "--step-cache", "the cache is read back and appended to");
  std::vector<std::pair<std::string, std::string>> options;
  if (!opt.step_cache.empty()) {
    // A file name, not YAML: quoted, so that '#', ': ' or '[' stay part of it.
    std::string quoted = "\"";
    for (char c : opt.step_cache) quoted += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
    options.emplace_back("workload.step_cache=" + quoted + "\"", "--step-cache");
  }
  // --trials sets workload.trials, so that what binding finds (results that outgrow --max-memory)
  // names --trials.
  if (opt.trials > 0) options.emplace_back("workload.trials=" + std::to_string(opt.trials), "--trials");
  wl::Scenario sc = bind_file(opt.scenario, overrides, true, opt.max_memory, options);
  if (sc.kind->name != "campaign")
    throw sim::UserError((opt.scenario.empty() ? std::string("the default scenario") : opt.scenario) + ": workload.kind is '" +
                         std::string(sc.kind->name) +
                         "'; faults runs a campaign: workload: {kind: campaign, job: {kind: " + std::string(sc.kind->name) +
                         ", ...}, duration: 54d, failures: {profile: llama3-405b}} (see README, Fault tolerance)");
  sc.doc.check_all_used();
  print_warnings(sc.doc.warnings(), opt.quiet);
  check_output(opt.json, "--json");
  sim::Simulation sim(sc.seed);
  sim.set_log(opt.log);
  wl::JobContext ctx;
  ctx.threads = opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ctx.trials = opt.trials;
  const int ranks = mpi_size();
  const bool lead = mpi_rank() == 0;  // under mpirun rank 0 reports; every rank computes the same summary
  if (ranks > 1) {
    // Trials handed out one at a time to ranks 1..K-1, their results gathered on rank 0 and sent
    // to every rank (each then summarises the same trials).
    ctx.distribute = [](size_t n, const std::function<std::string(size_t)>& trial) {
      std::vector<size_t> points(n);
      for (size_t i = 0; i < n; ++i) points[i] = i;
      std::vector<std::string> texts = mpi_run_points(points, trial, {});
      mpi_broadcast(texts);
      return texts;
    };
  }
  // --json - : the JSON is all that stdout holds (no report, as with --quiet).
  const bool quiet = output_to_stdout({{opt.json, "--json"}}) || opt.quiet || !lead;
  const bool tty = show_progress(quiet);
  if (tty) {
    auto shown = std::make_shared<std::atomic<int64_t>>(-1);  // the last percent printed (trials run on threads)
    ctx.progress = [wall0, shown](int64_t done, int64_t total) {
      const int64_t percent = total > 0 ? done * 100 / total : 0;
      if (shown->exchange(percent) == percent) return;
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
      const double f = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0;
      std::fprintf(stderr, "\r  %lld of %lld trials (%.0f%%), %.1f s, about %.0f s left   ", static_cast<long long>(done),
                   static_cast<long long>(total), f * 100, s, f > 0 ? s * (1 - f) / f : 0.0);
    };
  }
  if (!quiet) std::printf("clustersim faults: %s (seed %llu)\n\n", sc.name.c_str(), static_cast<unsigned long long>(sc.seed));
  wl::ScenarioRun out = wl::run_scenario(sc, sim, ctx);
  if (tty) std::fprintf(stderr, "\r%80s\r", "");
  const wl::JobResult& result = *out.result;
  if (!result.completed()) {
    std::fflush(stdout);
    if (lead) std::fprintf(stderr, "clustersim: %s\n", result.problem().c_str());
    return 3;
  }
  if (!quiet) std::fputs(result.summary().c_str(), stdout);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (!quiet && ranks > 1)
    std::printf("\ncampaign simulated in %.2f s of wall time on %d MPI ranks (%s running trials)\n", wall_s, ranks,
                count_noun(static_cast<uint64_t>(ranks - 1), "rank", "ranks").c_str());
  else if (!quiet)
    std::printf("\ncampaign simulated in %.2f s of wall time on %s\n", wall_s,
                count_noun(static_cast<uint64_t>(ctx.threads), "thread", "threads").c_str());
  if (!opt.json.empty() && lead) {
    nlohmann::ordered_json j;
    j["scenario"] = sc.name;
    j["seed"] = sc.seed;
    result.to_json(j);
    write_output(opt.json, j.dump(2) + "\n");
  }
  say_written(opt.json, "JSON", quiet);
  return 0;
}

int cmd_topology(const TopologyOptions& opt) {
  // --dot - : the graph is all that stdout holds (no description).
  const bool to_stdout = output_to_stdout({{opt.dot, "--dot"}});
  wl::Scenario sc = bind_file(opt.scenario, opt.overrides, false, opt.max_memory);
  sc.doc.check_all_used_under("cluster");  // unknown cluster keys are errors, as in `run`
  print_warnings(sc.doc.warnings(), false);
  check_output(opt.dot, "--dot");
  if (!to_stdout) std::printf("%s\n", sc.topology->describe().c_str());
  if (!opt.dot.empty()) write_output(opt.dot, sc.topology->to_dot());
  say_written(opt.dot, "DOT graph", to_stdout, " (render it with Graphviz: dot -Tsvg " + opt.dot + " -o topology.svg)");
  return 0;
}

int cmd_catalog(const CatalogOptions& opt) {
  using wl::appendf;
  check_output(opt.json, "--json");
  const bool quiet = output_to_stdout({{opt.json, "--json"}});
  // A precision the part has no tensor path for (peak 0) is "n/a", not 0 TFLOP/s.
  auto peak = [](double flops) {
    char buf[16];
    if (flops > 0) std::snprintf(buf, sizeof buf, "%.0f", flops / 1e12);
    else std::snprintf(buf, sizeof buf, "n/a");
    return std::string(buf);
  };
  nlohmann::ordered_json accelerators = nlohmann::ordered_json::array(), nics = accelerators, switches = accelerators,
                         models = accelerators;
  std::string o;
  o += "accelerators (dense peak TFLOP/s per precision, n/a: no tensor path for it; scale-up per accelerator\n"
       "per direction: NVLink for GPUs, the sum of a TPU chip's ICI links):\n";
  appendf(o, "  %-10s %6s %6s %6s %9s %9s  %s\n", "name", "bf16", "fp16", "fp8", "HBM GiB", "HBM GB/s", "scale-up GB/s");
  for (const auto& n : topo::gpu_names()) {
    auto g = topo::find_gpu(n);
    const bool tpu = g.kind == topo::AcceleratorKind::kTpu;
    char up[64];
    if (tpu)
      std::snprintf(up, sizeof up, "%.0f ICI (%u links x %.0f)", g.scale_up_bandwidth_Bps / 1e9, g.ici_links_per_chip,
                    g.ici_link_bandwidth_Bps / 1e9);
    else
      std::snprintf(up, sizeof up, "%.0f NVLink", g.scale_up_bandwidth_Bps / 1e9);
    appendf(o, "  %-10s %6s %6s %6s %9.1f %9.0f  %s\n", n.c_str(), peak(g.peak_bf16_flops).c_str(),
            peak(g.peak_fp16_flops).c_str(), peak(g.peak_fp8_flops).c_str(),
            static_cast<double>(g.hbm_capacity_bytes) / (1ull << 30), g.hbm_bandwidth_Bps / 1e9, up);
    nlohmann::ordered_json a;
    a["name"] = n;
    a["kind"] = tpu ? "tpu" : "gpu";
    // Peaks in FLOP/s; 0: no tensor path for that precision.
    a["peak_flops"] = {{"bf16", g.peak_bf16_flops}, {"fp16", g.peak_fp16_flops}, {"fp8", g.peak_fp8_flops},
                       {"tf32", g.peak_tf32_flops}, {"fp32", g.peak_fp32_flops}};
    a["hbm_bytes"] = g.hbm_capacity_bytes;
    a["hbm_bandwidth_Bps"] = g.hbm_bandwidth_Bps;
    a["scale_up_bandwidth_Bps"] = g.scale_up_bandwidth_Bps;
    if (tpu) {
      a["ici_links_per_chip"] = g.ici_links_per_chip;
      a["ici_link_bandwidth_Bps"] = g.ici_link_bandwidth_Bps;
    }
    a["source"] = g.source;
    accelerators.push_back(std::move(a));
  }
  o += "NICs (line rate per direction):\n";
  for (const auto& n : topo::nic_names()) {
    const topo::NicSpec nic = topo::find_nic(n);
    appendf(o, "  %-14s %4.0f Gb/s\n", n.c_str(), nic.bandwidth_Bps * 8 / 1e9);
    nics.push_back({{"name", n}, {"bandwidth_Bps", nic.bandwidth_Bps}, {"source", nic.source}});
  }
  o += "switches (ports, per port per direction):\n";
  for (const auto& n : topo::switch_names()) {
    const topo::SwitchSpec sw = topo::find_switch(n);
    appendf(o, "  %-14s %3u ports x %3.0f GB/s\n", n.c_str(), sw.ports, sw.port_bandwidth_Bps / 1e9);
    switches.push_back({{"name", n},
                        {"ports", sw.ports},
                        {"port_bandwidth_Bps", sw.port_bandwidth_Bps},
                        {"port_to_port_latency_ns", sw.port_to_port_latency.count_ns()},
                        {"source", sw.source}});
  }
  o += "model presets (parameters: the whole model, embeddings included; kv: key/value heads):\n";
  appendf(o, "  %-16s %9s %6s %6s %6s %5s %4s %7s  %s\n", "name", "params", "layers", "hidden", "ffn", "heads", "kv",
          "vocab", "block");
  for (const auto& n : wl::model_preset_names()) {
    const wl::ModelSpec m = wl::find_model_preset(n);
    const wl::ParamCounts pc = wl::count_params(m);
    const char* mlp = m.mlp == wl::MlpKind::kSwiGlu ? "swiglu" : "gelu";
    std::string block = mlp;
    block += m.tied_embeddings ? ", tied embeddings" : "";
    block += m.parallel_block ? ", parallel attention+mlp" : "";
    appendf(o, "  %-16s %8.2fB %6lld %6lld %6lld %5lld %4lld %7lld  %s\n", n.c_str(),
            static_cast<double>(pc.total) / 1e9, static_cast<long long>(m.layers), static_cast<long long>(m.hidden),
            static_cast<long long>(m.ffn_hidden), static_cast<long long>(m.heads), static_cast<long long>(m.kv_heads),
            static_cast<long long>(m.vocab), block.c_str());
    models.push_back({{"name", n},
                      {"params", pc.total},
                      {"layers", m.layers},
                      {"hidden", m.hidden},
                      {"ffn_hidden", m.ffn_hidden},
                      {"heads", m.heads},
                      {"kv_heads", m.kv_heads},
                      {"head_dim", m.effective_head_dim()},
                      {"vocab", m.vocab},
                      {"mlp", mlp},
                      {"tied_embeddings", m.tied_embeddings},
                      {"parallel_block", m.parallel_block}});
  }
  if (!quiet) std::fputs(o.c_str(), stdout);
  if (!opt.json.empty()) {
    nlohmann::ordered_json j;
    j["accelerators"] = std::move(accelerators);
    j["nics"] = std::move(nics);
    j["switches"] = std::move(switches);
    j["models"] = std::move(models);
    write_output(opt.json, j.dump(2) + "\n");
  }
  say_written(opt.json, "JSON", quiet);
  return 0;
}

}  // namespace app
