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

// The axis a binding error is about, when it names one as its --set location ("--set KEY: ...",
// "--set KEY=VALUE: ..." for an override that does not apply); axes.size() otherwise.
size_t axis_of(const std::string& msg, const std::vector<Axis>& axes) {
  for (size_t k = 0; k < axes.size(); ++k) {
    const std::string at = "--set " + axes[k].key;
    if (msg.rfind(at, 0) == 0 && msg.size() > at.size() && (msg[at.size()] == ':' || msg[at.size()] == '='))
      return k;
  }
  return axes.size();
}

// The error with "--axis" in place of the "--set" the overrides of a point are given as.
std::string as_axis_error(const std::string& msg) { return "--axis" + msg.substr(5); }

// An error about a value whatever the other keys: its type or units (the typed getters'
// "expected ...", "bad ...", "integer out of range"), as opposed to a combination the scenario
// refuses at some points only (a layout that does not divide the GPUs).
bool type_error(const std::string& msg) {
  return msg.find(": expected ") != std::string::npos || msg.find(": bad ") != std::string::npos ||
         msg.find(": integer out of range") != std::string::npos;
}

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
  const uint64_t max_memory = max_memory_bytes(opt.max_memory);
  // One point's scenario, bound (not run): the --set overrides, then each axis's value.
  load_scenario(opt.scenario);  // a missing or malformed file is an error, not a row per point
  auto bind = [&](const std::vector<std::string>& values) {
    sim::ConfigDoc doc = load_scenario(opt.scenario);
    for (const auto& o : opt.overrides) doc.apply_override(o);
    for (size_t k = 0; k < axes.size(); ++k) {
      try {
        doc.apply_override(axes[k].key + "=" + values[k]);
      } catch (const sim::ConfigError& e) {
        throw sim::ConfigError(as_axis_error(e.what()));  // a bad YAML value, a path through a scalar
      }
    }
    return wl::bind_scenario(std::move(doc), opt.scenario.empty() ? "default" : opt.scenario, true, max_memory);
  };
  {
    // Before the grid runs, as `run --set` would: the first point, and each other value of each
    // axis with the others at their first. An axis key the scenario does not know (at none of these
    // points that bind) or a value of the wrong type is an error naming the axis; any other unknown
    // key is one at the first point (as in `run`); other refusals are the rows' to report.
    std::vector<std::string> first;
    for (const auto& a : axes) first.push_back(a.values[0]);
    std::vector<std::string> unknown(axes.size());  // the unknown-key error naming axis k, if any
    std::vector<bool> known(axes.size(), false);    // axis k's key was read at a point that bound
    std::vector<std::string> warnings;              // of the points that bound, each once
    for (size_t k = 0; k < axes.size(); ++k) {
      for (size_t v = k == 0 ? 0 : 1; v < axes[k].values.size(); ++v) {
        std::vector<std::string> values = first;
        values[k] = axes[k].values[v];
        const bool first_point = v == 0;
        try {
          wl::Scenario sc = bind(values);
          sc.doc.check_all_used();
          known.assign(axes.size(), true);
          for (const std::string& w : sc.doc.warnings())
            if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
        } catch (const sim::ConfigError& e) {
          const std::string msg = e.what();
          const size_t a = axis_of(msg, axes);
          if (msg.rfind("--axis ", 0) == 0) {
            throw;  // the value does not apply as an override
          } else if (msg.find(": unknown key") != std::string::npos) {
            if (a < axes.size()) unknown[a] = msg;
            else if (first_point) throw;  // a --set or scenario key nobody reads: every point's error
          } else if (a < axes.size() && type_error(msg)) {
            throw sim::UserError(as_axis_error(msg));
          }
        } catch (const std::exception&) {
          // Not the axes' own fault (e.g. a cluster too big for memory): the rows will say.
        }
      }
    }
    for (size_t k = 0; k < axes.size(); ++k)
      if (!unknown[k].empty() && !known[k]) throw sim::UserError(as_axis_error(unknown[k]));
    print_warnings(warnings, opt.quiet || mpi_rank() != 0);
  }

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
      std::vector<std::string> values;
      for (size_t k = 0; k < axes.size(); ++k) values.push_back(value_of(i, k));
      wl::Scenario sc = bind(values);
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
    } catch (const sim::UserError& e) {  // the scenario refused this point
      row.status = "error";
      row.error = e.what();
    } catch (const std::exception& e) {  // not the input's fault (out of memory, an internal error)
      row.status = "failed";
      row.error = std::string("internal error: ") + e.what();
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
  size_t ok = 0, refused = 0;
  for (const Row& row : rows) {
    ok += row.status == "ok";
    refused += row.status == "error";
  }
  if (!quiet) {
    std::printf("sweep: %s over %s", count_noun(points, "point", "points").c_str(),
                count_noun(axes.size(), "axis", "axes").c_str());
    if (shards > 1) std::printf(" (shard %zu/%zu: %zu of them)", shard, shards, mine.size());
    if (mpi_size() > 1)
      std::printf(" on %d MPI ranks (%s running points)", mpi_size(),
                  count_noun(static_cast<uint64_t>(mpi_size() - 1), "rank", "ranks").c_str());
    std::printf("\n\n");
    // Each axis's column as wide as its key or its widest value, at least 28, and two spaces apart.
    std::vector<int> width;
    for (const auto& a : axes) {
      size_t w = std::max<size_t>(28, a.key.size());
      for (const auto& v : a.values) w = std::max(w, v.size());
      width.push_back(static_cast<int>(w));
    }
    for (size_t k = 0; k < axes.size(); ++k) std::printf("%-*s  ", width[k], axes[k].key.c_str());
    std::printf("%-8s %12s %8s  %s\n", "status", "step s", "MFU %", "error");
    for (size_t n = 0; n < mine.size(); ++n) {
      const size_t i = mine[n];
      for (size_t k = 0; k < axes.size(); ++k) std::printf("%-*s  ", width[k], value_of(i, k).c_str());
      const auto& r = rows[n].result;
      char step[32] = "";
      if (r.contains("step_time_s") && r["step_time_s"].is_number())
        std::snprintf(step, sizeof step, "%.4f", r["step_time_s"].get<double>());
      char mfu[32] = "";
      if (r.contains("mfu") && r["mfu"].is_number()) std::snprintf(mfu, sizeof mfu, "%.1f", r["mfu"].get<double>() * 100);
      std::string err = rows[n].error;
      if (err.size() > 100) err = err.substr(0, 97) + "...";
      std::printf("%-8s %12s %8s  %s\n", rows[n].status.c_str(), step, mfu, err.c_str());
    }
    if (mine.empty())
      std::printf("\nthis shard has no points\n");
    else if (ok == mine.size())
      std::printf("\n%s\n", mine.size() == 1   ? "the point ran"
                             : mine.size() == 2 ? "both points ran"
                                                : ("all " + std::to_string(ok) + " points ran").c_str());
    else if (ok == 0)
      std::printf("\nnone of the %s ran; %s why\n", count_noun(mine.size(), "point", "points").c_str(),
                  mine.size() == 1 ? "its row says" : "their rows say");
    else
      std::printf("\n%zu of %zu points ran; the %s why\n", ok, mine.size(),
                  mine.size() - ok == 1 ? "other's row says" : "others' rows say");
  }
  say_written(opt.csv, "CSV", quiet, " (plot it with scripts/plot_sweep.py)");
  say_written(opt.json, "JSON", quiet);
  if (ok == 0 && !mine.empty()) {
    // Nothing ran: an error for scripts too, even with --quiet. Status 2 when the scenario refused
    // every point (bad input, as for `run`), 3 when some could not finish.
    std::fflush(stdout);
    std::string first = rows[0].error.substr(0, rows[0].error.find('\n'));
    if (first.size() > 200) first = first.substr(0, 197) + "...";
    std::fprintf(
        stderr, "clustersim: error: sweep: none of the %s ran (%zu refused, %zu failed or aborted); point %zu: %s\n",
        count_noun(mine.size(), "point", "points").c_str(), refused, mine.size() - refused, mine[0], first.c_str());
    return refused == mine.size() ? 2 : 3;
  }
  return 0;
}

}  // namespace app
