#include "workloads/collectives/benchmark.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>

#include "sim/error.h"
#include "sim/units.h"

namespace wl {

namespace {

std::vector<uint32_t> bind_group(const sim::ConfigNode& test, const topo::Topology& topo) {
  uint32_t n = topo.num_gpus();
  std::vector<uint32_t> group;
  auto g = test.find("group");
  if (!g || (g->is_scalar() && g->as_string() == "all")) {
    if (!g) test.get_string("group", "all");
    for (uint32_t i = 0; i < n; ++i) group.push_back(i);
    return group;
  }
  if (g->is_scalar()) {
    std::string s = g->as_string();
    if (s != "node") g->fail("expected all, node, a list of GPU ids or {first, count, stride}, got \"" + s + "\"");
    for (uint32_t i = 0; i < topo.gpus_per_node(); ++i) group.push_back(i);
    return group;
  }
  if (g->is_sequence()) {
    std::set<int64_t> seen;
    for (size_t i = 0; i < g->size(); ++i) {
      int64_t r = g->at(i).as_int();
      if (r < 0 || r >= n)
        g->at(i).fail("GPU " + std::to_string(r) + " is outside the cluster (GPUs 0.." + std::to_string(n - 1) + ")");
      if (!seen.insert(r).second) g->at(i).fail("GPU " + std::to_string(r) + " appears twice in the group");
      group.push_back(static_cast<uint32_t>(r));
    }
  } else {
    int64_t first = g->get_int_in("first", 0, 1LL << 32, 0);
    int64_t count = g->get_int_in("count", 1, 1LL << 32);
    int64_t stride = g->get_int_in("stride", 1, 1LL << 32, 1);
    if (count > n)
      g->fail("a group of " + std::to_string(count) + " GPUs is larger than the cluster (" + std::to_string(n) +
              " GPUs)");
    const int64_t last = first + (count - 1) * stride;  // < 2^32 + 2^26 x 2^32: no overflow once count <= n
    if (last >= n)
      g->fail("the group reaches GPU " + std::to_string(last) + " but the cluster has GPUs 0.." + std::to_string(n - 1));
    for (int64_t i = 0; i < count; ++i) group.push_back(static_cast<uint32_t>(first + i * stride));
  }
  if (group.empty()) g->fail("the group is empty");
  return group;
}

std::vector<double> bind_sizes(const sim::ConfigNode& test) {
  auto s = test.child("sizes");
  std::vector<double> sizes;
  if (s.is_sequence()) {
    if (s.size() > 10000) s.fail("more than 10000 sizes (" + std::to_string(s.size()) + ")");
    for (size_t i = 0; i < s.size(); ++i) sizes.push_back(s.at(i).as_bytes());
  } else if (s.is_map()) {
    double lo = s.get_bytes("min"), hi = s.get_bytes("max");
    double f = s.get_double_in("factor", 1.0001, 1e6, 2.0);
    if (lo <= 0) s.child("min").fail("must be > 0");
    if (hi < lo) s.child("max").fail("must be >= min");
    // At most 10,000 sizes (a factor of 1.0001 over 1 B to 8 EiB would give 437,000 of them).
    const double count = std::floor(std::log(hi / lo) / std::log(f) + 1e-9) + 1;
    if (count > 10000)
      s.fail("the range gives " + std::to_string(static_cast<long long>(count)) +
             " sizes, more than 10000: raise factor or narrow min..max");
    for (double x = lo; sizes.size() < static_cast<size_t>(count) + 1 && x <= hi * (1 + 1e-12); x *= f)
      sizes.push_back(std::round(x));
  } else {
    sizes.push_back(s.as_bytes());
  }
  if (sizes.empty()) s.fail("no sizes given");
  for (size_t i = 0; i < sizes.size(); ++i)
    if (sizes[i] <= 0) s.fail("sizes must be > 0 bytes");
  return sizes;
}

}  // namespace

// Drives the tests one collective at a time, like nccl-tests' timing loop.
class BenchmarkDriver : public CollectiveListener {
 public:
  BenchmarkDriver(topo::ClusterResources& res, const CollectiveBenchConfig& cfg, std::vector<CollectivePlan> plans,
                  std::vector<std::pair<size_t, size_t>> order)
      : res_(res), cfg_(cfg), plans_(std::move(plans)), order_(std::move(order)), runtime_(res, runtime_options_for(res)) {
    for (size_t i = 0; i < plans_.size(); ++i) plans_[i].keep_id = i + 1;  // kept as long as runtime_
    auto& bus = res_.simulation().observers();
    if (bus.active()) {
      comm_cat_ = bus.names().intern("collective");
      bytes_key_ = bus.names().intern("bytes");
      iter_key_ = bus.names().intern("iteration");
    }
  }

