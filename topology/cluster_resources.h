// topology/cluster_resources.h: a Topology and its accelerators turned into engine constraints.
//
// Every directed Link becomes one fluid constraint (link i is the i-th of a consecutive block)
// whose capacity is the link bandwidth times the efficiency of its kind in the hardware profile
// (topology/hardware_profile.h, where the defaults cite their sources).
//
// Every accelerator gets two constraints, normalised to capacity 1.0: its SM pool (fraction of
// peak FLOP/s) and its HBM channel (fraction of peak bytes/s). A kernel of F FLOPs and B bytes is
// one activity of work t0 = max(F/P, B/BW) seconds, rate bound 1 (full speed), loading the SM pool
// with (F/P)/t0 and HBM with (B/BW)/t0: alone it runs at the roofline; two kernels side by side
// split the SMs; while a communication kernel holds SMs (NCCL CTAs do not share an SM with compute,
// nccl#689) the SM pool shrinks by comm_sms/sm_count and compute slows accordingly.
//
// A run may model only some GPUs individually (`modelled`): symmetric mode simulates one
// data-parallel replica and stands its copies' traffic on the fabric's shared links
// (wl::ExecutorOptions::symmetric_dp), so the other GPUs' SM pools, HBM and private links (scale-up
// and NIC: every link with such a GPU at an end) are never used and get no constraint. At 131,072
// GPUs that leaves about 17k of 803k constraints, and their records are never allocated.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/fluid.h"
#include "sim/observer.h"
#include "sim/simulation.h"
#include "topology/catalog.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"

namespace topo {

// A link's nominal capacity: its bandwidth times its kind's efficiency in the profile (bytes/s).
double link_capacity(const Link& link, const HardwareProfile& profile);

class ClusterResources : public sim::ConstraintWatcher, public sim::ConstraintNamer {
 public:
  // `modelled`: per GPU, 1 for a GPU the run models individually; empty: every GPU (see the top).
  ClusterResources(sim::Simulation& sim, const Topology& topo, const GpuSpec& gpu, const HardwareProfile& profile,
                   std::vector<uint8_t> modelled = {});
  ~ClusterResources() override;
  ClusterResources(const ClusterResources&) = delete;
  ClusterResources& operator=(const ClusterResources&) = delete;
  // "leaf3->spine0" for a link, "gpu12 SMs" / "gpu12 HBM" for a GPU's pools (made when asked).
  std::string constraint_name(sim::ConstraintId c) const override;

  const Topology& topology() const { return topo_; }
  const GpuSpec& gpu_spec() const { return gpu_; }
  const HardwareProfile& profile() const { return opt_; }
  sim::Simulation& simulation() { return sim_; }

