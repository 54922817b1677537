// topology/catalog.h: the hardware catalog: accelerators (GPUs and TPU chips), NICs and switches.
// Units: FLOP/s (dense, no 2:4 sparsity), bytes, bytes per second (B/s, decimal: 1 GB/s = 1e9 B/s),
// watts, sim::Time for latencies. Scale-up bandwidth is per accelerator, per direction.
// Invariants: the tables are constant; lookups return copies, so a caller may override any field
// (a scenario's `cluster.gpu` plus per-field overrides) without touching the catalog.
// A value of 0 means "not supported by the part" (e.g. FP8 on A100) or "not published"; the
// comment next to it says which. Every value cites its source next to it in catalog.cc.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/time.h"

namespace topo {

enum class AcceleratorKind : uint8_t { kGpu, kTpu };

struct GpuSpec {
  std::string name;
  AcceleratorKind kind = AcceleratorKind::kGpu;
  // Dense peak tensor throughput per precision, FLOP/s.
  double peak_bf16_flops = 0;
  double peak_fp16_flops = 0;
  double peak_fp8_flops = 0;   // 0: the part has no FP8 tensor path
  double peak_tf32_flops = 0;  // tensor-core TF32 (GPUs); 0 on TPUs
  double peak_fp32_flops = 0;  // plain FP32 (vector units, no tensor cores)
  // Device memory as the device offers it (nvidia-smi's total where checked), before the CUDA
  // context and NCCL's buffers (HardwareProfile::context_memory, nccl_memory) take their share.
  uint64_t hbm_capacity_bytes = 0;
  double hbm_bandwidth_Bps = 0;
  uint32_t sm_count = 0;  // GPUs: streaming multiprocessors; TPUs: TensorCores per chip
  // GPUs: the L2 cache; a kernel whose traffic fits in it is served from it rather than from HBM
  // (calibration fits the HBM efficiency on larger ones). 0: unknown.
  uint64_t l2_bytes = 0;
  // Scale-up fabric per accelerator per direction: NVLink for GPUs, sum over ICI links for TPUs.
  double scale_up_bandwidth_Bps = 0;
  // TPUs only: inter-chip interconnect links per chip and per-link per-direction bandwidth.
  uint32_t ici_links_per_chip = 0;
  double ici_link_bandwidth_Bps = 0;
  // TPUs only: the data-centre network (DCN) bandwidth per chip per direction, joining pods
  // (Cloud TPU Multislice); 0 where not published (a multi-pod torus must then give it).
  double dcn_bandwidth_Bps = 0;
  double power_W = 0;
  // Fraction of the dense tensor peak large GEMMs reach in training (before wave quantization):
  // the default of the hardware profile (topology/hardware_profile.h); each entry says where its
  // value comes from.
  double gemm_efficiency = 0.80;
  // FP8 GEMMs' fraction of the FP8 peak (0: gemm_efficiency); each entry says where it comes from.
  double fp8_gemm_efficiency = 0;
  // Fused attention (FlashAttention-style kernels): the hardware profile's defaults for the
  // forward's fraction of the tensor peak, the backward's (0: the forward's) and each direction's
  // sequence overhead in keys (topology/hardware_profile.h); each entry says where they come from.
  double attention_efficiency = 0.55;
  double attention_backward_efficiency = 0;
  double attention_seq_overhead = 0;
  double attention_backward_seq_overhead = 0;
  // Eager PyTorch's unvectorized elementwise kernels, elements per second (the hardware profile's
  // default; topology/hardware_profile.h); 0 where not known.
  double unvectorized_elementwise_rate = 0;
  // PyTorch's foreach (multi_tensor_apply) kernels' fraction of the HBM bandwidth (the hardware
  // profile's default); 0 where not measured (the profile's memory_efficiency then).
  double foreach_efficiency = 0;
  // Communication runtime facts of the part (GPUs; NCCL): whether its NVSwitch generation reduces
  // in the switch (NVLink SHARP, NCCL's NVLS algorithm), and the bus bandwidth NCCL's LL protocol
  // reaches on one node (NCCL src/graph/tuning.cc llMaxBws, per architecture); 0 where NCCL's LL
  // does not apply.
  bool nvlink_sharp = false;
  double ll_max_bandwidth_Bps = 0;
  // NCCL's NVLS channels on this part where nvlink_sharp (NVLS_NCHANNELS_SM90 / _SM100 in
  // src/transport/nvls.cc); 0 elsewhere.
  uint32_t nvls_channels = 0;
  std::string source;  // where the numbers come from
};

struct NicSpec {
  std::string name;
  double bandwidth_Bps = 0;  // line rate per direction
  std::string source;
};

struct SwitchSpec {
  std::string name;
  uint32_t ports = 0;
  double port_bandwidth_Bps = 0;  // per port per direction
  sim::Time port_to_port_latency;
  std::string source;
};

// Copies of catalog entries. Unknown names throw sim::TopologyError listing the known names.
GpuSpec find_gpu(std::string_view name);
// Whether a device name as CUDA reports it ("Tesla V100-SXM2-32GB", "NVIDIA H100 80GB HBM3") is
// the catalog entry's model: the entry name's first part ("v100", "h100") appears in it as the
// start of a word, case aside ("NVIDIA GH200" is not an h200). A hint for checking traces against a
// cluster, not an identification.
bool device_is(const GpuSpec& gpu, std::string_view device_name);
NicSpec find_nic(std::string_view name);
SwitchSpec find_switch(std::string_view name);

// Known names, in catalog order.
std::vector<std::string> gpu_names();
std::vector<std::string> nic_names();
std::vector<std::string> switch_names();

}  // namespace topo
