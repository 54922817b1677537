// Calibration samples from profiler traces (traces/kineto/samples.h). A hand-made trace checks the
// linking of kernels to the ops that launched them and the FLOP and byte counts (worked out in the
// comments); the DLRM sample's counts were read with Python's json module and the same rule (a
// kernel belongs to the innermost shaped CPU op, on its runtime call's thread, around the call).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "traces/kineto/kineto.h"
#include "traces/kineto/samples.h"

namespace traces {
namespace {

namespace fs = std::filesystem;

// Events: aten::linear (tid 1, 100..200 us) around aten::addmm (110..150 us; bias [1024], A
// [256,512], B [512,1024], bf16), whose runtime calls (correlation 7 at 120 us, 8 at 130 us) launch
// a GEMM kernel (10 us) and its split-K reduction (2 us); aten::add_ (300..310 us, float [1000,1000]
// twice) launching one elementwise kernel of 5 us; a flash-attention backward ([2,16,4096,128] for
// q and k, bf16) launching one kernel of 800 us; a memset of 1 MiB of 3 us; a kernel launched from
// another thread than any op's (not linked).
const char* kTrace = R"J({"traceEvents": [
 {"ph":"X","cat":"cpu_op","name":"aten::linear","pid":1,"tid":1,"ts":100,"dur":100,
  "args":{"Input Dims":[[256,512],[1024,512],[1024]],"Input type":["c10::BFloat16","c10::BFloat16","c10::BFloat16"]}},
 {"ph":"X","cat":"cpu_op","name":"aten::addmm","pid":1,"tid":1,"ts":110,"dur":40,
  "args":{"Input Dims":[[1024],[256,512],[512,1024],[],[]],"Input type":["c10::BFloat16","c10::BFloat16","c10::BFloat16","Scalar","Scalar"]}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":120,"dur":3,"args":{"correlation":7}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":130,"dur":3,"args":{"correlation":8}},
 {"ph":"X","cat":"kernel","name":"sm90_xmma_gemm_bf16bf16","pid":0,"tid":7,"ts":1000,"dur":10,"args":{"stream":7,"correlation":7}},
 {"ph":"X","cat":"kernel","name":"splitKreduce_kernel","pid":0,"tid":7,"ts":1010,"dur":2,"args":{"stream":7,"correlation":8}},
 {"ph":"X","cat":"cpu_op","name":"aten::add_","pid":1,"tid":1,"ts":300,"dur":10,
  "args":{"Input Dims":[[1000,1000],[1000,1000],[]],"Input type":["float","float","Scalar"]}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":305,"dur":3,"args":{"correlation":9}},
 {"ph":"X","cat":"kernel","name":"void at::native::vectorized_elementwise_kernel<4>","pid":0,"tid":7,"ts":1020,"dur":5,"args":{"stream":7,"correlation":9}},
 {"ph":"X","cat":"cpu_op","name":"aten::_flash_attention_backward","pid":1,"tid":2,"ts":400,"dur":20,
  "args":{"Input Dims":[[2,4096,16,128],[2,4096,16,128],[2,4096,16,128]],"Input type":["c10::BFloat16","c10::BFloat16","c10::BFloat16"]}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":2,"ts":410,"dur":3,"args":{"correlation":10}},
 {"ph":"X","cat":"kernel","name":"flash_bwd_kernel","pid":0,"tid":7,"ts":1030,"dur":800,"args":{"stream":7,"correlation":10}},
 {"ph":"X","cat":"gpu_memset","name":"Memset (Device)","pid":0,"tid":7,"ts":1900,"dur":3,"args":{"stream":7,"correlation":11,"bytes":1048576}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":3,"ts":500,"dur":3,"args":{"correlation":12}},
 {"ph":"X","cat":"kernel","name":"orphan_kernel","pid":0,"tid":7,"ts":2000,"dur":4,"args":{"stream":7,"correlation":12}}
]})J";

TEST(KernelSamples, LinksKernelsToTheOpsThatLaunchedThemAndCountsTheirWork) {
  const fs::path p = fs::temp_directory_path() / "clustersim_samples_test.json";
  std::ofstream(p) << kTrace;
  KinetoReadOptions ro;
  ro.ops = true;
  const KinetoRank r = read_kineto(p.string(), ro);
  fs::remove(p);
  ASSERT_EQ(r.activity.size(), 6u);
  EXPECT_EQ(r.activity.back().launched_by, -1);  // the orphan: its call is on no op's thread
  const std::vector<wl::KernelSample> s = kernel_samples(r, 3);
  ASSERT_EQ(s.size(), 4u);
  const wl::KernelSample* gemm = nullptr;
  const wl::KernelSample* add = nullptr;
  const wl::KernelSample* attn = nullptr;
  const wl::KernelSample* memset = nullptr;
  for (const auto& x : s) {
    EXPECT_EQ(x.source, 3u);
    if (x.cls == wl::KernelClass::kGemm) gemm = &x;
    if (x.cls == wl::KernelClass::kAttention) attn = &x;
    if (x.cls == wl::KernelClass::kMemory) (x.shape.rfind("memset", 0) == 0 ? memset : add) = &x;
  }
  ASSERT_TRUE(gemm && add && attn && memset);
  // The innermost op, addmm: 2 x 256 x 1024 x 512 FLOPs, both kernels (10 + 2 us), BF16.
  EXPECT_EQ(gemm->flops, 2.0 * 256 * 1024 * 512);
  EXPECT_EQ(gemm->rows, 256);
  EXPECT_EQ(gemm->cols, 1024);
  EXPECT_NEAR(gemm->seconds, 12e-6, 1e-15);
  EXPECT_EQ(gemm->precision, wl::MatmulPrecision::kBf16);
  // add_: reads two 1e6-float tensors and writes one: 12e6 bytes.
  EXPECT_EQ(add->bytes, 12e6);
  // Flash backward, [B,S,H,D] layout: forward 4 x (2*4096*16*128) x 4096 / 2 (causal), times 2.5.
  EXPECT_EQ(attn->flops, 2.5 * 4.0 * (2.0 * 4096 * 16 * 128) * 4096 / 2);
  EXPECT_TRUE(attn->backward);
  EXPECT_EQ(attn->keys, 4096);  // [B,S,H,D]: the key tensor's dimension 1
  EXPECT_EQ(memset->bytes, 1048576);
  EXPECT_NEAR(memset->seconds, 3e-6, 1e-15);
}

TEST(KernelSamples, DlrmRankZero) {
  const fs::path d = fs::path(CLUSTERSIM_SOURCE_DIR) / "tests" / "data" / "param-dlrm-8rank-v100";
  KinetoReadOptions ro;
  ro.ops = true;
  const KinetoRank r = read_kineto((d / "worker0_step_12.1694128201545.pt.trace.json.gz").string(), ro);
  const std::vector<wl::KernelSample> s = kernel_samples(r, 0);
  size_t gemms = 0, memory = 0;
  bool first = false;
  for (const auto& x : s) {
    gemms += x.cls == wl::KernelClass::kGemm;
    memory += x.cls == wl::KernelClass::kMemory;
    // aten::addmm(bias [256], [16, 13], [13, 256]) float: one gemmSN_TN_kernel of 8 us.
    if (x.shape == "gemm fp32 16x256x13") {
      first = true;
      EXPECT_EQ(x.flops, 2.0 * 16 * 256 * 13);
      EXPECT_NEAR(x.seconds, 8e-6, 1e-15);
    }
  }
  EXPECT_EQ(gemms, 23u);   // aten::mm / addmm / bmm ops that launched kernels
  // 151 ops launched exactly one elementwise kernel; one, aten::arange, has a Scalar first input
  // (no tensor size to count); no memsets.
  EXPECT_EQ(memory, 150u);
  EXPECT_TRUE(first);
  // Without the option nothing is linked and no op is kept.
  const KinetoRank plain = read_kineto((d / "worker0_step_12.1694128201545.pt.trace.json.gz").string());
  EXPECT_TRUE(plain.ops.empty());
  EXPECT_TRUE(kernel_samples(plain, 0).empty());
}

TEST(KernelSamples, SdpaBackwardOpsTakeTheirKeysFromTheBHSDLayout) {
  // aten::_scaled_dot_product_flash_attention_backward(grad_out, query, key, value, ...), each
  // [B=2, H=16, S=4096, D=128]: 4096 keys (not the 16 heads of the flash kernel's [B,S,H,D]
  // position), backward, 2.5 x 4 x (2 x 16 x 4096 x 128) x 4096 / 2 FLOPs; one kernel of 700 us.
  const fs::path p = fs::temp_directory_path() / "clustersim_samples_sdpa_test.json";
  std::ofstream(p) << R"J({"traceEvents": [
 {"ph":"X","cat":"cpu_op","name":"aten::_scaled_dot_product_flash_attention_backward","pid":1,"tid":1,"ts":100,"dur":20,
  "args":{"Input Dims":[[2,16,4096,128],[2,16,4096,128],[2,16,4096,128],[2,16,4096,128]],"Input type":["c10::BFloat16","c10::BFloat16","c10::BFloat16","c10::BFloat16"]}},
 {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":110,"dur":3,"args":{"correlation":5}},
 {"ph":"X","cat":"kernel","name":"flash_bwd_kernel","pid":0,"tid":7,"ts":1000,"dur":700,"args":{"stream":7,"correlation":5}}
]})J";
  KinetoReadOptions ro;
  ro.ops = true;
  const std::vector<wl::KernelSample> s = kernel_samples(read_kineto(p.string(), ro), 0);
  fs::remove(p);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].cls, wl::KernelClass::kAttention);
  EXPECT_TRUE(s[0].backward);
  EXPECT_EQ(s[0].keys, 4096);
  EXPECT_EQ(s[0].flops, 2.5 * 4.0 * (2.0 * 16 * 4096 * 128) * 4096 / 2);
  EXPECT_NEAR(s[0].seconds, 700e-6, 1e-15);
}

