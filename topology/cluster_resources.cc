#include "topology/cluster_resources.h"

#include <algorithm>
#include <string>

#include "sim/log.h"
#include "sim/error.h"

namespace topo {

namespace {
double efficiency_of(LinkKind kind, const HardwareProfile& o) {
  switch (kind) {
    case LinkKind::kScaleUp: return o.scale_up_efficiency;
    case LinkKind::kNic: return o.nic_efficiency;
    case LinkKind::kFabric: return o.fabric_efficiency;
    case LinkKind::kTorus: return o.torus_efficiency;
    case LinkKind::kCustom: return 1.0;
  }
  return 1.0;
}
}  // namespace

double link_capacity(const Link& l, const HardwareProfile& profile) {
  return l.bandwidth_Bps * efficiency_of(l.kind, profile);
}

double ClusterResources::link_capacity(uint32_t link) const { return ::topo::link_capacity(topo_.links()[link], opt_); }

ClusterResources::ClusterResources(sim::Simulation& sim, const Topology& topo, const GpuSpec& gpu,
                                   const HardwareProfile& opt, std::vector<uint8_t> modelled)
    : sim_(sim), topo_(topo), gpu_(gpu), opt_(opt) {
  auto& fluid = sim_.fluid();
  const auto& links = topo_.links();
  const uint32_t n = topo_.num_gpus();
  SIM_ASSERT(modelled.empty() || modelled.size() == n, "ClusterResources: one modelled flag per GPU");
  uint32_t m = n;
  if (!modelled.empty()) {
    m = 0;
    for (uint8_t f : modelled) m += f != 0;
    if (m == n) modelled.clear();  // all of them: the plain layout
  }
  num_modelled_ = m;
  // Per GPU, its place: the modelled GPUs first (in GPU order), then the others.
  gpus_.resize(n);
  if (modelled.empty()) {
    for (uint32_t g = 0; g < n; ++g) gpus_[g].place = g;
  } else {
    gpu_at_.resize(n);
    uint32_t first = 0, rest = m;
    for (uint32_t g = 0; g < n; ++g) {
      gpus_[g].place = modelled[g] ? first++ : rest++;
      gpu_at_[gpus_[g].place] = g;
    }
    // A link is left out when it has a GPU the run does not model at an end.
    link_constraint_.assign(links.size(), kNoConstraint);
    for (uint32_t i = 0; i < links.size(); ++i) {
      const Link& l = links[i];
      const bool out = (l.src < n && !modelled[l.src]) || (l.dst < n && !modelled[l.dst]);
      if (!out) constraint_link_.push_back(i);
    }
  }
  const uint32_t kept = num_link_constraints();
  fluid.reserve_constraints(kept + 2 * static_cast<size_t>(m));
  first_constraint_ = static_cast<uint32_t>(fluid.num_constraints());
  for (uint32_t k = 0; k < kept; ++k) {
    const uint32_t i = constraint_link_.empty() ? k : constraint_link_[k];
    auto c = fluid.add_constraint(::topo::link_capacity(links[i], opt_));
    if (!link_constraint_.empty()) link_constraint_[i] = c.value;
    SIM_ASSERT(c == link(i), "link constraints must be consecutive");
    if (opt_.watch_links) fluid.watch(c);
  }
  gpu_base_ = static_cast<uint32_t>(fluid.num_constraints());
  for (uint32_t p = 0; p < m; ++p) {
    fluid.add_constraint(1.0);  // SM pool
    fluid.add_constraint(1.0);  // HBM
  }
  // Links, then each modelled GPU's SM pool and HBM, in one block of ids, named on demand.
  fluid.add_namer(sim::ConstraintId(first_constraint_), kept + 2 * m, this);
  capacity_stale_.assign((n + 63) / 64, 0);
  gpu_failed_.assign(n, 0);
  if (sim::Log* log = sim_.log()) {
    log->at(sim::Layer::kTopology)
        .info("resources: {} x {}, {} vertices, {} directed links, {} sharing constraints", n, gpu_.name,
              topo_.num_vertices(), links.size(), kept + 2 * static_cast<size_t>(m));
    if (m < n)
      log->at(sim::Layer::kTopology)
          .info("resources: {} of {} GPUs modelled individually; {} links of the others left out", m, n,
                links.size() - kept);
  }
}

ClusterResources::~ClusterResources() { sim_.fluid().remove_namer(this); }

bool ClusterResources::order_gpus(std::span<const uint32_t> order) {
  const uint32_t n = topo_.num_gpus();
  SIM_ASSERT(order.size() == n, "order_gpus: the order must list every GPU once");
  std::vector<uint32_t> place(n, UINT32_MAX);
  for (uint32_t i = 0; i < n; ++i) {
    SIM_ASSERT(order[i] < n && place[order[i]] == UINT32_MAX, "order_gpus: the order must list every GPU once");
    place[order[i]] = i;
  }
  for (uint32_t i = 0; i < num_modelled_; ++i)
    if (!modelled(order[i])) return false;  // a GPU without SM pool and HBM in a modelled GPU's place
  // Untouched: every GPU's SM pool and HBM at capacity 1 with no user, so places can be swapped.
  if (sim_.fluid().num_active() > 0 || failed_gpus_ > 0 || !gpu_speed_.empty()) return false;
  for (const GpuState& g : gpus_)
    if (g.comm_active != 0) return false;
  for (uint64_t w : capacity_stale_)
    if (w != 0) return false;
  bool identity = true;
  for (uint32_t i = 0; i < n && identity; ++i) identity = order[i] == i;
  for (uint32_t g = 0; g < n; ++g) gpus_[g].place = place[g];
  if (identity) {
    gpu_at_.clear();
  } else {
    gpu_at_.assign(order.begin(), order.end());
  }
  return true;
}

std::string ClusterResources::constraint_name(sim::ConstraintId c) const {
  const uint32_t i = c.value - first_constraint_;
  const auto& links = topo_.links();
  const uint32_t kept = num_link_constraints();
  if (i < kept) {
    const Link& l = links[constraint_link_.empty() ? i : constraint_link_[i]];
    return topo_.vertex_name(l.src) + "->" + topo_.vertex_name(l.dst);
  }
  const auto at = static_cast<uint32_t>((i - kept) / 2);
  const uint32_t g = gpu_at_.empty() ? at : gpu_at_[at];
  return "gpu" + std::to_string(g) + ((i - kept) % 2 == 0 ? " SMs" : " HBM");
}

double ClusterResources::roofline_seconds(double flops, double peak_flops, double bytes, double hbm_Bps) {
  double tc = peak_flops > 0 ? flops / peak_flops : 0.0;
  double tm = hbm_Bps > 0 ? bytes / hbm_Bps : 0.0;
  return std::max(tc, tm);
}

sim::ActivityId ClusterResources::start_kernel(uint32_t gpu, double flops, double peak_flops, double bytes,
                                               double hbm_efficiency, sim::ActivityOwner* owner, uint64_t tag) {
  SIM_ASSERT(modelled(gpu), "kernel on an unknown GPU or one the run does not model");
  double tc = peak_flops > 0 ? flops / peak_flops : 0.0;
  double tm = bytes / (gpu_.hbm_bandwidth_Bps * hbm_efficiency);
  double t0 = std::max(tc, tm);
  if (t0 <= 0.0) return sim_.fluid().start(0.0, {}, sim::kUnbounded, owner, tag);
  if (stale(place(gpu))) apply_gpu_capacity(gpu);
  sim::Use uses[2] = {{sm_pool(gpu), tc / t0}, {hbm(gpu), tm / t0}};
  return sim_.fluid().start(t0, uses, 1.0, owner, tag);
}

sim::ActivityId ClusterResources::start_timed_kernel(uint32_t gpu, double seconds, double sm_load, double hbm_load,
                                                     sim::ActivityOwner* owner, uint64_t tag, uint32_t slot) {
  SIM_ASSERT(modelled(gpu), "kernel on an unknown GPU or one the run does not model");
  if (seconds <= 0.0) return sim_.fluid().start(0.0, {}, sim::kUnbounded, owner, tag, slot);
  if (stale(place(gpu))) apply_gpu_capacity(gpu);
  sim::Use uses[2] = {{sm_pool(gpu), sm_load}, {hbm(gpu), hbm_load}};
  return sim_.fluid().start(seconds, uses, 1.0, owner, tag, slot);
}

void ClusterResources::enable_link_counters(std::span<const uint32_t> gpus) {
  auto& bus = sim_.observers();
  if (!bus.active() || gpus.empty()) return;
  std::vector<uint8_t> traced(topo_.num_gpus(), 0);
  for (uint32_t g : gpus)
    if (g < traced.size()) traced[g] = 1;
  const auto& links = topo_.links();
  link_counters_.resize(links.size());
  auto is_traced = [&](uint32_t v) { return v < traced.size() && traced[v]; };
  for (size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    if ((!is_traced(l.src) && !is_traced(l.dst)) || !has_link(static_cast<uint32_t>(i))) continue;
    link_counters_[i].process = is_traced(l.src) ? l.src : l.dst;
    link_counters_[i].name = bus.names().intern("util " + topo_.vertex_name(l.src) + "->" + topo_.vertex_name(l.dst));
    sim_.fluid().watch(link(static_cast<uint32_t>(i)));
  }
  sim_.fluid().set_watcher(this);
}

void ClusterResources::on_load_change(sim::ConstraintId c, sim::Time now, double load, double capacity) {
  // Link constraints were created consecutively, so a link's index is its offset from the first
  // (or, with GPUs left out, found from it).
  if (c.value < first_constraint_ || c.value - first_constraint_ >= num_link_constraints()) return;
  uint32_t i = c.value - first_constraint_;
  if (!constraint_link_.empty()) i = constraint_link_[i];
  if (i >= link_counters_.size() || link_counters_[i].name == sim::kNoName) return;
  sim::CounterRecord r;
  r.process = link_counters_[i].process;
  r.name = link_counters_[i].name;
  r.time = now;
  r.value = capacity > 0 ? load / capacity : 0.0;
  sim_.observers().counter(r);
}

void ClusterResources::fail_gpu(uint32_t gpu) {
  SIM_ASSERT(modelled(gpu), "fail_gpu on an unknown GPU or one the run does not model");
  auto& fluid = sim_.fluid();
  const auto& links = topo_.links();
  for (size_t i = 0; i < links.size(); ++i)
    if ((links[i].src == gpu || links[i].dst == gpu) && has_link(static_cast<uint32_t>(i)))
      fluid.set_up(link(static_cast<uint32_t>(i)), false, sim::DownPolicy::kStall);
  if (!gpu_failed_[gpu]) ++failed_gpus_;
  gpu_failed_[gpu] = 1;
  fluid.set_up(sm_pool(gpu), false, sim::DownPolicy::kFail);
  fluid.set_up(hbm(gpu), false, sim::DownPolicy::kFail);
}


void ClusterResources::fail_link(uint32_t link) {
  SIM_ASSERT(link < topo_.links().size(), "fail_link on an unknown link");
  sim_.fluid().set_up(this->link(link), false, sim::DownPolicy::kStall);
}

void ClusterResources::set_link_speed(uint32_t link, double speed) {
  SIM_ASSERT(link < topo_.links().size() && speed > 0, "set_link_speed: unknown link or speed <= 0");
  const Link& l = topo_.links()[link];
  sim_.fluid().set_capacity(this->link(link), ::topo::link_capacity(l, opt_) * speed);
}

void ClusterResources::set_gpu_speed(uint32_t gpu, double speed) {
  SIM_ASSERT(modelled(gpu) && speed > 0, "set_gpu_speed: unknown GPU, one the run does not model, or speed <= 0");
  if (gpu_speed_.empty()) gpu_speed_.assign(topo_.num_gpus(), 1.0);
  gpu_speed_[gpu] = speed;
  apply_gpu_capacity(gpu);
}

// SM and HBM capacity: the GPU's speed, less what a running communication kernel holds.
void ClusterResources::apply_gpu_capacity(uint32_t gpu) {
  const double speed = gpu_speed_.empty() ? 1.0 : gpu_speed_[gpu];
  double sm_cap = speed, hbm_cap = speed;
  const uint32_t p = place(gpu);
  const uint32_t active = gpus_[gpu].comm_active;
  capacity_stale_[p >> 6] &= ~(uint64_t{1} << (p & 63));
  if (active > 0 && opt_.comm_sms > 0 && gpu_.sm_count > 0) {
    if ((active & kSmKernelMask) != 0) sm_cap *= 1.0 - std::min(1.0, static_cast<double>(opt_.comm_sms) / gpu_.sm_count);
    hbm_cap *= 1.0 - opt_.comm_hbm_fraction;
  }
  sim_.fluid().set_capacity(sm_pool(gpu), sm_cap);
  sim_.fluid().set_capacity(hbm(gpu), hbm_cap);
}

namespace {
// What a GPU's communication count means for its capacities: any communication (HBM share), and
// communication kernels on SMs (SM share).
uint32_t comm_state(uint32_t count) { return (count != 0 ? 1u : 0u) | ((count & 0xFFFFu) != 0 ? 2u : 0u); }
}  // namespace

void ClusterResources::comm_changed(uint32_t gpu) {
  if (opt_.comm_sms == 0 || gpu_.sm_count == 0) return;
  SIM_ASSERT(place(gpu) < num_modelled_, "communication on a GPU the run does not model");
  auto& fluid = sim_.fluid();
  if (fluid.in_use(sm_pool(gpu)) || fluid.in_use(hbm(gpu))) {
    apply_gpu_capacity(gpu);
  } else {
    const uint32_t p = place(gpu);
    capacity_stale_[p >> 6] |= uint64_t{1} << (p & 63);
  }
}

void ClusterResources::comm_begin(uint32_t gpu, bool holds_sms) {
  uint32_t& active = gpus_[gpu].comm_active;
  const uint32_t before = active;
  active += holds_sms ? 1u : kCopyEngineUnit;
  if (comm_state(before) != comm_state(active)) comm_changed(gpu);
}

void ClusterResources::comm_end(uint32_t gpu, bool holds_sms) {
  const uint32_t unit = holds_sms ? 1u : kCopyEngineUnit;
  uint32_t& active = gpus_[gpu].comm_active;
  SIM_ASSERT((active & (holds_sms ? kSmKernelMask : ~kSmKernelMask)) >= unit, "comm_end without comm_begin");
  const uint32_t before = active;
  active -= unit;
  if (comm_state(before) != comm_state(active)) comm_changed(gpu);
}

}  // namespace topo
