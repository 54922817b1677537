// sim/app/validate.cc: `clustersim validate`: simulates every published reference row
// (workloads/validation/published.h) and prints predicted vs published throughput.
// Exit status 0 when every selected row is within the tolerance, 1 otherwise (the failing rows
// are named on stderr).
#include "workloads/validation/validate.h"

#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/app/commands.h"
#include "sim/error.h"
#include "workloads/validation/published.h"

namespace app {

namespace {

std::string parallel_shape(const wl::PublishedRow& r) {
  return std::to_string(r.tp) + "/" + std::to_string(r.cp) + "/" + std::to_string(r.pp) + "/" + std::to_string(r.dp);
}

// "fits", or how far the memory model puts the fullest stage above HBM capacity.
std::string memory_label(const wl::RowResult& r) {
  if (r.fits()) return "fits";
  char buf[32];
  std::snprintf(buf, sizeof buf, "+%.1fGiB", (r.peak_memory_bytes - r.step.capacity_bytes) / (1ull << 30));
  return buf;
}

// printf to stdout when `on`.
__attribute__((format(printf, 2, 3))) void print(bool on, const char* fmt, ...) {
  if (!on) return;
  va_list args;
  va_start(args, fmt);
  std::vprintf(fmt, args);
  va_end(args);
}

nlohmann::ordered_json row_json(const wl::RowResult& r) {
  nlohmann::ordered_json e;
  e["row"] = std::string(r.row.id);
  e["source"] = wl::source_name(r.row.source);
  e["citation"] = std::string(r.row.citation);
  if (!r.row.note.empty()) e["note"] = std::string(r.row.note);
  e["setup"] = r.setup;
  e["gpus"] = r.row.gpus;
  e["tp"] = r.row.tp;
  e["cp"] = r.row.cp;
  e["pp"] = r.row.pp;
  e["dp"] = r.row.dp;
  e["seq_len"] = r.row.seq_len;
  e["global_batch"] = r.row.global_batch;
  e["micro_batch"] = 1;
  e["micro_batches"] = r.micro_batches;
  e["virtual_stages"] = r.virtual_stages;
  e["flop_convention"] = r.row.convention == wl::FlopConvention::kMegatronEq3 ? "megatron-eq3" : "palm-model-flops";
  if (!r.failure.empty()) {
    e["failure"] = r.failure;
    e["within_tolerance"] = false;
    return e;
  }
  e["predicted_step_time_s"] = r.step_time_s;
  e["predicted_tflops_per_gpu"] = r.predicted_tflops_per_gpu;
  e["published_tflops_per_gpu"] = r.row.tflops_per_gpu;
  e["relative_error"] = r.relative_error;
  e["predicted_mfu"] = r.predicted_mfu;
  e["published_mfu"] = r.row.mfu;
  e["within_tolerance"] = r.within_tolerance;
  e["peak_memory_bytes"] = r.peak_memory_bytes;
  e["hbm_capacity_bytes"] = r.step.capacity_bytes;
  e["fits_in_memory"] = r.fits();
  const auto& b = r.step.mean;
  nlohmann::ordered_json bd;
  for (const wl::BreakdownPart& p : wl::breakdown_parts(b)) bd[p.key] = p.seconds;
  e["breakdown_mean"] = bd;
  return e;
}

}  // namespace

int cmd_validate(const ValidateOptions& opt) {
  if (opt.rows != "megatron" && opt.rows != "llama3" && opt.rows != "all")
    throw sim::UserError("--rows must be megatron, llama3 or all, got \"" + opt.rows + "\"");
  if (opt.threads < 1) throw sim::UserError("--threads must be >= 1, got " + std::to_string(opt.threads));
  // An output to stdout ("-") is all that stdout holds: no table.
  const bool quiet = output_to_stdout({{opt.json, "--json"}, {opt.fingerprint, "--fingerprint"}});
  check_output(opt.json, "--json");  // before the rows are simulated
  check_output(opt.fingerprint, "--fingerprint");
  std::vector<wl::PublishedRow> rows;
  for (const auto& r : wl::published_rows()) {
    bool megatron = r.source == wl::PublishedSource::kMegatronSc21;
    if (opt.rows == "all" || (opt.rows == "megatron") == megatron) rows.push_back(r);
  }

  auto wall0 = std::chrono::steady_clock::now();
  TerminalProgress progress;
  std::function<void(size_t, size_t)> on_row;
  if (show_progress(quiet))
    on_row = [&progress](size_t done, size_t total) { progress.count("validation rows", done, total); };
  auto results = wl::run_validation(rows, opt.threads, !opt.fingerprint.empty(), on_row);
  progress.clear();
  double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();

  // The table goes to stdout unless an output does (--json - or --fingerprint -).
  const bool table = !quiet;
  print(table, "validation: predicted vs published training throughput (tolerance %.0f %%)\n",
        wl::kValidationTolerance * 100);
  for (auto src : {wl::PublishedSource::kMegatronSc21, wl::PublishedSource::kLlama3}) {
    bool used = false;
    for (const auto& r : rows) used = used || r.source == src;
    if (used) print(table, "  %s\n", wl::describe_source_setup(src).c_str());
  }
  print(table, "\n%-22s %6s %-11s %3s %9s %9s %9s %8s %15s %6s %-9s %s\n", "row", "GPUs", "TP/CP/PP/DP", "v", "step s",
              "pred TF", "pub TF", "error %", "MFU pred/pub %", "within", "memory", "breakdown (mean, % of step)");
  std::vector<std::string> failing;
  double sum_abs = 0;
  int counted = 0, within = 0;
  for (const auto& r : results) {
    if (!r.failure.empty()) {
      print(table, "%-22s %6lld %-11s  FAILED: %s\n", std::string(r.row.id).c_str(), static_cast<long long>(r.row.gpus),
                  parallel_shape(r.row).c_str(), r.failure.c_str());
      failing.push_back(std::string(r.row.id) + " (simulation failed)");
      continue;
    }
    const auto& b = r.step.mean;
    auto pct = [&](double v) { return v / r.step_time_s * 100; };
    double comm = 0;
    for (double e : b.exposed) comm += e;
    print(table,
        "%-22s %6lld %-11s %3lld %9.3f %9.1f %9.1f %+8.1f %7.1f / %-5.1f %6s %-9s compute %.0f, bubble %.0f, comm "
        "%.0f, opt %.1f, host %.1f\n",
        std::string(r.row.id).c_str(), static_cast<long long>(r.row.gpus), parallel_shape(r.row).c_str(),
        static_cast<long long>(r.virtual_stages), r.step_time_s, r.predicted_tflops_per_gpu, r.row.tflops_per_gpu,
        r.relative_error * 100, r.predicted_mfu * 100, r.row.mfu * 100, r.within_tolerance ? "yes" : "NO",
        memory_label(r).c_str(), pct(b.compute), pct(b.bubble), pct(comm), pct(b.optimizer), pct(b.host));
    sum_abs += std::abs(r.relative_error);
    ++counted;
    if (r.within_tolerance)
      ++within;
    else
      failing.push_back(std::string(r.row.id) + " (" + (r.relative_error > 0 ? "+" : "") +
                        std::to_string(static_cast<int>(std::lround(r.relative_error * 100))) + " %)");
  }
  for (const auto& r : rows)
    if (!r.note.empty()) print(table, "  note (%s): %s\n", std::string(r.id).c_str(), std::string(r.note).c_str());
  print(table, "\n%d of %s within %.0f %%; mean |error| %.1f %%\n", within,
        count_noun(results.size(), "row", "rows").c_str(),
              wl::kValidationTolerance * 100, counted > 0 ? sum_abs / counted * 100 : 0.0);
  // Timing goes to stderr so that stdout is the same on every run.
  std::fflush(stdout);
  std::fprintf(stderr, "(%s simulated in %.1f s of wall time on %s)\n",
               count_noun(results.size(), "row", "rows").c_str(), wall_s,
               count_noun(static_cast<uint64_t>(opt.threads), "thread", "threads").c_str());
  for (const auto& r : results) std::fprintf(stderr, "  %-22s %6.1f s\n", std::string(r.row.id).c_str(), r.wall_s);

  if (!opt.fingerprint.empty()) {
    std::string text;
    for (const auto& r : results) text += wl::row_fingerprint(r) + "\n";
    write_output(opt.fingerprint, text);
  }
  if (!opt.json.empty()) {
    nlohmann::ordered_json j;
    j["tolerance"] = wl::kValidationTolerance;
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : results) arr.push_back(row_json(r));
    j["rows"] = arr;
    j["within"] = within;
    j["total"] = results.size();
    j["mean_abs_error"] = counted > 0 ? sum_abs / counted : 0.0;
    write_output(opt.json, j.dump(2) + "\n");
  }
  say_written(opt.fingerprint, "fingerprints", quiet);
  say_written(opt.json, "JSON", quiet);
  if (!failing.empty()) {
    std::fflush(stdout);
    std::string names;
    for (const auto& n : failing) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "clustersim validate: %zu row%s outside %.0f %%: %s\n", failing.size(),
                 failing.size() == 1 ? "" : "s", wl::kValidationTolerance * 100, names.c_str());
    return 1;
  }
  return 0;
}

}  // namespace app