  // Whether the run models this GPU individually (every GPU unless `modelled` was given), and
  // whether it models them all.
  bool modelled(uint32_t gpu) const { return gpu < topo_.num_gpus() && place(gpu) < num_modelled_; }
  bool models_every_gpu() const { return num_modelled_ == topo_.num_gpus(); }
  // With every GPU modelled, link i is constraint first_constraint_ + i (computed, not looked up:
  // a table would be one more cache miss per link of a transfer's route at 16k GPUs and more);
  // otherwise a table gives the kept links' constraints (a link left out gives an id no constraint
  // has, which FluidModel::start refuses as an internal error). A GPU's SM pool and HBM are
  // constraints gpu_base_ + 2 p and + 1, p its place in the GPU order (order_gpus; the GPU's index
  // until then; the modelled GPUs' places come first).
  sim::ConstraintId link(uint32_t link_index) const {
    return sim::ConstraintId(link_constraint_.empty() ? first_constraint_ + link_index : link_constraint_[link_index]);
  }
  // Topology::node_link_stride in constraint ids: how far apart the constraints of a route inside
  // node k and of the same route inside node 0 are, when every link is modelled (0 otherwise).
  uint32_t node_constraint_stride() const { return link_constraint_.empty() ? topo_.node_link_stride() : 0; }
  bool has_link(uint32_t link_index) const {
    return link_constraint_.empty() || link_constraint_[link_index] != kNoConstraint;
  }
  sim::ConstraintId sm_pool(uint32_t gpu) const { return sim::ConstraintId(gpu_base_ + 2 * place(gpu)); }
  sim::ConstraintId hbm(uint32_t gpu) const { return sim::ConstraintId(gpu_base_ + 2 * place(gpu) + 1); }
  // Lays the GPUs' SM pool and HBM records (and stale-capacity bits) out in `order`, a permutation of
  // the GPUs: GPU order[i]'s come i-th (the modelled GPUs must come first; returns false
  // otherwise). A workload whose events visit GPUs in a known order (the executor: one pipeline
  // stage of every data-parallel replica at a time) passes it, so that its
  // walk over these records is sequential in memory, which the hardware prefetcher follows.
  // Changes no result. Only while the GPUs are untouched (no activity running, no communication,
  // straggler or failure set): returns false and changes nothing otherwise.
  bool order_gpus(std::span<const uint32_t> order);
  // A hint: what comm_begin/comm_end on `gpu` touch (its place and communication count; its SM
  // pool and HBM records only while a kernel runs on it, see comm_begin). A collective's members
  // are far apart at 16k GPUs and more, so asking for all of them before touching any overlaps
  // their cache misses.
  void prefetch_gpu(uint32_t gpu) const {
    if (gpu < gpus_.size()) __builtin_prefetch(&gpus_[gpu], 1);
  }

  // A link's nominal capacity: its bandwidth times its kind's efficiency (bytes/s).
  double link_capacity(uint32_t link) const;
  // Starts a kernel on `gpu`: `flops` at peak rate `peak_flops` (already scaled by the op class
  // efficiency) and `bytes` of HBM traffic at `hbm_efficiency` of peak bandwidth.
  sim::ActivityId start_kernel(uint32_t gpu, double flops, double peak_flops, double bytes, double hbm_efficiency,
                               sim::ActivityOwner* owner, uint64_t tag);
  // Starts a kernel already reduced to its time alone on an idle GPU and its loads on the SM pool
  // and HBM (fractions in [0, 1]; the larger is normally 1: the roofline's binding side).
  // `slot`: the activity slot to run in (sim::FluidModel::reserve_slots), or any free one.
  sim::ActivityId start_timed_kernel(uint32_t gpu, double seconds, double sm_load, double hbm_load,
                                     sim::ActivityOwner* owner, uint64_t tag,
                                     uint32_t slot = sim::FluidModel::kAnySlot);
  // Roofline time of a kernel alone on an idle GPU.
  static double roofline_seconds(double flops, double peak_flops, double bytes, double hbm_Bps);

  // Link utilisation counters on the observer bus: every link (with a constraint) that starts or
  // ends at one of `gpus` reports load / capacity (0..1) whenever its load changes, as counter
  // "util <link>" on the process of that GPU (its rank in the trace). Call before the run.
  void enable_link_counters(std::span<const uint32_t> gpus);
  void on_load_change(sim::ConstraintId c, sim::Time now, double load, double capacity) override;

  // The accelerator dies: its SM pool and HBM go down and fail every kernel running on them
  // (their owners are told, sim::DownPolicy::kFail); its links go down and stall what crosses
  // them (a dead GPU's NVLink and NIC traffic hangs, as NCCL does). Nothing comes back up.
  void fail_gpu(uint32_t gpu);
  // Read at every kernel issue: a healthy cluster answers without touching the per-GPU table.
  bool gpu_failed(uint32_t gpu) const { return failed_gpus_ > 0 && gpu_failed_[gpu] != 0; }
  // A link (one direction of a cable) goes down: what crosses it stalls, as NCCL hangs on a dead
  // NIC, cable or switch port. Nothing comes back up.
  void fail_link(uint32_t link);
  // Stragglers: the GPU computes at `speed` times its SM and HBM rates (0 < speed; 1 restores it),
  // the link carries `speed` times its bandwidth.
  void set_gpu_speed(uint32_t gpu, double speed);
  void set_link_speed(uint32_t link, double speed);

