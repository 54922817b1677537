// sim/app/sweep.cc: `clustersim sweep`: one scenario run at every point of a grid of --set
// overrides, one row per point (CSV, JSON and a table on stdout).
//
//   clustersim sweep [SCENARIO] --axis workload.parallelism.tp=1,2,4,8 --axis workload.parallelism.pp=1,2
//                    [--set KEY=VALUE]... [--csv FILE] [--json FILE] [--threads N]
//
// Points are the cartesian product of the axes, the first axis outermost. Every point binds and
// runs the scenario on its own simulation (sim::parallel_for, dynamic scheduling: points differ
// 1000x in cost); its row holds every axis value, a status (ok, error: the binding or the run
// refused it, e.g. a layout whose product is not the GPU count or that does not fit in memory;
// failed: the step could not finish; aborted: the watchdog ended it), the error text, and every
// scalar of the result's JSON (`run --json`), flattened to dotted keys (memory.peak_bytes). A
// failed point is a row, never the end of the sweep. Rows are written in point order whatever the
// thread count, with no wall-clock figure, so outputs are byte-identical for a given seed.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "sim/app/commands.h"
#include "sim/app/mpi_points.h"
#include "sim/config.h"
#include "sim/error.h"
#include "sim/parallel.h"
#include "sim/simulation.h"
#include "workloads/job/scenario.h"

namespace app {

namespace {

struct Axis {
  std::string key;
  std::vector<std::string> values;
};

Axis parse_axis(const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 >= text.size())
    throw sim::UserError("--axis: expected KEY=V1,V2,... (e.g. workload.parallelism.tp=1,2,4,8), got \"" + text + "\"");
  Axis a;
  a.key = text.substr(0, eq);
  std::string rest = text.substr(eq + 1);
  size_t start = 0;
  while (start <= rest.size()) {
    size_t comma = rest.find(',', start);
    if (comma == std::string::npos) comma = rest.size();
    std::string v = rest.substr(start, comma - start);
    if (v.empty()) throw sim::UserError("--axis " + a.key + ": an empty value in \"" + rest + "\"");
    a.values.push_back(v);
    start = comma + 1;
  }
  return a;
}

// Scalars of `j` under dotted keys, in document order; arrays are left out (per-stage tables).
void flatten(const nlohmann::ordered_json& j, const std::string& prefix, std::vector<std::pair<std::string, nlohmann::ordered_json>>& out) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string key = prefix.empty() ? it.key() : prefix + "." + it.key();
    if (it->is_object()) flatten(*it, key, out);
    else if (!it->is_array()) out.emplace_back(key, *it);
  }
}

struct Row {
  std::string status = "ok";
  std::string error;
  nlohmann::ordered_json result = nlohmann::ordered_json::object();
  std::vector<std::pair<std::string, nlohmann::ordered_json>> fields;
};

