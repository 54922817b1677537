// workloads/calibration/calibrate.h: fits the hardware profile (topology/hardware_profile.h) to
// kernels and collectives measured on real GPUs (`clustersim calibrate`; the trace readers in
// traces/ turn profiler traces into the samples below).
//
// Kernels: each class follows the profile's own cost model, t = latency + ideal / efficiency, where
// `ideal` is the kernel's time at the full peak: a GEMM's FLOPs over the dense peak of its
// precision times its wave-quantization factor (gemm_wave_factor), an attention core's FLOPs over
// the peak, a memory-bound kernel's HBM bytes over the HBM bandwidth. Two parameters per class
// (efficiency, latency) are fitted by least squares on the relative error (weights 1 / t^2), so a
// 5 us kernel counts as much as a 5 ms one; the latency is what makes small kernels reach a lower
// fraction of peak ("efficiency against size"). A fitted efficiency above 1 is clamped to 1 and a
// negative latency refitted as 0, each with a note. Fused attention is fitted per direction
// (forward, backward) with the profile's sequence overhead in place of the latency,
// t = ideal / efficiency x (1 + overhead / keys): a kernel's fixed work per block of queries grows
// with batch x heads as its useful work does, so it is a share of the time that shrinks with the
// sequence length, not a fixed latency.
// Held out: the distinct shapes of a class are sorted by size and every `holdout_every`-th one
// (and every sample of a trace listed in `test_sources`) is left out of the fit; the report gives
// the median and 90th-percentile absolute relative error on the fitted and on the held-out
// samples, and the held-out error of the profile before calibration.
//
// Collectives: each distinct (op, size, ranks) is simulated on the given cluster; the link
// efficiency of the links the group crosses (scale_up_efficiency inside one node, nic_efficiency
// across nodes) and the runtime's step_overhead are fitted. The simulated time is linear in
// step_overhead and in 1 / efficiency (latency steps x overhead + bytes over a bandwidth
// proportional to the efficiency), so three simulations give each sample's sensitivity to both and
// a least-squares fit on relative error gives the pair; a fourth simulation with the fitted profile
// reports the errors.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "topology/catalog.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"
#include "workloads/collectives/collective.h"
#include "workloads/program/program.h"

