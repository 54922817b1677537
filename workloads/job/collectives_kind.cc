// `workload: {kind: collectives}` as a Job: the nccl-tests style benchmark.
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/error.h"

#include "sim/units.h"
#include "workloads/collectives/benchmark.h"
#include "workloads/job/format.h"
#include "workloads/job/kinds.h"

namespace wl {

namespace {

class CollectivesResult : public JobResult {
 public:
  CollectivesResult(const CollectiveBenchConfig& cfg, std::vector<CollectiveResult> results, std::string problem)
      : cfg_(cfg), results_(std::move(results)), problem_(std::move(problem)) {}
  bool completed() const override { return problem_.empty(); }
  std::string problem() const override { return problem_; }

  std::string summary() const override {
    std::string o;
    appendf(o,
            "collective benchmark: %lld timed iterations after %lld warm-up (nccl-tests definitions:\n"
            "algbw = size / time, busbw = algbw x bus factor)\n\n",
            static_cast<long long>(cfg_.iterations), static_cast<long long>(cfg_.warmup));
    appendf(o, "%-15s %-17s %-7s %7s %10s %12s %10s %10s\n", "op", "algorithm", "proto", "ranks", "size", "time (us)",
            "algbw GB/s", "busbw GB/s");
    // One block per test: its rows, then its notes (auto's choice per size, fallbacks), each
    // note once, on the size it first applies to. The algorithm column shows the one that ran,
    // and "(auto)" where the test left the choice to auto.
    for (size_t i = 0; i < results_.size(); ++i) {
      const auto& r = results_[i];
      std::string alg(algorithm_name(r.algorithm));
      if (r.requested == Algorithm::kAuto) alg += " (auto)";
      appendf(o, "%-15s %-17s %-7s %7u %10s %12.2f %10.2f %10.2f\n", std::string(op_name(r.op)).c_str(), alg.c_str(),
              std::string(protocol_name(r.protocol)).c_str(), r.ranks, sim::format_bytes(r.size_bytes).c_str(),
              r.time_s * 1e6, r.algbw_GBps, r.busbw_GBps);
      if (i + 1 < results_.size() && results_[i + 1].test == r.test) continue;
      std::set<std::string> seen;
      for (size_t k = 0; k <= i; ++k) {
        const auto& x = results_[k];
        if (x.test != r.test || x.note.empty() || !seen.insert(x.note).second) continue;
        appendf(o, "  %10s: %s\n", sim::format_bytes(x.size_bytes).c_str(), x.note.c_str());
      }
      if (i + 1 < results_.size()) o += "\n";
    }
    return o;
  }

  void to_json(nlohmann::ordered_json& j) const override {
    nlohmann::ordered_json arr = nlohmann::ordered_json::array();
    for (const auto& r : results_) {
      nlohmann::ordered_json e;
      e["op"] = std::string(op_name(r.op));
      e["algorithm"] = std::string(algorithm_name(r.algorithm));
      e["requested_algorithm"] = std::string(algorithm_name(r.requested));
      e["protocol"] = std::string(protocol_name(r.protocol));
      e["ranks"] = r.ranks;
      e["size_bytes"] = static_cast<int64_t>(r.size_bytes);
      e["time_s"] = r.time_s;
      e["algbw_GBps"] = r.algbw_GBps;
      e["busbw_GBps"] = r.busbw_GBps;
      if (!r.note.empty()) e["note"] = r.note;
      arr.push_back(e);
    }
    j["collectives"] = arr;
  }

  std::string fingerprint() const override {
    std::string out = "collectives=";
    for (size_t i = 0; i < results_.size(); ++i) {
      const auto& r = results_[i];
      if (i) out += ",";
      out += std::string(op_name(r.op)) + "/" + std::string(algorithm_name(r.algorithm)) + "/" +
             std::string(protocol_name(r.protocol)) + "/" +
             std::to_string(r.ranks) + "/" + std::to_string(static_cast<int64_t>(r.size_bytes)) + ":" +
             std::to_string(to_ns(r.time_s));
    }
    return out;
  }

 private:
  const CollectiveBenchConfig& cfg_;
  std::vector<CollectiveResult> results_;
  std::string problem_;
};

class CollectivesJob : public Job {
 public:
  explicit CollectivesJob(CollectiveBenchConfig cfg) : cfg_(std::move(cfg)) {}
  void start(topo::ClusterResources& res, const JobContext&) override {
    bench_ = std::make_unique<CollectiveBenchmark>(res, cfg_);
    bench_->start();
  }
  std::unique_ptr<JobResult> finish(const sim::RunResult& run) override {
    SIM_ASSERT(bench_ != nullptr, "Job::finish() before start()");
    auto results = bench_->finish(run);
    return std::make_unique<CollectivesResult>(cfg_, std::move(results), bench_->problem());
  }

 private:
  CollectiveBenchConfig cfg_;
  std::unique_ptr<CollectiveBenchmark> bench_;
};

}  // namespace

std::unique_ptr<Job> bind_collectives_job(const sim::ConfigNode& w, const BindContext& ctx) {
  ctx.refuse_failures("collectives");
  return std::make_unique<CollectivesJob>(
      bind_collective_benchmark(w, ctx.topology, cluster_shape_of(ctx.topology, ctx.cluster.profile)));
}

}  // namespace wl