  // Communication starts / stops on `gpu`; nested calls are counted. While any runs the GPU's HBM
  // loses the profile's comm_hbm_fraction; while communication kernels run on its SMs
  // (holds_sms, as NCCL's do) it also loses comm_sms SMs. Copies by the copy engines (holds_sms
  // false: PyTorch AsyncTP's peer-to-peer copies) hold no SM.
  // While no kernel runs on the GPU (sim::FluidModel::in_use), the new capacities are only noted
  // and set when its next kernel starts, which reads them first: they change nothing before, and
  // the SM pool and HBM records are not touched (405B step, 1,024 GPUs: 96% of the changes).
  void comm_begin(uint32_t gpu, bool holds_sms = true);
  void comm_end(uint32_t gpu, bool holds_sms = true);

 private:
  sim::Simulation& sim_;
  uint32_t first_constraint_ = 0;  // its first constraint (links, then SM pool and HBM per modelled GPU)
  const Topology& topo_;
  GpuSpec gpu_;
  HardwareProfile opt_;
  uint32_t gpu_base_ = 0;  // the first GPU's SM pool
  uint32_t num_modelled_ = 0;  // GPUs with an SM pool and HBM: the first places
  static constexpr uint32_t kNoConstraint = UINT32_MAX;
  // Only when some GPUs are not modelled: per link, its constraint (kNoConstraint: left out); and
  // per link constraint, in order from first_constraint_, its link.
  std::vector<uint32_t> link_constraint_;
  std::vector<uint32_t> constraint_link_;
  uint32_t num_link_constraints() const {
    return static_cast<uint32_t>(link_constraint_.empty() ? topo_.links().size() : constraint_link_.size());
  }
  // Per GPU, in GPU order: its place in the GPU order (order_gpus) and how much communication
  // runs on it (communication kernels on SMs in the low 16 bits, copy-engine copies above). One
  // record, so that comm_begin/comm_end read one line for a node's GPUs, not a place and then,
  // from it, a count (two misses in a row at 131k GPUs).
  struct GpuState {
    uint32_t place = 0;
    uint32_t comm_active = 0;
  };
  static constexpr uint32_t kSmKernelMask = 0xFFFFu, kCopyEngineUnit = 1u << 16;
  std::vector<GpuState> gpus_;
  std::vector<uint32_t> gpu_at_;  // the GPU at each place; empty: identity
  uint32_t place(uint32_t gpu) const { return gpus_[gpu].place; }
  // Per place, a bit: its SM pool's and HBM's capacities are not yet what apply_gpu_capacity would
  // set (a change while no kernel ran on it, see comm_begin).
  std::vector<uint64_t> capacity_stale_;
  bool stale(uint32_t p) const { return (capacity_stale_[p >> 6] >> (p & 63)) & 1u; }
  // The GPU's communication state changed: set its capacities now if a kernel runs on it, else
  // when one starts.
  void comm_changed(uint32_t gpu);
  std::vector<uint8_t> gpu_failed_;  // per GPU: fail_gpu() was called
  uint32_t failed_gpus_ = 0;         // how many have
  std::vector<double> gpu_speed_;    // per GPU once a straggler was set (empty: all at full speed)
  void apply_gpu_capacity(uint32_t gpu);
  // Per link: the trace process and counter name it reports to (kNoName: not watched).
  struct LinkCounter {
    uint32_t process = 0;
    uint32_t name = sim::kNoName;
  };
  std::vector<LinkCounter> link_counters_;
};

}  // namespace topo
