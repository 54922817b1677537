// sim/app/main.cc: the clustersim command. Parses the command line, and turns user errors into
// one clear line and exit status 2. Everything else lives in the subcommand files.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "sim/app/commands.h"
#include "sim/app/mpi_points.h"
#include "sim/error.h"
#include "sim/log.h"

int main(int argc, char** argv) {
  // Started only when launched by mpirun; finished when main returns.
  std::unique_ptr<app::MpiSession> mpi;
  try {
    mpi = std::make_unique<app::MpiSession>(&argc, &argv);
  } catch (const sim::UserError& e) {
    std::fprintf(stderr, "clustersim: error: %s\n", e.what());
    return 2;
  }
  CLI::App app{"clustersim: discrete-event simulator of GPU and TPU clusters training large models"};
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print help for every subcommand");
  // Diagnostics (sim/log.h): to stderr, never data; accepted before or after the subcommand.
  app.fallthrough();
  int verbosity = 0;
  std::string log_level;
  app.add_flag("-v,--verbose", verbosity, "Log to stderr what is built and run (-v: info, -vv: debug, -vvv: trace)");
  app.add_option("--log-level", log_level, "Log level: off, error, warn (default), info, debug, trace");

  app::RunOptions run;
  auto* run_cmd = app.add_subcommand("run", "Simulate one scenario (the built-in default when no file is given)");
  run_cmd->add_option("scenario", run.scenario, "Scenario YAML file");
  run_cmd->add_option("--set", run.overrides, "Override a scenario key: --set cluster.nodes=4 (repeatable)");
  run_cmd->add_option("--seed", run.seed, "Random seed, 0 to 2^63-1 (overrides the scenario's `seed`)");
  run_cmd->add_option("--trace", run.trace, "Write a Chrome trace (open in Perfetto); .gz compresses");
  run_cmd->add_option("--trace-ranks", run.trace_ranks,
                      "Ranks to include in the trace (default: output.trace_ranks, else for a training step the first "
                      "rank of each pipeline stage, else ranks 0-15)")
      ->delimiter(',');
  run_cmd->add_option("--json", run.json, "Write results as JSON (-: to stdout, and nothing else)");
  run_cmd->add_option("--max-memory", run.max_memory,
                      "Refuse a cluster whose model would need more memory than this (e.g. 8GiB; default: what the "
                      "system has available)");
  run_cmd->add_option("--resolved", run.resolved,
                      "Write the fully resolved scenario (every default filled in; -: to stdout, and nothing else)");
  run_cmd->add_option("--fingerprint", run.fingerprint,
                      "Append the run's golden fingerprint line (times in ns, memory, trace hash) to FILE (-: to "
                      "stdout, and nothing else)");
  run_cmd->add_flag("--reproducible", run.reproducible, "Leave wall-clock fields out of the JSON (byte-identical reruns)");
  run_cmd->add_flag("-q,--quiet", run.quiet, "Print nothing but errors");
  run_cmd->add_flag("--check", run.check, "Bind and check the scenario (every key and value), simulate nothing");
  run_cmd->add_option("--chakra", run.chakra,
                      "Export the training step as Chakra execution traces PREFIX.<rank>.et (ASTRA-sim's input)");

  app::TopologyOptions topo;
  auto* topo_cmd = app.add_subcommand("topology", "Build a scenario's cluster, check it and describe it");
  topo_cmd->add_option("scenario", topo.scenario, "Scenario YAML file");
  topo_cmd->add_option("--set", topo.overrides, "Override a scenario key (repeatable)");
  topo_cmd->add_option("--dot", topo.dot, "Write the network graph in Graphviz DOT (-: to stdout, and nothing else)");
  topo_cmd->add_option("--max-memory", topo.max_memory, "Refuse a cluster whose model would need more memory than this");

  app::CatalogOptions catalog;
  auto* catalog_cmd = app.add_subcommand("catalog", "List the accelerators, NICs, switches and model presets");
  catalog_cmd->add_option("--json", catalog.json, "Write the catalog as JSON (-: to stdout, and nothing else)");

  app::ValidateOptions val;
  app::FaultsOptions faults;
  auto* faults_cmd = app.add_subcommand(
      "faults", "Fault-tolerance campaign: a training job over days to months under random failures (workload.kind: campaign)");
  faults_cmd->add_option("scenario", faults.scenario, "Campaign scenario YAML file")->required();
  faults_cmd->add_option("--set", faults.overrides, "Override a scenario key (repeatable)");
  faults_cmd->add_option("--seed", faults.seed, "Random seed, 0 to 2^63-1 (overrides the scenario's `seed`)");
  faults_cmd->add_option("--trials", faults.trials, "Independent trials (default: the scenario's workload.trials)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  faults_cmd->add_option("--threads", faults.threads, "Trials run at once (default: every core); results do not depend on it")
      ->check(CLI::Range(1, 1024));
  faults_cmd->add_option("--json", faults.json,
                         "Write results as JSON (scripts/plot_campaign.py draws them; -: to stdout, and nothing else)");
  faults_cmd->add_option("--step-cache", faults.step_cache, "File of cached step times (overrides workload.step_cache)");
  faults_cmd->add_option("--max-memory", faults.max_memory,
                         "Refuse a campaign whose cluster, step or trials' results would need more memory than this");
  faults_cmd->add_flag("-q,--quiet", faults.quiet, "Print nothing but errors");

  app::ReplayOptions replay;
  auto* replay_cmd = app.add_subcommand(
      "replay", "Replay measured traces, one per rank: PyTorch profiler JSON (measured durations) or Chakra .et");
  replay_cmd->add_option("traces", replay.traces, "Trace files (.json or .json.gz), one per rank, in rank order")
      ->required();
  replay_cmd->add_option("--et", replay.execution_traces,
                         "PyTorch execution traces, one per rank in rank order: the collectives' sizes")
      ->delimiter(',');
  replay_cmd->add_option(
      "--cluster", replay.cluster,
      "Simulate the collectives on this scenario's cluster: profiler traces at the sizes --et gives, "
      "else those the traces record; Chakra traces (default: one H100 NVSwitch node)");
  replay_cmd->add_option("--measured-on", replay.measured_on,
                         "Scenario of the cluster the traces were measured on: kernels are scaled to --cluster's GPU "
                         "through both hardware profiles (what-if)");
  replay_cmd->add_option("--json", replay.json,
                         "Write measured and replayed times per rank as JSON (-: to stdout, and nothing else)");
  replay_cmd->add_option("--trace", replay.trace, "Write the replay as a Chrome trace");
  replay_cmd->add_flag("-q,--quiet", replay.quiet, "Print nothing but errors");

  app::CalibrateOptions cal;
  auto* cal_cmd = app.add_subcommand(
      "calibrate", "Fit the hardware profile (cluster.profile) to kernels and collectives measured in profiler traces");
  cal_cmd->add_option("traces", cal.traces, "PyTorch profiler traces (.json or .json.gz), one per rank of one job")
      ->required();
  cal_cmd->add_option("--cluster", cal.cluster, "Scenario whose cluster the traces were measured on (its GPU, links)")
      ->required();
  cal_cmd
      ->add_option("-o,--output", cal.output,
                   "Write the fitted profile here (load it with cluster.profile.file; -: to stdout, and nothing else)")
      ->required();
  cal_cmd->add_option("--et", cal.execution_traces,
                      "PyTorch execution traces, one per rank in rank order: the collectives' sizes")
      ->delimiter(',');
  cal_cmd->add_option("--test", cal.test, "Traces used only to test the fit (held-out ranks or runs)")->delimiter(',');
  cal_cmd
      ->add_option("--holdout", cal.holdout,
                   "Hold out every N-th distinct kernel shape to test the fit (default 4; 0: none)")
      ->check(CLI::Range(0, 1000));
  cal_cmd->add_option("--json", cal.json, "Write the fit and its errors as JSON (-: to stdout, and nothing else)");
  cal_cmd->add_option(
      "--samples", cal.samples,
      "Write every kernel sample as CSV: measured and predicted times (-: to stdout, and nothing else)");
  cal_cmd->add_flag("-q,--quiet", cal.quiet, "Print nothing but errors");

  auto* val_cmd =
      app.add_subcommand("validate", "Predicted vs published training throughput (Megatron SC'21, Llama 3)");
  val_cmd->add_option("--rows", val.rows, "Which reference rows: megatron, llama3 or all")
      ->check(CLI::IsMember({"megatron", "llama3", "all"}));
  val_cmd->add_option("--json", val.json, "Write the results as JSON (-: to stdout, and nothing else)");
  val_cmd->add_option("--fingerprint", val.fingerprint,
                      "Write one golden fingerprint line per row to FILE (-: to stdout, and nothing else)");
  val_cmd->add_option("--threads", val.threads, "Rows simulated at once")->check(CLI::Range(1, 256));

  app::SweepOptions sweep;
  auto* sweep_cmd = app.add_subcommand(
      "sweep", "Run a scenario at every point of a grid of overrides; one CSV/JSON row per point");
  sweep_cmd->add_option("scenario", sweep.scenario, "Scenario YAML file (default: the built-in one)");
  sweep_cmd->add_option("--axis", sweep.axes, "KEY=V1,V2,...: one axis of the grid (repeatable; the first outermost)")
      ->required();
  sweep_cmd->add_option("--set", sweep.overrides, "Override a scenario key at every point (repeatable)");
  sweep_cmd->add_option("--csv", sweep.csv, "Write one row per point as CSV (-: to stdout, and nothing else)");
  sweep_cmd->add_option("--json", sweep.json, "Write every point's result as JSON (-: to stdout, and nothing else)");
  sweep_cmd->add_option("--threads", sweep.threads, "Points run at once (default: every core); rows do not depend on it")
      ->check(CLI::Range(1, 1024));
  sweep_cmd->add_option("--max-memory", sweep.max_memory, "Refuse clusters whose model would need more memory than this");
  sweep_cmd->add_option("--shard", sweep.shard,
                        "I/N: run only the points whose index is I modulo N (job arrays; concatenate the CSVs' rows "
                        "and sort them by the point column to merge)");
  sweep_cmd->add_flag("-q,--quiet", sweep.quiet, "Print nothing but errors");

  // The first word that is not an option names the subcommand: CLI11 would only say that one is
  // required (or the word is not expected). -v and --log-level are the options before it.
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word == "--log-level") {
      ++i;  // its value
      continue;
    }
    if (!word.empty() && word[0] == '-') continue;
    std::vector<std::string> names;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
    if (std::find(names.begin(), names.end(), word) != names.end()) break;
    std::fprintf(stderr, "clustersim: error: %s\n", app::unknown_subcommand(word, names).c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help and friends
    // Same one-line shape as every other user error.
    std::fprintf(stderr, "clustersim: error: %s (see clustersim --help)\n", e.what());
    return 2;
  }
  try {
    spdlog::level::level_enum level = spdlog::level::warn;
    if (verbosity > 0) level = verbosity == 1 ? spdlog::level::info : verbosity == 2 ? spdlog::level::debug : spdlog::level::trace;
    if (!log_level.empty()) level = sim::parse_log_level(log_level);
    sim::Log log(level);
    run.log = topo.log = val.log = faults.log = replay.log = cal.log = sweep.log = &log;
    if (app::mpi_size() > 1 && !*sweep_cmd && !*faults_cmd)
      throw sim::UserError("under mpirun only `clustersim sweep` and `clustersim faults` run (their points and "
                           "trials spread over the ranks); run other commands without mpirun");
    if (*run_cmd) return app::cmd_run(run);
    if (*topo_cmd) return app::cmd_topology(topo);
    if (*catalog_cmd) return app::cmd_catalog(catalog);
    if (*val_cmd) return app::cmd_validate(val);
    if (*faults_cmd) return app::cmd_faults(faults);
    if (*replay_cmd) return app::cmd_replay(replay);
    if (*cal_cmd) return app::cmd_calibrate(cal);
    if (*sweep_cmd) return app::cmd_sweep(sweep);
  } catch (const sim::UserError& e) {
    std::fprintf(stderr, "clustersim: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "clustersim: internal error: %s\n", e.what());
    return 1;
  }
  return 0;
}
