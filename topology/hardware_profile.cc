#include "topology/hardware_profile.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "sim/error.h"
#include "sim/units.h"

namespace topo {

HardwareProfile default_profile(const GpuSpec& gpu) {
  HardwareProfile p;
  // GEMM: the catalog entry's own figure (catalog.cc cites each).
  p.gemm_efficiency = gpu.gemm_efficiency;
  p.fp8_gemm_efficiency = gpu.fp8_gemm_efficiency;
  // Attention core: the catalog entry's (measured on Hopper; elsewhere 0.55: FlashAttention-2
  // reports 50-73% of A100 peak forward and less backward, Dao, arXiv 2307.08691, 2023).
  p.attention_efficiency = gpu.attention_efficiency;
  p.attention_backward_efficiency = gpu.attention_backward_efficiency;
  p.attention_seq_overhead = gpu.attention_seq_overhead;
  p.attention_backward_seq_overhead = gpu.attention_backward_seq_overhead;
  // Eager PyTorch's unvectorized elementwise kernels: the catalog entry's (measured on Hopper).
  p.unvectorized_elementwise_rate = gpu.unvectorized_elementwise_rate;
  // PyTorch's foreach kernels (the eager optimizer): the catalog entry's (measured on Hopper).
  p.foreach_efficiency = gpu.foreach_efficiency;
  // Memory-bound kernels reach 80-90% of HBM bandwidth in STREAM-like copies.
  p.memory_efficiency = 0.85;
  // Non-tensor-core math runs at the FP32 vector rate: H100 67 TF FP32 vs 989 TF BF16 tensor
  // (datasheet ratio 1/14.8). A part without BF16 is taken against its FP16 tensor peak, the one
  // its 16-bit runs use: V100 15.7 / 125 TF (datasheet). 0.07 where the entry has no FP32 figure
  // (TPUs).
  const double tensor16 = gpu.peak_bf16_flops > 0 ? gpu.peak_bf16_flops : gpu.peak_fp16_flops;
  p.vector_efficiency = gpu.peak_fp32_flops > 0 && tensor16 > 0 ? gpu.peak_fp32_flops / tensor16 : 0.07;
  // Wave quantization of GEMM tiles over the SMs (NVIDIA Deep Learning Performance Guide, "Matrix
  // Multiplication Background"); no effect without an SM count.
  p.gemm_wave_quantization = true;
  // Per-kernel fixed latencies: not modelled unless calibrated (clustersim calibrate) or set.
  p.gemm_latency = p.attention_latency = p.kernel_latency = sim::Time::zero();
  // Gap between back-to-back kernels of a stream: the median gap between consecutive kernels of a
  // stream whose second was launched at least 20 us before the first ended (so it waited in the
  // queue) is 1.15 us in HTA's A100 profiler trace (nccl_data.json.gz, 729 such pairs, 10th-90th
  // percentile 1.02-1.60 us; github.com/facebookresearch/HolisticTraceAnalysis) and 1 us (the
  // trace's resolution) in PARAM's DLRM V100 traces. TPUs run one compiled XLA program per step:
  // 0.
  p.kernel_gap = gpu.kind == AcceleratorKind::kTpu ? sim::Time::zero() : sim::Time::ns(1150);
  // Link payload fractions: NCCL moves payload at about 82% of NVLink line rate (370 of 450 GB/s
  // busbw on 8x H100, nccl-tests issue #212, maintainer) and about 94% of a 400 Gb/s NIC (46-48
  // of 50 GB/s, nccl-tests issue #290, maintainer); switch links as NICs; torus ICI 0.90 is an
  // assumption until measured.
  p.scale_up_efficiency = 0.82;
  p.nic_efficiency = 0.94;
  p.fabric_efficiency = 0.94;
  p.torus_efficiency = 0.90;
  // Latencies: half of NCCL's NVLink per-hop ring LL latency, 0.47 us (NCCL src/graph/tuning.cc,
  // 2.18), per NVSwitch link; a switch hop: Quantum-2 port-to-port ~130 ns plus cable and
  // serialisation, rounded up to 500 ns so that RoCE switches are not flattered; NIC + PCIe at each
  // end 1 us (2 x 1 us + 0.5 us for a same-leaf hop is close to NCCL's network per-hop latency of
  // 2.7 us in tuning.cc); a torus link 1 us, an assumption.
  p.scale_up_latency = sim::Time::ns(250);
  p.fabric_latency = sim::Time::ns(500);
  p.nic_latency = sim::Time::ns(1000);
  p.torus_latency = sim::Time::ns(1000);
  // A chip's way into the data-centre network between pods goes through its host (PCIe DMA to
  // host memory, then the host's NIC; Cloud TPU's Multislice docs): 10 us per end, so 20 us a
  // transfer between pods, an assumption until measured.
  p.dcn_latency = sim::Time::us(10);
  // NCCL's protocols, from its own cost model (NVIDIA/nccl v2.23.4-1, src/graph/tuning.cc):
  // baseLat (per collective, ring) LL 6.6 us, LL128 14 us, Simple 8.4 us; hwLat per ring step
  // over NVLink LL 0.6 us, LL128 1.9 us, Simple 3.4 us. The route latency of an NVSwitch step
  // (2 x scale_up_latency = 0.5 us) is added by the runtime, so the software part per step is
  // hwLat - 0.5 us. LL's bus bandwidth cap is the catalog's (tuning.cc llMaxBws). TPUs move ICI
  // data with DMA engines: Simple only (no flag protocols).
  p.nccl_protocols = gpu.kind == AcceleratorKind::kTpu ? "Simple" : "LL,LL128,Simple";
  p.step_overhead = sim::Time::ns(2900);
  p.ll_step_overhead = sim::Time::ns(100);
  p.ll128_step_overhead = sim::Time::ns(1400);
  p.simple_launch = sim::Time::ns(8400);
  p.ll_launch = sim::Time::ns(6600);
  p.ll128_launch = sim::Time::ns(14000);
  p.ll_max_bandwidth = gpu.ll_max_bandwidth_Bps;
  // NVLS where the NVSwitch reduces (catalog nvlink_sharp). NCCL v2.23.4's model gives 8 H100s
  // an NVLS algorithm bandwidth of 16 channels x 20 GB/s x 5/6 = 267 GB/s; an NVLS all-reduce
  // moves S(n+1)/n per port (collective.h), so 267 GB/s x 9/8 = 300 GB/s of each 450 GB/s port:
  // 0.667. Its latency is NCCL's model's, 25 us (NVIDIA/nccl v2.26.2-1 src/graph/tuning.cc hwLat,
  // NVLink, NVLS and NVLSTree, Simple); what mid-size NVLS all-reduces take beyond it is the
  // pipeline's fill, modelled from NCCL's chunking (collective.h). Its channels are the part's
  // (catalog), its largest chunk NCCL's default NCCL_NVLS_CHUNKSIZE, 128 KiB (src/transport/nvls.cc).
  p.nvls_efficiency = gpu.nvlink_sharp ? 0.667 : 0.0;
  p.nvls_latency = sim::Time::ns(25000);
  p.nvls_channels = gpu.nvls_channels > 0 ? gpu.nvls_channels : 16;
  p.nvls_chunk = 128 * 1024;
  // Channels: 24 "coll channels" on 8x H100 (NCCL INFO log of an AWS p5.48xlarge, and
  // NVIDIA/nccl#1197: 12 rings of 30 GB/s, doubled by ncclTopoDupChannels to 24 of 15 GB/s).
  p.nccl_channels = 24;
  // NCCL's kernels hold about 16 SMs on an 8-NIC DGX (NCCL issue #689); TPUs move ICI data with
  // DMA engines, not with their TensorCores: none held.
  // At most half of a (hypothetical) small GPU's SMs, so that compute always keeps some.
  p.comm_sms = gpu.kind == AcceleratorKind::kTpu ? 0 : std::min<uint32_t>(16, gpu.sm_count / 2);
  // Share of HBM bandwidth communication takes (reads and writes of staged chunks): an
  // assumption, small next to 3.35 TB/s.
  p.comm_hbm_fraction = 0.05;
  // Host launch cost per kernel in eager PyTorch: 11 us, the 10th percentile of the intervals
  // between consecutive cudaLaunchKernel calls on the launching thread (where the host launches
  // back to back) in two measured PyTorch profiler traces: 11 us on an A100 host (HTA's
  // nccl_data.json.gz, PyTorch with NCCL 2.17.1, github.com/facebookresearch/HolisticTraceAnalysis)
  // and 11-12 us on a DGX-1 V100 host (PARAM DLRM, worker0-2 step 12, github.com/facebookresearch/
  // param), both under the profiler, which adds to each launch (so an upper estimate; `clustersim
  // calibrate` fits it from a trace of your own). TPUs run compiled XLA programs (no per-op host
  // launch): 0.
  p.host_overhead = gpu.kind == AcceleratorKind::kTpu ? sim::Time::zero() : sim::Time::ns(11000);
  // Device memory the framework does not get: the CUDA context, about 300 MB with lazy kernel
  // loading since CUDA 11.7, over 1 GB before (NVIDIA's ptrblck, github.com/pytorch/pytorch/issues/
  // 107667), rounded up to 512 MiB for cuBLAS/cuDNN workspaces; and NCCL's buffers, linear in
  // channels and communicators: one communicator running all-reduce took about 1.6 GB, three
  // about 6 GB (github.com/NVIDIA/nccl/issues/864, answered by the maintainer in #986); 1 GiB per
  // communicator a rank uses.
  p.context_memory = 512ull << 20;
  p.nccl_memory = 1ull << 30;
  return p;
}

namespace {

// "LL,LL128,Simple" as NCCL_PROTO spells it (case-insensitive, spaces ignored): for each name, its
// index in {LL, LL128, Simple} or -1, and the name as written.
std::vector<std::pair<int, std::string>> parse_protocols(const std::string& list) {
  std::vector<std::pair<int, std::string>> out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(start, end - start);
    std::string low;
    for (char c : name)
      if (c != ' ') low.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    out.emplace_back(low == "ll" ? 0 : low == "ll128" ? 1 : low == "simple" ? 2 : -1, name);
    start = end + 1;
  }
  return out;
}

// At least one known name, none twice; empty when the list is good.
std::string protocols_problem(const std::string& list) {
  bool seen[3] = {false, false, false};
  for (const auto& [i, name] : parse_protocols(list)) {
    if (i < 0) return "unknown protocol '" + name + "' (expected a comma-separated list of LL, LL128, Simple)";
    if (seen[i]) return "protocol '" + name + "' is listed twice";
    seen[i] = true;
  }
  return {};
}

}  // namespace

