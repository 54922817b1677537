// topology/hardware_profile.h: everything a calibration may set about the hardware, in one place.
//
// Compute: the fraction of the precision's dense peak each op class reaches (GEMM with its size
// dependence through wave quantization, the attention core, non-tensor "vector" math) and the
// fraction of HBM bandwidth memory-bound kernels reach. Links: the payload fraction and the latency
// of each link kind (NVLink/NVSwitch scale-up, NIC, switch-to-switch fabric hop, torus ICI link).
// Communication runtime (NCCL): the software latency per algorithm step, the SMs a communication
// kernel holds and the share of HBM bandwidth it takes while it runs.
//
// Defaults come from the catalog entry of the accelerator (GpuSpec::gemm_efficiency, its SM count,
// its vector/tensor peak ratio, its kind), each with its source in hardware_profile.cc. A scenario
// may load a profile file and override any field:
//   cluster:
//     profile: {file: my-cluster.yaml, gemm_efficiency: 0.72, nic_latency: 1.5us}
// The file is a map of the same keys (its path relative to the scenario's folder). Every field
// appears in `clustersim run --resolved` output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sim/config.h"
#include "sim/time.h"
#include "topology/catalog.h"

namespace topo {

struct HardwareProfile {
  // --- compute: fractions of peak -------------------------------------------------------------
  double gemm_efficiency = 0.80;
  // FP8 GEMMs' fraction of the FP8 peak (0: gemm_efficiency): they reach less of their doubled
  // peak than BF16 GEMMs of theirs (the catalog entry's, measured on Hopper).
  double fp8_gemm_efficiency = 0;
  double attention_efficiency = 0.55;
  double vector_efficiency = 0.07;  // non-tensor FLOP rate as a fraction of the tensor peak
  double memory_efficiency = 0.85;  // fraction of HBM bandwidth
  // Fraction of HBM bandwidth PyTorch's foreach kernels (multi_tensor_apply: the eager optimizer's
  // passes) reach; 0: memory_efficiency.
  double foreach_efficiency = 0;
  bool gemm_wave_quantization = true;
  // Fixed time per kernel beyond its roofline time (launch, prologue, epilogue, tail): a kernel of
  // F FLOPs takes latency + F / rate, so small kernels reach a lower fraction of peak. 0 by default
  // (not modelled); `clustersim calibrate` fits them from measured kernels.
  sim::Time gemm_latency = sim::Time::zero();
  sim::Time attention_latency = sim::Time::zero();
  sim::Time kernel_latency = sim::Time::zero();  // every other kernel (vector, memory-bound)
  // Fused attention (FlashAttention, cuDNN): the backward kernel's fraction of peak (0: the
  // forward's; FlashAttention-2 and -3 report their backward slower than their forward), and each
  // direction's fixed work per block of queries, counted in key positions: a kernel over
  // sequences of s keys takes its ideal time x (1 + overhead / s). A block loads its queries,
  // finalises the softmax and writes its output whatever the keys it visits, and the causal
  // diagonal blocks are half idle, so short sequences reach a lower fraction of peak. 0: not
  // modelled; `clustersim calibrate` fits them.
  double attention_backward_efficiency = 0;
  double attention_seq_overhead = 0;
  double attention_backward_seq_overhead = 0;
  // The GPU's idle time between two kernels of a stream when the second was already queued (the
  // device-side launch: work distribution, the first block's start): added to every costed
  // kernel, of any class, loading nothing.
  sim::Time kernel_gap = sim::Time::ns(1150);
  // Elements per second that eager PyTorch's unvectorized elementwise kernels process (ATen's
  // generic `elementwise_kernel` for broadcast or strided operands, `unrolled_elementwise_kernel`
  // for dtype-casting copies): they are bound by instruction issue, not by HBM, so they take
  // max(bytes / HBM rate, elements / this rate). 0: not modelled (bandwidth-bound like the rest).
  double unvectorized_elementwise_rate = 0;
  // --- links: payload fraction and latency per link kind --------------------------------------
  double scale_up_efficiency = 0.82;
  double nic_efficiency = 0.94;
  double fabric_efficiency = 0.94;
  double torus_efficiency = 0.90;
  sim::Time scale_up_latency = sim::Time::ns(250);  // per GPU->switch or switch->GPU link
  sim::Time nic_latency = sim::Time::ns(1000);      // per GPU<->leaf link (NIC + cable)
  sim::Time fabric_latency = sim::Time::ns(500);    // per switch-to-switch hop
  sim::Time torus_latency = sim::Time::ns(1000);    // per torus (ICI) link
  sim::Time dcn_latency = sim::Time::us(10);        // per chip<->DCN link (multi-pod tori)
  // --- communication runtime (NCCL) -----------------------------------------------------------
  // NCCL's protocols (workloads/collectives/collective.h): which may run ("LL,LL128,Simple" as
  // NCCL_PROTO spells them), each one's launch latency per collective and software latency per
  // algorithm step (on top of the route latency), and LL's bus bandwidth cap; NVLS (in-switch
  // all-reduce): the fraction of the scale-up port bandwidth it reaches (0: off) and its latency.
  std::string nccl_protocols = "LL,LL128,Simple";
  sim::Time step_overhead = sim::Time::ns(2900);  // Simple's software latency per algorithm step
  sim::Time ll_step_overhead = sim::Time::ns(100);
  sim::Time ll128_step_overhead = sim::Time::ns(1400);
  sim::Time simple_launch = sim::Time::ns(8400);
  sim::Time ll_launch = sim::Time::ns(6600);
  sim::Time ll128_launch = sim::Time::ns(14000);
  double ll_max_bandwidth = 0;  // B/s; 0: no cap
  double nvls_efficiency = 0;
  sim::Time nvls_latency = sim::Time::ns(25000);
  // NVLS's pipeline (collective.h): its channels (NCCL_NVLS_NCHANNELS) and largest chunk
  // (NCCL_NVLS_CHUNKSIZE), which set the bytes one loop of the pipeline moves.
  uint32_t nvls_channels = 16;
  double nvls_chunk = 128 * 1024;
  uint32_t nccl_channels = 24;  // ring/tree channels; small collectives use fewer (collective.h)
  uint32_t comm_sms = 16;                         // SMs a communication kernel holds (0: no slowdown)
  double comm_hbm_fraction = 0.05;                // share of HBM bandwidth communication takes
  bool watch_links = false;                       // report link loads to the fluid model's watcher
  // --- host (framework) --------------------------------------------------------------------------
  // CPU time the framework's host thread spends to launch one GPU kernel or collective (eager
  // PyTorch: Python, the dispatcher, autograd, cudaLaunchKernel). The host runs ahead of the GPU;
  // it is the bottleneck only where kernels are shorter than their launches (small models, small
  // micro-batches). 0: the host never holds the GPU back.
  sim::Time host_overhead = sim::Time::ns(11000);
  // --- device memory not available to the framework ------------------------------------------
  uint64_t context_memory = 512ull << 20;  // CUDA context, kernels loaded lazily
  uint64_t nccl_memory = 1ull << 30;       // per NCCL communicator a rank uses (channel buffers)
};

// The defaults for an accelerator (from its catalog entry; no per-name branches).
HardwareProfile default_profile(const GpuSpec& gpu);

// Binds `cluster.profile` (a map, absent = empty): defaults for `gpu`, then the keys of `file:`
// if given (relative to the scenario's folder), then the map's own keys. Every field is written
// into the scenario so the resolved scenario shows it. Throws sim::ConfigError naming file, line,
// column and key for an unknown key, a bad value, or a file that cannot be read.
HardwareProfile bind_profile(const sim::ConfigNode& cluster, const GpuSpec& gpu);

// A fused attention direction's fraction of peak: the forward's, or the backward's where set
// (attention_backward_efficiency 0 stands for the forward's).
double attention_efficiency(const HardwareProfile& p, bool backward);

// The factor by which a fused attention kernel over sequences of `keys` keys runs relative to
// attention_efficiency x peak: the backward's efficiency ratio over (1 + seq overhead / keys).
// 1 with the defaults or an unknown length (keys <= 0).
double attention_rate_factor(const HardwareProfile& p, bool backward, double keys);

// Whether nccl_protocols lists `name` ("LL", "LL128", "Simple"; case-insensitive).
bool protocol_enabled(const HardwareProfile& p, std::string_view name);

}  // namespace topo