namespace wl {

enum class MatmulPrecision : uint8_t { kFp32, kTf32, kBf16, kFp16, kFp8 };
std::string_view precision_name(MatmulPrecision p);
// The dense peak of precision p on gpu, FLOP/s (0 when the catalog entry has none).
double peak_flops(const topo::GpuSpec& gpu, MatmulPrecision p);

struct KernelSample {
  KernelClass cls = KernelClass::kGemm;  // kGemm, kAttention or kMemory
  MatmulPrecision precision = MatmulPrecision::kBf16;
  double flops = 0;           // kGemm, kAttention
  double rows = 0, cols = 0;  // kGemm: output shape per batch (wave quantization); 0 unknown
  double bytes = 0;           // kMemory: HBM bytes read and written
  // kMemory: elements of one of PyTorch's unvectorized elementwise kernels (generic or casting),
  // which run at the profile's unvectorized_elementwise_rate; 0 for every other kernel.
  double elements = 0;
  double seconds = 0;         // measured
  bool backward = false;      // kAttention: a backward kernel
  double keys = 0;            // kAttention: keys per sequence (0 unknown)
  std::string shape;          // "gemm fp32 256x512x1024": groups samples for the hold-out, labels them
  uint32_t source = 0;        // which trace it came from
};

struct CollectiveSample {
  CollectiveOp op = CollectiveOp::kAllReduce;
  double bytes = 0;    // as nccl-tests counts it
  uint32_t ranks = 0;  // the group's size
  std::vector<uint32_t> members;  // its GPUs (rank r on GPU r); empty: GPUs 0 .. ranks-1
  double seconds = 0;  // measured (the member that waited least)
};

struct ErrorStats {
  size_t n = 0;
  double median = 0, p90 = 0;  // of |predicted / measured - 1|
};

struct ClassFit {
  KernelClass cls = KernelClass::kGemm;
  bool backward = false;     // kAttention: the backward kernels' fit (attention_backward_*)
  // kMemory: the unvectorized elementwise kernels' fit; `efficiency` is then their rate in
  // elements per second (unvectorized_elementwise_rate) and `latency` the memory class's, kept.
  bool unvectorized = false;
  // kGemm: the FP8 GEMMs' fit (fp8_gemm_efficiency), through the GEMM class's latency, kept; the
  // GEMM class itself leaves them out.
  bool fp8 = false;
  bool fitted = false;       // false: too few samples, the profile keeps its value
  double efficiency = 0;     // fitted (or kept)
  sim::Time latency;         // fitted (or kept); kAttention: not fitted (its seq overhead is)
  double seq_overhead = 0;   // kAttention: fitted (or kept) attention[_backward]_seq_overhead
  size_t shapes = 0;         // distinct shapes
  ErrorStats fit, held_out, held_out_before;
  std::string note;
};

struct CollectiveFit {
  bool fitted = false;
  std::string efficiency_key;  // "scale_up_efficiency" or "nic_efficiency"
  double efficiency = 0;
  sim::Time step_overhead;
  size_t samples = 0;
  ErrorStats after, before;
  std::string note;
};

// The host's launch cost (HardwareProfile::host_overhead): where the host launches back to back,
// consecutive launches are one host_overhead apart; longer intervals are the host doing something
// else (waiting on a synchronisation, Python between ops, the data loader). The fit is the 10th
// percentile of the launch intervals (at least 20 of them), pooled over the traces.
// The gap between back-to-back kernels (HardwareProfile::kernel_gap): the median of the gaps
// between consecutive kernels of a stream whose second was already queued (at least 20).
struct HostFit {
  bool fitted = false;
  sim::Time host_overhead;
  size_t intervals = 0;
  double median_s = 0;  // of all intervals, for the report
  std::string note;
  bool gap_fitted = false;
  sim::Time kernel_gap;
  size_t gaps = 0;
  std::string gap_note;
};

struct CalibrationOptions {
  uint32_t holdout_every = 4;          // 0: hold no shape out
  std::vector<uint32_t> test_sources;  // traces used only to test the fit
};

struct Calibration {
  topo::HardwareProfile profile;  // the base profile with the fitted fields replaced
  std::vector<ClassFit> kernels;  // gemm, attention, memory
  CollectiveFit collectives;
  HostFit host;
};

// Fits the kernel classes; `base` is the profile the fit starts from (the cluster's).
Calibration calibrate_kernels(const std::vector<KernelSample>& samples, const topo::GpuSpec& gpu,
                              const topo::HardwareProfile& base, const CalibrationOptions& opt);

// Fits the collectives on `topo` (c.profile is updated): the NIC efficiency when a group spans
// nodes, else the scale-up one. Samples whose group does not fit the cluster are refused with a
// sim::UserError.
void calibrate_collectives(const std::vector<CollectiveSample>& samples, const topo::Topology& topo,
                           const topo::GpuSpec& gpu, Calibration& c);

// Fits host_overhead from launch intervals and kernel_gap from queued kernel gaps, in seconds
// (c.profile is updated with what was fitted).
void calibrate_host(std::vector<double> intervals, std::vector<double> gaps, Calibration& c);

// Simulated time of each sample on `topo` with `profile`, in order (one collective at a time).
std::vector<double> simulate_collectives(const std::vector<CollectiveSample>& samples, const topo::Topology& topo,
                                         const topo::GpuSpec& gpu, const topo::HardwareProfile& profile);

// The fitted keys as a profile file (`cluster.profile.file`), with the fit's errors as comments.
std::string profile_yaml(const Calibration& c, const std::string& header);

// The profile's predicted time of a sample (its cost model above).
double predict_seconds(const KernelSample& s, const topo::GpuSpec& gpu, const topo::HardwareProfile& p);

}  // namespace wl