  void start() { begin_case(); }

  void on_collective_done(uint64_t) override {
    auto& sim = res_.simulation();
    const auto& [t, s] = order_[case_];
    const auto& test = cfg_.tests[t];
    auto& bus = sim.observers();
    if (bus.active()) {
      sim::SpanRecord r;
      r.name = span_name_;
      r.category = comm_cat_;
      r.thread = 1;
      r.start = iter_start_;
      r.end = sim.now();
      r.args[0] = {bytes_key_, test.sizes[s]};
      r.args[1] = {iter_key_, static_cast<double>(iter_) - static_cast<double>(cfg_.warmup)};
      for (uint32_t g : test.group) {
        r.process = g;
        bus.span(r);
      }
    }
    ++iter_;
    if (iter_ == cfg_.warmup) timed_start_ = sim.now();
    if (iter_ < cfg_.warmup + cfg_.iterations) {
      start_iteration();
      return;
    }
    times_.push_back((sim.now() - timed_start_).seconds() / static_cast<double>(cfg_.iterations));
    ++case_;
    if (case_ < order_.size()) begin_case();
  }

  const std::vector<double>& times() const { return times_; }
  const std::vector<CollectivePlan>& plans() const { return plans_; }

 private:
  void begin_case() {
    iter_ = 0;
    timed_start_ = res_.simulation().now();
    auto& bus = res_.simulation().observers();
    if (bus.active()) {
      const auto& [t, s] = order_[case_];
      const auto& plan = plans_[case_];
      span_name_ = bus.names().intern(std::string(op_name(plan.op)) + " " + sim::format_bytes(cfg_.tests[t].sizes[s]) +
                                      " " + std::string(algorithm_name(plan.algorithm)) + "/" +
                                      std::string(protocol_name(plan.protocol)));
    }
    start_iteration();
  }
  void start_iteration() {
    iter_start_ = res_.simulation().now();
    const auto& [t, s] = order_[case_];
    runtime_.start(plans_[case_], cfg_.tests[t].group, this, case_);
  }

