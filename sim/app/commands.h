// sim/app/commands.h: the subcommands of the clustersim command. They throw sim::UserError for
// bad input (main prints it and exits 2) and return the process exit status otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <chrono>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "sim/config.h"
#include "sim/simulation.h"
#include "sim/units.h"

namespace sim {
class Log;
}

namespace app {

struct RunOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::string scenario;  // empty: the built-in default
  std::vector<std::string> overrides;
  std::optional<std::string> seed;  // --seed as typed (parse_seed); none: the scenario's
  std::string trace;
  std::vector<uint32_t> trace_ranks;
  std::string json;
  std::string resolved;
  std::string fingerprint;  // append one golden fingerprint line (tests/golden/) to this file
  bool reproducible = false;
  bool quiet = false;
  bool check = false;  // bind and check the scenario, simulate nothing
  std::string chakra;  // export the step's program as Chakra traces PREFIX.<rank>.et
  std::string max_memory;  // refuse clusters whose model would need more (empty: what the system has)
};

struct TopologyOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::string scenario;
  std::vector<std::string> overrides;
  std::string dot;
  std::string max_memory;
};

struct CatalogOptions {
  std::string json;  // the catalog as JSON (-: to stdout, and nothing else)
};

struct ValidateOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::string rows = "all";  // megatron | llama3 | all
  std::string json;
  std::string fingerprint;  // one golden fingerprint line per row (tests/golden/)
  int threads = 2;
};

// `clustersim faults`: a campaign scenario (workload.kind: campaign) over many trials.
struct FaultsOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::string scenario;
  std::vector<std::string> overrides;
  std::optional<std::string> seed;  // --seed as typed (parse_seed); none: the scenario's
  int64_t trials = 0;  // 0: the scenario's workload.trials
  int threads = 0;     // 0: every core
  std::string json;
  std::string step_cache;  // overrides workload.step_cache
  std::string max_memory;  // --max-memory as typed; empty: MemAvailable
  bool quiet = false;
};

// `clustersim replay`: measured traces (one per rank) replayed on the simulator.
struct ReplayOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::vector<std::string> traces;
  std::vector<std::string> execution_traces;  // per rank: collective sizes, to simulate collectives
  std::string cluster;                        // scenario whose cluster simulates the collectives
  std::string measured_on;                    // scenario of the measured cluster: kernels scaled to --cluster's GPU
  std::string json;
  std::string trace;  // Chrome trace of the replay
  bool quiet = false;
};

// `clustersim calibrate`: a hardware profile fitted to measured traces.
struct CalibrateOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::vector<std::string> traces;            // profiler traces, one per rank of one job
  std::vector<std::string> execution_traces;  // per rank: collective sizes
  std::vector<std::string> test;              // traces used only to test the fit (held-out ranks)
  std::string cluster;                        // the scenario whose cluster was measured
  std::string output;                         // the profile file
  std::string json;
  std::string samples;  // CSV of every kernel sample, measured and predicted
  uint32_t holdout = 4;
  bool quiet = false;
};

struct SweepOptions {
  sim::Log* log = nullptr;  // diagnostics to stderr (-v, --log-level); null: none
  std::string scenario;                // empty: the built-in default
  std::vector<std::string> axes;       // KEY=V1,V2,...
  std::vector<std::string> overrides;  // --set, applied to every point before the axes
  std::string csv;
  std::string json;
  int threads = 0;  // 0: every core
  std::string max_memory;
  std::string shard;  // "I/N": only the points whose index is I modulo N (a scheduler's job array)
  bool quiet = false;
};

// A scenario's warnings (sim::ConfigDoc::warnings: implausible values, allowed), one line each on
// stderr as "clustersim: warning: <where>: <what>"; nothing with --quiet.
void print_warnings(const std::vector<std::string>& warnings, bool quiet);

// Output files: checked writable before anything is simulated (naming the option), and written
// whole to PATH.partial then renamed, so a failed run leaves an earlier file as it was. "-" is
// stdout: always writable, written at once.
void check_output(const std::string& path, const char* option);
void write_output(const std::string& path, const std::string& text);
// The report's closing line for an output file: "<what> written: <path><hint>". Nothing for an
// output not asked for (empty path), for stdout ("-": it is what stdout holds) or when quiet.
void say_written(const std::string& path, const char* what, bool quiet, const std::string& hint = "");
// The hint after a trace's "written" line.
inline constexpr const char* kOpenInPerfetto = " (open it in https://ui.perfetto.dev)";
// The outputs of one command as (path, option) pairs: true when one of them is "-" (stdout; the
// command then prints no report, as with --quiet, so that stdout holds that output alone). A
// UserError naming the options when two of them are "-".
bool output_to_stdout(const std::vector<std::pair<std::string, const char*>>& outputs);
// A UserError naming `option` when `path` is "-": outputs that cannot go to stdout (a trace,
// gzip'ed or too big to read there; a file that is appended to or read back).
void refuse_stdout(const std::string& path, const char* option, const char* why);
// --seed's text as a seed (0 .. 2^63-1, the scenario's `seed` range); a UserError naming `option`
// otherwise ("--seed: expected a non-negative integer, got \"-1\"").
uint64_t parse_seed(const std::string& text, const char* option);
// "unknown subcommand 'runn' (subcommands: run, topology, ...; did you mean 'run'?)": the
// suggestion is the name nearest in edit distance (at most 2), or the one name `word` begins.
std::string unknown_subcommand(const std::string& word, const std::vector<std::string>& names);
using sim::count_noun;  // "1 point", "2 points" (sim/units.h)

int cmd_run(const RunOptions& opt);
int cmd_calibrate(const CalibrateOptions& opt);
int cmd_replay(const ReplayOptions& opt);
int cmd_faults(const FaultsOptions& opt);
int cmd_topology(const TopologyOptions& opt);
int cmd_catalog(const CatalogOptions& opt);
// Predicted vs published throughput (sim/app/validate.cc); 1 when a row is outside tolerance.
int cmd_validate(const ValidateOptions& opt);
// Progress on a terminal: only when stdout and stderr are both terminals and not --quiet. The
// line goes to stderr, is rewritten in place at most twice a second and cleared by clear().
bool show_progress(bool quiet);
class TerminalProgress : public sim::ProgressListener {
 public:
  // Simulation progress (simulated time, events, events/s) of one run.
  void on_progress(sim::Time now, uint64_t events) override;
  // "label: done of total (p%), s, about s left" for sweeps, rows, trials (thread-safe).
  void count(const char* label, size_t done, size_t total);
  void clear();

 private:
  std::mutex mu_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_{};
  bool shown_ = false;
};

// One scenario at every point of a grid of overrides (sim/app/sweep.cc).
int cmd_sweep(const SweepOptions& opt);
// --max-memory as bytes (0: not given); a UserError naming the option when it is not a size.
uint64_t max_memory_bytes(const std::string& text);

// The scenario `clustersim run` uses when given no file.
const char* default_scenario_yaml();
// The scenario file at `path`, or the built-in default when `path` is empty, not yet bound.
sim::ConfigDoc load_scenario(const std::string& path);

}  // namespace app
