// tests/app/cli_test.cc: end-to-end tests of the clustersim command. Each test runs the built binary
// (CLUSTERSIM_BINARY) through the shell with stdout and stderr sent to files in a fresh temporary
// folder, then looks at the exit status, the messages and the files the run wrote.
// No timing asserts: wall time is only reported.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/catalog.h"
#include "topology/hardware_profile.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kBinary = CLUSTERSIM_BINARY;
const fs::path kSourceDir = CLUSTERSIM_SOURCE_DIR;

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
}

// Single-quotes one argument for /bin/sh.
std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

struct CliResult {
  int status = -1;  // exit status, or -1 when the process did not exit normally
  std::string out, err;
  double wall_s = 0;
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "clustersim_cli_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  fs::path file(const std::string& name) const { return dir_ / name; }

  // Runs clustersim with `args` (each quoted), in the temporary folder.
  CliResult run(const std::vector<std::string>& args) {
    std::string cmd = "cd " + quote(dir_.string()) + " && " + quote(kBinary);
    for (const auto& a : args) {
      cmd += ' ';
      cmd += quote(a);
    }
    cmd += " >" + quote(file("stdout.txt").string()) + " 2>" + quote(file("stderr.txt").string());
    CliResult r;
    auto t0 = std::chrono::steady_clock::now();
    int rc = std::system(cmd.c_str());
    r.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.status = (rc != -1 && WIFEXITED(rc)) ? WEXITSTATUS(rc) : -1;
    r.out = read_text(file("stdout.txt"));
    r.err = read_text(file("stderr.txt"));
    return r;
  }

  json read_json(const std::string& name) {
    json j = json::parse(read_text(file(name)), nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(j.is_discarded()) << name << " is not valid JSON";
    return j;
  }

  fs::path dir_;
};

// One fixture per suite, all sharing CliTest's temporary folder and runner.
class CliScenarios : public CliTest {};
class CliErrors : public CliTest {};
class CliDeterminism : public CliTest {};
class CliResolved : public CliTest {};
class CliTrace : public CliTest {};
class CliSubcommands : public CliTest {};
class CliFailures : public CliTest {};

std::vector<fs::path> example_scenarios() {
  std::vector<fs::path> v;
  for (const auto& e : fs::directory_iterator(kSourceDir / "workloads" / "scenarios"))
    if (e.is_regular_file() && e.path().extension() == ".yaml") v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

// A user error: status 2, exactly one line on stderr, in the common shape.
void expect_one_error_line(const CliResult& r) {
  EXPECT_EQ(r.status, 2) << r.err;
  ASSERT_FALSE(r.err.empty());
  EXPECT_EQ(r.err.back(), '\n') << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.err.rfind("clustersim: error: ", 0), 0u) << r.err;
}

// Two DGX H100 nodes running nccl-tests style collectives; the tests below work out values of its
// first case by hand, so it lives here rather than depending on an example or the built-in default.
const char* const kTwoNodeCollectives =
    "name: two-dgx-h100-collectives\n"
    "seed: 1\n"
    "cluster:\n"
    "  gpu: h100-sxm\n"
    "  nodes: 2\n"
    "  gpus_per_node: 8\n"
    "  scale_up: {kind: nvswitch}\n"
    "  scale_out:\n"
    "    kind: fat-tree\n"
    "    nic_bandwidth: 400Gbps\n"
    "    rails: 8\n"
    "    tiers:\n"
    "      - {name: leaf, nodes: 2}\n"
    "      - {name: spine, leafs: 1}\n"
    "workload:\n"
    "  kind: collectives\n"
    "  iterations: 5\n"
    "  warmup: 1\n"
    "  tests:\n"
    "    - {op: all-reduce, algorithm: ring, group: node, sizes: [1MiB, 64MiB]}\n"
    "    - {op: all-reduce, algorithm: ring, group: all, sizes: [1MiB, 64MiB]}\n";

bool contains(const std::string& hay, const std::string& needle) { return hay.find(needle) != std::string::npos; }

// ---------------------------------------------------------------------------------------------
// Every example scenario runs, and its golden fingerprint (tests/golden/scenarios.txt: events,
// every simulated time in integer ns, peak memory per stage, a hash of the first 10,000 trace
// records) is unchanged. The folder is listed when the test runs, so a new scenario is covered
// without touching this file; a scenario without a golden line fails until
// scripts/update-golden.sh has been run and its diff reviewed.

// Golden lines by their first word (the scenario's file name, "default", or "validate:<row>").
std::map<std::string, std::string> read_golden(const fs::path& p) {
  std::map<std::string, std::string> lines;
  std::istringstream in(read_text(p));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines[line.substr(0, line.find(' '))] = line;
  return lines;
}

const char* const kGoldenHint =
    "a golden fingerprint changed: if the change is intended, run scripts/update-golden.sh, review the diff "
    "and say why in the commit message";

TEST_F(CliScenarios, EveryExampleRunsAndMatchesItsGoldenFingerprint) {
  auto golden = read_golden(kSourceDir / "tests" / "golden" / "scenarios.txt");
  auto scenarios = example_scenarios();
  ASSERT_GE(scenarios.size(), 4u) << "expected the example scenarios in workloads/scenarios/";
  std::set<std::string> seen{"default"};
  {
    auto r = run({"run", "--quiet", "--fingerprint", "fp.txt"});
    EXPECT_EQ(r.status, 0) << r.err;
    std::string line = read_text(file("fp.txt"));
    EXPECT_EQ(line, golden["default"] + "\n") << kGoldenHint;
  }
  for (const auto& s : scenarios) {
    SCOPED_TRACE(s.string());
    const std::string name = s.filename().string();
    seen.insert(name);
    fs::remove(file("fp.txt"));
    // The 131,072-GPU examples take minutes: CI checks their schema only (run --check).
    const bool check_only = name.find("131k") != std::string::npos;
    auto r = check_only ? run({"run", s.string(), "--quiet", "--check", "--fingerprint", "fp.txt"})
                        : run({"run", "--quiet", "--json", "out.json", "--fingerprint", "fp.txt", s.string()});
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err, "");
    EXPECT_EQ(r.out, "") << "--quiet prints nothing";
    if (!check_only) {
      json j = read_json("out.json");
      EXPECT_TRUE(j.contains("scenario"));
      EXPECT_TRUE(j.contains("run"));
    }
    ASSERT_TRUE(golden.count(name)) << name << " has no line in tests/golden/scenarios.txt; " << kGoldenHint;
    EXPECT_EQ(read_text(file("fp.txt")), golden[name] + "\n") << kGoldenHint;
    // Reported, not asserted: examples are meant to take seconds at most.
    if (r.wall_s > 20) std::cout << "NOTE: " << name << " took " << r.wall_s << " s\n";
    RecordProperty(name, std::to_string(r.wall_s) + " s");
  }
  for (const auto& [name, line] : golden) EXPECT_TRUE(seen.count(name)) << "stale golden line: " << line;
}

// ---------------------------------------------------------------------------------------------
// Bad scenarios. Line and column of each bad value were counted by hand in the text below
// (1-based); the message must name file:line:col and the dotted key.

TEST_F(CliErrors, UnknownKey) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: h100-sxm\n"
             "  nodes: 1\n"
             "  gpus_per_node: 8\n"
             "  scale_up: {kind: nvswitch, bandwdith: 450GB/s}\n"  // the misspelt key starts at col 30
             "workload:\n"
             "  kind: collectives\n"
             "  tests:\n"
             "    - {op: all-reduce, sizes: [1MiB]}\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:6:30: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "cluster.scale_up.bandwdith")) << r.err;
  EXPECT_TRUE(contains(r.err, "unknown key")) << r.err;
}

TEST_F(CliErrors, FsdpKeysForAnotherStrategy) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n"
             "workload:\n"
             "  kind: training\n"
             "  model: {preset: llama3-8b}\n"
             "  training: {seq_len: 2048, global_batch: 8}\n"
             "  parallelism: {dp: 8, data_parallel: zero1, fsdp_reduce_dtype: bf16}\n"  // the value at col 65
             "  schedule: {kind: 1f1b}\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:7:65: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "workload.parallelism.fsdp_reduce_dtype: applies to data_parallel: fsdp only (this job's is zero1)"))
      << r.err;
  // At their defaults the keys pass (resolved scenarios of earlier releases list fsdp_prefetch for
  // every strategy; sweeps cross strategies); any other value is refused the same way.
  auto replace_all = [](std::string t, const std::string& from, const std::string& to) {
    for (size_t at = t.find(from); at != std::string::npos; at = t.find(from, at + to.size())) t.replace(at, from.size(), to);
    return t;
  };
  write_text(file("old.yaml"), replace_all(read_text(file("bad.yaml")), "fsdp_reduce_dtype: bf16", "fsdp_prefetch: 1"));
  EXPECT_EQ(run({"run", "--quiet", "old.yaml"}).status, 0);
  write_text(file("old2.yaml"), replace_all(read_text(file("bad.yaml")), "fsdp_reduce_dtype: bf16",
                                            "fsdp_reduce_dtype: fp32, fsdp_reshard_after_forward: default"));
  EXPECT_EQ(run({"run", "--quiet", "old2.yaml"}).status, 0);
  write_text(file("bad2.yaml"), replace_all(read_text(file("bad.yaml")), "fsdp_reduce_dtype: bf16", "fsdp_prefetch: 2"));
  r = run({"run", "--quiet", "bad2.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "workload.parallelism.fsdp_prefetch: applies to data_parallel: fsdp only")) << r.err;
}

TEST_F(CliErrors, Fp8RecipeForAnotherPrecision) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n"
             "workload:\n"
             "  kind: training\n"
             "  model: {preset: llama3-8b, layers: 2}\n"
             "  training: {seq_len: 2048, global_batch: 8, precision: bf16, fp8_recipe: tensorwise}\n"  // value at col 75
             "  parallelism: {tp: 8}\n"
             "  schedule: {kind: 1f1b}\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:6:75: workload.training.fp8_recipe: applies to precision: fp8 only (this job's is bf16)"))
      << r.err;
  // delayed, the default a resolved FP8 scenario lists, passes; with fp8 the JSON says which ran.
  std::string t = read_text(file("bad.yaml"));
  t.replace(t.find("fp8_recipe: tensorwise"), 22, "fp8_recipe: delayed");
  write_text(file("ok.yaml"), t);
  EXPECT_EQ(run({"run", "--quiet", "ok.yaml"}).status, 0);
  t.replace(t.find("precision: bf16"), 15, "precision: fp8");
  t.replace(t.find("fp8_recipe: delayed"), 19, "fp8_recipe: tensorwise");
  write_text(file("fp8.yaml"), t);
  ASSERT_EQ(run({"run", "--quiet", "fp8.yaml", "--json", "out.json"}).status, 0);
  EXPECT_TRUE(contains(read_text(file("out.json")), "\"fp8_recipe\": \"tensorwise\"")) << read_text(file("out.json"));
}

TEST_F(CliErrors, NegativeBandwidth) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: h100-sxm\n"
             "  nodes: 2\n"
             "  gpus_per_node: 8\n"
             "  scale_out:\n"
             "    kind: fat-tree\n"
             "    nic_bandwidth: -400Gbps\n"  // the value starts at col 20
             "    tiers:\n"
             "      - {name: leaf, nodes: 2}\n"
             "workload:\n"
             "  kind: collectives\n"
             "  tests:\n"
             "    - {op: all-reduce, sizes: [1MiB]}\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:8:20: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "cluster.scale_out.nic_bandwidth")) << r.err;
}

TEST_F(CliErrors, TorusDimensionZero) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: tpu-v5p\n"
             "  nodes: 16\n"
             "  gpus_per_node: 4\n"
             "  scale_out:\n"
             "    kind: torus\n"
             "    dims: [4, 0, 4]\n"  // the list starts at col 11, its 0 is at col 15
             "workload:\n"
             "  kind: collectives\n"
             "  tests:\n"
             "    - {op: all-reduce, sizes: [1MiB]}\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  // The error points at the element itself: line 8, column 15, key cluster.scale_out.dims[1].
  EXPECT_TRUE(contains(r.err, "bad.yaml:8:15: cluster.scale_out.dims[1]")) << r.err;
  EXPECT_TRUE(contains(r.err, "dimension 1 is 0")) << r.err;
}

TEST_F(CliErrors, GroupLargerThanCluster) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: h100-sxm\n"
             "  nodes: 1\n"
             "  gpus_per_node: 8\n"
             "workload:\n"
             "  kind: collectives\n"
             "  tests:\n"
             "    - {op: all-reduce, sizes: [1MiB]}\n"
             "    - op: all-gather\n"
             "      group: {first: 0, count: 16}\n"  // the group map starts at col 14
             "      sizes: [1MiB]\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:11:14: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "workload.tests[1].group")) << r.err;
  EXPECT_TRUE(contains(r.err, "16")) << r.err;
}

