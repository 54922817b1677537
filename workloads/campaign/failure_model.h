// workloads/campaign/failure_model.h: random failure processes of a training job's nodes, the
// built-in failure profiles, and the portable samplers the campaign simulator draws them with.
//
// A failure process is one component's failures (faulty GPU, HBM, a network switch, a software
// bug): events per node at a rate given per 1,000 node-days (or as an MTBF per node), exponential
// (a Poisson process per node) or Weibull (a renewal process per node: every node keeps its own
// clock, restarted when the node is replaced; Weibull scale = mean / Gamma(1 + 1/k) so that the
// mean time between a node's failures is 1 / rate, whatever the shape k). One event takes `nodes`
// nodes (a correlated failure: a leaf switch, a rack, a power feed; the aligned group of `nodes`
// job positions holding the struck node), needs them replaced (hardware: they go to repair) or
// only a restart of the job's processes (software, a hung collective), and shows either as a
// crash (detected quickly) or as a hang (seen only when the NCCL watchdog times out), or is a
// planned interruption (maintenance announced ahead: checkpoint on demand, nothing lost).
//
// Profiles (per-node rates, so they scale with the job):
//   llama3-405b: Table 5 of "The Llama 3 Herd of Models" (arXiv 2407.21783, §3.3.4): the root
//     causes of the 419 unexpected interruptions of a 54-day snapshot of Llama 3 405B pre-training
//     on up to 16,384 H100 GPUs (2,048 nodes of 8); rate of a row = count / (54 d x 2,048 nodes).
//     The table's printed percentage of the first row does not equal 148 / 419; the counts are
//     used. The 47 planned interruptions of the same snapshot (firmware upgrades, configuration
//     or dataset updates) are a process of their own, only with `planned: true`.
//   kokolis-rsc1, kokolis-rsc2: Kokolis et al., "Revisiting Reliability in Large-Scale Machine
//     Learning Research Clusters" (arXiv 2410.21680, HPCA 2025): the failure rates r_f of Meta's
//     two A100 research clusters over 11 months, 6.50 (RSC-1, 16k GPUs) and 2.34 (RSC-2, 8k
//     GPUs) failures per 1,000 node-days. The paper's job MTTF is 1 / (nodes x r_f), from which it
//     projects 1.8 h for 16,384 GPUs (2,048 nodes: 1,000 / (6.50 x 2,048) days = 1.80 h) and
//     0.23 h for 131,072 (16,384 nodes: 0.225 h) at RSC-1's rate. Its measured MTTFs of Figure 7
//     (47.7 days for 8-GPU jobs, 7.9 h for 1,024-GPU jobs) are shorter than these rates give (RSC-1:
//     154 days, 28.8 h); the profiles follow the rates. One process, hardware, crash; category
//     unknown (the paper's attribution of failures to causes is not broken down here).
//
// Samplers: the distributions of <random> are implementation-defined, so every draw here is made
// from the raw 64-bit output of std::mt19937_64 (fully specified by the C++ standard): a uniform
// u = (x >> 11) x 2^-53 in [0, 1), then the inverse CDF. Results are therefore the same bytes on
// every platform whose libm gives the same log/pow (IEEE-754 doubles; glibc's are correctly
// rounded in practice).
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace wl {

// What broke. The Llama 3 table's categories, plus HBM, software and planned for other profiles.
enum class FailureCategory : uint8_t {
  kGpu,
  kHbm,
  kNetwork,
  kHost,
  kSoftware,
  kDependency,
  kMaintenance,
  kPlanned,
  kUnknown,
};
inline constexpr size_t kNumFailureCategories = 9;
// "gpu", "hbm", "network", "host", "software", "dependency", "maintenance", "planned", "unknown".
std::string_view failure_category_name(FailureCategory c);
std::optional<FailureCategory> parse_failure_category(std::string_view name);
const std::array<std::string_view, kNumFailureCategories>& failure_category_names();

enum class FailureDistribution : uint8_t { kExponential, kWeibull };

// How the job learns of the failure: a crash (a process dies, the launcher sees it after
// `detection.crash`), a hang (a collective never completes; the NCCL watchdog aborts after
// `detection.watchdog`), or planned (announced: no detection, a checkpoint is taken first).
enum class Manifestation : uint8_t { kCrash, kHang, kPlanned };

struct FailureProcess {
  std::string name;
  FailureCategory category = FailureCategory::kUnknown;
  double rate_per_node_s = 0;  // events per node per second of wall time (1 / MTBF per node)
  FailureDistribution distribution = FailureDistribution::kExponential;
  double weibull_shape = 1;  // k (> 0); only for Weibull
  int64_t nodes = 1;         // nodes one event takes (aligned group of job positions)
  bool replace = true;       // the nodes go to repair (hardware); false: the job restarts only
  Manifestation manifests = Manifestation::kCrash;
};

struct FailureModel {
  std::string profile;  // the built-in profile it started from ("" for explicit processes)
  std::vector<FailureProcess> processes;
};

inline constexpr double kSecondsPerDay = 86400.0;
// Rate per node per second from a count per 1,000 node-days.
constexpr double rate_from_per_1000_node_days(double per_1000) { return per_1000 / (1000.0 * kSecondsPerDay); }
constexpr double per_1000_node_days(double rate_per_node_s) { return rate_per_node_s * 1000.0 * kSecondsPerDay; }

// The built-in profiles by name ("llama3-405b", "kokolis-rsc1", "kokolis-rsc2"); nullopt when
// unknown.
// `planned` adds the profile's planned interruptions where it has them (llama3-405b: 47).
std::optional<FailureModel> failure_profile(std::string_view name, bool planned);
std::vector<std::string> failure_profile_names();

// Events per second of the whole job of `nodes` nodes (the sum of the processes' rates x nodes);
// planned processes are counted only when include_planned.
double job_failure_rate(const FailureModel& model, int64_t nodes, bool include_planned);

// --- portable samplers --------------------------------------------------------------------------

// Uniform in [0, 1) with 53 random bits.
inline double uniform01(std::mt19937_64& g) { return static_cast<double>(g() >> 11) * 0x1.0p-53; }
// Exponential with mean 1: -log(1 - u), finite since 1 - u >= 2^-53.
inline double exponential1(std::mt19937_64& g) { return -std::log1p(-uniform01(g)); }
// Weibull(shape k, scale) by the inverse CDF: scale x (-log(1 - u))^(1/k).
inline double weibull(std::mt19937_64& g, double shape, double scale) {
  return scale * std::pow(exponential1(g), 1.0 / shape);
}
// The Weibull scale whose mean is `mean`: mean / Gamma(1 + 1/k).
inline double weibull_scale_for_mean(double mean, double shape) { return mean / std::tgamma(1.0 + 1.0 / shape); }

}  // namespace wl