  topo::ClusterResources& res_;
  const CollectiveBenchConfig& cfg_;
  std::vector<CollectivePlan> plans_;
  std::vector<std::pair<size_t, size_t>> order_;
  CollectiveRuntime runtime_;
  size_t case_ = 0;
  int64_t iter_ = 0;
  sim::Time iter_start_, timed_start_;
  std::vector<double> times_;
  uint32_t span_name_ = sim::kNoName, comm_cat_ = sim::kNoName, bytes_key_ = sim::kNoName, iter_key_ = sim::kNoName;
};

CollectiveBenchConfig bind_collective_benchmark(const sim::ConfigNode& w, const topo::Topology& topo,
                                               const ClusterShape& shape) {
  CollectiveBenchConfig cfg;
  cfg.iterations = w.get_int_in("iterations", 1, 1000000, 5);
  cfg.warmup = w.get_int_in("warmup", 0, 1000000, 1);
  w.refuse_moved("step_overhead", "set cluster.profile.step_overhead (the hardware profile's)");
  auto tests = w.child("tests");
  if (!tests.is_sequence() || tests.size() == 0) tests.fail("expected a non-empty list of collective tests");
  for (size_t i = 0; i < tests.size(); ++i) {
    auto t = tests.at(i);
    CollectiveTest ct;
    try {
      ct.op = parse_op(t.get_string("op"));
    } catch (const sim::ConfigError& e) {
      t.child("op").fail(e.what());
    }
    try {
      ct.algorithm = parse_algorithm(t.get_string("algorithm", "auto"));
    } catch (const sim::ConfigError& e) {
      t.child("algorithm").fail(e.what());
    }
    try {
      ct.protocol = parse_protocol(t.get_string("protocol", "auto"));
    } catch (const sim::ConfigError& e) {
      t.child("protocol").fail(e.what());
    }
    ct.group = bind_group(t, topo);
    ct.sizes = bind_sizes(t);
    if (ct.op == CollectiveOp::kSendRecv && ct.group.size() != 2)
      t.fail("send-recv needs a group of exactly 2 GPUs (sender, receiver), got " + std::to_string(ct.group.size()));
    // An algorithm that does not implement the op or does not fit the group's shape is an
    // error of this test's `algorithm` (or `op` when auto), found before anything is simulated.
    CollectiveRequest probe;
    probe.op = ct.op;
    probe.algorithm = ct.algorithm;
    probe.protocol = ct.protocol;
    probe.group = ct.group;
    probe.bytes = ct.sizes.front();
    const std::string problem = collective_problem(probe, shape);
    if (!problem.empty()) {
      const bool protocol_bad = problem.find("protocol only") != std::string::npos && t.has("protocol");
      t.child(protocol_bad ? "protocol" : t.has("algorithm") ? "algorithm" : "op").fail(problem);
    }
    cfg.tests.push_back(std::move(ct));
  }
  return cfg;
}

CollectiveBenchmark::CollectiveBenchmark(topo::ClusterResources& res, const CollectiveBenchConfig& cfg)
    : res_(res), cfg_(cfg) {
  const auto& topo = res.topology();
  const ClusterShape shape = cluster_shape_of(res);
  CostHints hints = cost_hints_for(res, runtime_options_for(res));
  std::vector<CollectivePlan> plans;
  for (size_t t = 0; t < cfg.tests.size(); ++t) {
    for (size_t s = 0; s < cfg.tests[t].sizes.size(); ++s) {
      CollectiveRequest req;
      req.op = cfg.tests[t].op;
      req.algorithm = cfg.tests[t].algorithm;
      req.protocol = cfg.tests[t].protocol;
      req.group = cfg.tests[t].group;
      req.bytes = cfg.tests[t].sizes[s];
      plans.push_back(lower_collective(req, shape, hints));
      order_.emplace_back(t, s);
    }
  }
  auto& bus = res.simulation().observers();
  if (bus.active()) {
    std::set<uint32_t> members;
    for (const auto& t : cfg.tests) members.insert(t.group.begin(), t.group.end());
    for (uint32_t g : members) {
      bus.declare_process(g, "rank " + std::to_string(g) + " (node " + std::to_string(topo.node_of(g)) + ")", g);
      bus.declare_thread(g, 1, "comm");
    }
  }
  driver_ = std::make_unique<BenchmarkDriver>(res, cfg, std::move(plans), order_);
}

CollectiveBenchmark::~CollectiveBenchmark() = default;

void CollectiveBenchmark::start() { driver_->start(); }

std::vector<CollectiveResult> CollectiveBenchmark::finish(const sim::RunResult& run) {
  if (run.deadlocked) problem_ = "the collective benchmark did not finish: " + run.deadlock_report;
  std::vector<CollectiveResult> out;
  const auto& times = driver_->times();
  for (size_t i = 0; i < order_.size() && i < times.size(); ++i) {
    const auto& [t, s] = order_[i];
    const auto& test = cfg_.tests[t];
    const auto& plan = driver_->plans()[i];
    CollectiveResult r;
    r.op = plan.op;
    r.algorithm = plan.algorithm;
    r.protocol = plan.protocol;
    r.requested = test.algorithm;
    r.test = t;
    r.note = plan.note;
    r.ranks = static_cast<uint32_t>(test.group.size());
    r.size_bytes = test.sizes[s];
    r.time_s = times[i];
    r.algbw_GBps = r.time_s > 0 ? r.size_bytes / r.time_s / 1e9 : 0.0;
    r.busbw_GBps = r.algbw_GBps * bus_factor(r.op, r.ranks);
    out.push_back(r);
  }
  return out;
}

std::vector<CollectiveResult> run_collective_benchmark(topo::ClusterResources& res, const CollectiveBenchConfig& cfg) {
  CollectiveBenchmark bench(res, cfg);
  bench.start();
  auto results = bench.finish(res.simulation().run());
  if (!bench.problem().empty()) throw sim::UserError(bench.problem());
  return results;
}

}  // namespace wl