// An algorithm that cannot run the op, or cannot run on the group's shape, is caught while the
// scenario is bound: the error names the test's `algorithm` node, and stdout stays empty (the
// cluster summary is not printed, nothing is simulated).
TEST_F(CliErrors, AlgorithmThatCannotRunTheOp) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: h100-sxm\n"
             "  nodes: 1\n"
             "  gpus_per_node: 8\n"
             "workload:\n"
             "  kind: collectives\n"
             "  tests:\n"
             "    - {op: all-reduce, sizes: [1MiB]}\n"
             "    - {op: all-to-all, algorithm: ring, sizes: [1MiB]}\n");  // `ring` at col 35
  auto r = run({"run", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:10:35: workload.tests[1].algorithm: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "ring does not implement all-to-all (use direct or auto)")) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CliErrors, AlgorithmThatDoesNotFitTheGroup) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: h100-sxm\n"
             "  nodes: 1\n"
             "  gpus_per_node: 8\n"
             "workload:\n"
             "  kind: collectives\n"
             "  tests:\n"
             "    - {op: all-reduce, algorithm: halving-doubling, group: [0, 1, 2], sizes: [1MiB]}\n");
  auto r = run({"run", "bad.yaml"});
  expect_one_error_line(r);
  // `halving-doubling` starts at col 35 of line 9; 3 ranks are not a power of two.
  EXPECT_TRUE(contains(r.err, "bad.yaml:9:35: workload.tests[0].algorithm: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "power-of-two group, got 3 ranks")) << r.err;
  EXPECT_EQ(r.out, "");
}

// The same for a training step: the dimension's algorithm is checked against the collectives the
// step runs on that dimension (DDP's all-reduce over DP), before the step is simulated.
TEST_F(CliErrors, TrainingAlgorithmThatCannotRunOnItsDimension) {
  write_text(file("bad.yaml"),
             "name: t\n"
             "cluster:\n"
             "  gpu: h100-sxm\n"
             "  nodes: 2\n"
             "  gpus_per_node: 8\n"
             "  scale_out: {kind: fat-tree, tiers: [{name: leaf, nodes: 2}]}\n"
             "workload:\n"
             "  kind: training\n"
             "  model: {preset: llama3-8b}\n"
             "  training: {seq_len: 4096, global_batch: 8, micro_batch: 1}\n"
             "  parallelism: {tp: 8, pp: 1, dp: 2, data_parallel: ddp}\n"
             "  schedule: {kind: 1f1b}\n"
             "  collectives: {dp: torus}\n");  // `torus` at col 21 of line 13
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:13:21: workload.collectives.dp: ")) << r.err;
  EXPECT_TRUE(contains(r.err, "all-reduce with torus on 2 ranks: torus needs a torus cluster shape")) << r.err;
}

TEST_F(CliErrors, MissingFile) {
  auto r = run({"run", "--quiet", "no-such-scenario.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "no-such-scenario.yaml")) << r.err;
}

TEST_F(CliErrors, YamlSyntax) {
  // The flow map opened on line 2 is never closed.
  write_text(file("bad.yaml"), "name: t\ncluster: {gpu: h100-sxm, nodes: 1\nworkload: [\n");
  auto r = run({"run", "--quiet", "bad.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "bad.yaml:")) << r.err;
  EXPECT_TRUE(contains(r.err, "syntax")) << r.err;
}

// Inputs from the reliability battery that used to crash: each is now one line, exit 2.
TEST_F(CliErrors, SelfReferencingAliasAndAliasBomb) {
  write_text(file("rec.yaml"), "cluster: &a [*a]\n");  // y19: endless recursion before
  CliResult r = run({"run", "--quiet", "rec.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "rec.yaml:1:10")) << r.err;
  EXPECT_TRUE(contains(r.err, "refers to itself")) << r.err;
  // y06: 2^30 leaves from 31 lines (each alias doubles the last): refused at once.
  std::string bomb = "a0: &a0 [x, x]\n";
  for (int i = 1; i < 30; ++i) {
    const std::string n = std::to_string(i), prev = std::to_string(i - 1);  // named: see GCC bug 105329
    bomb += "a" + n + ": &a" + n + " [*a" + prev + ", *a" + prev + "]\n";
  }
  write_text(file("bomb.yaml"), bomb);
  CliResult b = run({"run", "--quiet", "bomb.yaml"});
  expect_one_error_line(b);
  EXPECT_TRUE(contains(b.err, "more than 1000000 values")) << b.err;
  EXPECT_LT(b.wall_s, 10.0);
  // The same through --set.
  CliResult s = run({"run", "--quiet", "--set", "output.trace_ranks=&r [*r]"});
  expect_one_error_line(s);
}

TEST_F(CliErrors, ABandwidthNearZeroIsAnErrorNotACrash) {
  // r01: 1e-30 B/s makes a 1 MiB all-reduce last 1e36 s, past the 2^62 ns the engine represents.
  write_text(file("slow.yaml"), "cluster:\n  gpu: h100-sxm\n  nodes: 1\n  gpus_per_node: 8\n"
                                "  scale_up: {kind: nvswitch, bandwidth: 1e-30B/s}\n"
                                "workload: {kind: collectives, tests: [{op: all-reduce, sizes: [1MiB]}]}\n");
  CliResult r = run({"run", "--quiet", "slow.yaml"});
  expect_one_error_line(r);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "146 years")) << r.err;
}

TEST_F(CliErrors, ProductsThatWouldWrapAreRefused) {
  // p23: 2^20 x 2^20 x 2^20 x 2^24 x 2^24 = 2^108 ranks wrapped in 64 bits before.
  write_text(file("p.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}\n"
                             "workload:\n  kind: training\n  model: {preset: llama3-8b}\n"
                             "  training: {seq_len: 8192, global_batch: 64, micro_batch: 1}\n"
                             "  parallelism: {tp: 1048576, cp: 1048576, pp: 1048576, dp: 16777216, dp_outer: 16777216}\n"
                             "  schedule: {kind: 1f1b}\n");
  CliResult r = run({"run", "--quiet", "p.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "more than 2^64 ranks")) << r.err;
  // A torus dimension of 2^32 + 2 was truncated to 2 and simulated as another shape.
  write_text(file("t.yaml"), "cluster:\n  gpu: tpu-v5p\n  nodes: 2\n  gpus_per_node: 4\n"
                             "  scale_out: {kind: torus, dims: [4294967298, 4, 1]}\n");
  CliResult t = run({"run", "--quiet", "t.yaml"});
  expect_one_error_line(t);
  EXPECT_TRUE(contains(t.err, "scale_out.dims[0]")) << t.err;
}

TEST_F(CliErrors, ARingOverMoreThan65535LinksRuns) {
  // A ring all-reduce over 32,768 GPUs: one activity crosses more than 65,535 constraints, which
  // was an internal assertion (exit 134) before; it is a result now.
  write_text(file("ring.yaml"), "cluster:\n  gpu: h100-sxm\n  nodes: 4096\n  gpus_per_node: 8\n  scale_out:\n"
                                "    kind: fat-tree\n    nic_bandwidth: 400Gbps\n    tiers:\n"
                                "      - {name: rack, nodes: 16}\n      - {name: pod, racks: 256}\n"
                                "workload: {kind: collectives, iterations: 1, warmup: 0, tests: "
                                "[{op: all-reduce, algorithm: ring, sizes: [1MiB]}]}\n");
  CliResult r = run({"run", "--quiet", "ring.yaml", "--json", "ring.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = read_json("ring.json");
  EXPECT_EQ(j["collectives"][0]["ranks"], 32768);
  EXPECT_GT(j["collectives"][0]["time_s"].get<double>(), 0);
}

TEST_F(CliErrors, AClusterTooLargeForMemoryIsRefusedBeforeSetUp) {
  // c12: 2^26 GPUs (the documented maximum) filled 8 GiB and was killed. Its network model alone
  // needs 2^26 x 1 KiB = 64 GiB; with --max-memory 16GiB it is refused at once, naming the cluster.
  write_text(file("huge.yaml"), "cluster:\n  gpu: h100-sxm\n  nodes: 8388608\n  gpus_per_node: 8\n  scale_out:\n"
                                "    kind: fat-tree\n    tiers:\n      - {name: rack, nodes: 4096}\n"
                                "      - {name: pod, racks: 2048}\n");
  CliResult r = run({"topology", "huge.yaml", "--max-memory", "16GiB"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "huge.yaml:2:3: cluster: a cluster of 67108864 accelerators needs at least 64 GiB"))
      << r.err;
  EXPECT_LT(r.wall_s, 1.0);
  CliResult run_r = run({"run", "huge.yaml", "--max-memory", "16GiB"});
  expect_one_error_line(run_r);
  expect_one_error_line(run({"run", "--max-memory", "lots"}));
}

TEST_F(CliErrors, DocumentedMaximaThatCannotRunAreRefusedWithTheirKey) {
  auto training = [&](const std::string& gpu, const std::string& model, const std::string& training) {
    write_text(file("t.yaml"), "cluster: {gpu: " + gpu + ", nodes: 1, gpus_per_node: 8}\nworkload:\n  kind: training\n"
                               "  model: {preset: llama3-8b" + model + "}\n  training: {seq_len: 2048, micro_batch: 1" +
                               training + "}\n  parallelism: {tp: 8}\n  schedule: {kind: 1f1b}\n");
    CliResult r = run({"run", "--quiet", "t.yaml"});
    expect_one_error_line(r);
    return r.err;
  };
  // p14: FP8 on an A100 (no FP8 tensor path) silently ran at the BF16 peak.
  EXPECT_TRUE(contains(training("a100-sxm", "", ", global_batch: 8, precision: fp8"), "workload.training.precision"));
  // p20: 2^30 micro-batches x 32 layers is more than 2^26 layer passes (filled 8 GiB before).
  EXPECT_TRUE(contains(training("h100-sxm", "", ", global_batch: 1073741824"), "workload.training.global_batch"));
  // p22: 2^40 layers (std::bad_alloc, exit 1, before).
  EXPECT_TRUE(contains(training("h100-sxm", ", layers: 1099511627776", ", global_batch: 8"), "workload.model.layers"));
  // d09: 2^30 x 100,000 DiLoCo inner steps never finished.
  CliResult d = run({"run", "--quiet", (kSourceDir / "workloads/scenarios/diloco-4dc-400gbps.yaml").string(), "--set",
                     "workload.inner_steps=1073741824", "--set", "workload.outer_steps=100000"});
  expect_one_error_line(d);
  EXPECT_TRUE(contains(d.err, "more than 2^32 simulated inner steps")) << d.err;
}

// tests/data/bad-scenarios: inputs that once crashed, hung or exhausted memory; each must end
// as exit 2 with one line holding the text its first line expects (usually the key).
TEST_F(CliErrors, EveryBadScenarioIsOneLineNamingItsKey) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(kSourceDir / "tests" / "data" / "bad-scenarios")) {
    if (e.path().extension() != ".yaml") continue;
    ++n;
    const std::string text = read_text(e.path());
    ASSERT_EQ(text.rfind("# expect: ", 0), 0u) << e.path();
    const std::string expect = text.substr(10, text.find('\n') - 10);
    CliResult r = run({"run", "-q", "--max-memory", "2GiB", e.path().string()});
    SCOPED_TRACE(e.path().filename().string());
    expect_one_error_line(r);
    EXPECT_TRUE(contains(r.err, expect)) << r.err;
    EXPECT_LT(r.wall_s, 5.0);
  }
  EXPECT_GE(n, 20u);
}

// Inputs a fuzzer once found crashing, hanging or reaching undefined behaviour (tests/fuzz/
// regressions/, scripts/fuzz.sh adds more): each must now end as a result (exit 0) or as one
// error line (exit 2), quickly.
TEST_F(CliErrors, EveryFuzzRegressionIsAResultOrOneErrorLine) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(kSourceDir / "tests" / "fuzz" / "regressions")) {
    if (e.path().filename() == "README.md") continue;
    ++n;
    CliResult r = run({"run", "-q", "--max-memory", "2GiB", e.path().string()});
    SCOPED_TRACE(e.path().filename().string());
    EXPECT_TRUE(r.status == 0 || r.status == 2) << r.status << " " << r.err;
    if (r.status == 2) expect_one_error_line(r);
    EXPECT_LT(r.wall_s, 10.0);
  }
  EXPECT_GE(n, 20u);
}

TEST_F(CliErrors, AFailedRunLeavesEarlierOutputsAndBadPathsAreFoundFirst) {
  // Llama 3 70B with TP 8 alone needs more than 80 GB per GPU: the memory check fails after the
  // trace file would have been opened. Earlier outputs stay as they were.
  write_text(file("oom.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8}\nworkload:\n  kind: training\n"
                               "  model: {preset: llama3-70b}\n  training: {seq_len: 4096, global_batch: 1, micro_batch: 1}\n"
                               "  parallelism: {tp: 8}\n  schedule: {kind: 1f1b}\n");
  write_text(file("t.json"), "earlier trace");
  write_text(file("r.json"), "earlier result");
  CliResult r = run({"run", "--quiet", "oom.yaml", "--trace", "t.json", "--json", "r.json"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "out of memory")) << r.err;
  EXPECT_EQ(read_text(file("t.json")), "earlier trace");
  EXPECT_EQ(read_text(file("r.json")), "earlier result");
  EXPECT_FALSE(fs::exists(file("t.json.partial")));
  // An unwritable --json is reported before anything is simulated, naming the option.
  CliResult j = run({"run", "--quiet", "--json", (dir_ / "no" / "such" / "dir.json").string()});
  expect_one_error_line(j);
  EXPECT_TRUE(contains(j.err, "--json: cannot write")) << j.err;
  CliResult v = run({"validate", "--json", (dir_ / "no" / "v.json").string()});
  expect_one_error_line(v);
  EXPECT_LT(v.wall_s, 5.0);  // refused before the rows (minutes) are simulated
}

TEST_F(CliErrors, SetUnknownKey) {
  auto r = run({"run", "--quiet", "--set", "cluster.no_such_key=3"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--set")) << r.err;
  EXPECT_TRUE(contains(r.err, "cluster.no_such_key")) << r.err;
  EXPECT_TRUE(contains(r.err, "unknown key")) << r.err;
}

TEST_F(CliErrors, UnknownOption) {
  auto r = run({"run", "--no-such-option"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--no-such-option")) << r.err;
}

// ---------------------------------------------------------------------------------------------
// Determinism and seeds.

// Two leaves of four single-GPU nodes under a spine, 2:1 oversubscribed, each leaf's uplink
// capacity (4 x 50 GB/s / 2 = 100 GB/s) split into 4 uplinks of 25 GB/s (23.5 GB/s at the 94%
// fabric efficiency), chosen per flow by ECMP hashing: the flow hash draws on the seed. All-to-all
// of 1 GiB on all 8 GPUs and on four groups of 2 + 2 GPUs across the leaves.
const char* const kFlowHashTwoLeaf =
    "name: flow-hash-two-leaf\n"
    "seed: 1\n"
    "cluster:\n"
    "  gpu: h100-sxm\n"
    "  nodes: 8\n"
    "  gpus_per_node: 1\n"
    "  scale_out:\n"
    "    kind: fat-tree\n"
    "    nic_bandwidth: 400Gbps\n"
    "    uplink_policy: flow-hash\n"
    "    tiers:\n"
    "      - {name: leaf, nodes: 4}\n"
    "      - {name: spine, leafs: 2, oversubscription: 2, uplinks: 4}\n"
    "workload:\n"
    "  kind: collectives\n"
    "  iterations: 1\n"
    "  warmup: 0\n"
    "  tests:\n"
    "    - {op: all-to-all, algorithm: direct, group: all, sizes: [1GiB]}\n"
    "    - {op: all-to-all, algorithm: direct, group: [0, 1, 4, 5], sizes: [1GiB]}\n"
    "    - {op: all-to-all, algorithm: direct, group: [2, 3, 6, 7], sizes: [1GiB]}\n"
    "    - {op: all-to-all, algorithm: direct, group: [0, 2, 5, 7], sizes: [1GiB]}\n"
    "    - {op: all-to-all, algorithm: direct, group: [1, 3, 4, 6], sizes: [1GiB]}\n";

TEST_F(CliDeterminism, SameRunSameBytes) {
  // The default scenario (D-mod-K), the rail-optimized example with flow hashing asked for (its
  // spine has one uplink per leaf, so no route has a choice to hash), and a fabric whose flow-hash
  // uplinks do give choices, so that its paths draw on the seed: the same seed, the same bytes.
  write_text(file("fh.yaml"), kFlowHashTwoLeaf);
  const std::vector<std::vector<std::string>> cases = {
      {"run"},
      {"run", (kSourceDir / "workloads/scenarios/h100-128node-rail-collectives.yaml").string(), "--set",
       "cluster.scale_out.uplink_policy=flow-hash"},
      {"run", file("fh.yaml").string()},
  };
  for (const auto& base : cases) {
    SCOPED_TRACE(base.back());
    for (const char* tag : {"1", "2"}) {
      auto args = base;
      for (std::string a : {"--quiet", "--reproducible", "--json"}) args.push_back(a);
      args.push_back(std::string("a") + tag + ".json");
      args.push_back("--trace");
      args.push_back(std::string("t") + tag + ".json");
      auto r = run(args);
      ASSERT_EQ(r.status, 0) << r.err;
    }
    std::string a1 = read_text(file("a1.json")), a2 = read_text(file("a2.json"));
    std::string t1 = read_text(file("t1.json")), t2 = read_text(file("t2.json"));
    EXPECT_FALSE(a1.empty());
    EXPECT_FALSE(t1.empty());
    EXPECT_TRUE(a1 == a2) << "JSON results differ between identical runs";
    EXPECT_TRUE(t1 == t2) << "traces differ between identical runs";
    EXPECT_FALSE(contains(a1, "wall_time")) << "--reproducible leaves wall-clock fields out";
  }
}

TEST_F(CliDeterminism, SeedFlag) {
  write_text(file("s.yaml"), kTwoNodeCollectives);
  ASSERT_EQ(run({"run", "--quiet", "--reproducible", "--json", "a.json", "s.yaml"}).status, 0);
  ASSERT_EQ(run({"run", "--quiet", "--reproducible", "--json", "b.json", "--seed", "7", "s.yaml"}).status, 0);
  json a = read_json("a.json"), b = read_json("b.json");
  EXPECT_EQ(a["seed"], 1);  // the scenario says seed: 1
  EXPECT_EQ(b["seed"], 7);
  EXPECT_EQ(b["run"]["seed"], 7);
  // The built-in default scenario reports its seed the same way.
  ASSERT_EQ(run({"run", "--quiet", "--reproducible", "--json", "c.json", "--seed", "9"}).status, 0);
  EXPECT_EQ(read_json("c.json")["seed"], 9);
}

TEST_F(CliDeterminism, SeedChangesOnlyRandomScenarios) {
  // The seed reaches the results only through the ECMP flow hash (the "ecmp" random stream), and
  // only where a route has equal choices. kFlowHashTwoLeaf, worked by hand: S = 1 GiB, an uplink
  // carries 23.5 GB/s. All 8 GPUs: each rank sends S/8 to each peer, so 16 flows of S/8 go from one
  // leaf to the other (and 16 back), over 4 uplinks; a rank's NIC needs 7/8 S / 47 GB/s = 20.0 ms.
  //  - d-mod-k: uplink = destination GPU mod 4, so every uplink carries 4 flows, S/2 at 23.5 GB/s:
  //    22.85 ms, above the NIC time; the same for any seed. (Each 2 + 2 group: its 4 flows each way
  //    go to 2 destinations, 2 flows on each of 2 uplinks: S/2 again, 22.85 ms.)
  //  - flow-hash: each flow's uplink is a hash of (seed, communicator, channel, pair), so the most
  //    loaded uplink carries m >= 4 flows, m an integer: m x S/8 / 23.5 GB/s = m x 5.71 ms; which m
  //    depends on the seed. Each of the five communicators draws its paths independently (the
  //    member list is part of the hash), so two seeds give the same five times with a small
  //    chance (each time ties with a chance of about 1/3 to 1/2); the outputs are a fixed function
  //    of the seed, so seeds 1 and 2 either always differ or never, and they must differ.
  write_text(file("fh.yaml"), kFlowHashTwoLeaf);
  auto run_seed = [&](const std::string& policy, const char* seed) {
    std::string out = policy + seed + ".json";
    auto r = run({"run", "fh.yaml", "--quiet", "--reproducible", "--json", out, "--seed", seed, "--set",
                  "cluster.scale_out.uplink_policy=" + policy});
    EXPECT_EQ(r.status, 0) << r.err;
    json j = read_json(out);
    EXPECT_EQ(j["seed"], std::stoi(seed));
    j.erase("seed");
    j["run"].erase("seed");
    return j;
  };
  auto times = [](const json& j) {
    std::vector<double> t;
    for (const auto& c : j["collectives"]) t.push_back(c["time_s"].get<double>());
    return t;
  };
  const double S = 1024.0 * 1024.0 * 1024.0, uplink_Bps = 23.5e9;

  json d1 = run_seed("d-mod-k", "1"), d2 = run_seed("d-mod-k", "2");
  EXPECT_EQ(d1.dump(), d2.dump()) << "d-mod-k results depend on the seed";
  ASSERT_EQ(times(d1).size(), 5u);
  for (double t : times(d1)) EXPECT_NEAR(t, S / 2 / uplink_Bps, 20e-6);  // latencies: a few us

  json f1 = run_seed("flow-hash", "1"), f2 = run_seed("flow-hash", "2");
  ASSERT_EQ(times(f1).size(), 5u);
  ASSERT_EQ(times(f2).size(), 5u);
  EXPECT_NE(times(f1), times(f2)) << "flow-hash collective times do not depend on the seed";
  for (const json* f : {&f1, &f2}) {
    const double all = times(*f)[0] / (S / 8 / uplink_Bps);  // m, the flows on the busiest uplink
    EXPECT_GE(all, 4.0 - 1e-3);
    EXPECT_NEAR(all, std::round(all), 5e-3);
  }
  // The same seed again: the same paths.
  EXPECT_EQ(run_seed("flow-hash", "2").dump(), f2.dump());
}

// ---------------------------------------------------------------------------------------------
// --resolved writes a scenario that reproduces the run.

TEST_F(CliResolved, RerunsToSameJson) {
  // The built-in default (also with --seed, which must land in the resolved file), the two-node
  // collectives scenario and the collective
  // examples; not every example, since training scenarios can take a while and one run of each
  // is in CliScenarios already.
  write_text(file("s.yaml"), kTwoNodeCollectives);
  std::vector<std::vector<std::string>> cases = {{}, {"--seed", "42"}, {file("s.yaml").string()}};
  for (const char* s : {"dgx-h100-collectives.yaml", "h100-128node-rail-collectives.yaml",
                        "llama3-16k-h100-collectives.yaml", "tpu-v5p-8x8x8-collectives.yaml"})
    cases.push_back({(kSourceDir / "workloads/scenarios" / s).string()});
  for (const auto& extra : cases) {
    SCOPED_TRACE(extra.empty() ? std::string("default") : extra.back());
    std::vector<std::string> args = {"run", "--quiet", "--reproducible", "--json", "a.json", "--resolved", "r.yaml"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto r1 = run(args);
    ASSERT_EQ(r1.status, 0) << r1.err;
    auto r2 = run({"run", "--quiet", "--reproducible", "--json", "b.json", "r.yaml"});
    ASSERT_EQ(r2.status, 0) << r2.err << "\nresolved scenario:\n" << read_text(file("r.yaml"));
    EXPECT_EQ(read_text(file("a.json")), read_text(file("b.json")));
  }
}

// ---------------------------------------------------------------------------------------------
// The Chrome trace.

TEST_F(CliTrace, StructureAndUnits) {
  write_text(file("s.yaml"), kTwoNodeCollectives);
  ASSERT_EQ(run({"run", "--quiet", "--reproducible", "--json", "a.json", "--trace", "t.json", "s.yaml"}).status, 0);
  json res = read_json("a.json");
  json tr = read_json("t.json");
  ASSERT_TRUE(tr.contains("traceEvents"));
  ASSERT_TRUE(tr["traceEvents"].is_array());

  std::map<int, std::string> process_names;
  std::vector<json> spans;
  for (const auto& e : tr["traceEvents"]) {
    ASSERT_TRUE(e.contains("ph"));
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] == "X") {
      EXPECT_TRUE(e["ts"].is_number());
      EXPECT_TRUE(e["dur"].is_number());
      EXPECT_GE(e["dur"].get<double>(), 0);
      spans.push_back(e);
    }
  }
  // The scenario has 16 GPUs; the trace holds the first 16 ranks by default.
  EXPECT_EQ(process_names.size(), 16u);
  EXPECT_EQ(process_names[0], "rank 0 (node 0)");
  ASSERT_FALSE(spans.empty());

  // The scenario's first case: ring all-reduce of 1 MiB on the 8 GPUs of node 0,
  // 1 warm-up and 5 timed iterations. Worked out by hand: at 1 MiB the ring runs NCCL's LL
  // protocol (launch 6.6 us; 2(n-1) = 14 steps of 0.1 us plus two 0.25 us NVSwitch hops); it moves
  // 2(n-1)/n x 1 MiB = 1,835,008 payload bytes per GPU at LL's cap, 141 GB/s (below LL's half of
  // 450 GB/s x 0.82 = 184.5 GB/s):
  //   6.6 + 14 x 0.6 us + 1,835,008 B / 141e9 B/s = 15 us + 13.01424 us = 28.01424 us.
  const double hand_us = 6.6 + 14 * 0.6 + 1835008.0 / 141e9 * 1e6;
  const auto& first = res["collectives"][0];
  ASSERT_EQ(first["op"], "all-reduce");
  ASSERT_EQ(first["ranks"], 8);
  ASSERT_EQ(first["size_bytes"], 1048576);
  const double time_us = first["time_s"].get<double>() * 1e6;
  EXPECT_NEAR(time_us, hand_us, 0.001);

  // Rank 0's spans of that case: ts and dur are microseconds, so each iteration's dur equals the
  // JSON's time_s x 1e6, and the first timed iteration starts when the warm-up (at t = 0) ends.
  // The 16-GPU case after it has spans of the same name, so take rank 0's first six in time order.
  std::vector<json> mine;
  for (const auto& e : spans)
    if (e["pid"] == 0 && e["name"] == "all-reduce 1 MiB ring/LL") mine.push_back(e);
  std::stable_sort(mine.begin(), mine.end(),
                   [](const json& a, const json& b) { return a["ts"].get<double>() < b["ts"].get<double>(); });
  ASSERT_GE(mine.size(), 6u) << "1 warm-up and 5 timed iterations";
  for (int k = 0; k < 6; ++k) {
    SCOPED_TRACE(k);
    const json& e = mine[k];
    EXPECT_EQ(e["args"]["iteration"].get<double>(), k - 1) << "warm-up is iteration -1";
    EXPECT_EQ(e["args"]["bytes"].get<double>(), 1048576.0);
    EXPECT_NEAR(e["dur"].get<double>(), time_us, 0.001);
    EXPECT_NEAR(e["dur"].get<double>(), hand_us, 0.001);
    // Back to back from t = 0; each start is rounded to the nanosecond.
    EXPECT_NEAR(e["ts"].get<double>(), k * hand_us, 0.001 * (k + 1));
  }
}

// ---------------------------------------------------------------------------------------------
// Failures inside a step (issue 9): node 7 of the Llama 3 8B example (TP 8, PP 4, DP 2 on 8 DGX
// nodes: ranks 56-63, pipeline stage 3 of data-parallel replica 1) dies at 700 ms, inside the
// step (about 1.2 s). The ranks of its replica's other stages and then the other replica (in the
// data-parallel all-reduce) wait for it for ever; the watchdog (10 s here) aborts the job.

std::string with_failures(const std::string& failures) {
  return read_text(kSourceDir / "workloads" / "scenarios" / "llama3-8b-64xh100-1f1b.yaml") + "failures:\n" + failures;
}

TEST_F(CliFailures, NodeDeathInsideALlama3StepIsAbortedOneWatchdogTimeoutAfterTheOldestHungOp) {
  std::string all_ranks;
  for (int r = 0; r < 64; ++r) {
    if (r) all_ranks += ',';
    all_ranks += std::to_string(r);
  }
  write_text(file("healthy.yaml"), with_failures("  events: []\n"));
  ASSERT_EQ(run({"run", "healthy.yaml", "--quiet", "--trace", "h.json", "--trace-ranks", all_ranks}).status, 0);
  write_text(file("f.yaml"), with_failures("  watchdog: 10s\n  events: [{at: 700ms, kill: {node: 7}}]\n"));
  CliResult r = run({"run", "f.yaml", "--json", "f.json", "--trace", "t.json", "--trace-ranks", all_ranks});
  EXPECT_EQ(r.status, 4) << r.err;  // aborted
  EXPECT_TRUE(contains(r.err, "clustersim: aborted: node 7 (GPUs 56-63) died at 700 ms")) << r.err;
  EXPECT_TRUE(contains(r.out, "ABORTED by the watchdog")) << r.out;
  json res = read_json("f.json");
  ASSERT_EQ(res["status"], "aborted");
  EXPECT_DOUBLE_EQ(res["failure"]["failed_at_s"].get<double>(), 0.7);
  const double abort_s = res["failure"]["aborted_at_s"].get<double>();
  // The whole step up to the abort is lost on all 64 GPUs.
  EXPECT_NEAR(res["failure"]["work_lost_gpu_s"].get<double>(), abort_s * 64, 1e-6);

  // The trace: the death as an instant at 700 ms, the watchdog and the abort as instants at the
  // abort; the ops in flight on live ranks as spans that end at the abort.
  json tr = read_json("t.json");
  std::string fired;
  int fired_pid = -1;
  double abort_us = -1, death_us = -1;
  std::vector<json> hung;
  for (const auto& e : tr["traceEvents"]) {
    if (e["ph"] == "i" && e["name"] == "failure: node 7 (GPUs 56-63) died" && e["pid"] == 0) death_us = e["ts"];
    if (e["ph"] == "i" && e["name"].get<std::string>().rfind("watchdog timeout: ", 0) == 0) {
      fired = e["name"].get<std::string>().substr(18);
      fired_pid = e["pid"];
      abort_us = e["ts"];
    }
  }
  EXPECT_DOUBLE_EQ(death_us, 700000.0);
  ASSERT_GE(fired_pid, 0) << "no watchdog instant in the trace";
  EXPECT_NEAR(abort_us, abort_s * 1e6, 1e-3);
  for (const auto& e : tr["traceEvents"])
    if (e["ph"] == "X" && std::abs(e["ts"].get<double>() + e["dur"].get<double>() - abort_us) < 1e-3) hung.push_back(e);
  ASSERT_FALSE(hung.empty());
  // The watchdog fires exactly one timeout after the oldest op still hung was issued, and that op
  // is the one it names: no span cut by the abort started before it.
  double oldest = abort_us;
  for (const auto& e : hung) oldest = std::min(oldest, e["ts"].get<double>());
  EXPECT_NEAR(abort_us - oldest, 10e6, 1e-3) << "abort " << abort_us << " us, oldest hung op issued at " << oldest;
  bool found = false;
  for (const auto& e : hung)
    if (e["pid"] == fired_pid && e["name"] == fired && std::abs(e["ts"].get<double>() - oldest) < 1e-3) found = true;
  EXPECT_TRUE(found) << "the op the watchdog names (" << fired << " on rank " << fired_pid << ") is the oldest hung";
  // Until a rank blocks on the dead node it runs as in the healthy step: the op was issued at the
  // same time there (where it then completed; a recv that waited for its sender shows the wait as
  // a "wait" span from its issue, then its own span from the send's start).
  json h = read_json("h.json");
  bool same_issue = false;
  for (const auto& e : h["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == fired_pid && (e["name"] == fired || e["name"] == "wait") &&
        std::abs(e["ts"].get<double>() - oldest) < 1e-3)
      same_issue = true;
  EXPECT_TRUE(same_issue) << fired << " on rank " << fired_pid << " is issued at " << oldest << " us in the healthy step";
  // No rank of the dead node has a span after its death.
  for (const auto& e : tr["traceEvents"])
    if (e["ph"] == "X" && e["pid"].get<int>() >= 56) { EXPECT_LE(e["ts"].get<double>(), 700000.0) << e.dump(); }
}

TEST_F(CliFailures, ElasticRecoveryRunsTheNextStepWithOneReplicaFewer) {
  // Node 7 holds ranks of replica 1 only: elastic recovery drops that replica and goes on with
  // replica 0 (GPUs 0-31) at half the global batch. That is exactly the job "dp 1, global batch
  // 32" on the same cluster with its last 4 nodes idle (spare_nodes: 4), so the step times agree.
  write_text(file("f.yaml"), with_failures("  watchdog: 10s\n  recovery: elastic\n  events: [{at: 700ms, kill: {node: 7}}]\n"));
  CliResult r = run({"run", "--json", "f.json", "f.yaml"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "changes the training")) << r.out;
  json res = read_json("f.json");
  EXPECT_EQ(res["status"], "recovered");
  ASSERT_TRUE(res["recovery"].contains("step")) << res.dump(2);
  write_text(file("ref.yaml"), read_text(kSourceDir / "workloads" / "scenarios" / "llama3-8b-64xh100-1f1b.yaml"));
  ASSERT_EQ(run({"run", "ref.yaml", "--quiet", "--json", "ref.json", "--set", "cluster.spare_nodes=4", "--set",
                 "workload.parallelism.dp=1", "--set", "workload.training.global_batch=32"})
                .status,
            0);
  json ref = read_json("ref.json");
  EXPECT_DOUBLE_EQ(res["recovery"]["step"]["step_time_s"].get<double>(), ref["step_time_s"].get<double>());
  EXPECT_DOUBLE_EQ(res["recovery"]["step"]["workload"]["tokens_per_step"].get<double>(), 32.0 * 8192);
}

TEST_F(CliFailures, SpareRecoveryMovesTheDeadNodesRanks) {
  write_text(file("f.yaml"), with_failures("  watchdog: 10s\n  recovery: spare\n  events: [{at: 700ms, kill: {gpu: 60}}]\n"));
  CliResult r = run({"run", "f.yaml", "--json", "f.json", "--set", "cluster.nodes=9", "--set", "cluster.spare_nodes=1"});
  ASSERT_EQ(r.status, 0) << r.err;
  json res = read_json("f.json");
  EXPECT_EQ(res["recovery"]["change"], "the ranks of node 7 moved to spare node 8");
  EXPECT_EQ(res["recovery"]["step"]["workload"]["tokens_per_step"].get<double>(), 64.0 * 8192);
}

TEST_F(CliFailures, BadFailureInputsAreOneLineNamingTheKey) {
  const std::pair<const char*, const char*> cases[] = {
      {"  events: [{at: 1ms, kill: {node: 8}}]\n", "failures.events[0].kill.node: node 8 is outside the cluster"},
      {"  events: [{at: -1ms, kill: {gpu: 1}}]\n", "failures.events[0].at"},
      {"  events: [{at: 1ms, kill: {switch: nowhere}}]\n", "no vertex 'nowhere'"},
      {"  events: [{at: 1ms, slow: {gpu: 1, factor: 0.5}}]\n", "failures.events[0].slow.factor"},
      {"  recovery: spare\n  events: []\n", "failures.recovery: recovery: spare needs hot spare nodes"},
      {"  recovery: sometimes\n  events: []\n", "failures.recovery"},
      {"  watchdog: 0s\n  events: []\n", "failures.watchdog"},
      {"  events: [{at: 1h, kill: {gpu: 1}}]\n", "failures.events[0].at: 60 min is after the step ended"},
  };
  for (const auto& [yaml, message] : cases) {
    SCOPED_TRACE(yaml);
    write_text(file("bad.yaml"), with_failures(yaml));
    CliResult r = run({"run", "bad.yaml"});
    expect_one_error_line(r);
    EXPECT_TRUE(contains(r.err, message)) << r.err;
  }
}

// A campaign (workload.kind: campaign) of the Llama 3 8B job on 64 H100, 54 days, Llama 3's
// failure rates per node-day, elastic data parallelism (so states with a replica dropped occur).
std::string small_campaign(const std::string& extra = "") {
  std::string job = read_text(kSourceDir / "workloads" / "scenarios" / "llama3-8b-64xh100-1f1b.yaml");
  const size_t w = job.find("workload:\n");
  std::string head = job.substr(0, w), body = job.substr(w + 10);
  std::string indented;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) indented += "    " + line + "\n";
  return head + "workload:\n  kind: campaign\n  job:\n" + indented +
         "  duration: 54d\n  trials: 200\n  policy: elastic\n  failures: {profile: llama3-405b}\n" + extra;
}

TEST_F(CliFailures, FaultsCampaignCachesStepTimesAndDoesNotDependOnThreads) {
  write_text(file("c.yaml"), small_campaign());
  CliResult a = run({"faults", "c.yaml", "--json", "a.json", "--threads", "1", "--step-cache", "steps.cache"});
  ASSERT_EQ(a.status, 0) << a.err;
  EXPECT_TRUE(contains(a.out, "ETTR")) << a.out;
  EXPECT_TRUE(contains(a.out, " of wall time on 1 thread\nJSON written: a.json\n")) << a.out;
  json ja = read_json("a.json");
  const int64_t simulated = ja["step_simulations"]["run"].get<int64_t>();
  EXPECT_GE(simulated, 1);  // the full job, and one per number of replicas down that occurred
  EXPECT_EQ(ja["step_simulations"]["from_cache"].get<int64_t>(), 0);
  // Second campaign on the same job, 2 threads: every step time comes from the cache, and the
  // results are the same bytes.
  CliResult b = run({"faults", "c.yaml", "--json", "b.json", "--threads", "2", "--step-cache", "steps.cache"});
  ASSERT_EQ(b.status, 0) << b.err;
  json jb = read_json("b.json");
  EXPECT_EQ(jb["step_simulations"]["run"].get<int64_t>(), 0);
  EXPECT_EQ(jb["step_simulations"]["from_cache"].get<int64_t>(), simulated);
  EXPECT_EQ(ja["results"].dump(), jb["results"].dump());
  // Another seed: other trials.
  CliResult c = run({"faults", "c.yaml", "--json", "c.json", "--seed", "2", "--step-cache", "steps.cache"});
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(ja["results"].dump(), read_json("c.json")["results"].dump());
}

// The campaign says how its steps were simulated. The job has two data-parallel replicas: with
// fidelity symmetric the full job's step folds them into one; a state with one replica dropped
// (elastic) has a single replica, nothing to fold, so it runs expanded and says why.
TEST_F(CliFailures, FaultsCampaignSaysWhichFidelityItsStepsRan) {
  write_text(file("c.yaml"), small_campaign());
  CliResult sym = run({"faults", "c.yaml", "--json", "s.json", "--set", "workload.job.fidelity=symmetric"});
  ASSERT_EQ(sym.status, 0) << sym.err;
  json js = read_json("s.json")["step_simulations"];
  const int64_t simulated = js["run"].get<int64_t>();
  ASSERT_GE(simulated, 2) << "200 trials of 54 days with elastic replicas drop one at least once";
  EXPECT_EQ(js["fidelity"]["symmetric"].get<int64_t>(), 1);
  EXPECT_EQ(js["fidelity"]["expanded"].get<int64_t>(), simulated - 1);
  EXPECT_TRUE(contains(sym.out, "fidelity: expanded")) << sym.out;
  EXPECT_TRUE(contains(sym.out, "one data-parallel replica")) << sym.out;
  // Not asked for: every step expanded, no reason to give.
  CliResult ex = run({"faults", "c.yaml", "--json", "e.json"});
  ASSERT_EQ(ex.status, 0) << ex.err;
  json je = read_json("e.json")["step_simulations"];
  EXPECT_EQ(je["fidelity"].size(), 1u);
  EXPECT_EQ(je["fidelity"]["expanded"].get<int64_t>(), je["run"].get<int64_t>());
  EXPECT_TRUE(contains(ex.out, "  fidelity: expanded\n")) << ex.out;
}

TEST_F(CliFailures, FaultsRefusesANonCampaignScenario) {
  write_text(file("t.yaml"), read_text(kSourceDir / "workloads" / "scenarios" / "llama3-8b-64xh100-1f1b.yaml"));
  CliResult r = run({"faults", "t.yaml"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "faults runs a campaign")) << r.err;
}

TEST_F(CliFailures, BadCampaignInputsAreOneLineNamingTheKey) {
  const std::pair<std::string, const char*> cases[] = {
      {small_campaign("  checkpoint: {every_steps: 0}\n"), "workload.checkpoint.every_steps"},
      {small_campaign("  checkpoint: {interval: 0s}\n"), "workload.checkpoint.interval"},
      {small_campaign("  spares: 9\n"), "workload.spares"},
      {small_campaign("  detection: {watchdog: 0s}\n"), "workload.detection.watchdog: the watchdog timeout must be positive"},
  };
  for (const auto& [yaml, message] : cases) {
    SCOPED_TRACE(message);
    write_text(file("bad.yaml"), yaml);
    CliResult r = run({"faults", "bad.yaml", "--trials", "2"});
    expect_one_error_line(r);
    EXPECT_TRUE(contains(r.err, message)) << r.err;
  }
  const std::pair<const char*, const char*> replaced[] = {
      {"policy: elastic", "policy: sometimes"},
      {"{profile: llama3-405b}", "{profile: nonesuch}"},
      {"{profile: llama3-405b}", "{processes: [{name: psu, category: toaster, rate_per_1000_node_days: 1}]}"},
      {"{profile: llama3-405b}", "{processes: [{name: psu, category: host, rate_per_1000_node_days: -1}]}"},
      {"{profile: llama3-405b}", "{processes: [{name: row, category: host, rate_per_1000_node_days: 1, nodes: 9}]}"},
  };
  // The job has 8 nodes (64 GPUs of 8 per node): an event of 9 nodes is more than it has.
  const char* keys[] = {"workload.policy", "workload.failures.profile", "workload.failures.processes[0].category",
                        "workload.failures.processes[0].rate_per_1000_node_days",
                        "workload.failures.processes[0].nodes: 9 nodes per event, more than the job's 8 nodes"};
  for (size_t i = 0; i < std::size(replaced); ++i) {
    SCOPED_TRACE(keys[i]);
    std::string yaml = small_campaign();
    yaml.replace(yaml.find(replaced[i].first), std::string(replaced[i].first).size(), replaced[i].second);
    write_text(file("bad.yaml"), yaml);
    CliResult r = run({"faults", "bad.yaml", "--trials", "2"});
    expect_one_error_line(r);
    EXPECT_TRUE(contains(r.err, keys[i])) << r.err;
  }
}

// The trials' results are held at once, 200 bytes each (TrialResult: 13 doubles and 12 counters
// of 8 bytes), once for the configured interval and once per sweep interval. Against
// --max-memory 100MiB (104,857,600 bytes), each line worked out by hand:
//   1,000,000 trials: 200,000,000 bytes, refused at binding, named at workload.trials or --trials;
//   300,000 trials (60,000,000 bytes) with a sweep: 2 campaigns at least, 120,000,000: refused at binding;
//   200,000 trials (40,000,000) with a sweep of 3 intervals (10, 20, 40 min: distinct step counts
//   for a step of about a second): 80,000,000 passes binding, 4 x 40,000,000 = 160,000,000 is
//   refused once the intervals are known, before any trial runs.
TEST_F(CliFailures, CampaignTrialsThatOutgrowTheMemoryAreRefusedNamingTheKey) {
  write_text(file("c.yaml"), small_campaign());
  CliResult r = run({"faults", "c.yaml", "--trials", "1000000", "--max-memory", "100MiB"});
  expect_one_error_line(r);
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(contains(r.err, "--trials: workload.trials: 1000000 trials x 200 bytes of results per trial need at "
                              "least 191 MiB, more than the run's limit of 100 MiB (--max-memory"))
      << r.err;
  std::string yaml = small_campaign();
  yaml.replace(yaml.find("trials: 200"), 11, "trials: 1000000");
  write_text(file("big.yaml"), yaml);
  r = run({"faults", "big.yaml", "--max-memory", "100MiB"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "big.yaml:")) << r.err;
  EXPECT_TRUE(contains(r.err, ": workload.trials: 1000000 trials x 200 bytes")) << r.err;
  r = run({"faults", "c.yaml", "--trials", "300000", "--max-memory", "100MiB", "--set",
           "workload.checkpoint.sweep=[10min, 20min]"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--trials: workload.trials: 300000 trials x at least 2 campaigns")) << r.err;
  EXPECT_TRUE(contains(r.err, "need at least 114 MiB")) << r.err;  // 120,000,000 / 2^20 = 114.4
  r = run({"faults", "c.yaml", "--trials", "200000", "--max-memory", "100MiB", "--set",
           "workload.checkpoint.sweep=[10min, 20min, 40min]"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--trials: workload.trials: 200000 trials x 4 campaigns (the configured checkpoint "
                              "interval and 3 sweep intervals) x 200 bytes of results per trial need at least 153 MiB"))
      << r.err;  // 160,000,000 / 2^20 = 152.6
}

// ---------------------------------------------------------------------------------------------
// Replay of measured traces (tests/data/param-dlrm-8rank-v100: 8 ranks of DLRM on V100).

class CliReplay : public CliTest {};

TEST_F(CliReplay, ChakraExportOfTheDefaultStepReplaysToItsStepTime) {
  fs::create_directories(file("ck"));
  // Exported traces carry the GPU's ops, not the host's launches (as ASTRA-sim models none): the
  // step they reproduce is the one whose host never holds the GPU back.
  ASSERT_EQ(run({"run", "--quiet", "--json", "run.json", "--chakra", file("ck/step").string(), "--set",
                 "cluster.profile.host_overhead=0ns"})
                .status,
            0);
  std::vector<std::string> args = {"replay"};
  for (int r = 0; r < 64; ++r) args.push_back(file("ck/step." + std::to_string(r) + ".et").string());
  args.push_back("--cluster");
  args.push_back((kSourceDir / "workloads" / "scenarios" / "llama3-8b-64xh100-1f1b.yaml").string());
  args.push_back("--json");
  args.push_back("rep.json");
  CliResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\nJSON written: rep.json\n")) << r.out;
  const double step = read_json("run.json")["step_time_s"].get<double>();
  double longest = 0;
  const json rep = read_json("rep.json");
  ASSERT_EQ(rep["ranks"].size(), 64u) << r.out;
  for (const auto& row : rep["ranks"]) longest = std::max(longest, row["replayed_s"].get<double>());
  EXPECT_NEAR(longest, step, 1e-9);
  // --chakra on a kind that builds no training program is refused.
  write_text(file("c.yaml"), kTwoNodeCollectives);
  expect_one_error_line(run({"run", "c.yaml", "--chakra", "x"}));
}

TEST_F(CliReplay, ChakraReplaySaysHowManyCollectivesEachRankRan) {
  // ASTRA-sim's 8-NPU microbenchmark: one COMM_COLL_NODE (an all-reduce of 1 MiB) per rank file
  // (tests/data/astra-sim-all-reduce-8npus-1mb/README.md); the JSON said 0.
  std::vector<std::string> args = {"replay"};
  for (int r = 0; r < 8; ++r)
    args.push_back((kSourceDir / "tests/data/astra-sim-all-reduce-8npus-1mb" / ("all_reduce." + std::to_string(r) + ".et"))
                       .string());
  args.push_back("--json");
  args.push_back("c.json");
  CliResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "replay of 8 Chakra traces, 1 collective per rank simulated on")) << r.out;
  EXPECT_EQ(read_json("c.json")["collectives_per_rank"], 1);
}

TEST_F(CliReplay, DlrmTracesReplayPerRank) {
  const fs::path d = kSourceDir / "tests" / "data" / "param-dlrm-8rank-v100";
  std::vector<std::string> kineto, et;
  for (const auto& e : fs::directory_iterator(d)) {
    const std::string p = e.path().string();
    if (p.find(".pt.trace.json.gz") != std::string::npos) kineto.push_back(p);
    if (p.find("dlrm_eg_") != std::string::npos) et.push_back(p);
  }
  std::sort(kineto.begin(), kineto.end());
  std::sort(et.begin(), et.end());
  std::vector<std::string> args = {"replay"};
  args.insert(args.end(), kineto.begin(), kineto.end());
  args.push_back("--json");
  args.push_back("m.json");
  std::vector<std::string> traced = args;
  traced.push_back("--trace");
  traced.push_back("rep.trace.json");
  CliResult r = run(traced);
  ASSERT_EQ(r.status, 0) << r.err;
  // The trace holds the measured activities beside the replay: rank 0's 261 GPU activities (245
  // kernels, 16 memcpys) on process 8, "rank 0 measured"; idle gaps are not drawn. Its one
  // profiler step, ProfilerStep#10, is a span on the "profiler steps" thread (tid 2^20) of both.
  const json tr = read_json("rep.trace.json");
  size_t measured0 = 0;
  std::string name8;
  std::vector<std::string> steps0;
  for (const auto& e : tr["traceEvents"]) {
    const bool step = e["tid"] == 1048576;
    if (e["ph"] == "X" && e["pid"] == 8 && !step) ++measured0;
    if (e["ph"] == "X" && step && (e["pid"] == 0 || e["pid"] == 8))
      steps0.push_back(std::to_string(e["pid"].get<int>()) + " " + e["name"].get<std::string>());
    if (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 8) name8 = e["args"]["name"];
  }
  EXPECT_EQ(measured0, 261u);
  EXPECT_EQ(name8, "rank 0 measured");
  std::sort(steps0.begin(), steps0.end());
  EXPECT_EQ(steps0, (std::vector<std::string>{"0 ProfilerStep#10", "8 ProfilerStep#10"}));
  json m = read_json("m.json");
  EXPECT_EQ(m["collectives"], "measured");
  ASSERT_EQ(m["ranks"].size(), 8u);
  for (const auto& row : m["ranks"]) EXPECT_LT(std::abs(row["error"].get<double>()), 0.03) << row.dump();
  // Simulated collectives need their sizes.
  std::vector<std::string> bad = args;
  bad.push_back("--cluster");
  bad.push_back((d / "dgx1-v100.yaml").string());
  expect_one_error_line(run(bad));
  std::vector<std::string> sim = bad;
  sim.push_back("--et");
  sim.insert(sim.end(), et.begin(), et.end());
  CliResult s = run(sim);
  ASSERT_EQ(s.status, 0) << s.err;
  json j = read_json("m.json");
  EXPECT_EQ(j["collectives"], "simulated");
  for (const auto& row : j["ranks"]) EXPECT_LT(std::abs(row["error"].get<double>()), 0.15) << row.dump();
  // A file that is not a trace.
  write_text(file("x.json"), "{\"a\": 1}");
  CliResult x = run({"replay", "x.json"});
  expect_one_error_line(x);
  EXPECT_TRUE(contains(x.err, "x.json: no traceEvents")) << x.err;
}

// A trace of many profiler steps gets a line per rank, not a line per step. 30 steps of 100 us on
// the host, each launching one kernel of 40 us at its start (step k's at 100k + 10 us): on the GPU
// step k runs from its kernel's start to the next one's, 100 us, the last one 40 us, so the mean
// is (29 x 100 + 40) / 30 = 98 us, the least 40 and the most 100. One trace alone replays its
// measured times: every step's error is 0, and the first is the furthest of equals.
TEST_F(CliReplay, ManyProfilerStepsAreSummedUpPerRank) {
  std::string events;
  for (int k = 0; k < 30; ++k) {
    const std::string id = std::to_string(k + 1), t = std::to_string(100 * k);
    events += std::string(k ? ",\n" : "") + R"({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#)" + id +
              R"(", "pid": 1, "tid": 1, "ts": )" + t + R"(, "dur": 100},)" + "\n" +
              R"({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": )" + t +
              R"(, "dur": 2, "args": {"correlation": )" + id + "}},\n" +
              R"({"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": )" + std::to_string(100 * k + 10) +
              R"(, "dur": 40, "args": {"stream": 7, "correlation": )" + id + "}}";
  }
  write_text(file("steps.json"), "{\"traceEvents\": [\n" + events + "\n]}\n");
  CliResult r = run({"replay", "steps.json", "--json", "s.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "profiler steps per rank")) << r.out;
  EXPECT_FALSE(contains(r.out, "per profiler step")) << r.out;
  EXPECT_TRUE(contains(r.out, "     0     30           0.098 (0.040-0.100)           0.098 (0.040-0.100)     +0.00%  "
                              "ProfilerStep#1 (+0.00%)"))
      << r.out;
  json j = read_json("s.json");
  ASSERT_EQ(j["ranks"].size(), 1u);
  EXPECT_EQ(j["ranks"][0]["steps"].size(), 30u);
}

TEST_F(CliReplay, WhatIfOnAnotherGpuScalesKernelsThroughBothProfiles) {
  const fs::path d = kSourceDir / "tests" / "data" / "param-dlrm-8rank-v100";
  std::vector<std::string> kineto, et;
  for (const auto& e : fs::directory_iterator(d)) {
    const std::string p = e.path().string();
    if (p.find(".pt.trace.json.gz") != std::string::npos) kineto.push_back(p);
    if (p.find("dlrm_eg_") != std::string::npos) et.push_back(p);
  }
  std::sort(kineto.begin(), kineto.end());
  std::sort(et.begin(), et.end());
  write_text(file("h100.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n");
  std::vector<std::string> args = {"replay"};
  args.insert(args.end(), kineto.begin(), kineto.end());
  for (const char* a : {"--cluster", "h100.yaml", "--json", "w.json", "--measured-on"}) args.push_back(a);
  args.push_back((d / "dgx1-v100.yaml").string());
  args.push_back("--et");
  args.insert(args.end(), et.begin(), et.end());
  CliResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "stays as measured")) << r.out;  // the assumptions are stated
  const json j = read_json("w.json");
  ASSERT_TRUE(j.contains("what_if"));
  // FP32 GEMMs (volta_sgemm, gemmSN<float>): V100 over H100 FP32 rate, each at its GEMM efficiency.
  const topo::GpuSpec v = topo::find_gpu("v100-sxm2"), h = topo::find_gpu("h100-sxm");
  const double fp32 = v.peak_fp32_flops * topo::default_profile(v).gemm_efficiency /
                      (h.peak_fp32_flops * topo::default_profile(h).gemm_efficiency);
  EXPECT_NEAR(j["what_if"]["classes"][1]["ratio"].get<double>(), fp32, 1e-12);
  // Memory-bound: 900 GB/s over 3.35 TB/s at the same memory efficiency.
  EXPECT_EQ(j["what_if"]["classes"][4]["class"].get<std::string>(), "memory-bound and other");
  EXPECT_NEAR(j["what_if"]["classes"][4]["ratio"].get<double>(), 900e9 / 3350e9, 1e-12);
  // Unvectorized elementwise kernels: the V100 has no measured element rate, so as memory-bound.
  // Foreach kernels: the V100 at its memory efficiency (0.85), the H100 at its measured 0.725.
  EXPECT_EQ(j["what_if"]["classes"][5]["class"].get<std::string>(), "unvectorized elementwise");
  EXPECT_NEAR(j["what_if"]["classes"][5]["ratio"].get<double>(), 900e9 / 3350e9, 1e-12);
  EXPECT_EQ(j["what_if"]["classes"][6]["class"].get<std::string>(), "foreach (optimizer)");
  EXPECT_NEAR(j["what_if"]["classes"][6]["ratio"].get<double>(), 900e9 * 0.85 / (3350e9 * 0.725), 1e-12);
  for (const auto& row : j["ranks"]) EXPECT_LT(row["replayed_s"].get<double>(), row["measured_s"].get<double>());
  // --measured-on needs a target cluster.
  std::vector<std::string> bad = {"replay", kineto[0], "--measured-on", (d / "dgx1-v100.yaml").string()};
  expect_one_error_line(run(bad));
}

TEST_F(CliReplay, OneTraceOfALargerJobKeepsItsCollectivesAsMeasured) {
  // HTA's A100 sample is rank 0 of a 2-rank job: 3,774 GPU activities, 21 of them NCCL kernels
  // (counted with Python's json module). Replayed alone on another cluster and GPU, its collectives
  // are neither simulated (its peer's trace is missing) nor scaled as kernels: the what-if's classes
  // hold the other 3,753 activities, and the report and the JSON say the collectives were measured.
  const fs::path a100 = kSourceDir / "tests" / "data" / "hta-a100-nccl" / "nccl_data.json.gz";
  write_text(file("a100.yaml"), "cluster: {gpu: a100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n");
  write_text(file("h100.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n");
  CliResult r = run({"replay", a100.string(), "--measured-on", "a100.yaml", "--cluster", "h100.yaml", "--json", "w.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "21 collectives per rank as measured (one trace")) << r.out;
  EXPECT_TRUE(contains(r.out, "collectives are as measured")) << r.out;
  const json w = read_json("w.json");
  EXPECT_EQ(w["collectives"], "measured");
  int kernels = 0;
  for (const auto& c : w["what_if"]["classes"]) kernels += c["kernels"].get<int>();
  EXPECT_EQ(kernels, 3753);
}

TEST_F(CliReplay, WhatIfScalesUnvectorizedAndForeachKernelsByTheirOwnRates) {
  // An eager H100 capture replayed on an H200 with the catalog's profiles: unvectorized elementwise
  // kernels by the ratio of element rates (320 G/s on both: unchanged), foreach kernels by HBM x
  // foreach_efficiency, 3.35 TB/s x 0.725 over 4.8 TB/s x 0.63 = 0.80316 (the captures measure
  // 0.80), the other memory-bound kernels by HBM alone, 3.35 / 4.8 = 0.69792.
  const fs::path d = kSourceDir / "tests" / "data" / "captures" / "h100-sxm" / "h4096-l2-b1";
  write_text(file("h100.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 1}\n"
                                "workload: {kind: collectives, tests: [{op: all-reduce, sizes: [1MiB]}]}\n");
  write_text(file("h200.yaml"), "cluster: {gpu: h200, nodes: 1, gpus_per_node: 1}\n"
                                "workload: {kind: collectives, tests: [{op: all-reduce, sizes: [1MiB]}]}\n");
  CliResult r = run({"replay", (d / "rank0.trace.json.gz").string(), "--measured-on", file("h100.yaml").string(),
                     "--cluster", file("h200.yaml").string(), "--json", "w.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json w = read_json("w.json");
  const json& c = w["what_if"]["classes"];
  EXPECT_NEAR(c[4]["ratio"].get<double>(), 3.35 / 4.8, 1e-12);
  EXPECT_NEAR(c[5]["ratio"].get<double>(), 1.0, 1e-12);
  EXPECT_NEAR(c[6]["ratio"].get<double>(), 3.35 * 0.725 / (4.8 * 0.63), 1e-12);
  EXPECT_GT(c[5]["kernels"].get<int>(), 0);  // the capture has both kinds
  EXPECT_GT(c[6]["kernels"].get<int>(), 0);
}

TEST_F(CliReplay, CalibrateWritesAProfileThatScenariosLoad) {
  const fs::path d = kSourceDir / "tests" / "data" / "param-dlrm-8rank-v100";
  std::vector<std::string> kineto, et;
  for (const auto& e : fs::directory_iterator(d)) {
    const std::string p = e.path().string();
    if (p.find(".pt.trace.json.gz") != std::string::npos) kineto.push_back(p);
    if (p.find("dlrm_eg_") != std::string::npos) et.push_back(p);
  }
  std::sort(kineto.begin(), kineto.end());
  std::sort(et.begin(), et.end());
  std::vector<std::string> args = {"calibrate"};
  args.insert(args.end(), kineto.begin(), kineto.end() - 1);  // ranks 0-6 fit, rank 7 only tests
  args.push_back("--test");
  args.push_back(kineto.back());
  args.push_back("--cluster");
  args.push_back((d / "dgx1-v100.yaml").string());
  args.push_back("-o");
  args.push_back("v100.yaml");
  args.push_back("--json");
  args.push_back("cal.json");
  CliResult r = run(args);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\nprofile written: v100.yaml (load it with cluster.profile.file)\nJSON written: cal.json\n"))
      << r.out;
  const json j = read_json("cal.json");
  ASSERT_EQ(j["kernels"].size(), 5u);  // GEMM, attention forward and backward, memory-bound, unvectorized
  // Memory-bound kernels: the default profile charges no per-kernel latency, so its predictions of
  // these microsecond kernels are far too short; the fitted one must do better on the held-out
  // shapes and the held-out rank.
  const json& mem = j["kernels"][3];
  EXPECT_TRUE(mem["fitted"].get<bool>());
  EXPECT_LT(mem["held_out"]["median_abs_error"].get<double>(), mem["held_out_before"]["median_abs_error"].get<double>());
  EXPECT_GT(mem["held_out"]["samples"].get<int>(), 150);  // rank 7's 150 and held-out shapes
  // Seven of eight ranks fit: their collectives include waiting for the missing one; not fitted.
  EXPECT_FALSE(j["collectives"]["fitted"].get<bool>());
  EXPECT_TRUE(contains(j["collectives"]["note"].get<std::string>(), "7 trace(s) of a 8-rank job"));
  // The profile loads in a scenario (and shows in the resolved one).
  write_text(file("s.yaml"), "cluster:\n  gpu: v100-sxm2\n  nodes: 1\n  gpus_per_node: 8\n"
                             "  scale_up: {kind: nvswitch}\n  profile: {file: v100.yaml}\n"
                             "workload: {kind: collectives, tests: [{op: all-reduce, sizes: [1MiB]}]}\n");
  CliResult s = run({"run", "s.yaml", "-q", "--resolved", "r.yaml"});
  ASSERT_EQ(s.status, 0) << s.err;
  EXPECT_TRUE(contains(read_text(file("r.yaml")), "kernel_latency: ")) << read_text(file("r.yaml"));
  // Bad inputs: one line each.
  expect_one_error_line(run({"calibrate", kineto[0], "-o", "p.yaml"}));  // no --cluster
  expect_one_error_line(
      run({"calibrate", kineto[0], "--cluster", (d / "dgx1-v100.yaml").string(), "-o", "p.yaml", "--holdout", "1"}));
  CliResult c = run({"calibrate", (kSourceDir / "tests/data/astra-sim-all-reduce-8npus-1mb/all_reduce.0.et").string(),
                     "--cluster", (d / "dgx1-v100.yaml").string(), "-o", "p.yaml"});
  expect_one_error_line(c);
  EXPECT_TRUE(contains(c.err, "Chakra")) << c.err;
  // The same for a Chakra trace given with --test (it was read as JSON: "binary, not JSON (a Chakra
  // protobuf trace? give Chakra traces as .et files)", of a file that was one).
  CliResult ct = run({"calibrate", kineto[0], "--test",
                      (kSourceDir / "tests/data/astra-sim-all-reduce-8npus-1mb/all_reduce.0.et").string(), "--cluster",
                      (d / "dgx1-v100.yaml").string(), "-o", "p.yaml"});
  expect_one_error_line(ct);
  EXPECT_TRUE(contains(ct.err, "all_reduce.0.et: calibrate reads PyTorch profiler traces")) << ct.err;
  CliResult w = run({"calibrate", kineto[0], "--cluster", (d / "dgx1-v100.yaml").string(), "-o", "/nonexistent/p.yaml"});
  expect_one_error_line(w);
  EXPECT_TRUE(contains(w.err, "--output")) << w.err;
  // A V100's trace fitted as an H100's profile: written, with a warning on stderr and in the file.
  CliResult h = run({"calibrate", kineto[0], "--cluster",
                     (kSourceDir / "workloads/scenarios/dgx-h100-collectives.yaml").string(), "-o", "h.yaml", "-q"});
  ASSERT_EQ(h.status, 0) << h.err;
  EXPECT_TRUE(contains(h.err, "warning: the traces were measured on 'Tesla V100-SXM2-32GB'")) << h.err;
  EXPECT_TRUE(contains(read_text(file("h.yaml")), "# Warning: the traces were measured on 'Tesla V100-SXM2-32GB'"));
  // On the V100's own cluster, no warning.
  CliResult v = run({"calibrate", kineto[0], "--cluster", (d / "dgx1-v100.yaml").string(), "-o", "v.yaml", "-q"});
  ASSERT_EQ(v.status, 0) << v.err;
  EXPECT_FALSE(contains(v.err, "warning")) << v.err;
}

TEST_F(CliReplay, CalibrateFitsSingleGpuRunsOfAnH100AndPredictsTheSizesHeldOut) {
  // Seven single-GPU runs captured on an H100 SXM (tests/data/captures/README.md): four fit the
  // profile (widths 1024 to 4096, seq 2048 and 8192), Llama 3.2 3B's and Llama 3 70B's layer shapes
  // only test it. Independent runs of one rank each fit on a one-GPU cluster (only collectives need
  // the job's rank count).
  const fs::path d = kSourceDir / "tests" / "data" / "captures" / "h100-sxm";
  auto trace = [&](const char* name) { return (d / name / "rank0.trace.json.gz").string(); };
  // The profile before the fit: FlashAttention-2's single 0.55 for both directions, no overheads
  // (the H100 entry's own attention defaults come from these very captures).
  write_text(file("one.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 1, profile: {attention_efficiency: 0.55,\n"
                               "  attention_backward_efficiency: 0, attention_seq_overhead: 0, attention_backward_seq_overhead: 0}}\n"
                               "workload: {kind: collectives, tests: [{op: all-reduce, sizes: [1MiB]}]}\n");
  CliResult r = run({"calibrate", trace("h1024-l4-b4"), trace("h2048-l4-b2"), trace("h4096-l2-b1"),
                     trace("h4096-l2-b1-s8192"), "--test", trace("h3072-l2-b2"), trace("h8192-l2-b1"), "--cluster",
                     file("one.yaml").string(), "-o", "h100.yaml", "--json", "cal.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = read_json("cal.json");
  ASSERT_EQ(j["kernels"].size(), 5u);
  // A class whose fit misses the held-out kernels by more than the profile before it says so, and
  // only such a class (compared here from the JSON's two medians).
  for (const json& k : j["kernels"]) {
    if (!k["fitted"].get<bool>() || !k.contains("held_out") || !k.contains("held_out_before")) continue;
    const double after = k["held_out"]["median_abs_error"].get<double>();
    const double before = k["held_out_before"]["median_abs_error"].get<double>();
    char line[160];
    std::snprintf(line, sizeof line, "warning: the fit misses the held-out kernels by more than the profile before it "
                                     "(median %.1f%% against %.1f%%)", after * 100, before * 100);
    EXPECT_EQ(contains(r.out, line), after > before) << k["class"] << "\n" << r.out;
  }
  // GEMMs: cuBLAS on the held-out shapes within 10% (median) of what was measured.
  const json& gemm = j["kernels"][0];
  EXPECT_TRUE(gemm["fitted"].get<bool>());
  EXPECT_LT(gemm["held_out"]["median_abs_error"].get<double>(), 0.10);
  // Attention: PyTorch 2.11 runs cuDNN's fused attention on Hopper; its ops are read, each direction
  // fitted with a sequence overhead (two sequence lengths make it identifiable). FlashAttention-2
  // and -3 report their backward slower than their forward (Dao 2023, arXiv 2307.08691, Fig. 5-7;
  // Shah et al. 2024, arXiv 2407.08608): so does the fit.
  const json& fwd = j["kernels"][1];
  const json& bwd = j["kernels"][2];
  ASSERT_TRUE(fwd["fitted"].get<bool>()) << fwd.dump();
  ASSERT_TRUE(bwd["fitted"].get<bool>()) << bwd.dump();
  EXPECT_EQ(bwd["class"].get<std::string>(), "attention backward");
  EXPECT_LT(bwd["efficiency"].get<double>(), fwd["efficiency"].get<double>());
  EXPECT_GT(fwd["seq_overhead_keys"].get<double>(), 0);
  EXPECT_GT(bwd["seq_overhead_keys"].get<double>(), 0);
  // On the held-out runs' backward kernels the fit beats the single default efficiency.
  EXPECT_LT(bwd["held_out"]["median_abs_error"].get<double>(), bwd["held_out_before"]["median_abs_error"].get<double>());
  // Memory-bound (vectorized) kernels moving more than the 50 MiB L2: within 10% (median) on what
  // the fit did not see.
  const json& mem = j["kernels"][3];
  EXPECT_LT(mem["held_out"]["median_abs_error"].get<double>(), 0.10);
  // PyTorch's unvectorized elementwise kernels (broadcasts, strided operands, casting copies) fit
  // an element rate of their own, within 15% (median) on what it did not see, and far below what
  // the H100's HBM would allow them: at 3.35 TB/s, kernels of 4 to 12 bytes per element could
  // process 279 to 837 G elements/s; they are bound by instruction issue instead.
  const json& unvec = j["kernels"][4];
  EXPECT_EQ(unvec["class"].get<std::string>(), "unvectorized elementwise");
  ASSERT_TRUE(unvec["fitted"].get<bool>()) << unvec.dump();
  EXPECT_LT(unvec["held_out"]["median_abs_error"].get<double>(), 0.15);
  EXPECT_LT(unvec["rate_elements_per_s"].get<double>(), 3.35e12 / 6);
  EXPECT_TRUE(contains(read_text(file("h100.yaml")), "unvectorized_elementwise_rate: "));
  EXPECT_TRUE(j["host"]["fitted"].get<bool>());
  EXPECT_TRUE(contains(j["collectives"]["note"].get<std::string>(), "not the ranks of one job"));
  // The profile file holds the attention keys and loads in a scenario.
  const std::string prof = read_text(file("h100.yaml"));
  for (const char* key : {"attention_latency: ", "attention_efficiency: ", "attention_seq_overhead: ",
                          "attention_backward_efficiency: ", "attention_backward_seq_overhead: "})
    EXPECT_TRUE(contains(prof, key)) << key << " missing from\n" << prof;
  write_text(file("load.yaml"), "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 1, profile: {file: h100.yaml}}\n"
                                "workload: {kind: collectives, tests: [{op: all-reduce, sizes: [1MiB]}]}\n");
  CliResult l = run({"run", file("load.yaml").string(), "-q", "--resolved", "r.yaml"});
  ASSERT_EQ(l.status, 0) << l.err;
  EXPECT_TRUE(contains(read_text(file("r.yaml")), "attention_backward_seq_overhead: ")) << read_text(file("r.yaml"));
  // One sequence length only: the overhead cannot be fitted, and the note says so.
  CliResult one = run({"calibrate", trace("h1024-l4-b4"), trace("h2048-l4-b2"), "--cluster", file("one.yaml").string(),
                       "-o", "one.yaml.out", "--json", "one.json"});
  ASSERT_EQ(one.status, 0) << one.err;
  EXPECT_TRUE(contains(read_json("one.json")["kernels"][1]["note"].get<std::string>(), "every sample has 2048 keys"));
}

TEST_F(CliReplay, AttentionSequenceOverheadSlowsTheTrainingStepsAttentionByItsClosedForm) {
  // Llama 3 8B on one H200, seq 8192 (workloads/scenarios/llama3-8b-1xh200.yaml), attention set to
  // one efficiency of 0.55 with no overheads. Causal forward attention per layer:
  // 4 x 8192 x 8192 x 4096 / 2 = 5.4976e11 FLOPs, 32 layers = 1.7592e13, at 0.55 x 989 TF/s =
  // 32.3415 ms. A forward sequence overhead of 8192 keys halves that kernel's rate
  // (1 + 8192 / 8192): the step grows by exactly those 32.34 ms, nothing else moves (one GPU, no
  // communication, the backward keeps its rate).
  const std::string sc = (kSourceDir / "workloads/scenarios/llama3-8b-1xh200.yaml").string();
  const std::vector<std::string> base = {"run", sc, "-q", "--set", "cluster.profile.attention_efficiency=0.55",
                                         "--set", "cluster.profile.attention_backward_efficiency=0",
                                         "--set", "cluster.profile.attention_seq_overhead=0",
                                         "--set", "cluster.profile.attention_backward_seq_overhead=0"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> a = base;
    a.insert(a.end(), more.begin(), more.end());
    return run(a);
  };
  ASSERT_EQ(with({"--json", "a.json"}).status, 0);
  CliResult r = with({"--json", "b.json", "--set", "cluster.profile.attention_seq_overhead=8192"});
  ASSERT_EQ(r.status, 0) << r.err;
  const double grown = read_json("b.json")["step_time_s"].get<double>() - read_json("a.json")["step_time_s"].get<double>();
  EXPECT_NEAR(grown, 4.0 * 8192 * 8192 * 4096 / 2 * 32 / (0.55 * 989e12), 1e-7);
  // A backward efficiency of 0.275 (half the forward's 0.55) doubles the backward's 2.5x FLOPs'
  // time instead: + 2.5 x 32.3415 ms.
  r = with({"--json", "c.json", "--set", "cluster.profile.attention_backward_efficiency=0.275"});
  ASSERT_EQ(r.status, 0) << r.err;
  const double bwd = read_json("c.json")["step_time_s"].get<double>() - read_json("a.json")["step_time_s"].get<double>();
  EXPECT_NEAR(bwd, 2.5 * 4.0 * 8192 * 8192 * 4096 / 2 * 32 / (0.55 * 989e12), 1e-7);
  // Selective recompute runs the attention forward again inside the backward pass, at the
  // forward's rate: halving the backward's efficiency still adds 2.5 x 32.34 ms, not 3.5 x.
  ASSERT_EQ(with({"--json", "d.json", "--set", "workload.training.recompute=selective"}).status, 0);
  r = with({"--json", "e.json", "--set", "workload.training.recompute=selective", "--set",
            "cluster.profile.attention_backward_efficiency=0.275"});
  ASSERT_EQ(r.status, 0) << r.err;
  const double sel = read_json("e.json")["step_time_s"].get<double>() - read_json("d.json")["step_time_s"].get<double>();
  EXPECT_NEAR(sel, 2.5 * 4.0 * 8192 * 8192 * 4096 / 2 * 32 / (0.55 * 989e12), 1e-7);
  expect_one_error_line(run({"run", sc, "-q", "--set", "cluster.profile.attention_backward_efficiency=0.001"}));
}

TEST_F(CliReplay, PureBf16TrainingKeepsNoMasterCopyAndMovesHalfTheOptimizerBytes) {
  // Llama 3 8B (8,030,261,248 parameters, Meta's "8.03B") on one H200 with master_weights: false,
  // as the capture in tests/data/captures/h200/llama3-8b-s8192 trained it: Adam's m and v in bf16,
  // 4 bytes per parameter, and PyTorch's foreach AdamW moving 40 bytes per parameter in 8 passes,
  // each launched once per 320 x 65,536 parameters (multi_tensor_apply): ceil(8,030,261,248 /
  // 20,971,520) = 383 launches a pass, 3,064 kernels (the capture shows 3,072), at the H200's
  // foreach_efficiency (0.63, measured on the other H200 captures):
  // 8,030,261,248 x 40 B / (4.8 TB/s x 0.63) + 3,064 x 1.15 us = 109.7 ms (the capture's kernels:
  // 101.9 ms, plus their gaps).
  const std::string sc = (kSourceDir / "workloads/scenarios/llama3-8b-1xh200.yaml").string();
  const double params = 8030261248.0;
  ASSERT_EQ(run({"run", sc, "-q", "--json", "a.json"}).status, 0);
  json a = read_json("a.json");
  EXPECT_EQ(a["memory"]["stages"][0]["optimizer_bytes"].get<double>(), 4 * params);
  EXPECT_EQ(a["memory"]["stages"][0]["params_bytes"].get<double>(), 2 * params);
  EXPECT_FALSE(a["config"]["master_weights"].get<bool>());
  EXPECT_NEAR(a["breakdown"]["optimizer_s"].get<double>(), params * 40 / (4.8e12 * 0.63) + 3064 * 1.15e-6, 1e-8);
  // With fp32 master weights: 12 bytes per parameter and 80 bytes moved.
  CliResult r = run({"run", sc, "-q", "--json", "b.json", "--set", "workload.training.master_weights=true", "--set",
                     "workload.memory.allow_oom=true"});
  ASSERT_EQ(r.status, 0) << r.err;
  json b = read_json("b.json");
  EXPECT_EQ(b["memory"]["stages"][0]["optimizer_bytes"].get<double>(), 12 * params);
  EXPECT_NEAR(b["breakdown"]["optimizer_s"].get<double>(), params * 80 / (4.8e12 * 0.63) + 3064 * 1.15e-6, 1e-8);
  // A fused optimizer on bf16 state: 7 x 2 bytes per parameter in one kernel, at the memory
  // efficiency (0.85).
  r = run({"run", sc, "-q", "--json", "c.json", "--set", "workload.training.kernels=fused"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NEAR(read_json("c.json")["breakdown"]["optimizer_s"].get<double>(), params * 14 / (4.8e12 * 0.85) + 1.15e-6, 1e-8);
  // The optimizer apart from the kernels: fused kernels with PyTorch's foreach AdamW (a compiled
  // model, its optimizer not compiled) run the eager one's 40 bytes in 3,064 kernels again; the
  // JSON and the summary say which optimizer and which gradients ran (lazy: the default with
  // eager kernels, persistent with fused ones unless set).
  r = run({"run", sc, "--json", "d.json", "--set", "workload.training.kernels=fused", "--set",
           "workload.training.optimizer=foreach"});
  ASSERT_EQ(r.status, 0) << r.err;
  json d = read_json("d.json");
  EXPECT_NEAR(d["breakdown"]["optimizer_s"].get<double>(), params * 40 / (4.8e12 * 0.63) + 3064 * 1.15e-6, 1e-8);
  EXPECT_EQ(d["config"]["optimizer"].get<std::string>(), "foreach");
  EXPECT_EQ(d["config"]["gradients"].get<std::string>(), "persistent");
  EXPECT_TRUE(contains(r.out, "optimizer foreach")) << r.out;
  EXPECT_EQ(a["config"]["optimizer"].get<std::string>(), "foreach");
  EXPECT_EQ(a["config"]["gradients"].get<std::string>(), "lazy");
  // Lazy gradients: the eager 8B's peak comes at the loss, before any gradient exists.
  EXPECT_EQ(a["memory"]["stages"][0]["grads_bytes"].get<double>(), 0.0);
  expect_one_error_line(run({"run", sc, "-q", "--set", "workload.training.optimizer=sgd"}));
  expect_one_error_line(run({"run", sc, "-q", "--set", "workload.training.gradients=sometimes"}));
  CliResult bad = run({"run", sc, "-q", "--set", "workload.training.precision=fp32"});
  expect_one_error_line(bad);
  EXPECT_TRUE(contains(bad.err, "master_weights")) << bad.err;
  // Under FSDP without master weights the gradients reduce in the parameters' bf16 (FSDP2 with no
  // mixed-precision policy), not torchtitan's fp32.
  r = run({"run", sc, "-q", "--json", "f.json", "--set", "workload.parallelism.data_parallel=fsdp"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(read_json("f.json")["config"]["fsdp_reduce_dtype"].get<std::string>(), "bf16");
}

TEST_F(CliReplay, FsdpFloat8AllGatherGathersTheLinearWeightsInOneByte) {
  // Llama 3 8B, FSDP over 8 H100s (tp 1), FP8 tensorwise. Without pipeline parallelism FSDP
  // reshards after forward, so the buffers hold fsdp_prefetch + 1 = 2 gathered layers (and the
  // head). A layer's linear weights: 4096 x (4096 + 2 x 1024) + 4096 x 4096 + 3 x 4096 x 14336
  // = 218,103,808; gathered in FP8 they take 1 byte instead of 2: 2 x 218,103,808 = 436,207,616
  // bytes fewer. Norms, embedding and head gather as before.
  write_text(file("f8.yaml"),
             "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n"
             "workload:\n  kind: training\n  model: {preset: llama3-8b}\n"
             "  training: {seq_len: 8192, global_batch: 8, micro_batch: 1, precision: fp8, fp8_recipe: tensorwise}\n"
             "  parallelism: {dp: 8, data_parallel: fsdp}\n  schedule: {kind: 1f1b}\n  memory: {allow_oom: true}\n");
  ASSERT_EQ(run({"run", file("f8.yaml").string(), "-q", "--json", "a.json"}).status, 0);
  CliResult r = run({"run", file("f8.yaml").string(), "-q", "--json", "b.json", "--set",
                     "workload.parallelism.fsdp_float8_all_gather=true"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json a = read_json("a.json"), b = read_json("b.json");
  EXPECT_EQ(a["memory"]["stages"][0]["buffers_bytes"].get<double>() - b["memory"]["stages"][0]["buffers_bytes"].get<double>(),
            436207616.0);
  EXPECT_TRUE(b["config"]["fsdp_float8_all_gather"].get<bool>());
  // Less to gather, and each rank casts only its eighth of every weight: no slower.
  EXPECT_LE(b["step_time_s"].get<double>(), a["step_time_s"].get<double>());
  // Refused without torchao's FP8 (tensorwise) or without FSDP, naming the key.
  CliResult bf16 = run({"run", file("f8.yaml").string(), "-q", "--set", "workload.training.fp8_recipe=delayed", "--set",
                        "workload.parallelism.fsdp_float8_all_gather=true"});
  expect_one_error_line(bf16);
  EXPECT_TRUE(contains(bf16.err, "fsdp_float8_all_gather")) << bf16.err;
  CliResult ddp = run({"run", file("f8.yaml").string(), "-q", "--set", "workload.parallelism.data_parallel=ddp", "--set",
                       "workload.parallelism.fsdp_float8_all_gather=true"});
  expect_one_error_line(ddp);
  EXPECT_TRUE(contains(ddp.err, "fsdp only")) << ddp.err;
}

TEST_F(CliReplay, FsdpCopiesAreFsdp2sOnGpusAndOffOnTpus) {
  // FSDP2's copy-out runs on the compute stream after each all-gather: Llama 3 8B over 8 H100s
  // (tp 1, resharded after forward) gathers each of its 32 layers twice (forward, backward), the
  // embedding twice and the head once (kept from its forward to its backward): 64 copy-outs of
  // 2 x 436,224,000 bytes (218,112,000 parameters in bf16, read and written), 2 of 2 x
  // 1,050,673,152 (the 525,336,576-parameter embedding) and 1 of 2 x 1,050,681,344 (the head and
  // the final norm). At 0.85 of 3.35 TB/s plus the 1.15 us kernel gap each, that is
  // 64 x 306.40 us + 2 x 738.00 us + 738.01 us = 21,823 us the compute stream spends more; the
  // copy-ins (6 bytes per parameter on the reduce-scatter stream) add contention on top.
  write_text(file("fc.yaml"),
             "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n"
             "workload:\n  kind: training\n  model: {preset: llama3-8b}\n"
             "  training: {seq_len: 8192, global_batch: 8, micro_batch: 1}\n"
             "  parallelism: {dp: 8, data_parallel: fsdp}\n  schedule: {kind: 1f1b}\n  memory: {allow_oom: true}\n");
  CliResult r = run({"run", file("fc.yaml").string(), "-q", "--json", "a.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_EQ(run({"run", file("fc.yaml").string(), "-q", "--json", "b.json", "--set",
                 "workload.parallelism.fsdp_copies=false"}).status, 0);
  const json a = read_json("a.json"), b = read_json("b.json");
  EXPECT_TRUE(a["config"]["fsdp_copies"].get<bool>());
  EXPECT_FALSE(b["config"]["fsdp_copies"].get<bool>());
  const double rate = 3.35e12 * 0.85, gap = 1.15e-6;
  const double copy_out = 64 * (2 * 436224000.0 / rate + gap) + 2 * (2 * 1050673152.0 / rate + gap) +
                          (2 * 1050681344.0 / rate + gap);
  const double more = a["step_time_s"].get<double>() - b["step_time_s"].get<double>();
  EXPECT_GE(more, copy_out * (1 - 1e-6));
  // The copy-ins move 6 x 8,030,261,248 bytes beside the compute: at most their own time more.
  EXPECT_LE(more, copy_out + 6 * 8030261248.0 / rate);
  // The copy-outs hold the compute stream and are charged to the data-parallel part; the copy-ins
  // run on the data-parallel stream beside the compute (FSDP2 prefetches the next layer's
  // all-gather, so the backward's kernels overlap its collectives) and slow it through HBM only,
  // by at most their own time: the rest of the difference is compute.
  const double dp_more = a["breakdown"]["exposed_dp_s"].get<double>() - b["breakdown"]["exposed_dp_s"].get<double>();
  const double compute_more = a["breakdown"]["compute_s"].get<double>() - b["breakdown"]["compute_s"].get<double>();
  EXPECT_GE(dp_more, copy_out * (1 - 1e-6));
  EXPECT_GE(compute_more, 0.0);
  EXPECT_LE(compute_more, 6 * 8030261248.0 / rate);
  EXPECT_NEAR(dp_more + compute_more, more, 1e-6 * more);
  // XLA's sharded programs gather in place: off by default on TPUs, and refused without FSDP.
  write_text(file("tpu.yaml"),
             "cluster: {gpu: tpu-v5p, nodes: 2, gpus_per_node: 4, scale_out: {kind: torus, dims: [2, 2, 2]}}\n"
             "workload:\n  kind: training\n  model: {preset: llama3-8b}\n"
             "  training: {seq_len: 2048, global_batch: 8, micro_batch: 1}\n"
             "  parallelism: {dp: 8, data_parallel: fsdp}\n  schedule: {kind: 1f1b}\n  memory: {allow_oom: true}\n");
  r = run({"run", file("tpu.yaml").string(), "-q", "--json", "t.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(read_json("t.json")["config"]["fsdp_copies"].get<bool>());
  CliResult ddp = run({"run", file("fc.yaml").string(), "-q", "--set", "workload.parallelism.data_parallel=ddp", "--set",
                       "workload.parallelism.fsdp_copies=false"});
  expect_one_error_line(ddp);
  EXPECT_TRUE(contains(ddp.err, "fsdp_copies: applies to data_parallel: fsdp only")) << ddp.err;
}

TEST_F(CliReplay, TpCommOverlapNamesItsImplementation) {
  // true is Megatron-LM's flag (userbuffers); asynctp is PyTorch's; the summary and the JSON say
  // which ran, and a value outside the list, or overlap without sequence parallelism, is refused.
  write_text(file("tp.yaml"),
             "cluster: {gpu: h100-sxm, nodes: 1, gpus_per_node: 8, scale_up: {kind: nvswitch}}\n"
             "workload:\n  kind: training\n  model: {preset: llama3-8b, layers: 2}\n"
             "  training: {seq_len: 4096, global_batch: 1, micro_batch: 1}\n"
             "  parallelism: {tp: 8, sequence_parallel: true}\n  schedule: {kind: 1f1b}\n");
  // YAML's boolean spellings keep working (on: Megatron's flag); JSON keeps the boolean and names
  // the implementation beside it.
  for (auto [value, ran] : {std::pair{"false", "none"}, std::pair{"off", "none"}, std::pair{"true", "userbuffers"},
                            std::pair{"yes", "userbuffers"}, std::pair{"userbuffers", "userbuffers"},
                            std::pair{"asynctp", "asynctp"}}) {
    CliResult r = run({"run", file("tp.yaml").string(), "--json", "tp.json", "--set",
                       std::string("workload.parallelism.tp_comm_overlap=") + value});
    ASSERT_EQ(r.status, 0) << r.err;
    const json cfg = read_json("tp.json")["config"];
    EXPECT_EQ(cfg["tp_comm_overlap_kind"].get<std::string>(), ran) << value;
    EXPECT_EQ(cfg["tp_comm_overlap"].get<bool>(), std::string(ran) != "none") << value;
    EXPECT_EQ(contains(r.out, "tp comm overlapped with its GEMMs in 8 chunks"), std::string(ran) != "none") << r.out;
  }
  CliResult bad = run({"run", file("tp.yaml").string(), "-q", "--set", "workload.parallelism.tp_comm_overlap=sometimes"});
  expect_one_error_line(bad);
  EXPECT_TRUE(contains(bad.err, "tp_comm_overlap")) << bad.err;
  CliResult no_sp = run({"run", file("tp.yaml").string(), "-q", "--set", "workload.parallelism.tp_comm_overlap=asynctp",
                         "--set", "workload.parallelism.sequence_parallel=false"});
  expect_one_error_line(no_sp);
  EXPECT_TRUE(contains(no_sp.err, "sequence_parallel")) << no_sp.err;
  // What sequence parallelism keeps for the weight gradients: Megatron's shard by default,
  // PyTorch's gathered input on request (and only with sequence parallelism).
  CliResult g = run({"run", file("tp.yaml").string(), "--json", "g.json", "--set",
                     "workload.parallelism.sequence_parallel_saves=gathered"});
  ASSERT_EQ(g.status, 0) << g.err;
  EXPECT_EQ(read_json("g.json")["config"]["sequence_parallel_saves"].get<std::string>(), "gathered");
  EXPECT_EQ(read_json("tp.json")["config"]["sequence_parallel_saves"].get<std::string>(), "shard");
  EXPECT_TRUE(contains(g.out, "keeps each GEMM's gathered input")) << g.out;
  CliResult g_no_sp = run({"run", file("tp.yaml").string(), "-q", "--set", "workload.parallelism.sequence_parallel_saves=gathered",
                           "--set", "workload.parallelism.sequence_parallel=false"});
  expect_one_error_line(g_no_sp);
  EXPECT_TRUE(contains(g_no_sp.err, "sequence_parallel_saves")) << g_no_sp.err;
}

// ---------------------------------------------------------------------------------------------
// Other subcommands.

TEST_F(CliSubcommands, TopologyWritesDot) {
  auto r = run({"topology", (kSourceDir / "workloads/scenarios/dgx-h100-collectives.yaml").string(), "--dot", "g.dot"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "8 GPUs")) << r.out;
  std::string dot = read_text(file("g.dot"));
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot.substr(0, 80);
  EXPECT_TRUE(contains(dot, "gpu0"));
  EXPECT_TRUE(contains(dot, "gpu7"));
  EXPECT_FALSE(contains(dot, "gpu8")) << "one node of 8 GPUs";
  EXPECT_TRUE(contains(dot, "->"));
  EXPECT_EQ(dot.back(), '\n');
}

TEST_F(CliSubcommands, TensorParallelismAcrossNodesIsNoted) {
  // The default cluster has nodes of 8 GPUs under one NVSwitch each: tp 16 (ranks 0-15 with tp
  // innermost) spans nodes 0 and 1; tp 8 is one node and gets no note.
  CliResult r = run({"run", "--set", "workload.parallelism.tp=16", "--set", "workload.parallelism.dp=1"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "  note: tp 16 spans 2 nodes of 8 GPUs: every layer's tp collectives cross the "
                              "scale-out network\n"))
      << r.out;
  r = run({"run", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_FALSE(j["workload"].contains("notes")) << r.out;
}

TEST_F(CliSubcommands, CatalogListsH100) {
  auto r = run({"catalog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "h100-sxm")) << r.out;
  EXPECT_TRUE(contains(r.out, "tpu-v5p")) << r.out;
  // One column per precision, with n/a where the part has no tensor path for it (not 0 TFLOP/s):
  // V100 has FP16 only; TPUs bf16 only. A TPU's scale-up is its ICI links.
  std::map<std::string, std::string> line;
  std::istringstream lines(r.out);
  for (std::string l; std::getline(lines, l);) {
    std::istringstream words(l);
    std::string name;
    words >> name;
    line.emplace(name, l);  // the first "name" line is the accelerators' header
  }
  EXPECT_TRUE(contains(line["name"], " bf16   fp16    fp8 ")) << r.out;
  EXPECT_TRUE(contains(line["v100-sxm2"], "   n/a    125    n/a ")) << r.out;
  EXPECT_TRUE(contains(line["a100-sxm"], "   312    312    n/a ")) << r.out;
  EXPECT_TRUE(contains(line["tpu-v5p"], "   459    n/a    n/a ")) << r.out;
  EXPECT_TRUE(contains(line["tpu-v5p"], " 600 ICI (6 links x 100)")) << r.out;
  EXPECT_TRUE(contains(line["h100-sxm"], " 450 NVLink")) << r.out;
  EXPECT_FALSE(contains(r.out, " 0 TFLOP/s")) << r.out;
}

TEST_F(CliSubcommands, CatalogGivesPresetSizesAndJson) {
  // Llama 3 8B by hand: embeddings 128,256 x 4,096 = 525,336,576, untied, so twice; a layer has
  // q and o 4,096^2 each, k and v 4,096 x 1,024 each (8 KV heads of 128), the SwiGLU MLP
  // 3 x 4,096 x 14,336 and two norms of 4,096: 218,112,000; x 32 layers = 6,979,584,000; plus the
  // final norm: 8,030,261,248 (the 8.03B of Meta's model card).
  auto r = run({"catalog"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "  llama3-8b            8.03B     32   4096  14336    32    8  128256  swiglu\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "quantum-2       64 ports x  50 GB/s")) << r.out;
  r = run({"catalog", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "stdout is the JSON and nothing else: " << r.out;
  const auto named = [&](const char* list, const std::string& name) {
    for (const auto& e : j[list])
      if (e["name"] == name) return e;
    ADD_FAILURE() << name << " is not in " << list;
    return json();
  };
  EXPECT_EQ(named("models", "llama3-8b")["params"].get<int64_t>(), 8030261248);
  EXPECT_EQ(named("models", "llama3-8b")["kv_heads"].get<int64_t>(), 8);
  // Datasheets: H100 SXM 3.35 TB/s HBM3 and 989 dense BF16 TFLOP/s; ConnectX-7 400 Gb/s; QM9700 64 NDR ports.
  EXPECT_DOUBLE_EQ(named("accelerators", "h100-sxm")["hbm_bandwidth_Bps"].get<double>(), 3.35e12);
  EXPECT_DOUBLE_EQ(named("accelerators", "h100-sxm")["peak_flops"]["bf16"].get<double>(), 989e12);
  EXPECT_DOUBLE_EQ(named("nics", "connectx-7")["bandwidth_Bps"].get<double>(), 50e9);
  EXPECT_EQ(named("switches", "quantum-2")["ports"].get<int>(), 64);
  EXPECT_FALSE(named("switches", "quantum-2")["source"].get<std::string>().empty());
}

}  // namespace

namespace {

class CliSweep : public CliTest {};

// Splits one CSV line (the sweep quotes cells holding commas or quotes).
std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') cur += '"', ++i;
      else if (c == '"') quoted = false;
      else cur += c;
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

TEST_F(CliSweep, SixteenPointsOneRowEachTheSameOnOneAndTwoThreads) {
  // The built-in default (Llama 3 8B on 64 H100s) over tp x pp = {1,2,4,8}^2 with dp: auto.
  const std::vector<std::string> axes = {"sweep", "--axis", "workload.parallelism.tp=1,2,4,8", "--axis",
                                         "workload.parallelism.pp=1,2,4,8", "--set", "workload.parallelism.dp=auto"};
  auto with = [&](const std::string& threads, const std::string& tag) {
    std::vector<std::string> a = axes;
    for (const std::string& s : std::vector<std::string>{"--threads", threads, "--csv", tag + ".csv", "--json", tag + ".json", "-q"})
      a.push_back(s);
    return run(a);
  };
  CliResult one = with("1", "one");
  ASSERT_EQ(one.status, 0) << one.err;
  CliResult two = with("2", "two");
  ASSERT_EQ(two.status, 0) << two.err;
  EXPECT_EQ(read_text(file("one.csv")), read_text(file("two.csv")));
  EXPECT_EQ(read_text(file("one.json")), read_text(file("two.json")));

  std::istringstream csv(read_text(file("one.csv")));
  std::string line;
  ASSERT_TRUE(std::getline(csv, line));
  const std::vector<std::string> header = csv_cells(line);
  for (const char* col : {"workload.parallelism.tp", "workload.parallelism.pp", "status", "error", "step_time_s",
                          "tokens_per_s", "tflops_per_gpu", "mfu", "breakdown.compute_s", "breakdown.exposed_tp_s",
                          "breakdown.bubble_s", "memory.peak_bytes", "memory.fits", "config.model", "config.gpu",
                          "config.dp"})
    EXPECT_NE(std::find(header.begin(), header.end(), col), header.end()) << col;
  auto col = [&](const char* name) {
    return static_cast<size_t>(std::find(header.begin(), header.end(), name) - header.begin());
  };
  std::vector<std::vector<std::string>> rows;
  while (std::getline(csv, line)) rows.push_back(csv_cells(line));
  ASSERT_EQ(rows.size(), 16u);
  // tp 1, pp 1: 8B params x 16 bytes of model state on every GPU does not fit in 80 GB.
  EXPECT_EQ(rows[0][col("status")], "error");
  EXPECT_NE(rows[0][col("error")].find("out of memory"), std::string::npos) << rows[0][col("error")];
  // tp 8, pp 4 (row 14): the default scenario itself, dp = 64 / 32 = 2; the same step as `run`.
  EXPECT_EQ(rows[14][col("status")], "ok");
  EXPECT_EQ(rows[14][col("config.dp")], "2");
  ASSERT_EQ(run({"run", "--json", "default.json", "-q"}).status, 0);
  const json d = read_json("default.json");
  EXPECT_EQ(std::stod(rows[14][col("step_time_s")]), d["step_time_s"].get<double>());
  // The JSON holds the same points in the same order.
  const json j = read_json("one.json");
  ASSERT_EQ(j["points"].size(), 16u);
  EXPECT_EQ(j["points"][14]["at"]["workload.parallelism.tp"], "8");
  EXPECT_EQ(j["points"][0]["status"], "error");
}

TEST_F(CliSweep, BadAxesAreOneLineErrors) {
  CliResult r = run({"sweep", "--axis", "workload.parallelism.tp"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--axis: expected KEY=V1,V2"), std::string::npos) << r.err;
  r = run({"sweep", "--axis", "a=1", "--axis", "a=2"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("given twice"), std::string::npos) << r.err;
  r = run({"sweep", "--axis", "workload.parallelism.tp=1", "--csv", "no/such/dir/x.csv"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--csv"), std::string::npos) << r.err;
}

}  // namespace

namespace {

class CliProgress : public CliTest {};

TEST_F(CliProgress, ShownOnATerminalNeverInAPipeOrWithQuiet) {
  // `script` (util-linux, essential on Debian) runs the command on a pseudo-terminal and copies
  // what it prints. The default scenario (~250k events) reports its progress at least once.
  const std::string cmd = quote(kBinary) + " run";
  const std::string pty_cmd = "cd " + quote(dir_.string()) + " && script -qec " + quote(cmd) + " /dev/null > pty.txt 2>&1";
  ASSERT_EQ(std::system(pty_cmd.c_str()), 0);
  const std::string pty = read_text(file("pty.txt"));
  EXPECT_NE(pty.find("M events/s"), std::string::npos) << pty.substr(0, 400);
  EXPECT_NE(pty.find("step time"), std::string::npos);  // and the summary after it
  CliResult piped = run({"run"});
  ASSERT_EQ(piped.status, 0);
  EXPECT_EQ(piped.out.find("events/s"), std::string::npos);
  EXPECT_EQ(piped.err.find("events/s"), std::string::npos);
  const std::string quiet_cmd = "cd " + quote(dir_.string()) + " && script -qec " + quote(cmd + " -q") + " /dev/null > quiet.txt 2>&1";
  ASSERT_EQ(std::system(quiet_cmd.c_str()), 0);
  EXPECT_EQ(read_text(file("quiet.txt")).find("events/s"), std::string::npos);
}

}  // namespace

namespace {

TEST_F(CliTrace, DefaultTrainingTraceHasOneRankPerStageAndArrowsBetweenThem) {
  // The default scenario has 4 pipeline stages (tp 8 innermost: stage s starts at rank 8 s); its
  // trace shows exactly their first ranks, and every pipeline message between them is a flow whose
  // start and end each lie inside a slice of their own track (so the viewer draws the arrow).
  ASSERT_EQ(run({"run", "--trace", "t.json", "-q"}).status, 0);
  const json t = read_json("t.json");
  const json& ev = t.is_object() ? t["traceEvents"] : t;
  std::set<int> pids;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;
  for (const auto& e : ev)
    if (e["ph"] == "X") {
      pids.insert(e["pid"].get<int>());
      const double ts = e["ts"].get<double>();
      slices[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + e["dur"].get<double>()});
    }
  EXPECT_EQ(pids, (std::set<int>{0, 8, 16, 24}));
  std::map<uint64_t, int> ends;
  size_t flows = 0;
  for (const auto& e : ev) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    ++flows;
    ends[e["id"].get<uint64_t>()] += e["ph"] == "s" ? 1 : 10;
    const double ts = e["ts"].get<double>();
    bool inside = false;
    for (const auto& [a, b] : slices[{e["pid"].get<int>(), e["tid"].get<int>()}]) inside |= a <= ts && ts <= b && b > a;
    EXPECT_TRUE(inside) << e.dump();
  }
  // 32 micro-batches x 3 stage boundaries x 2 directions (activations forward, gradients back).
  EXPECT_EQ(flows, 2u * 32 * 3 * 2);
  for (const auto& [id, v] : ends) EXPECT_EQ(v, 11) << "flow " << id << " lacks an end";
}

TEST_F(CliTrace, CollectiveMembersAreLinkedByArrows) {
  // Tracing the 8 ranks of one TP group: every TP collective links the member that arrived last
  // to the 7 others, and both ends of every arrow lie inside a slice of their own track.
  ASSERT_EQ(run({"run", "--trace", "t.json", "--trace-ranks", "0,1,2,3,4,5,6,7", "-q"}).status, 0);
  const json t = read_json("t.json");
  const json& ev = t.is_object() ? t["traceEvents"] : t;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;
  size_t tp_collectives = 0;
  for (const auto& e : ev)
    if (e["ph"] == "X") {
      const double ts = e["ts"].get<double>();
      slices[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back({ts, ts + e["dur"].get<double>()});
      if (e["pid"] == 0 && e["cat"] == "tp") ++tp_collectives;
    }
  std::map<uint64_t, std::pair<int, int>> ends;  // id -> (starts, finishes)
  for (const auto& e : ev) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    auto& c = ends[e["id"].get<uint64_t>()];
    (e["ph"] == "s" ? c.first : c.second) += 1;
    const double ts = e["ts"].get<double>();
    bool inside = false;
    for (const auto& [a, b] : slices[{e["pid"].get<int>(), e["tid"].get<int>()}]) inside |= a <= ts && ts <= b;
    EXPECT_TRUE(inside) << e.dump();
  }
  for (const auto& [id, c] : ends) EXPECT_EQ(c, std::make_pair(1, 1)) << "flow " << id;
  // 7 arrows per TP collective (rank 0 is in every one of the group's), no pipeline arrows (the
  // other stages are not traced).
  EXPECT_GT(tp_collectives, 1000u);
  EXPECT_EQ(ends.size(), 7 * tp_collectives);
}

TEST_F(CliTrace, SlicesHaveCategoriesShortNamesAndWaitingApartFromTransfer) {
  ASSERT_EQ(run({"run", "--trace", "t.json", "-q"}).status, 0);
  const json t = read_json("t.json");
  const json& ev = t.is_object() ? t["traceEvents"] : t;
  std::set<std::string> names, cats;
  size_t slices = 0;
  // Per (pid, tid): slices by start time, and where each flow (a message) starts.
  std::map<std::pair<int, int>, std::map<double, json>> by_track;
  std::map<uint64_t, double> flow_start;
  for (const auto& e : ev) {
    if (e["ph"] == "s") flow_start[e["id"].get<uint64_t>()] = e["ts"].get<double>();
    if (e["ph"] != "X") continue;
    ++slices;
    ASSERT_TRUE(e.contains("cat")) << e.dump();
    names.insert(e["name"].get<std::string>());
    cats.insert(e["cat"].get<std::string>());
    by_track[{e["pid"].get<int>(), e["tid"].get<int>()}][e["ts"].get<double>()] = e;
  }
  // Names repeat: the default step's 4 traced ranks run 23,000 slices of a few dozen kinds (the
  // layer and micro-batch are in args), not a name per slice.
  EXPECT_GT(slices, 20000u);
  EXPECT_LT(names.size(), 100u);
  EXPECT_EQ(cats, (std::set<std::string>{"compute", "tp", "pp", "dp", "optimizer", "wait"}));
  // A recv that waited: a "wait" slice from its issue ends exactly where the recv's own slice
  // starts, and that is when the sender started sending (the flow's start).
  size_t waits = 0;
  for (const auto& [track, m] : by_track)
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it->second["name"] != "wait") continue;
      ++waits;
      auto next = std::next(it);
      ASSERT_NE(next, m.end());
      const double end = it->first + it->second["dur"].get<double>();
      EXPECT_NEAR(next->first, end, 1e-3) << it->second.dump();
      EXPECT_EQ(next->second["args"]["micro_batch"], it->second["args"]["micro_batch"]);
    }
  EXPECT_GT(waits, 100u);
  // Every flow ends (f) inside the recv's transfer slice, which starts at the flow's start.
  size_t checked = 0;
  for (const auto& e : ev) {
    if (e["ph"] != "f") continue;
    const double start = flow_start.at(e["id"].get<uint64_t>());
    const auto& m = by_track[{e["pid"].get<int>(), e["tid"].get<int>()}];
    auto it = m.find(start);
    if (it == m.end()) continue;  // the recv was issued after the message arrived: no wait
    EXPECT_EQ(it->second["cat"], "pp") << it->second.dump();
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

}  // namespace

namespace {

TEST_F(CliSubcommands, SetIndexesListsResolvedGoesToStdoutTopologyRejectsUnknownKeys) {
  // --set edits an element of a list: leaf groups of 4 nodes instead of 8 give 8 x 2 = 16 leaf
  // switch vertices (one per rail per group).
  CliResult r = run({"topology", "--set", "cluster.scale_out.tiers[0].nodes=4"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("leaf 16 switch vertices (groups of up to 4)"), std::string::npos) << r.out;
  r = run({"topology", "--set", "cluster.scale_out.tiers[7].nodes=4"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("the list has 2 elements"), std::string::npos) << r.err;
  // topology checks the cluster's keys as run does.
  r = run({"topology", "--set", "cluster.nodez=4"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cluster.nodez: unknown key"), std::string::npos) << r.err;
  // --resolved - prints the scenario actually run (the built-in default here) and writes no file.
  r = run({"run", "--resolved", "-", "--check", "-q"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("name: default-", 0), 0u) << r.out.substr(0, 200);
  EXPECT_NE(r.out.find("workload:"), std::string::npos);
  EXPECT_FALSE(fs::exists(file("-")));
}

}  // namespace

namespace {

TEST_F(CliSweep, ShardsMergeIntoTheWholeSweep) {
  // --shard I/N runs the points whose index is I mod N; the CSVs' rows, concatenated and sorted by
  // their point column under one header, are the unsharded CSV byte for byte.
  const std::vector<std::string> base = {"sweep", "--axis", "workload.parallelism.tp=2,4,8", "--axis",
                                         "workload.parallelism.pp=1,2", "--set", "workload.parallelism.dp=auto", "-q"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra.begin(), extra.end());
    return run(a);
  };
  ASSERT_EQ(with({"--csv", "all.csv"}).status, 0);
  ASSERT_EQ(with({"--csv", "s0.csv", "--shard", "0/2"}).status, 0);
  ASSERT_EQ(with({"--csv", "s1.csv", "--shard", "1/2"}).status, 0);
  auto lines = [&](const std::string& name) {
    std::istringstream in(read_text(file(name)));
    std::vector<std::string> v;
    for (std::string l; std::getline(in, l);) v.push_back(l);
    return v;
  };
  const auto all = lines("all.csv"), s0 = lines("s0.csv"), s1 = lines("s1.csv");
  ASSERT_EQ(all.size(), 7u);  // header + 6 points
  std::vector<std::string> merged(s0.begin() + 1, s0.end());
  merged.insert(merged.end(), s1.begin() + 1, s1.end());
  std::sort(merged.begin(), merged.end(), [](const std::string& a, const std::string& b) {
    return std::stoi(a.substr(0, a.find(','))) < std::stoi(b.substr(0, b.find(',')));
  });
  merged.insert(merged.begin(), s0[0]);
  EXPECT_EQ(merged, all);
  CliResult bad = with({"--shard", "2/2"});
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("--shard: expected I/N"), std::string::npos) << bad.err;
}

}  // namespace

namespace {

TEST_F(CliErrors, BadNcclProtocolListsNameTheKey) {
  CliResult r = run({"run", "--check", "--set", "cluster.profile.nccl_protocols=LL,Foo"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cluster.profile.nccl_protocols: unknown protocol 'Foo'"), std::string::npos) << r.err;
  r = run({"run", "--check", "--set", "cluster.profile.nccl_protocols=LL, ll"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("listed twice"), std::string::npos) << r.err;
  // A switch without NVLink SHARP cannot run NVLS (the V100 and A100 switches do not reduce).
  r = run({"run", "--check", "--set", "cluster.gpu=a100-sxm", "--set", "cluster.profile.nvls_efficiency=0.5"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("no NVLink SHARP"), std::string::npos) << r.err;
  EXPECT_EQ(run({"run", "--check", "-q", "--set", "cluster.profile.nccl_protocols=Simple"}).status, 0);
}

}  // namespace

namespace {

class CliLog : public CliTest {};

TEST_F(CliLog, VerboseLogsGoToStderrAndNeverChangeTheOutput) {
  const CliResult quiet = run({"run", "--json", "a.json", "--reproducible"});
  ASSERT_EQ(quiet.status, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");  // the default level (warn) says nothing in a normal run
  const CliResult verbose = run({"run", "-vv", "--json", "b.json", "--reproducible"});
  ASSERT_EQ(verbose.status, 0) << verbose.err;
  // The same summary but for its last line's wall time.
  auto without_wall = [](const std::string& t) { return t.substr(0, t.rfind(" events simulated in ")); };
  EXPECT_EQ(without_wall(verbose.out), without_wall(quiet.out));
  EXPECT_EQ(read_text(file("a.json")), read_text(file("b.json")));
  // The default cluster has 8 nodes of 8 H100.
  EXPECT_NE(verbose.err.find("[topology] info: resources: 64 x h100-sxm"), std::string::npos) << verbose.err;
  EXPECT_NE(verbose.err.find("[workloads] debug: lowered all-reduce"), std::string::npos) << verbose.err;
  // Accepted before the subcommand too, and as --log-level.
  const CliResult before = run({"--log-level", "info", "run", "-q"});
  ASSERT_EQ(before.status, 0) << before.err;
  EXPECT_NE(before.err.find("[workloads] info: scenario"), std::string::npos) << before.err;
  EXPECT_EQ(before.err.find("debug"), std::string::npos) << before.err;
}

TEST_F(CliLog, ABadLevelIsAOneLineError) {
  const CliResult r = run({"run", "--log-level", "loud"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--log-level: expected one of off, error, warn, info, debug, trace, got \"loud\""),
            std::string::npos)
      << r.err;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Usability: every bad input is one line naming it; "-" is stdout; counts read as English.

namespace {

// The DLRM sample's profiler trace of rank 0 and its cluster.
struct DlrmSample {
  std::string rank0, cluster;
};
DlrmSample dlrm_sample() {
  const fs::path d = kSourceDir / "tests" / "data" / "param-dlrm-8rank-v100";
  std::vector<std::string> kineto;
  for (const auto& e : fs::directory_iterator(d))
    if (e.path().string().find(".pt.trace.json.gz") != std::string::npos) kineto.push_back(e.path().string());
  std::sort(kineto.begin(), kineto.end());
  return {kineto.empty() ? std::string() : kineto[0], (d / "dgx1-v100.yaml").string()};
}

TEST_F(CliSweep, AnAxisKeyTheScenarioDoesNotKnowOrAValueOfTheWrongTypeIsRefusedBeforeTheGrid) {
  // Before: every point ran and its row said "unknown key", and the sweep exited 0.
  CliResult r = run({"sweep", "--axis", "workload.parallelism.tpp=1,2", "-q", "--csv", "s.csv"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--axis workload.parallelism.tpp: unknown key (known here: ")) << r.err;
  EXPECT_FALSE(fs::exists(file("s.csv"))) << "refused before the grid ran";
  // A value of the wrong type, not the first of a later axis.
  r = run({"sweep", "--axis", "workload.parallelism.pp=4", "--axis", "workload.parallelism.tp=8,x", "-q"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--axis workload.parallelism.tp: expected an integer, got \"x\"")) << r.err;
  r = run({"sweep", "--axis", "cluster.scale_out.nic_bandwidth=400Gbps,fast", "-q"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--axis cluster.scale_out.nic_bandwidth: bad bandwidth \"fast\"")) << r.err;
  // A value that is not YAML.
  r = run({"sweep", "--axis", "workload.parallelism.tp=[1", "-q"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--axis workload.parallelism.tp=[1: bad value")) << r.err;
  // A --set key nobody reads, as `run --set` says it.
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--set", "cluster.nodez=2", "-q"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--set cluster.nodez: unknown key")) << r.err;
  // A layout refused at some points only is those points' rows: tp 1 x pp 4 x dp 2 is 8 ranks
  // for the 64 GPUs, tp 8 x pp 4 x dp 2 the default scenario.
  r = run({"sweep", "--axis", "workload.parallelism.tp=1,8", "--axis", "workload.parallelism.pp=4"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "\n1 of 2 points ran; the other's row says why\n")) << r.out;
}

TEST_F(CliSweep, ASweepWhereNoPointRanExitsNonZeroWithOneLine) {
  // tp x pp x dp = 1 x 1 x 2 and 2 x 1 x 2 ranks: never the default cluster's 64 GPUs.
  const std::vector<std::string> args = {"sweep", "--axis", "workload.parallelism.tp=1,2", "--axis",
                                         "workload.parallelism.pp=1", "--csv", "s.csv"};
  std::vector<std::string> quiet = args;
  quiet.push_back("-q");
  CliResult r = run(quiet);
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "sweep: none of the 2 points ran (2 refused, 0 failed or aborted); point 0: ")) << r.err;
  EXPECT_EQ(r.out, "");
  const std::string csv = read_text(file("s.csv"));
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3) << "the rows still say why: " << csv;
  r = run(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_TRUE(contains(r.out, "\nnone of the 2 points ran; their rows say why\n")) << r.out;
}

TEST_F(CliSweep, TheTableKeepsItsColumnsApartAndCountsReadAsEnglish) {
  CliResult r = run({"sweep", "--axis", "workload.parallelism.sequence_parallel=true,false"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "sweep: 2 points over 1 axis\n")) << r.out;
  // An axis key longer than the column: its own width, two spaces before the next column.
  std::istringstream lines(r.out);
  std::string line, header;
  std::vector<std::string> rows;
  while (std::getline(lines, line)) {
    if (line.rfind("workload.parallelism.sequence_parallel", 0) == 0) header = line;
    if (line.rfind("true ", 0) == 0 || line.rfind("false ", 0) == 0) rows.push_back(line);
  }
  EXPECT_TRUE(contains(header, "workload.parallelism.sequence_parallel  status")) << r.out;
  ASSERT_EQ(rows.size(), 2u) << r.out;
  for (const auto& row : rows) EXPECT_EQ(row.find("ok"), header.find("status")) << r.out;
  EXPECT_TRUE(contains(r.out, "\nboth points ran\n")) << r.out;
  EXPECT_FALSE(contains(r.out, "others")) << r.out;
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--axis", "workload.parallelism.pp=4"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "sweep: 1 point over 2 axes\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "\nthe point ran\n")) << r.out;
}

TEST_F(CliErrors, DashWritesAnOutputToStdoutAndNothingElse) {
  // run --json -: stdout holds the JSON alone, the bytes --json FILE writes; no file named "-".
  CliResult r = run({"run", "--json", "-", "--reproducible"});
  ASSERT_EQ(r.status, 0) << r.err;
  ASSERT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << r.out.substr(0, 300);
  EXPECT_FALSE(fs::exists(file("-")));
  ASSERT_EQ(run({"run", "--json", "a.json", "--reproducible", "-q"}).status, 0);
  EXPECT_EQ(r.out, read_text(file("a.json")));
  // sweep --csv - and --json -.
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--csv", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("point,workload.parallelism.tp,status,error,", 0), 0u) << r.out.substr(0, 300);
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 2) << r.out;
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json s = json::parse(r.out, nullptr, false);
  ASSERT_FALSE(s.is_discarded()) << r.out.substr(0, 300);
  EXPECT_EQ(s["points"].size(), 1u);
  // topology --dot -: the graph alone.
  r = run({"topology", "--dot", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("digraph", 0), 0u) << r.out.substr(0, 200);
  // faults, replay and calibrate.
  write_text(file("c.yaml"), small_campaign());
  r = run({"faults", "c.yaml", "--trials", "4", "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << r.out.substr(0, 300);
  const DlrmSample d = dlrm_sample();
  r = run({"replay", d.rank0, "--json", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(json::parse(r.out, nullptr, false).is_discarded()) << r.out.substr(0, 300);
  r = run({"calibrate", d.rank0, "--cluster", d.cluster, "-o", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out.rfind("# Hardware profile fitted by `clustersim calibrate`", 0), 0u) << r.out.substr(0, 300);
  EXPECT_FALSE(contains(r.out, "wrote")) << r.out;
  EXPECT_FALSE(fs::exists(file("-")));
  // One output at a time, and never a trace.
  r = run({"run", "--json", "-", "--resolved", "-"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--json -: --resolved already writes to stdout")) << r.err;
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--csv", "-", "--json", "-"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--json -: --csv already writes to stdout")) << r.err;
  r = run({"run", "--trace", "-"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--trace: cannot write to stdout ('-')")) << r.err;
  r = run({"replay", d.rank0, "--trace", "-"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--trace: cannot write to stdout ('-')")) << r.err;
  EXPECT_FALSE(fs::exists(file("-")));
}

TEST_F(CliErrors, SeedIsANonNegativeIntegerAndItsErrorsNameSeed) {
  for (const char* bad : {"-1", "abc", "1.5", "7x"}) {
    SCOPED_TRACE(bad);
    CliResult r = run({"run", "--seed", bad, "-q"});
    expect_one_error_line(r);
    EXPECT_TRUE(contains(r.err, std::string("--seed: expected a non-negative integer, got \"") + bad + "\"")) << r.err;
    EXPECT_FALSE(contains(r.err, "--set")) << r.err;
  }
  CliResult r = run({"run", "--seed", "99999999999999999999", "-q"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--seed: at most 9223372036854775807")) << r.err;
  write_text(file("c.yaml"), small_campaign());
  r = run({"faults", "c.yaml", "--seed", "-1"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--seed: expected a non-negative integer, got \"-1\"")) << r.err;
  // The largest seed runs, and is the one recorded.
  r = run({"run", "--seed", "9223372036854775807", "--check", "--resolved", "-"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "seed: 9223372036854775807\n")) << r.out.substr(0, 300);
}

TEST_F(CliErrors, TraceRanksAreCheckedByCheckAndSaidToDoNothingWithoutATrace) {
  // The default scenario has 8 nodes of 8 GPUs: ranks 0..63. --check refuses rank 64 as the run
  // does, before anything is simulated.
  CliResult r = run({"run", "--check", "--trace-ranks", "3,64"});
  EXPECT_EQ(r.status, 2);
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--trace-ranks: rank 64 is outside the cluster (0..63)")) << r.err;
  // Ranks in range without a trace or fingerprint to put them in: a note, and the run goes on.
  r = run({"run", "--check", "--trace-ranks", "3"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "--trace-ranks does nothing without --trace")) << r.err;
  r = run({"run", "--check", "--trace-ranks", "3", "--trace", "t.json"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
}

TEST_F(CliErrors, ImplausibleRatesAndLatenciesRunWithAWarningNamingTheKey) {
  // 400Mbps is 400e6 / 8 = 50 MB/s per GPU, below any datacentre NIC: a slip for 400Gbps. It runs
  // (a what-if), with one warning line naming the key; --quiet keeps stderr empty.
  CliResult r = run({"run", "--check", "--set", "cluster.scale_out.nic_bandwidth=400Mbps"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err,
            "clustersim: warning: --set cluster.scale_out.nic_bandwidth: 50 MB/s (0.4 Gb/s) is outside what "
            "datacentre NICs offer per GPU (10 Gb/s to 1600 Gb/s); a unit slip? (Gbps is gigabits per second, GB/s "
            "gigabytes)\n");
  r = run({"run", "--check", "-q", "--set", "cluster.scale_out.nic_bandwidth=400Mbps"});
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.err, "");
  // 5 ms per fabric hop, where a switch takes about 130 ns (Quantum-2).
  r = run({"run", "--check", "--set", "cluster.profile.fabric_latency=5ms"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "warning: --set cluster.profile.fabric_latency: 5 ms per hop is over 100 us")) << r.err;
  // Plausible values, and the defaults: no warning.
  r = run({"run", "--check", "--set", "cluster.scale_out.nic_bandwidth=200Gbps"});
  EXPECT_EQ(r.err, "");
  // A sweep says it once, before its grid, whatever the points.
  r = run({"sweep", "--axis", "workload.training.global_batch=32,64", "--set",
           "cluster.scale_out.nic_bandwidth=400Mbps", "--csv", "s.csv"});
  EXPECT_EQ(r.status, 0) << r.err;
  size_t n = 0;
  for (size_t at = r.err.find("warning:"); at != std::string::npos; at = r.err.find("warning:", at + 1)) ++n;
  EXPECT_EQ(n, 1u) << r.err;
}

TEST_F(CliTrace, RunSaysWhereItsOutputsWent) {
  CliResult r = run({"run", "--trace", "t.json.gz", "--json", "r.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string tail = "trace written: t.json.gz (open it in https://ui.perfetto.dev)\nJSON written: r.json\n";
  ASSERT_GE(r.out.size(), tail.size());
  EXPECT_EQ(r.out.substr(r.out.size() - tail.size()), tail) << r.out;
  EXPECT_TRUE(fs::exists(file("t.json.gz")) && fs::exists(file("r.json")));
  // An output to stdout is all stdout holds; --quiet prints nothing.
  r = run({"run", "--json", "-"});
  EXPECT_FALSE(contains(r.out, "written")) << r.out;
  r = run({"run", "-q", "--trace", "t.json"});
  EXPECT_EQ(r.out, "");
  // The trace carries the scenario it was made from, resolved (Perfetto shows otherData as metadata).
  const json t = read_json("t.json");
  const std::string yaml = t["otherData"]["scenario_yaml"].get<std::string>();
  EXPECT_EQ(yaml.rfind("name: default-llama3-8b-64xh100-1f1b\n", 0), 0u) << yaml;
  EXPECT_TRUE(contains(yaml, "gpu: h100-sxm")) << yaml;
  // ... and the run's summary and result, as the terminal and --json had them.
  EXPECT_TRUE(contains(t["otherData"]["summary"].get<std::string>(), "MFU")) << t["otherData"].dump();
  EXPECT_EQ(t["otherData"]["result"]["step_time_s"], read_json("r.json")["step_time_s"]);
  // Every other command that writes files ends its report the same way (faults, replay and
  // calibrate: in their own tests).
  auto ends_with = [](const std::string& out, const std::string& tail) {
    return out.size() >= tail.size() && out.compare(out.size() - tail.size(), tail.size(), tail) == 0;
  };
  r = run({"run", "--check", "--resolved", "r.yaml"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ends_with(r.out, "nothing simulated\nresolved scenario written: r.yaml\n")) << r.out;
  r = run({"topology", "--dot", "g.dot"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ends_with(r.out, "DOT graph written: g.dot (render it with Graphviz: dot -Tsvg g.dot -o topology.svg)\n"))
      << r.out;
  r = run({"catalog", "--json", "c.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ends_with(r.out, "\nJSON written: c.json\n")) << r.out;
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--csv", "s.csv", "--json", "s.json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(ends_with(r.out, "the point ran\nCSV written: s.csv (plot it with scripts/plot_sweep.py)\n"
                               "JSON written: s.json\n"))
      << r.out;
  r = run({"sweep", "--axis", "workload.parallelism.tp=8", "--csv", "s.csv", "-q"});
  EXPECT_EQ(r.out, "");
}

TEST_F(CliErrors, AnUnknownSubcommandIsNamedWithTheNearestOne) {
  CliResult r = run({"runn"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "unknown subcommand 'runn' (subcommands: run, topology, catalog, faults, replay, "
                              "calibrate, validate, sweep; did you mean 'run'?)"))
      << r.err;
  r = run({"-v", "sweeep", "--axis", "a=1"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "unknown subcommand 'sweeep'")) << r.err;
  EXPECT_TRUE(contains(r.err, "did you mean 'sweep'?")) << r.err;
  r = run({"--log-level", "info", "topo"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "did you mean 'topology'?")) << r.err;
  r = run({"frobnicate"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "unknown subcommand 'frobnicate'")) << r.err;
  EXPECT_FALSE(contains(r.err, "did you mean")) << r.err;
  // A subcommand after the options before it still runs.
  EXPECT_EQ(run({"--log-level", "warn", "catalog"}).status, 0);
}

TEST_F(CliReplay, CalibrateHoldoutZeroHoldsNoShapeOutAndSaysSo) {
  const DlrmSample d = dlrm_sample();
  CliResult r = run({"calibrate", d.rank0, "--cluster", d.cluster, "-o", "p.yaml", "--holdout", "0"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "calibration of the v100-sxm2 profile from 1 trace: ")) << r.out;
  EXPECT_TRUE(contains(r.out, "held out: nothing (--holdout 0)")) << r.out;
  EXPECT_FALSE(contains(r.out, "0-th")) << r.out;
  r = run({"calibrate", d.rank0, "--cluster", d.cluster, "-o", "p.yaml", "--holdout", "3"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "held out: every 3rd distinct shape\n")) << r.out;
  r = run({"calibrate", d.rank0, "--cluster", d.cluster, "-o", "p.yaml"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "held out: every 4th distinct shape\n")) << r.out;
  r = run({"calibrate", d.rank0, "--cluster", d.cluster, "-o", "p.yaml", "--holdout", "1"});
  expect_one_error_line(r);
  EXPECT_TRUE(contains(r.err, "--holdout 1")) << r.err;
}

TEST_F(CliSubcommands, HelpSaysWhenReplayUsesClusterAndWhatTraceRanksDefaultsTo) {
  // replay --cluster works without --et: Chakra traces, and profiler traces that record sizes.
  CliResult r = run({"replay", "--help"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_FALSE(contains(r.out, "needs --et")) << r.out;
  EXPECT_TRUE(contains(r.out, "at the sizes --et gives, else those the traces record; Chakra traces")) << r.out;
  // --trace-ranks: what run does (the training kind's default_trace_ranks, else ranks 0-15), in
  // the help and in the README alike.
  const std::string said = "else for a training step the first rank of each pipeline stage, else ranks 0-15";
  r = run({"run", "--help"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(contains(r.out, said)) << r.out;
  EXPECT_TRUE(contains(read_text(kSourceDir / "README.md"), said));
}

}  // namespace
