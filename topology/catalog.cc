// topology/catalog.cc: constant tables behind catalog.h.
// Marks: [V] read in the source, [V2] read in a
// secondary transcription, [D] derived here (arithmetic shown), [R] recalled, to be confirmed.
#include "topology/catalog.h"

#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/error.h"

namespace topo {
namespace {

constexpr double kTera = 1e12;
constexpr double kGiga = 1e9;
constexpr uint64_t kGiB = 1ull << 30;

// Built once on first use and never modified afterwards: a constant table, not mutable state.
const std::vector<GpuSpec>& gpu_table() {
  static const std::vector<GpuSpec> table = [] {
    std::vector<GpuSpec> t;
    {
      GpuSpec g;
      g.name = "v100-sxm2";
      // NVIDIA Tesla V100 datasheet (SXM2, 32 GB): 125 TF tensor (FP16 in, FP32 accumulate),
      // 15.7 TF FP32, 900 GB/s HBM2, 80 SMs, NVLink 2 "300 GB/s" total = 150 GB/s per direction
      // (6 links x 25 GB/s), 300 W. Volta has no BF16, TF32 or FP8 tensor path.
      g.peak_bf16_flops = 0;
      g.peak_fp16_flops = 125 * kTera;
      g.peak_fp8_flops = 0;
      g.peak_tf32_flops = 0;
      g.peak_fp32_flops = 15.7 * kTera;
      g.hbm_capacity_bytes = 32ull * 1024 * 1024 * 1024;  // "32 GB HBM2" (binary: 32 GiB stacks)
      g.hbm_bandwidth_Bps = 900 * kGiga;
      g.sm_count = 80;
      g.scale_up_bandwidth_Bps = 150 * kGiga;
      g.power_W = 300;
      // NCCL v2.23.4 src/graph/tuning.cc llMaxBws: Volta one node 39 GB/s; NVSwitch gen1: no SHARP.
      g.ll_max_bandwidth_Bps = 39 * kGiga;
      g.source = "NVIDIA Tesla V100 datasheet (SXM2 32 GB)";
      t.push_back(g);
    }
    {
      GpuSpec g;
      g.name = "a100-sxm";
      g.peak_bf16_flops = 312 * kTera;  // FSDP paper §5.4 [V]; A100 datasheet
      g.peak_fp16_flops = 312 * kTera;  // A100 datasheet [R]: same tensor rate as BF16
      g.peak_fp8_flops = 0;             // Ampere has no FP8 tensor path
      g.peak_tf32_flops = 156 * kTera;  // A100 datasheet [R]: half of BF16, dense
      g.peak_fp32_flops = 19.5 * kTera; // A100 datasheet [R]
      // "80 GB HBM2e" on the datasheet [R]; the device offers 81,920 MiB as nvidia-smi reports it
      // for A100-SXM4-80GB (github.com/modal-labs/modal-client/pull/2797; dexmal/dexbotic#41, A800).
      g.hbm_capacity_bytes = 81920ull * 1024 * 1024;
      g.hbm_bandwidth_Bps = 2039 * kGiga;                 // 2,039 GB/s, datasheet [R]
      g.sm_count = 108;                                   // [R]
      g.l2_bytes = 40ull << 20;                           // 40 MB L2 (NVIDIA A100 whitepaper)
      g.scale_up_bandwidth_Bps = 300 * kGiga;  // NVLink 3: 600 GB/s total bidirectional = 300 per direction [R]
      g.power_W = 400;                         // [R]
      // FIT: one number for all ten rows of Megatron-LM SC'21 Table 1 (clustersim validate), on top
      // of wave quantization; the microbenchmark maximum is higher (267.9 of 312 TF, 86%, in the
      // ml-engineering matmul table), the gap being what 2021-era training loses around its GEMMs
      // (unfused kernels, launch gaps), which this model does not resolve kernel by kernel.
      g.gemm_efficiency = 0.66;
      // Eager PyTorch's unvectorized elementwise kernels are bound by instruction issue (measured on
      // the H100 SXM: 320 G elements/s, its entry below); scaled by SMs x boost clock, 108 x 1,410
      // MHz against 132 x 1,980 MHz (NVIDIA A100 and H100 whitepapers): an estimate, not measured.
      g.unvectorized_elementwise_rate = 320e9 * (108.0 * 1410.0) / (132.0 * 1980.0);
      // NCCL v2.23.4 src/graph/tuning.cc llMaxBws: Ampere one node 87.7 GB/s; NVSwitch gen2: no SHARP.
      g.ll_max_bandwidth_Bps = 87.7 * kGiga;
      g.source = "NVIDIA A100 datasheet; 312 TF BF16 confirmed in PyTorch FSDP paper (arXiv 2304.11277) §5.4";
      t.push_back(g);
    }
    {
      GpuSpec g;
      g.name = "h100-sxm";
      g.peak_bf16_flops = 989 * kTera;   // 989 TF dense (1,979 with 2:4 sparsity) [V2]
      g.peak_fp16_flops = 989 * kTera;   // same tensor rate as BF16 [V2]
      g.peak_fp8_flops = 1979 * kTera;   // FP8 1,979 TF dense [V2]
      g.peak_tf32_flops = 494 * kTera;   // datasheet 989 TF with sparsity -> ~494 dense [R]
      g.peak_fp32_flops = 67 * kTera;    // datasheet [R]
      // "80 GB HBM3" [V2]; the device offers 81,559 MiB as nvidia-smi reports it for "NVIDIA H100
      // 80GB HBM3" (github.com/NVIDIA/nccl/issues/1264, wilicc/gpu-burn#114).
      g.hbm_capacity_bytes = 81559ull * 1024 * 1024;
      g.hbm_bandwidth_Bps = 3350 * kGiga;                 // 3.35 TB/s [V2]
      g.sm_count = 132;                                   // 132 SMs [V2]
      g.l2_bytes = 50ull << 20;                           // 50 MB L2 (NVIDIA H100 whitepaper)
      g.scale_up_bandwidth_Bps = 450 * kGiga;  // NVLink 4: 900 GB/s total over 18 links = 450 per direction [V2]
      g.power_W = 700;                         // [V2]; Llama 3 §3.3.1 "H100 ... 700W" [V]
      // A plain dense matmul loop on an H100 reaches about 80% of peak once matrices are about
      // 8k x 8k (Stanford CS336 2025 lecture benchmark). Other entries use it until measured.
      g.gemm_efficiency = 0.80;
      // FP8 GEMMs (torch._scaled_mm, e4m3 x e4m3 -> bf16, one scale per tensor) at Llama 3 8B's
      // linear shapes with 8,192 tokens reach 62-70% of the 1,979 TF FP8 peak where BF16 ones reach
      // 75-79% of theirs (median 0.68; scripts/capture/gemm_bench.py, tests/data/captures/h100-sxm/
      // gemm-bench/gemm.json, PyTorch 2.11, cuBLAS's nvjet kernels, before the board's power limit
      // lowered the clock); with torchao's fast accumulation (use_fast_accum, its forward GEMM) 4-11%
      // faster (gemm-bench/gemm-fastaccum.json), and `clustersim calibrate` fits 0.73 on the FP8
      // training-step captures that use it (tt-h4096-l8-b1-s8192-fp8{,-compiled}). Not the default:
      // with 0.73 torchtitan's Table 1 Float8 gain comes out 1.18 where 1.28 was published (0.68:
      // 1.15; TrainingPrecision.TensorwiseFp8GainIsTorchtitansTable1); set
      // `cluster.profile.fp8_gemm_efficiency: 0.73` to run it.
      // cuDNN's fused attention (cuDNN 9.19 under PyTorch 2.11 SDPA; Transformer Engine's default
      // backend on Hopper is the same library) as `clustersim calibrate` fits it from the H100 SXM
      // captures in tests/data/captures/h100-sxm (workloads/scenarios/profiles/h100-sxm-pytorch-2.11.yaml):
      // forward 71% of peak, backward 52%, each slowed by (1 + overhead / keys).
      g.attention_efficiency = 0.71;
      g.attention_backward_efficiency = 0.52;
      g.attention_seq_overhead = 1600;
      g.attention_backward_seq_overhead = 1400;
      // Eager PyTorch's unvectorized elementwise kernels (broadcast or strided operands, casting
      // copies) process 317-327 G elements/s in each eager H100 SXM capture of tests/data/captures
      // (elements over time of those kernels with at least 4 M elements, PyTorch 2.11), whether they
      // move 4 or 8 bytes per element: bound by instruction issue, not by the 3.35 TB/s of HBM (the
      // 8B's kernels on the H200, of 33-117 M elements, far beyond the L2, run at 284-413 G/s).
      g.unvectorized_elementwise_rate = 320e9;
      // PyTorch's foreach AdamW (bf16 states, 40 bytes per parameter, multi_tensor_apply) moves
      // 2.41-2.46 TB/s in each of the six eager H100 SXM captures of tests/data/captures: 72-73% of
      // the HBM bandwidth, where vectorized elementwise kernels reach 93%.
      g.foreach_efficiency = 0.725;
      // Third-generation NVSwitch reduces in the switch (NVLink SHARP; NVIDIA H100 Tensor Core GPU
      // Architecture whitepaper, 2022); NCCL v2.23.4 src/graph/tuning.cc llMaxBws: Hopper 141 GB/s.
      g.nvlink_sharp = true;
      g.ll_max_bandwidth_Bps = 141 * kGiga;
      g.nvls_channels = 16;  // NCCL v2.26.2-1 src/transport/nvls.cc NVLS_NCHANNELS_SM90
      g.source = "NVIDIA H100 SXM5 spec table (via hpctech.co.jp, glennklockwood.com); Llama 3 arXiv 2407.21783 §3.3.1";
      t.push_back(g);
    }
    {
      GpuSpec g;
      g.name = "h200";
      g.peak_bf16_flops = 989 * kTera;  // same die as H100 SXM [V2]
      g.peak_fp16_flops = 989 * kTera;  // [V2]
      g.peak_fp8_flops = 1979 * kTera;  // [V2]
      g.peak_tf32_flops = 494 * kTera;  // [R], as H100
      g.peak_fp32_flops = 67 * kTera;   // [R], as H100
      // "141 GB HBM3e" [V2]; the device offers 143,771 MiB as nvidia-smi reports it for "NVIDIA H200"
      // (driver 580.159.04; tests/data/captures/h200/nvidia-smi.txt, measured for this project).
      g.hbm_capacity_bytes = 143771ull * 1024 * 1024;
      g.hbm_bandwidth_Bps = 4800 * kGiga;                  // 4.8 TB/s [V2]
      g.sm_count = 132;                                    // [V2]
      g.l2_bytes = 50ull << 20;                            // the H100's die: 50 MB L2
      g.scale_up_bandwidth_Bps = 450 * kGiga;  // NVLink 4, 900 GB/s total = 450 per direction [V2]
      g.power_W = 700;                         // [V2]
      g.nvlink_sharp = true;                  // as H100 (same NVSwitch generation)
      // cuDNN's fused attention as fitted from the H200 captures (tests/data/captures/h200,
      // workloads/scenarios/profiles/h200-pytorch-2.11.yaml): forward 70%, backward 56%.
      g.attention_efficiency = 0.70;
      g.attention_backward_efficiency = 0.56;
      g.attention_seq_overhead = 1600;
      g.attention_backward_seq_overhead = 1460;
      // Same SMs and clock as the H100 SXM, whose measured rate this is (topology/catalog.cc, the
      // h100-sxm entry); the H200 captures, not used for it, show 339-352 G elements/s.
      g.unvectorized_elementwise_rate = 320e9;
      // Its foreach AdamW moves 2.95-3.07 TB/s in the six small eager H200 captures (61-64% of the
      // HBM bandwidth: faster than the H100's, not in proportion); the full Llama 3 8B, not used
      // for it, 3.15 TB/s.
      g.foreach_efficiency = 0.63;
      g.ll_max_bandwidth_Bps = 141 * kGiga;   // NCCL v2.23.4 tuning.cc llMaxBws, Hopper
      g.nvls_channels = 16;                   // NCCL v2.26.2-1 src/transport/nvls.cc, SM90
      g.source = "NVIDIA H200 SXM vendor pages (NVIDIA H200 product page)";
      t.push_back(g);
    }
    {
      GpuSpec g;
      g.name = "b200";
      g.peak_bf16_flops = 2250 * kTera;  // ~2.25 PF dense [R / vendor page]
      g.peak_fp16_flops = 2250 * kTera;  // [R] same tensor rate as BF16
      g.peak_fp8_flops = 4500 * kTera;   // FP8 ~4.5 PF dense / 9 PF sparse [R / vendor page]
      g.peak_tf32_flops = 1100 * kTera;  // [R] half of BF16
      g.peak_fp32_flops = 80 * kTera;    // [R] HGX B200 640 TF FP32 / 8 GPUs
      // 192 GB HBM3e [R]; the device offers 183,359 MiB as nvidia-smi reports it for "NVIDIA B200"
      // (github.com/NVIDIA/TensorRT-LLM/issues/10278).
      g.hbm_capacity_bytes = 183359ull * 1024 * 1024;
      g.hbm_bandwidth_Bps = 8000 * kGiga;                  // 8 TB/s [R]
      g.sm_count = 148;                                    // [R] not in the reference table
      g.scale_up_bandwidth_Bps = 900 * kGiga;  // NVLink 5: 1.8 TB/s total = 900 GB/s per direction [R]
      g.power_W = 1000;                        // ~1,000 W [R]
      // Fifth-generation NVLink switch keeps SHARP (NVIDIA Blackwell architecture technical brief);
      // NCCL v2.23.4 src/graph/tuning.cc llMaxBws: Blackwell 2 x 141 GB/s.
      g.nvlink_sharp = true;
      g.ll_max_bandwidth_Bps = 282 * kGiga;
      // NCCL v2.26.2-1 src/transport/nvls.cc NVLS_NCHANNELS_SM100 (v2.29 uses 24 inside one node).
      g.nvls_channels = 32;
      g.source = "NVIDIA B200 / HGX B200 vendor page (marked [R])";
      t.push_back(g);
    }
    {
      GpuSpec g;
      g.name = "tpu-v4";
      g.kind = AcceleratorKind::kTpu;
      g.peak_bf16_flops = 275 * kTera;  // 275 TF (bf16 or int8), Cloud TPU v4 docs [V]
      g.peak_fp16_flops = 0;            // the MXU takes bf16, not IEEE fp16
      g.peak_fp8_flops = 0;             // not supported
      g.peak_tf32_flops = 0;
      g.peak_fp32_flops = 0;            // not published (fp32 matmuls run as multi-pass bf16)
      g.hbm_capacity_bytes = 32 * kGiB;    // 32 GiB HBM2 [V]
      g.hbm_bandwidth_Bps = 1200 * kGiga;  // 1,200 GB/s [V]
      g.sm_count = 2;                      // 2 TensorCores per chip [V]
      g.ici_links_per_chip = 6;            // 3D torus: +/- in each of 3 dimensions
      // 50 GB/s per link per direction [R]. Cross-check [D]: a 16x16x16 pod cut in half crosses
      // 16*16 rings * 2 links = 512 links; 512 * 50 GB/s = 25.6 TB/s vs 24 TB/s published [V].
      g.ici_link_bandwidth_Bps = 50 * kGiga;
      g.scale_up_bandwidth_Bps = 6 * 50 * kGiga;  // [D] 6 links * 50 GB/s
      g.power_W = 192;                            // measured max 192 W (min/mean 90/170) [V]
      g.source = "Cloud TPU v4 docs (cloud.google.com/tpu/docs/v4); Jouppi et al. ISCA 2023";
      t.push_back(g);
    }
    {
      GpuSpec g;
      g.name = "tpu-v5p";
      g.kind = AcceleratorKind::kTpu;
      g.peak_bf16_flops = 459 * kTera;  // 459 TF [V] Cloud TPU v5p docs
      g.peak_fp16_flops = 0;            // bf16 MXU
      g.peak_fp8_flops = 0;             // not supported (int8 only)
      g.peak_tf32_flops = 0;
      g.peak_fp32_flops = 0;               // not published
      g.hbm_capacity_bytes = 95 * kGiB;    // 95 GiB HBM2e [V]
      g.hbm_bandwidth_Bps = 2765 * kGiga;  // 2,765 GB/s [V]
      g.sm_count = 2;                      // 2 TensorCores (+4 SparseCores) [V]
      g.ici_links_per_chip = 6;            // 3D torus [V]
      // [D] 1,200 GB/s per chip bidirectional [V] / 6 links / 2 directions = 100 GB/s; the older
      // page's 4,800 Gb/s = 600 GB/s per chip per direction agrees.
      g.ici_link_bandwidth_Bps = 100 * kGiga;
      g.scale_up_bandwidth_Bps = 600 * kGiga;  // [D] 6 * 100 GB/s per direction
      g.dcn_bandwidth_Bps = 50e9 / 8;          // DCN 50 Gb/s per chip [V] (the v5p docs' table)
      g.power_W = 0;                           // not published
      g.source = "Cloud TPU v5p docs (cloud.google.com/tpu/docs/v5p)";
      t.push_back(g);
    }
    return t;
  }();
  return table;
}

const std::vector<NicSpec>& nic_table() {
  static const std::vector<NicSpec> table = {
      // 400 Gb/s NDR / 400GbE = 50e9 B/s per direction; nccl-tests reach 46-48 GB/s per NIC [V, nccl-tests#290].
      {"connectx-7", 400e9 / 8, "NVIDIA ConnectX-7 datasheet (400 Gb/s NDR/400GbE)"},
      // 200 Gb/s HDR = 25e9 B/s; DGX A100 measures ~24 GB/s per NIC [V, nccl#412].
      {"connectx-6", 200e9 / 8, "NVIDIA ConnectX-6 datasheet (200 Gb/s HDR/200GbE)"},
  };
  return table;
}

const std::vector<SwitchSpec>& switch_table() {
  static const std::vector<SwitchSpec> table = {
      // Third-generation NVSwitch (HGX/DGX H100: 4 per node): 64 NVLink4 ports of 25 GB/s per
      // direction = 3.2 TB/s full duplex [R]. Port latency not published (0 = unknown).
      {"nvswitch-gen3", 64, 25e9, sim::Time::zero(), "NVIDIA NVSwitch 3rd gen / DGX H100 architecture [R]"},
      // Fourth-generation NVSwitch (GB200/B200 NVL72: 18 chips, 72 GPUs): 72 NVLink5 ports of
      // 50 GB/s per direction each [R]; 72 GPUs * 1.8 TB/s = 130 TB/s per NVL72 domain [R].
      {"nvswitch-gen4", 72, 50e9, sim::Time::zero(), "NVIDIA GB200 NVL72 / NVLink 5 switch [R]"},
      // Quantum-2 QM9700: 64 ports of NDR 400 Gb/s [V: QM97XX user manual]. Port-to-port
      // latency ~130 ns is the figure NVIDIA quotes for its HDR/NDR switch ASICs [R, to confirm].
      {"quantum-2", 64, 400e9 / 8, sim::Time::ns(130), "NVIDIA QM97XX NDR switch user manual; latency [R]"},
  };
  return table;
}

template <class Table>
std::string known_names(const Table& table) {
  std::string s;
  for (const auto& e : table) {
    if (!s.empty()) s += ", ";
    s += e.name;
  }
  return s;
}

template <class Table>
auto find_in(const Table& table, std::string_view name, const char* what) {
  for (const auto& e : table) {
    if (e.name == name) return e;
  }
  throw sim::TopologyError("unknown " + std::string(what) + " '" + std::string(name) +
                           "': known names are " + known_names(table));
}

template <class Table>
std::vector<std::string> names_of(const Table& table) {
  std::vector<std::string> v;
  v.reserve(table.size());
  for (const auto& e : table) v.push_back(e.name);
  return v;
}

}  // namespace

GpuSpec find_gpu(std::string_view name) { return find_in(gpu_table(), name, "gpu"); }

bool device_is(const GpuSpec& gpu, std::string_view device_name) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  };
  // As a word of its own: "b200" is not "NVIDIA GB200", nor "h200" "NVIDIA GH200".
  const std::string model = lower(gpu.name.substr(0, gpu.name.find('-')));
  const std::string device = lower(device_name);
  if (model.empty()) return false;
  for (size_t at = device.find(model); at != std::string::npos; at = device.find(model, at + 1))
    if (at == 0 || !std::isalnum(static_cast<unsigned char>(device[at - 1]))) return true;
  return false;
}
NicSpec find_nic(std::string_view name) { return find_in(nic_table(), name, "nic"); }
SwitchSpec find_switch(std::string_view name) { return find_in(switch_table(), name, "switch"); }

std::vector<std::string> gpu_names() { return names_of(gpu_table()); }
std::vector<std::string> nic_names() { return names_of(nic_table()); }
std::vector<std::string> switch_names() { return names_of(switch_table()); }

}  // namespace topo
