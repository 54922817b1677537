// workloads/collectives/benchmark.h: an nccl-tests style benchmark of collectives on a cluster.
//
//   workload:
//     kind: collectives
//     iterations: 5          # timed iterations per size (back to back, like nccl-tests -n)
//     warmup: 1              # untimed iterations before them (-w)
//     tests:
//       - op: all-reduce     # all-reduce | reduce-scatter | all-gather | broadcast | reduce | all-to-all | send-recv
//         algorithm: auto    # auto | ring | tree | halving-doubling | hierarchical | torus | direct | nvls
//         protocol: auto     # auto | LL | LL128 | Simple (NCCL's; auto picks the fastest estimate)
//         group: all         # all | node | [0, 8, 16] | {first: 0, count: 16, stride: 1}
//         sizes: [1MiB, 1GiB]  # or {min: 1KiB, max: 1GiB, factor: 2}
// Results follow nccl-tests: time per iteration, algbw = size / time, busbw = algbw x bus factor.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <string>
#include <vector>

#include "sim/config.h"
#include "sim/simulation.h"
#include "topology/cluster_resources.h"
#include "workloads/collectives/cluster_shape.h"
#include "workloads/collectives/collective.h"
#include "workloads/collectives/runtime.h"

namespace wl {

struct CollectiveTest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kAuto;
  std::vector<uint32_t> group;
  std::vector<double> sizes;
  Protocol protocol = Protocol::kAuto;
};

struct CollectiveBenchConfig {
  std::vector<CollectiveTest> tests;
  int64_t iterations = 5;
  int64_t warmup = 1;
};

struct CollectiveResult {
  CollectiveOp op;
  Algorithm algorithm;  // the one used
  Protocol protocol;    // the one used
  Algorithm requested = Algorithm::kAuto;  // what the test asked for
  size_t test = 0;                         // index of its test in the config
  std::string note;     // auto's reasoning, fallbacks
  uint32_t ranks = 0;
  double size_bytes = 0;
  double time_s = 0;  // per iteration
  double algbw_GBps = 0;
  double busbw_GBps = 0;
};

// Binds the `workload:` section (kind: collectives) against the built topology (group checks) and
// its shape (cluster_shape_of(resources): whether NVLS applies).
CollectiveBenchConfig bind_collective_benchmark(const sim::ConfigNode& workload, const topo::Topology& topo,
                                               const ClusterShape& shape);

class BenchmarkDriver;

// The benchmark in two halves around the simulation's run: the constructor lowers every plan (and
// declares the trace lanes), start() begins the first collective, finish() returns one result per
// size that completed; problem() is non-empty when the run could not finish them all.
class CollectiveBenchmark {
 public:
  CollectiveBenchmark(topo::ClusterResources& res, const CollectiveBenchConfig& cfg);
  ~CollectiveBenchmark();
  void start();
  std::vector<CollectiveResult> finish(const sim::RunResult& run);
  const std::string& problem() const { return problem_; }

 private:
  topo::ClusterResources& res_;
  const CollectiveBenchConfig& cfg_;
  std::vector<std::pair<size_t, size_t>> order_;
  std::unique_ptr<BenchmarkDriver> driver_;
  std::string problem_;
};

// Runs every test and size in one simulation, in order, and returns one result per size.
// When the observer bus is active, each collective appears as a span on every member's comm lane.
std::vector<CollectiveResult> run_collective_benchmark(topo::ClusterResources& res, const CollectiveBenchConfig& cfg);

}  // namespace wl
