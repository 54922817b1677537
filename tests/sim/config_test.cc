// Tests for sim/config.h: typed getters, error locations and paths, --set overrides,
// check_all_used and the resolved document. Line:column values are counted by hand from the
// text (1-based); the comment next to each says where the column comes from.
#include "sim/config.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <unistd.h>

#include "sim/error.h"

namespace sim {
namespace {

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// Line numbers are those of the text: line 1 is "name: demo".
constexpr const char* kScenario =
    "name: demo\n"                                                   // 1
    "seed: 7\n"                                                      // 2
    "cluster:\n"                                                     // 3
    "  gpu: h100-sxm\n"                                              // 4
    "  nodes: 4\n"                                                   // 5
    "  gpus_per_node: 8\n"                                           // 6
    "  scale_up: {kind: nvswitch, bandwidth: 450GB/s}\n"             // 7
    "  scale_out:\n"                                                 // 8
    "    kind: fat-tree\n"                                           // 9
    "    nic_bandwidth: 400Gbps\n"                                   // 10
    "    rails: 8\n"                                                 // 11
    "    tiers:\n"                                                   // 12
    "      - {name: rack, nodes: 2}\n"                               // 13
    "      - {name: pod, racks: 192, oversubscription: 1}\n"         // 14
    "workload:\n"                                                    // 15
    "  sizes: [1MiB, 1GiB]\n"                                        // 16
    "  algorithms: [ring, tree]\n"                                   // 17
    "  warmup: 1.5us\n"                                              // 18
    "  peak: 989TFLOPS\n"                                            // 19
    "  total: 3.8e25FLOP\n"                                          // 20
    "  memory: 80GiB\n"                                              // 21
    "  efficiency: 0.85\n"                                           // 22
    "  overlap: true\n";                                             // 23

// Replaces the first occurrence of `from` in kScenario.
std::string scenario_with(const std::string& from, const std::string& to) {
  std::string s = kScenario;
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

// Reads every key of kScenario the way a binding layer would.
void bind_all(const ConfigNode& root) {
  root.get_string("name");
  root.get_int("seed");
  ConfigNode cluster = root.child("cluster");
  cluster.get_string("gpu");
  cluster.get_int_in("nodes", 1, 1000000);
  cluster.get_int("gpus_per_node");
  ConfigNode up = cluster.child("scale_up");
  up.get_enum("kind", {"nvswitch", "nvlink"});
  up.get_bandwidth("bandwidth");
  ConfigNode out = cluster.child("scale_out");
  out.get_enum("kind", {"fat-tree", "torus"});
  out.get_bandwidth("nic_bandwidth");
  out.get_int("rails");
  ConfigNode tiers = out.child("tiers");
  for (size_t i = 0; i < tiers.size(); ++i) {
    ConfigNode t = tiers.at(i);
    t.get_string("name");
    t.get_int("nodes", 1);
    t.get_int("racks", 1);
    t.get_double_in("oversubscription", 1.0, 100.0, 1.0);
  }
  ConfigNode w = root.child("workload");
  ConfigNode sizes = w.child("sizes");
  for (size_t i = 0; i < sizes.size(); ++i) sizes.at(i).as_bytes();
  w.get_string_list("algorithms");
  w.get_duration("warmup");
  w.get_flop_rate("peak");
  w.get_flops("total");
  w.get_bytes("memory");
  w.get_double("efficiency");
  w.get_bool("overlap");
}

TEST(ConfigBinding, TypedValues) {
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  ConfigNode root = doc.root();
  EXPECT_EQ(root.get_string("name"), "demo");
  EXPECT_EQ(root.get_int("seed"), 7);
  ConfigNode cluster = root.child("cluster");
  EXPECT_EQ(cluster.path(), "cluster");
  EXPECT_EQ(cluster.get_int_in("nodes", 1, 100), 4);
  // 450GB/s = 4.5e11 B/s
  EXPECT_DOUBLE_EQ(cluster.child("scale_up").get_bandwidth("bandwidth"), 4.5e11);
  ConfigNode out = cluster.child("scale_out");
  // 400Gbps = 400e9 / 8 = 5e10 B/s
  EXPECT_DOUBLE_EQ(out.get_bandwidth("nic_bandwidth"), 5e10);
  EXPECT_EQ(out.get_enum("kind", {"fat-tree", "torus"}), "fat-tree");
  ConfigNode tiers = out.child("tiers");
  ASSERT_TRUE(tiers.is_sequence());
  ASSERT_EQ(tiers.size(), 2u);
  ConfigNode pod = tiers.at(1);
  EXPECT_EQ(pod.path(), "cluster.scale_out.tiers[1]");
  EXPECT_EQ(pod.child("racks").path(), "cluster.scale_out.tiers[1].racks");
  EXPECT_EQ(pod.get_int("racks"), 192);
  EXPECT_DOUBLE_EQ(pod.get_double("oversubscription"), 1.0);
  EXPECT_EQ(pod.keys(), (std::vector<std::string>{"name", "racks", "oversubscription"}));

  ConfigNode w = root.child("workload");
  ConfigNode sizes = w.child("sizes");
  // 1MiB = 2^20 = 1048576; 1GiB = 2^30 = 1073741824
  EXPECT_DOUBLE_EQ(sizes.at(0).as_bytes(), 1048576.0);
  EXPECT_DOUBLE_EQ(sizes.at(1).as_bytes(), 1073741824.0);
  EXPECT_EQ(w.get_string_list("algorithms"), (std::vector<std::string>{"ring", "tree"}));
  // 1.5us = 1500 ns
  EXPECT_EQ(w.get_duration("warmup").count_ns(), 1500);
  // 989TFLOPS = 9.89e14 FLOP/s; 3.8e25FLOP = 3.8e25
  EXPECT_DOUBLE_EQ(w.get_flop_rate("peak"), 9.89e14);
  EXPECT_DOUBLE_EQ(w.get_flops("total"), 3.8e25);
  // 80GiB = 80 * 2^30 = 85899345920
  EXPECT_DOUBLE_EQ(w.get_bytes("memory"), 85899345920.0);
  EXPECT_DOUBLE_EQ(w.get_double_in("efficiency", 0.0, 1.0), 0.85);
  EXPECT_TRUE(w.get_bool("overlap"));

  EXPECT_TRUE(root.has("cluster"));
  EXPECT_FALSE(root.has("failures"));
  EXPECT_FALSE(root.find("failures").has_value());
  EXPECT_TRUE(cluster.is_map());
  EXPECT_TRUE(cluster.child("gpu").is_scalar());
  EXPECT_EQ(cluster.child("gpu").scalar(), "h100-sxm");
}

TEST(ConfigBinding, LocationsAreOneBased) {
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  ConfigNode root = doc.root();
  // "  nodes: 4": the value starts after 2 spaces + "nodes: " (7 chars) = column 10.
  EXPECT_EQ(root.child("cluster").child("nodes").location(), "scenario.yaml:5:10");
  // Line 14 "      - {name: pod, racks: 192, oversubscription: 1}": '-' at 7, '{' at 9,
  // "name" at 10, "racks" at 21, "192" at 28, "oversubscription" at 33, "1" at 51.
  ConfigNode pod = root.child("cluster").child("scale_out").child("tiers").at(1);
  EXPECT_EQ(pod.child("racks").location(), "scenario.yaml:14:28");
  EXPECT_EQ(pod.child("oversubscription").location(), "scenario.yaml:14:51");
  // The flow map itself starts at its '{'.
  EXPECT_EQ(pod.location(), "scenario.yaml:14:9");
  // Line 16 "  sizes: [1MiB, 1GiB]": '[' at 10, "1MiB" at 11, "1GiB" at 17.
  EXPECT_EQ(root.child("workload").child("sizes").at(1).location(), "scenario.yaml:16:17");
}

TEST(ConfigErrors, WrongType) {
  ConfigDoc doc = ConfigDoc::load_string(scenario_with("nodes: 4", "nodes: four"), "scenario.yaml");
  ConfigNode cluster = doc.root().child("cluster");
  // "  nodes: four": value at column 10.
  EXPECT_EQ(error_of([&] { cluster.get_int("nodes"); }),
            "scenario.yaml:5:10: cluster.nodes: expected an integer, got \"four\"");
  // Line 4 "  gpu: h100-sxm": value at column 8.
  EXPECT_EQ(error_of([&] { cluster.get_double("gpu"); }),
            "scenario.yaml:4:8: cluster.gpu: expected a number, got \"h100-sxm\"");
  EXPECT_EQ(error_of([&] { cluster.get_bool("gpu"); }),
            "scenario.yaml:4:8: cluster.gpu: expected true or false, got \"h100-sxm\"");
  // scale_up is a flow map starting at column 13 of line 7 ("  scale_up: {").
  EXPECT_EQ(error_of([&] { cluster.get_string("scale_up"); }),
            "scenario.yaml:7:13: cluster.scale_up: expected a string, got a map");
  EXPECT_EQ(error_of([&] { cluster.get_int("scale_out"); }),
            "scenario.yaml:9:5: cluster.scale_out: expected an integer, got a map");
  // Asking a scalar for a key: gpu is not a map.
  EXPECT_EQ(error_of([&] { cluster.child("gpu").child("x"); }),
            "scenario.yaml:4:8: cluster.gpu: expected a map, got \"h100-sxm\"");
  ConfigNode w = doc.root().child("workload");
  // "  sizes: [1MiB, 1GiB]": the list starts at column 10.
  EXPECT_EQ(error_of([&] { w.get_int_list("sizes"); }),
            "scenario.yaml:16:11: workload.sizes[0]: expected an integer, got \"1MiB\"");
  // "  warmup: 1.5us": value at column 11.
  EXPECT_EQ(error_of([&] { w.get_string_list("warmup"); }),
            "scenario.yaml:18:11: workload.warmup: expected a list of strings, got \"1.5us\"");
  EXPECT_EQ(error_of([&] { w.get_int_list("warmup"); }),
            "scenario.yaml:18:11: workload.warmup: expected a list of integers, got \"1.5us\"");
  EXPECT_EQ(error_of([&] { w.child("sizes").scalar(); }),
            "scenario.yaml:16:10: workload.sizes: expected a value, got a list");
  EXPECT_EQ(error_of([&] { w.child("sizes").at(2); }),
            "scenario.yaml:16:10: workload.sizes: index 2 is out of range (the list has 2 entries)");
  EXPECT_EQ(error_of([&] { w.child("memory").at(0); }),
            "scenario.yaml:21:11: workload.memory: expected a list, got \"80GiB\"");
}

TEST(ConfigErrors, IntegerEdgeCases) {
  ConfigDoc doc = ConfigDoc::load_string(
      "a: 1.0\nb: 99999999999999999999\nc: +12\nd: -3\ne: 1e3\nf: .nan\ng: ~\n", "n.yaml");
  ConfigNode r = doc.root();
  EXPECT_EQ(error_of([&] { r.get_int("a"); }), "n.yaml:1:4: a: expected an integer, got \"1.0\"");
  EXPECT_EQ(error_of([&] { r.get_int("b"); }),
            "n.yaml:2:4: b: integer out of range, got \"99999999999999999999\"");
  EXPECT_EQ(r.get_int("c"), 12);
  EXPECT_EQ(r.get_int("d"), -3);
  // 1e3 is a number but not written as an integer.
  EXPECT_EQ(error_of([&] { r.get_int("e"); }), "n.yaml:5:4: e: expected an integer, got \"1e3\"");
  EXPECT_DOUBLE_EQ(r.get_double("e"), 1000.0);
  EXPECT_EQ(error_of([&] { r.get_double("f"); }), "n.yaml:6:4: f: expected a number, got \".nan\"");
  // "g: ~" is null: present, but no value.
  EXPECT_TRUE(r.has("g"));
  EXPECT_EQ(error_of([&] { r.get_int("g"); }).find("n.yaml:7:"), 0u);
  EXPECT_NE(error_of([&] { r.get_int("g"); }).find("g: expected an integer, got nothing (null)"),
            std::string::npos);
}

TEST(ConfigErrors, OutOfRange) {
  ConfigDoc doc = ConfigDoc::load_string(scenario_with("nodes: 4", "nodes: 0"), "scenario.yaml");
  ConfigNode cluster = doc.root().child("cluster");
  EXPECT_EQ(error_of([&] { cluster.get_int_in("nodes", 1, 100); }),
            "scenario.yaml:5:10: cluster.nodes: must be >= 1, got 0");
  // gpus_per_node: 8 at line 6, "  gpus_per_node: " = 17 chars -> column 18.
  EXPECT_EQ(error_of([&] { cluster.get_int_in("gpus_per_node", 1, 4); }),
            "scenario.yaml:6:18: cluster.gpus_per_node: must be <= 4, got 8");
  // The defaulted form checks a present value just the same.
  EXPECT_EQ(error_of([&] { cluster.get_int_in("nodes", 1, 100, 5); }),
            "scenario.yaml:5:10: cluster.nodes: must be >= 1, got 0");
  ConfigNode w = doc.root().child("workload");
  // "  efficiency: 0.85": value at column 15.
  EXPECT_EQ(error_of([&] { w.get_double_in("efficiency", 0.9, 1.0); }),
            "scenario.yaml:22:15: workload.efficiency: must be >= 0.9, got 0.85");
  EXPECT_EQ(error_of([&] { w.get_double_in("efficiency", 0.0, 0.5, 0.1); }),
            "scenario.yaml:22:15: workload.efficiency: must be <= 0.5, got 0.85");
}

TEST(ConfigErrors, MissingRequiredKey) {
  ConfigDoc doc = ConfigDoc::load_string(scenario_with("  gpu: h100-sxm\n", ""), "scenario.yaml");
  // Without the gpu line, the cluster map starts at "  nodes: 4" on line 4, column 3.
  EXPECT_EQ(error_of([&] { doc.root().child("cluster").child("gpu"); }),
            "scenario.yaml:4:3: cluster: missing required key 'gpu'");
  EXPECT_EQ(error_of([&] { doc.root().child("cluster").get_bandwidth("gpu"); }),
            "scenario.yaml:4:3: cluster: missing required key 'gpu'");
  // At the top level the path reads "(top level)"; the root map starts at 1:1.
  EXPECT_EQ(error_of([&] { doc.root().get_string("model"); }),
            "scenario.yaml:1:1: (top level): missing required key 'model'");
}

// A missing key whose misspelling is in the map says so (a new user's `clustr:` was reported as a
// missing `cluster` only); keys under 4 letters get no hint (tp and pp are both real keys).
TEST(ConfigErrors, MissingRequiredKeyPointsAtItsMisspelling) {
  ConfigDoc doc = ConfigDoc::load_string("name: x\nclustr:\n  gpu: h100-sxm\nworkloads: {pp: 2}\n", "s.yaml");
  EXPECT_EQ(error_of([&] { doc.root().child("cluster"); }),
            "s.yaml:1:1: (top level): missing required key 'cluster'; is 'clustr' (line 2) a misspelling of it?");
  // Two edits are allowed from 8 letters on: "workloads" is one from "workload", "wrkloads" two.
  EXPECT_EQ(error_of([&] { doc.root().child("workload"); }),
            "s.yaml:1:1: (top level): missing required key 'workload'; is 'workloads' (line 4) a misspelling of it?");
  ConfigDoc far = ConfigDoc::load_string("nme: x\nclstr: {}\n", "s.yaml");
  EXPECT_EQ(error_of([&] { far.root().child("cluster"); }), "s.yaml:1:1: (top level): missing required key 'cluster'");
  EXPECT_EQ(error_of([&] { doc.root().child("workloads").child("tp"); }),
            "s.yaml:4:12: workloads: missing required key 'tp'");
  EXPECT_EQ(edit_distance("clustr", "cluster"), 1u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);  // the textbook example: k->s, e->i, +g
  EXPECT_EQ(edit_distance("", "abc"), 3u);
}

TEST(ConfigErrors, BadUnitsCarryLocationAndPath) {
  ConfigDoc doc = ConfigDoc::load_string(scenario_with("400Gbps", "40Gbs"), "scenario.yaml");
  ConfigNode out = doc.root().child("cluster").child("scale_out");
  // "    nic_bandwidth: 40Gbs": 4 spaces + "nic_bandwidth: " (15 chars) -> column 20.
  EXPECT_EQ(error_of([&] { out.get_bandwidth("nic_bandwidth"); }),
            "scenario.yaml:10:20: cluster.scale_out.nic_bandwidth: bad bandwidth \"40Gbs\": "
            "expected a number and a unit such as Gbps, GB/s or GiB/s");

  ConfigDoc neg = ConfigDoc::load_string(scenario_with("1.5us", "-1.5us"), "scenario.yaml");
  EXPECT_EQ(error_of([&] { neg.root().child("workload").get_duration("warmup"); }),
            "scenario.yaml:18:11: workload.warmup: duration must not be negative, got \"-1.5us\"");

  ConfigDoc list = ConfigDoc::load_string(scenario_with("1GiB]", "1GiX]"), "scenario.yaml");
  EXPECT_EQ(error_of([&] { list.root().child("workload").child("sizes").at(1).as_bytes(); }),
            "scenario.yaml:16:17: workload.sizes[1]: bad size \"1GiX\": expected a number of "
            "bytes, optionally with a unit such as KB, MiB, GB or GiB");

  ConfigDoc rate = ConfigDoc::load_string(scenario_with("989TFLOPS", "989TF"), "scenario.yaml");
  EXPECT_NE(error_of([&] { rate.root().child("workload").get_flop_rate("peak"); })
                .find("scenario.yaml:19:9: workload.peak: bad FLOP rate \"989TF\""),
            std::string::npos);
  ConfigDoc flops = ConfigDoc::load_string(scenario_with("3.8e25FLOP", "lots"), "scenario.yaml");
  EXPECT_NE(error_of([&] { flops.root().child("workload").get_flops("total"); })
                .find("scenario.yaml:20:10: workload.total: bad FLOP count \"lots\""),
            std::string::npos);
  // A map where a quantity is expected.
  EXPECT_EQ(error_of([&] { doc.root().child("cluster").get_bandwidth("scale_up"); }),
            "scenario.yaml:7:13: cluster.scale_up: expected a value, got a map");
}

TEST(ConfigErrors, EnumListsAllowedValues) {
  ConfigDoc doc = ConfigDoc::load_string(
      scenario_with("kind: fat-tree", "kind: fat_tree"), "scenario.yaml");
  ConfigNode out = doc.root().child("cluster").child("scale_out");
  // "    kind: fat_tree": value at column 11.
  EXPECT_EQ(error_of([&] { out.get_enum("kind", {"fat-tree", "torus", "edges"}); }),
            "scenario.yaml:9:11: cluster.scale_out.kind: expected one of fat-tree, torus, edges, "
            "got \"fat_tree\"");
  std::vector<std::string> allowed = {"fat-tree"};
  EXPECT_EQ(error_of([&] { out.get_enum("kind", allowed, "fat-tree"); }),
            "scenario.yaml:9:11: cluster.scale_out.kind: expected one of fat-tree, got \"fat_tree\"");
  EXPECT_EQ(out.get_enum("routing", {"ecmp", "dmodk"}, "ecmp"), "ecmp");
}

TEST(ConfigErrors, FailNamesLocationAndPath) {
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  ConfigNode rails = doc.root().child("cluster").child("scale_out").child("rails");
  // "    rails: 8": value at column 12.
  EXPECT_EQ(error_of([&] { rails.fail("must divide gpus_per_node (8)"); }),
            "scenario.yaml:11:12: cluster.scale_out.rails: must divide gpus_per_node (8)");
}

TEST(ConfigErrors, SyntaxErrorNamesLineAndColumn) {
  // The flow list opened on line 2 is never closed; yaml-cpp gives up at line 3, column 2.
  EXPECT_EQ(error_of([] { ConfigDoc::load_string("a: 1\nb: [1, 2\nc: 3\n", "bad.yaml"); }),
            "bad.yaml:3:2: YAML syntax error: end of sequence flow not found");
  // " b: 2" is indented under a scalar: its ':' (line 2, column 3) is an illegal map value.
  EXPECT_EQ(error_of([] { ConfigDoc::load_string("a: 1\n b: 2\n", "bad.yaml"); }),
            "bad.yaml:2:3: YAML syntax error: illegal map value");
  // A top level that is not a map.
  EXPECT_EQ(error_of([] { ConfigDoc::load_string("- 1\n- 2\n", "list.yaml"); }),
            "list.yaml:1:1: (top level): expected a map, got a list");
}

TEST(ConfigErrors, DuplicateKey) {
  // Line 3 "  nodes: 8" repeats "nodes" from line 2; the repeat starts at column 3.
  EXPECT_EQ(error_of([] { ConfigDoc::load_string("cluster:\n  nodes: 4\n  nodes: 8\n", "d.yaml"); }),
            "d.yaml:3:3: cluster.nodes: duplicate key (first given on line 2)");
  ConfigDoc doc = ConfigDoc::load_string("a: 1\n", "d.yaml");
  EXPECT_EQ(error_of([&] { doc.apply_override("b={k: 1, k: 2}"); }), "--set b: b.k: duplicate key");
}

TEST(ConfigFile, LoadFromDisk) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("clustersim_config_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::string path = (dir / "scenario.yaml").string();
  {
    std::ofstream f(path);
    f << "cluster:\n  nodes: four\n";
  }
  ConfigDoc doc = ConfigDoc::load_file(path);
  EXPECT_EQ(doc.name(), path);
  // "  nodes: four": column 10.
  EXPECT_EQ(error_of([&] { doc.root().child("cluster").get_int("nodes"); }),
            path + ":2:10: cluster.nodes: expected an integer, got \"four\"");
  std::string missing = (dir / "nope.yaml").string();
  EXPECT_EQ(error_of([&] { ConfigDoc::load_file(missing); }),
            "cannot open scenario file \"" + missing + "\": No such file or directory");
  {
    std::ofstream f(path);
    f << "cluster:\n  nodes: [4\n";
  }
  std::string msg = error_of([&] { ConfigDoc::load_file(path); });
  EXPECT_EQ(msg.find(path + ":"), 0u) << msg;
  EXPECT_NE(msg.find("YAML syntax error"), std::string::npos) << msg;
  std::filesystem::remove_all(dir);
}

TEST(ConfigOverride, ReplacesAndCreates) {
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  doc.apply_override("cluster.nodes=16");
  doc.apply_override("workload.sizes=[4KiB,1MiB,1GiB]");
  doc.apply_override("output.trace=out/x.json");
  doc.apply_override("a.b.c = 5");
  doc.apply_override("cluster.scale_up={kind: nvlink, bandwidth: 900GB/s}");
  ConfigNode root = doc.root();
  ConfigNode cluster = root.child("cluster");
  EXPECT_EQ(cluster.get_int("nodes"), 16);
  EXPECT_EQ(cluster.child("nodes").location(), "--set cluster.nodes");
  ConfigNode sizes = root.child("workload").child("sizes");
  ASSERT_EQ(sizes.size(), 3u);
  // 4KiB = 4096
  EXPECT_DOUBLE_EQ(sizes.at(0).as_bytes(), 4096.0);
  EXPECT_EQ(sizes.at(2).location(), "--set workload.sizes");
  EXPECT_EQ(root.child("output").get_string("trace"), "out/x.json");
  EXPECT_EQ(root.child("output").location(), "--set output.trace");
  EXPECT_EQ(root.child("a").child("b").get_int("c"), 5);
  // 900GB/s = 9e11 B/s
  EXPECT_DOUBLE_EQ(cluster.child("scale_up").get_bandwidth("bandwidth"), 9e11);
  // Untouched values keep their file locations.
  EXPECT_EQ(cluster.child("gpu").location(), "scenario.yaml:4:8");
}

TEST(ConfigOverride, ErrorsNameTheAssignment) {
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  EXPECT_EQ(error_of([&] { doc.apply_override("cluster.nodes.x=1"); }),
            "--set cluster.nodes.x=1: 'cluster.nodes' is not a map");
  EXPECT_EQ(error_of([&] { doc.apply_override("workload.sizes.first=1"); }),
            "--set workload.sizes.first=1: 'workload.sizes' is not a map");
  EXPECT_EQ(error_of([&] { doc.apply_override("cluster.nodes"); }),
            "--set cluster.nodes: expected key.path=value");
  EXPECT_EQ(error_of([&] { doc.apply_override("=4"); }), "--set =4: missing key path before '='");
  EXPECT_EQ(error_of([&] { doc.apply_override("cluster.nodes="); }),
            "--set cluster.nodes=: missing value after '='");
  EXPECT_EQ(error_of([&] { doc.apply_override("cluster..nodes=4"); }),
            "--set cluster..nodes=4: empty key in path 'cluster..nodes'");
  EXPECT_EQ(error_of([&] { doc.apply_override("workload.sizes=[1MiB,"); })
                .find("--set workload.sizes=[1MiB,: bad value: "),
            0u);

  // Values from --set are checked like file values, and errors point at the --set.
  doc.apply_override("cluster.nodes=zero");
  EXPECT_EQ(error_of([&] { doc.root().child("cluster").get_int("nodes"); }),
            "--set cluster.nodes: expected an integer, got \"zero\"");
}

TEST(ConfigOverride, ReplacesNullWithMap) {
  ConfigDoc doc = ConfigDoc::load_string("failures:\nname: x\n", "s.yaml");
  doc.apply_override("failures.mtbf=5d");
  ConfigNode root = doc.root();
  // 5d = 5 * 86400 s = 432000 s = 4.32e14 ns
  EXPECT_EQ(root.child("failures").get_duration("mtbf").count_ns(), 432000000000000);
  EXPECT_EQ(root.get_string("name"), "x");
  doc.check_all_used();
}

TEST(ConfigUsed, AllKeysBound) {
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  bind_all(doc.root());
  EXPECT_NO_THROW(doc.check_all_used());
}

TEST(ConfigUsed, ReportsTypoWithKnownKeys) {
  ConfigDoc doc = ConfigDoc::load_string(scenario_with("nic_bandwidth", "nic_bw"), "scenario.yaml");
  ConfigNode root = doc.root();
  // Binding code reads the correct spelling with a default, so it counts as known.
  ConfigNode out = root.child("cluster").child("scale_out");
  out.get_enum("kind", {"fat-tree"});
  out.get_bandwidth("nic_bandwidth", 5e10);
  out.get_int("rails");
  out.child("tiers");
  // Line 10 "    nic_bw: 400Gbps": the key starts at column 5. Known keys are sorted.
  EXPECT_EQ(error_of([&] { doc.check_all_used(); }),
            "scenario.yaml:1:1: name: unknown key (known here: cluster)");
  bind_all(root);
  EXPECT_EQ(error_of([&] { doc.check_all_used(); }),
            "scenario.yaml:10:5: cluster.scale_out.nic_bw: unknown key (known here: kind, "
            "nic_bandwidth, rails, tiers)");
}

TEST(ConfigUsed, FirstInDocumentOrderAndInsideLists) {
  // Two unknown keys: tiers[0].nodez on line 13 and workload.extra on line 24.
  std::string text = scenario_with("{name: rack, nodes: 2}", "{name: rack, nodez: 2}") + "  extra: 1\n";
  ConfigDoc doc = ConfigDoc::load_string(text, "scenario.yaml");
  bind_all(doc.root());
  // Line 13 "      - {name: rack, nodez: 2}": '{' at 9, "name" at 10, "nodez" at 22.
  EXPECT_EQ(error_of([&] { doc.check_all_used(); }),
            "scenario.yaml:13:22: cluster.scale_out.tiers[0].nodez: unknown key (known here: name, "
            "nodes, oversubscription, racks)");
}

TEST(ConfigUsed, EveryAccessKindCounts) {
  ConfigDoc doc = ConfigDoc::load_string("a: 1\nb: 2\nc: {x: 1}\nd: 4\ne: 5\n", "u.yaml");
  ConfigNode r = doc.root();
  r.has("a");
  r.find("b");
  r.child("c").get_int("x");
  r.get_int("d", 0);
  EXPECT_EQ(error_of([&] { doc.check_all_used(); }),
            "u.yaml:5:1: e: unknown key (known here: a, b, c, d)");
  r.get_string("e");
  EXPECT_NO_THROW(doc.check_all_used());
}

TEST(ConfigUsed, UnreadSectionAndOverriddenKey) {
  // A map that was reached but never read inside.
  ConfigDoc doc = ConfigDoc::load_string("model:\n  layers: 4\n", "m.yaml");
  doc.root().child("model");
  EXPECT_EQ(error_of([&] { doc.check_all_used(); }),
            "m.yaml:2:3: model.layers: unknown key (no keys are read here)");
  // A misspelt --set is reported at the --set.
  ConfigDoc doc2 = ConfigDoc::load_string(kScenario, "scenario.yaml");
  doc2.apply_override("cluster.nodez=8");
  bind_all(doc2.root());
  EXPECT_EQ(error_of([&] { doc2.check_all_used(); }),
            "--set cluster.nodez: unknown key (known here: gpu, gpus_per_node, "
            "nodes, scale_out, scale_up)");
}

TEST(ConfigOverride, AnOptionThatSetsAKeyIsNamedInItsErrors) {
  // faults --step-cache FILE sets workload.step_cache: an error about the value names the option.
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  doc.apply_override("cluster.nodes=zero", "--nodes");
  EXPECT_EQ(error_of([&] { doc.root().child("cluster").get_int("nodes"); }),
            "--nodes: cluster.nodes: expected an integer, got \"zero\"");
}

TEST(ConfigUsed, AMovedKeyIsNamedWhenGivenAndNotOfferedWhenNot) {
  ConfigDoc doc = ConfigDoc::load_string("model:\n  layers: 4\n  lyers: 5\n", "m.yaml");
  ConfigNode model = doc.root().child("model");
  model.get_int("layers");
  model.refuse_moved("width", "set model.hidden");  // absent: nothing happens
  // The unknown key's list is what is read here: layers, not the moved width.
  EXPECT_EQ(error_of([&] { doc.check_all_used(); }), "m.yaml:3:3: model.lyers: unknown key (known here: layers)");
  ConfigDoc given = ConfigDoc::load_string("model:\n  width: 4\n", "g.yaml");
  EXPECT_EQ(error_of([&] { given.root().child("model").refuse_moved("width", "set model.hidden"); }),
            "g.yaml:2:10: model.width: moved: set model.hidden");
}

TEST(ConfigResolved, ContainsAppliedDefaults) {
  ConfigDoc doc = ConfigDoc::load_string("cluster:\n  nodes: 4\nfailures:\n", "r.yaml");
  ConfigNode root = doc.root();
  ConfigNode cluster = root.child("cluster");
  EXPECT_EQ(cluster.get_int("nodes", 1), 4);                 // present: no default written
  EXPECT_EQ(cluster.get_int("gpus_per_node", 8), 8);
  // 100Gbps = 1.25e10 B/s; shortest exact spelling among the candidates is "100Gbps".
  EXPECT_DOUBLE_EQ(cluster.get_bandwidth("nic_bandwidth", 1.25e10), 1.25e10);
  // 80 * 2^30 = 85899345920 bytes -> "80GiB"
  EXPECT_DOUBLE_EQ(cluster.get_bytes("hbm", 85899345920.0), 85899345920.0);
  // 989e12 FLOP/s -> "989TFLOPS"; 1.2e15 FLOPs -> "1.2PFLOP"
  EXPECT_DOUBLE_EQ(cluster.get_flop_rate("peak", 989e12), 989e12);
  EXPECT_DOUBLE_EQ(cluster.get_flops("budget", 1.2e15), 1.2e15);
  // 1500 ns -> "1.5us"; 30 s -> "30s"
  EXPECT_EQ(cluster.get_duration("latency", Time::ns(1500)).count_ns(), 1500);
  EXPECT_EQ(cluster.get_duration("timeout", Time::sec(30)), Time::sec(30));
  EXPECT_EQ(cluster.get_string("gpu", "h100-sxm"), "h100-sxm");
  EXPECT_FALSE(cluster.get_bool("spares", false));
  EXPECT_DOUBLE_EQ(cluster.get_double("efficiency", 0.5), 0.5);
  EXPECT_EQ(cluster.get_int_list("dims", {4, 4, 8}), (std::vector<int64_t>{4, 4, 8}));
  EXPECT_EQ(cluster.get_string_list("order", {"tp", "dp"}), (std::vector<std::string>{"tp", "dp"}));
  EXPECT_EQ(cluster.get_enum("routing", {"ecmp", "dmodk"}, "dmodk"), "dmodk");
  // "failures:" is null; defaults turn it into a map.
  EXPECT_EQ(root.child("failures").get_duration("mtbf", Time::sec(3600)), Time::sec(3600));
  EXPECT_NO_THROW(doc.check_all_used());

  const std::string expected =
      "cluster:\n"
      "  nodes: 4\n"
      "  gpus_per_node: 8\n"
      "  nic_bandwidth: 100Gbps\n"
      "  hbm: 80GiB\n"
      "  peak: 989TFLOPS\n"
      "  budget: 1.2PFLOP\n"
      "  latency: 1.5us\n"
      "  timeout: 30s\n"
      "  gpu: h100-sxm\n"
      "  spares: false\n"
      "  efficiency: 0.5\n"
      "  dims: [4, 4, 8]\n"
      "  order: [tp, dp]\n"
      "  routing: dmodk\n"
      "failures:\n"
      "  mtbf: 1h\n";
  EXPECT_EQ(doc.resolved_yaml(), expected);

  // The resolved document binds to the same values with no defaults left to apply.
  ConfigDoc again = ConfigDoc::load_string(doc.resolved_yaml(), "resolved.yaml");
  ConfigNode c2 = again.root().child("cluster");
  EXPECT_DOUBLE_EQ(c2.get_bandwidth("nic_bandwidth"), 1.25e10);
  EXPECT_DOUBLE_EQ(c2.get_bytes("hbm"), 85899345920.0);
  EXPECT_EQ(c2.get_duration("latency").count_ns(), 1500);
  EXPECT_EQ(c2.get_int_list("dims"), (std::vector<int64_t>{4, 4, 8}));
  EXPECT_EQ(again.root().child("failures").get_duration("mtbf"), Time::sec(3600));
}

TEST(ConfigResolved, IncludesOverridesAndIsDeterministic) {
  auto run = [] {
    ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
    doc.apply_override("cluster.nodes=16");
    doc.apply_override("output.trace=out/x.json");
    bind_all(doc.root());
    return doc.resolved_yaml();
  };
  std::string a = run();
  EXPECT_EQ(a, run());
  EXPECT_NE(a.find("  nodes: 16\n"), std::string::npos) << a;
  EXPECT_NE(a.find("output:\n  trace: out/x.json\n"), std::string::npos) << a;
  // Defaults applied inside list elements: tiers[0] had no racks/oversubscription.
  EXPECT_NE(a.find("racks: 1"), std::string::npos) << a;
}

TEST(ConfigNodeHandle, CheapToCopy) {
  // One shared pointer: copying a handle never copies strings or YAML nodes.
  EXPECT_EQ(sizeof(ConfigNode), sizeof(std::shared_ptr<int>));
  ConfigDoc doc = ConfigDoc::load_string(kScenario, "scenario.yaml");
  ConfigNode a = doc.root().child("cluster");
  ConfigNode b = a;
  EXPECT_EQ(b.path(), "cluster");
  EXPECT_EQ(b.location(), a.location());
}

TEST(ConfigDocEmpty, EmptyTextIsEmptyScenario) {
  ConfigDoc doc = ConfigDoc::load_string("", "empty.yaml");
  EXPECT_EQ(doc.root().get_int("seed", 1), 1);
  EXPECT_EQ(doc.resolved_yaml(), "seed: 1\n");
  EXPECT_EQ(error_of([&] { doc.root().child("cluster"); }).find("empty.yaml"), 0u);
}

}  // namespace
}  // namespace sim
