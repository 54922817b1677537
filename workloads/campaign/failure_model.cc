#include "workloads/campaign/failure_model.h"

namespace wl {

namespace {

constexpr std::array<std::string_view, kNumFailureCategories> kCategoryNames = {
    "gpu", "hbm", "network", "host", "software", "dependency", "maintenance", "planned", "unknown"};

// Table 5 of arXiv 2407.21783 (§3.3.4): root causes of the 419 unexpected interruptions during a
// 54-day snapshot of Llama 3 405B pre-training on up to 16,384 H100 GPUs (2,048 nodes).
struct LlamaRow {
  const char* name;
  FailureCategory category;
  int count;
  bool replace;  // hardware: the node leaves the job for repair
  Manifestation manifests;
};
constexpr LlamaRow kLlama3Rows[] = {
    {"Faulty GPU", FailureCategory::kGpu, 148, true, Manifestation::kCrash},
    {"GPU HBM3 Memory", FailureCategory::kGpu, 72, true, Manifestation::kCrash},
    {"Software Bug", FailureCategory::kDependency, 54, false, Manifestation::kCrash},
    {"Network Switch/Cable", FailureCategory::kNetwork, 35, true, Manifestation::kCrash},
    {"Host Maintenance", FailureCategory::kMaintenance, 32, true, Manifestation::kCrash},
    {"GPU SRAM Memory", FailureCategory::kGpu, 19, true, Manifestation::kCrash},
    {"GPU System Processor", FailureCategory::kGpu, 17, true, Manifestation::kCrash},
    {"NIC", FailureCategory::kHost, 7, true, Manifestation::kCrash},
    {"NCCL Watchdog Timeouts", FailureCategory::kUnknown, 7, false, Manifestation::kHang},
    // Silent data corruption is found by checks, not by a crash; it is modelled as one, detected
    // after `detection.crash` (an optimistic choice).
    {"Silent Data Corruption", FailureCategory::kGpu, 6, true, Manifestation::kCrash},
    {"GPU Thermal Interface + Sensor", FailureCategory::kGpu, 6, true, Manifestation::kCrash},
    {"SSD", FailureCategory::kHost, 3, true, Manifestation::kCrash},
    {"Power Supply", FailureCategory::kHost, 3, true, Manifestation::kCrash},
    {"Server Chassis", FailureCategory::kHost, 2, true, Manifestation::kCrash},
    {"IO Expansion Board", FailureCategory::kHost, 2, true, Manifestation::kCrash},
    {"Dependency", FailureCategory::kDependency, 2, false, Manifestation::kCrash},
    {"CPU", FailureCategory::kHost, 2, true, Manifestation::kCrash},
    {"System Memory", FailureCategory::kHost, 2, true, Manifestation::kCrash},
};
constexpr double kLlama3Days = 54;
constexpr double kLlama3Nodes = 2048;  // 16,384 H100 / 8 per node
constexpr int kLlama3Planned = 47;

double llama3_rate(int count) { return count / (kLlama3Days * kSecondsPerDay * kLlama3Nodes); }

// Failure rates r_f of arXiv 2410.21680 (Kokolis et al.), failures per 1,000 node-days: RSC-1
// (16k A100 GPUs) and RSC-2 (8k A100 GPUs), 11 months of both clusters.
constexpr double kKokolisRsc1 = 6.50;
constexpr double kKokolisRsc2 = 2.34;

}  // namespace

std::string_view failure_category_name(FailureCategory c) { return kCategoryNames[static_cast<size_t>(c)]; }

std::optional<FailureCategory> parse_failure_category(std::string_view name) {
  for (size_t i = 0; i < kCategoryNames.size(); ++i)
    if (kCategoryNames[i] == name) return static_cast<FailureCategory>(i);
  return std::nullopt;
}

const std::array<std::string_view, kNumFailureCategories>& failure_category_names() { return kCategoryNames; }

std::optional<FailureModel> failure_profile(std::string_view name, bool planned) {
  FailureModel m;
  m.profile = std::string(name);
  if (name == "llama3-405b") {
    for (const LlamaRow& r : kLlama3Rows) {
      FailureProcess p;
      p.name = r.name;
      p.category = r.category;
      p.rate_per_node_s = llama3_rate(r.count);
      p.replace = r.replace;
      p.manifests = r.manifests;
      m.processes.push_back(p);
    }
    if (planned) {
      FailureProcess p;
      p.name = "Planned Maintenance";
      p.category = FailureCategory::kPlanned;
      p.rate_per_node_s = llama3_rate(kLlama3Planned);
      p.replace = false;
      p.manifests = Manifestation::kPlanned;
      m.processes.push_back(p);
    }
    return m;
  }
  if (name == "kokolis-rsc1" || name == "kokolis-rsc2") {
    FailureProcess p;
    p.name = "Any failure";
    p.category = FailureCategory::kUnknown;
    p.rate_per_node_s = rate_from_per_1000_node_days(name == "kokolis-rsc1" ? kKokolisRsc1 : kKokolisRsc2);
    p.replace = true;
    p.manifests = Manifestation::kCrash;
    m.processes.push_back(p);
    return m;
  }
  return std::nullopt;
}

std::vector<std::string> failure_profile_names() { return {"llama3-405b", "kokolis-rsc1", "kokolis-rsc2"}; }

double job_failure_rate(const FailureModel& model, int64_t nodes, bool include_planned) {
  double r = 0;
  for (const FailureProcess& p : model.processes)
    if (include_planned || p.manifests != Manifestation::kPlanned) r += p.rate_per_node_s;
  return r * static_cast<double>(nodes);
}

}  // namespace wl