std::string csv_cell(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string cell_text(const nlohmann::ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

}  // namespace

int cmd_sweep(const SweepOptions& opt) {
  if (opt.axes.empty()) throw sim::UserError("sweep: give at least one --axis KEY=V1,V2,...");
  std::vector<Axis> axes;
  std::set<std::string> keys;
  for (const auto& t : opt.axes) {
    axes.push_back(parse_axis(t));
    if (!keys.insert(axes.back().key).second) throw sim::UserError("--axis " + axes.back().key + " is given twice");
  }
  size_t points = 1;
  for (const auto& a : axes) {
    points *= a.values.size();
    if (points > 100000) throw sim::UserError("sweep: more than 100,000 points; split the sweep");
  }
  size_t shard = 0, shards = 1;
  if (!opt.shard.empty()) {
    const size_t slash = opt.shard.find('/');
    bool ok = slash != std::string::npos && slash > 0 && slash + 1 < opt.shard.size() &&
              opt.shard.find_first_not_of("0123456789/") == std::string::npos && opt.shard.size() < 20;
    if (ok) {
      shard = std::stoull(opt.shard.substr(0, slash));
      shards = std::stoull(opt.shard.substr(slash + 1));
      ok = shards >= 1 && shard < shards;
    }
    if (!ok) throw sim::UserError("--shard: expected I/N with 0 <= I < N (e.g. 0/4), got \"" + opt.shard + "\"");
  }
  // An output to stdout ("-") is all that stdout holds: no table, as with --quiet.
  const bool quiet = output_to_stdout({{opt.csv, "--csv"}, {opt.json, "--json"}}) || opt.quiet;
  check_output(opt.csv, "--csv");
  check_output(opt.json, "--json");

  // Point i's value index along axis k: the first axis outermost.
  auto value_of = [&](size_t i, size_t k) -> const std::string& {
    size_t stride = 1;
    for (size_t m = k + 1; m < axes.size(); ++m) stride *= axes[m].values.size();
    return axes[k].values[(i / stride) % axes[k].values.size()];
  };
  // The points this shard runs, in order; row k is point mine[k].
  std::vector<size_t> mine;
  for (size_t i = shard; i < points; i += shards) mine.push_back(i);
  std::vector<Row> rows(mine.size());
  TerminalProgress progress;
  const bool tty = show_progress(quiet) && mpi_rank() == 0;
  std::atomic<size_t> done{0};
  // One point, from its overrides to its row (its fields are flattened by the caller).
  auto run_point = [&](size_t i, Row& row) {
    try {
      std::vector<std::string> overrides = opt.overrides;
      for (size_t k = 0; k < axes.size(); ++k) overrides.push_back(axes[k].key + "=" + value_of(i, k));
      sim::ConfigDoc doc = opt.scenario.empty()
                               ? sim::ConfigDoc::load_string(default_scenario_yaml(), "<default scenario>")
                               : sim::ConfigDoc::load_file(opt.scenario);
      for (const auto& o : overrides) doc.apply_override(o);
      wl::Scenario sc = wl::bind_scenario(std::move(doc), opt.scenario.empty() ? "default" : opt.scenario, true,
                                          max_memory_bytes(opt.max_memory));
      sc.doc.check_all_used();
      sim::Simulation sim(sc.seed);
      sim.set_log(opt.log);
      wl::JobContext ctx;
      wl::ScenarioRun out = wl::run_scenario(sc, sim, ctx);
      out.result->to_json(row.result);
      if (out.result->aborted()) {
        row.status = "aborted";
        row.error = out.result->problem();
      } else if (!out.result->completed()) {
        row.status = "failed";
        row.error = out.result->problem();
      }
      row.result["events"] = out.events;
    } catch (const std::exception& e) {
      row.status = "error";
      row.error = e.what();
    }
  };
  if (mpi_size() > 1) {
    // Under mpirun: points handed out one at a time to ranks 1..K-1, rows gathered on rank 0 as
    // JSON text (which keeps key order, integers and every double exactly).
    std::vector<std::string> texts = mpi_run_points(
        mine,
        [&](size_t i) {
          Row row;
          run_point(i, row);
          nlohmann::ordered_json j;
          j["status"] = row.status;
          j["error"] = row.error;
          j["result"] = std::move(row.result);
          return j.dump();
        },
        [&](size_t n) {
          if (tty) progress.count("sweep points", n, mine.size());
        });
    if (mpi_rank() != 0) return 0;  // rank 0 writes the outputs
    for (size_t k = 0; k < mine.size(); ++k) {
      const nlohmann::ordered_json j = nlohmann::ordered_json::parse(texts[k]);
      rows[k].status = j["status"].get<std::string>();
      rows[k].error = j["error"].get<std::string>();
      rows[k].result = j["result"];
    }
  } else {
    const int threads =
        opt.threads > 0 ? opt.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    sim::parallel_for(mine.size(), threads, [&](size_t k) {
      run_point(mine[k], rows[k]);
      if (tty) progress.count("sweep points", ++done, mine.size());
    });
  }
  for (Row& row : rows) flatten(row.result, "", row.fields);
  progress.clear();

  // Columns: the axes, status, error, then every result key in first-seen order over the rows.
  std::vector<std::string> columns;
  std::set<std::string> seen;
  for (const auto& r : rows)
    for (const auto& [k, v] : r.fields)
      if (seen.insert(k).second) columns.push_back(k);

  if (!opt.csv.empty()) {
    std::string text = "point,";
    for (const auto& a : axes) text += csv_cell(a.key) + ",";
    text += "status,error";
    for (const auto& c : columns) text += "," + csv_cell(c);
    text += "\n";
    for (size_t r = 0; r < mine.size(); ++r) {
      const size_t i = mine[r];
      text += std::to_string(i) + ",";
      for (size_t k = 0; k < axes.size(); ++k) text += csv_cell(value_of(i, k)) + ",";
      text += rows[r].status + "," + csv_cell(rows[r].error);
      std::map<std::string, const nlohmann::ordered_json*> by_key;
      for (const auto& [k, v] : rows[r].fields) by_key[k] = &v;
      for (const auto& c : columns) {
        auto it = by_key.find(c);
        text += ',';
        if (it != by_key.end()) text += csv_cell(cell_text(*it->second));
      }
      text += "\n";
    }
    write_output(opt.csv, text);
  }
  if (!opt.json.empty()) {
    nlohmann::ordered_json j;
    j["scenario"] = opt.scenario.empty() ? "default" : opt.scenario;
    nlohmann::ordered_json ax = nlohmann::ordered_json::array();
    for (const auto& a : axes) ax.push_back({{"key", a.key}, {"values", a.values}});
    j["axes"] = ax;
    if (shards > 1) j["shard"] = std::to_string(shard) + "/" + std::to_string(shards);
    nlohmann::ordered_json pts = nlohmann::ordered_json::array();
    for (size_t r = 0; r < mine.size(); ++r) {
      const size_t i = mine[r];
      nlohmann::ordered_json p;
      p["point"] = i;
      nlohmann::ordered_json at = nlohmann::ordered_json::object();
      for (size_t k = 0; k < axes.size(); ++k) at[axes[k].key] = value_of(i, k);
      p["at"] = at;
      p["status"] = rows[r].status;
      if (!rows[r].error.empty()) p["error"] = rows[r].error;
      p["result"] = rows[r].result;
      pts.push_back(p);
    }
    j["points"] = pts;
    write_output(opt.json, j.dump(2) + "\n");
  }
  if (!quiet) {
    std::printf("sweep: %zu points over %zu axes", points, axes.size());
    if (shards > 1) std::printf(" (shard %zu/%zu: %zu of them)", shard, shards, mine.size());
    if (mpi_size() > 1) std::printf(" on %d MPI ranks (%d running points)", mpi_size(), mpi_size() - 1);
    std::printf("\n\n");
    for (const auto& a : axes) std::printf("%-28s ", a.key.c_str());
    std::printf("%-8s %12s %8s  %s\n", "status", "step s", "MFU %", "error");
    size_t ok = 0;
    for (size_t n = 0; n < mine.size(); ++n) {
      const size_t i = mine[n];
      for (size_t k = 0; k < axes.size(); ++k) std::printf("%-28s ", value_of(i, k).c_str());
      const auto& r = rows[n].result;
      char step[32] = "";
      if (r.contains("step_time_s") && r["step_time_s"].is_number())
        std::snprintf(step, sizeof step, "%.4f", r["step_time_s"].get<double>());
      char mfu[32] = "";
      if (r.contains("mfu") && r["mfu"].is_number()) std::snprintf(mfu, sizeof mfu, "%.1f", r["mfu"].get<double>() * 100);
      std::string err = rows[n].error;
      if (err.size() > 100) err = err.substr(0, 97) + "...";
      std::printf("%-8s %12s %8s  %s\n", rows[n].status.c_str(), step, mfu, err.c_str());
      ok += rows[n].status == "ok";
    }
    std::printf("\n%zu of %zu points ran; the others' rows say why\n", ok, mine.size());
  }
  return 0;
}

}  // namespace app