double attention_efficiency(const HardwareProfile& p, bool backward) {
  return backward && p.attention_backward_efficiency > 0 ? p.attention_backward_efficiency : p.attention_efficiency;
}

double attention_rate_factor(const HardwareProfile& p, bool backward, double keys) {
  double f = attention_efficiency(p, backward) / p.attention_efficiency;
  const double overhead = backward ? p.attention_backward_seq_overhead : p.attention_seq_overhead;
  if (keys > 0 && overhead > 0) f /= 1 + overhead / keys;
  return f;
}

bool protocol_enabled(const HardwareProfile& p, std::string_view name) {
  const auto want = parse_protocols(std::string(name));
  if (want.size() != 1 || want[0].first < 0) return false;
  for (const auto& [i, listed] : parse_protocols(p.nccl_protocols))
    if (i == want[0].first) return true;
  return false;
}

namespace {

// Reads every profile key of map `m` with `p`'s values as defaults (so they are written into m).
void read_keys(const sim::ConfigNode& m, HardwareProfile& p, const GpuSpec& gpu) {
  p.gemm_efficiency = m.get_double_in("gemm_efficiency", 0.01, 1.0, p.gemm_efficiency);
  p.fp8_gemm_efficiency = m.get_double_in("fp8_gemm_efficiency", 0.0, 1.0, p.fp8_gemm_efficiency);
  if (p.fp8_gemm_efficiency > 0 && p.fp8_gemm_efficiency < 0.01)
    m.child("fp8_gemm_efficiency")
        .fail("must be 0 (gemm_efficiency's) or between 0.01 and 1, got " + std::to_string(p.fp8_gemm_efficiency));
  p.attention_efficiency = m.get_double_in("attention_efficiency", 0.01, 1.0, p.attention_efficiency);
  p.attention_backward_efficiency =
      m.get_double_in("attention_backward_efficiency", 0.0, 1.0, p.attention_backward_efficiency);
  if (p.attention_backward_efficiency > 0 && p.attention_backward_efficiency < 0.01)
    m.child("attention_backward_efficiency")
        .fail("must be 0 (the forward's) or between 0.01 and 1, got " + std::to_string(p.attention_backward_efficiency));
  p.attention_seq_overhead = m.get_double_in("attention_seq_overhead", 0.0, 1e6, p.attention_seq_overhead);
  p.attention_backward_seq_overhead =
      m.get_double_in("attention_backward_seq_overhead", 0.0, 1e6, p.attention_backward_seq_overhead);
  p.vector_efficiency = m.get_double_in("vector_efficiency", 0.0001, 1.0, p.vector_efficiency);
  p.memory_efficiency = m.get_double_in("memory_efficiency", 0.01, 1.0, p.memory_efficiency);
  p.foreach_efficiency = m.get_double_in("foreach_efficiency", 0.0, 1.0, p.foreach_efficiency);
  if (p.foreach_efficiency > 0 && p.foreach_efficiency < 0.01)
    m.child("foreach_efficiency")
        .fail("must be 0 (memory_efficiency's) or between 0.01 and 1, got " + std::to_string(p.foreach_efficiency));
  p.gemm_wave_quantization = m.get_bool("gemm_wave_quantization", p.gemm_wave_quantization);
  p.scale_up_efficiency = m.get_double_in("scale_up_efficiency", 0.01, 1.0, p.scale_up_efficiency);
  p.nic_efficiency = m.get_double_in("nic_efficiency", 0.01, 1.0, p.nic_efficiency);
  p.fabric_efficiency = m.get_double_in("fabric_efficiency", 0.01, 1.0, p.fabric_efficiency);
  p.torus_efficiency = m.get_double_in("torus_efficiency", 0.01, 1.0, p.torus_efficiency);
  auto latency = [&](const char* key, sim::Time def) {
    sim::Time t = m.get_duration(key, def);
    if (t < sim::Time::zero()) m.child(key).fail("must be >= 0");
    return t;
  };
  // A hop's latency is allowed any value (a what-if), but one above 100 us is said: switches take
  // 0.1-1 us port to port (NVIDIA Quantum-2: about 130 ns) and a NIC about 1-2 us, so it is more
  // often a unit slip (ms for us) than a design.
  auto hop_latency = [&](const char* key, sim::Time def) {
    sim::Time t = latency(key, def);
    if (m.has(key) && t > sim::Time::us(100))
      m.child(key).warn(sim::format_duration(t) + " per hop is over 100 us, where switches take 0.1-1 us and a NIC "
                        "1-2 us; a unit slip? (ms for us)");
    return t;
  };
  p.scale_up_latency = hop_latency("scale_up_latency", p.scale_up_latency);
  p.nic_latency = hop_latency("nic_latency", p.nic_latency);
  p.fabric_latency = hop_latency("fabric_latency", p.fabric_latency);
  p.torus_latency = hop_latency("torus_latency", p.torus_latency);
  p.dcn_latency = latency("dcn_latency", p.dcn_latency);
  p.step_overhead = latency("step_overhead", p.step_overhead);
  p.ll_step_overhead = latency("ll_step_overhead", p.ll_step_overhead);
  p.ll128_step_overhead = latency("ll128_step_overhead", p.ll128_step_overhead);
  p.simple_launch = latency("simple_launch", p.simple_launch);
  p.ll_launch = latency("ll_launch", p.ll_launch);
  p.ll128_launch = latency("ll128_launch", p.ll128_launch);
  p.nvls_latency = latency("nvls_latency", p.nvls_latency);
  p.nvls_efficiency = m.get_double_in("nvls_efficiency", 0.0, 1.0, p.nvls_efficiency);
  p.nccl_channels = static_cast<uint32_t>(m.get_int_in("nccl_channels", 1, 64, p.nccl_channels));
  p.nvls_channels = static_cast<uint32_t>(m.get_int_in("nvls_channels", 1, 64, p.nvls_channels));
  {
    const double c = m.get_bytes("nvls_chunk", p.nvls_chunk);
    if (c < 4096 || c > (64 << 20)) m.child("nvls_chunk").fail("must be between 4 KiB and 64 MiB");
    p.nvls_chunk = c;
  }
  if (p.nvls_efficiency > 0 && !gpu.nvlink_sharp)
    m.child("nvls_efficiency").fail("this accelerator's switch does not reduce in-network (no NVLink SHARP); use 0");
  {
    const double b = m.get_bandwidth("ll_max_bandwidth", p.ll_max_bandwidth);
    if (b < 0 || b > 1e15) m.child("ll_max_bandwidth").fail("must be between 0 and 1 PB/s");
    p.ll_max_bandwidth = b;
  }
  p.nccl_protocols = m.get_string("nccl_protocols", p.nccl_protocols);
  if (m.has("nccl_protocols")) {
    const std::string problem = protocols_problem(p.nccl_protocols);
    if (!problem.empty()) m.child("nccl_protocols").fail(problem);
  }
  p.gemm_latency = latency("gemm_latency", p.gemm_latency);
  p.attention_latency = latency("attention_latency", p.attention_latency);
  p.kernel_latency = latency("kernel_latency", p.kernel_latency);
  p.kernel_gap = latency("kernel_gap", p.kernel_gap);
  if (p.kernel_gap > sim::Time::sec(1)) m.child("kernel_gap").fail("must be at most 1s per kernel");
  p.unvectorized_elementwise_rate =
      m.get_double_in("unvectorized_elementwise_rate", 0.0, 1e15, p.unvectorized_elementwise_rate);
  if (p.unvectorized_elementwise_rate > 0 && p.unvectorized_elementwise_rate < 1e6)
    m.child("unvectorized_elementwise_rate")
        .fail("is elements per second: 0 (not modelled) or at least 1e6, got " +
              std::to_string(p.unvectorized_elementwise_rate));
  p.host_overhead = latency("host_overhead", p.host_overhead);
  if (p.host_overhead > sim::Time::sec(1)) m.child("host_overhead").fail("must be at most 1s per kernel launch");
  // Fewer than all of them: a communication kernel holding every SM would leave compute none.
  p.comm_sms = static_cast<uint32_t>(m.get_int_in("comm_sms", 0, gpu.sm_count > 0 ? gpu.sm_count - 1 : 0, p.comm_sms));
  p.comm_hbm_fraction = m.get_double_in("comm_hbm_fraction", 0.0, 0.99, p.comm_hbm_fraction);
  auto bytes = [&](const char* key, uint64_t def) {
    const double b = m.get_bytes(key, static_cast<double>(def));
    if (b < 0 || b > 1e15) m.child(key).fail("must be between 0 B and 1 PB");
    return static_cast<uint64_t>(b);
  };
  p.context_memory = bytes("context_memory", p.context_memory);
  p.nccl_memory = bytes("nccl_memory", p.nccl_memory);
  // Both are taken from the device's memory before the framework gets any (NCCL's once per
  // communicator): either one as large as the device leaves the model nothing, which the step
  // would report as "0 B HBM" without naming them.
  for (auto [key, value] : {std::pair{"context_memory", p.context_memory}, std::pair{"nccl_memory", p.nccl_memory}})
    if (m.has(key) && gpu.hbm_capacity_bytes > 0 && value >= gpu.hbm_capacity_bytes)
      m.child(key).fail("is " + sim::format_bytes(static_cast<double>(value)) + ", as much as the " + gpu.name +
                        "'s " + sim::format_bytes(static_cast<double>(gpu.hbm_capacity_bytes)) +
                        " of memory: nothing would be left for the model");
}

}  // namespace

HardwareProfile bind_profile(const sim::ConfigNode& cluster, const GpuSpec& gpu) {
  HardwareProfile p = default_profile(gpu);
  sim::ConfigNode m = cluster.child_map("profile");
  if (auto f = m.find("file")) {
    std::filesystem::path path = f->as_string();
    if (path.is_relative()) path = std::filesystem::path(m.document_name()).parent_path() / path;
    auto load = [&]() -> sim::ConfigDoc {
      try {
        return sim::ConfigDoc::load_file(path.string());
      } catch (const sim::ConfigError& e) {
        f->fail(std::string("cannot load the profile: ") + e.what());
      }
    };
    sim::ConfigDoc file = load();
    sim::ConfigNode root = file.root();
    if (!root.is_map() && !root.is_null()) f->fail("the profile file " + path.string() + " is not a map of profile keys");
    read_keys(root, p, gpu);
    file.check_all_used();  // an unknown key in the file is named with its own file:line:col
  }
  read_keys(m, p, gpu);
  return p;
}

}  // namespace topo