TEST(KernelSamples, CudnnAttentionOfAnH100Capture) {
  // tests/data/captures/h100-sxm/h4096-l2-b1: 2 layers, q [1, 32, 2048, 128], causal. PyTorch 2.11
  // runs SDPA through aten::_cudnn_attention_forward / _backward ([B,H,S,D]); read with Python's
  // json module: forward kernels of 82.561 and 82.913 us, backward 3 kernels each, 263.109 and
  // 267.813 us together. FLOPs: forward 4 * (32 * 2048 * 128) * 2048 / 2 = 34,359,738,368; backward
  // 2.5 times that (QK^T again, dV, dP, dQ, dK).
  const fs::path f = fs::path(CLUSTERSIM_SOURCE_DIR) / "tests" / "data" / "captures" / "h100-sxm" / "h4096-l2-b1" /
                     "rank0.trace.json.gz";
  KinetoReadOptions ro;
  ro.ops = true;
  std::vector<double> fwd, bwd;
  for (const auto& s : kernel_samples(read_kineto(f.string(), ro), 0)) {
    if (s.cls != wl::KernelClass::kAttention) continue;
    EXPECT_EQ(s.precision, wl::MatmulPrecision::kBf16);
    const bool backward = s.backward;
    EXPECT_EQ(s.keys, 2048);
    EXPECT_EQ(s.shape.find(" bwd") != std::string::npos, backward) << s.shape;
    EXPECT_EQ(s.flops, (backward ? 2.5 : 1.0) * 34359738368.0) << s.shape;
    (backward ? bwd : fwd).push_back(s.seconds);
  }
  std::sort(fwd.begin(), fwd.end());
  std::sort(bwd.begin(), bwd.end());
  ASSERT_EQ(fwd.size(), 2u);
  ASSERT_EQ(bwd.size(), 2u);
  EXPECT_NEAR(fwd[0], 82.561e-6, 1e-10);
  EXPECT_NEAR(fwd[1], 82.913e-6, 1e-10);
  EXPECT_NEAR(bwd[0], 263.109e-6, 1e-9);
  EXPECT_NEAR(bwd[1], 267.813e-6, 1e-9);
}

}  // namespace
TEST(LaunchIntervals, HostLaunchesOfTheHtaA100Sample) {
  // Worked out with a short Python script over the JSON (each kernel's args.correlation to the
  // cuda_runtime call with the same correlation; per thread, consecutive call starts): 2,700
  // kernels launched from 2 threads, so 2,698 intervals; sorted, the one at index 269 (10th
  // percentile) is 11.8642578125 us and the median (index 1,349) 171.94 us.
  const fs::path f = fs::path(CLUSTERSIM_SOURCE_DIR) / "tests" / "data" / "hta-a100-nccl" / "nccl_data.json.gz";
  KinetoReadOptions ro;
  ro.ops = true;
  std::vector<double> iv = launch_intervals(read_kineto(f.string(), ro));
  ASSERT_EQ(iv.size(), 2698u);
  std::sort(iv.begin(), iv.end());
  EXPECT_NEAR(iv[269], 11.8642578125e-6, 1e-9);
  EXPECT_NEAR(iv[1349], 171.94e-6, 0.01e-6);
  // Queued kernel gaps (the same script: per stream, consecutive kernels whose second's launch call
  // started at least 20 us before the first ended): 729 of them, the median (index 364) 1.15234375 us.
  std::vector<double> gaps = queued_kernel_gaps(read_kineto(f.string(), ro));
  ASSERT_EQ(gaps.size(), 729u);
  wl::Calibration c;
  wl::calibrate_host(iv, gaps, c);
  EXPECT_TRUE(c.host.gap_fitted);
  EXPECT_NEAR(c.host.kernel_gap.seconds(), 1.15234375e-6, 1e-9);
  EXPECT_TRUE(c.host.fitted);
  EXPECT_NEAR(c.host.host_overhead.seconds(), 11.864e-6, 1e-9);
  EXPECT_EQ(c.profile.host_overhead, c.host.host_overhead);
  // Fewer than 20 intervals: not fitted, the profile keeps its value, and the note says why.
  wl::Calibration few;
  wl::calibrate_host({1e-6, 2e-6}, {}, few);
  EXPECT_FALSE(few.host.gap_fitted);
  EXPECT_FALSE(few.host.fitted);
  EXPECT_EQ(few.profile.host_overhead, topo::HardwareProfile{}.host_overhead);
  EXPECT_NE(few.host.note.find("2 launch interval(s)"), std::string::npos) << few.host.note;
}

}  // namespace traces
