// Calibration (workloads/calibration/calibrate.h): samples generated from known parameters through
// the cost model's closed form, t = latency + ideal / efficiency, must give those parameters back;
// collectives "measured" on a cluster with a known profile must give that profile's link
// efficiency and step overhead back when fitted from another.
#include <gtest/gtest.h>

#include <cmath>

#include "topology/catalog.h"
#include "topology/hardware_profile.h"
#include "topology/topology.h"
#include "workloads/calibration/calibrate.h"

namespace wl {
namespace {

const topo::GpuSpec kH100 = topo::find_gpu("h100-sxm");

// A BF16 GEMM of M x N x K at `eff` of the 989 TF peak plus `lat` seconds (no wave factor: the
// shape is left unknown, rows = cols = 0).
KernelSample gemm(double m, double n, double k, double eff, double lat) {
  KernelSample s;
  s.cls = KernelClass::kGemm;
  s.precision = MatmulPrecision::kBf16;
  s.flops = 2 * m * n * k;
  s.seconds = lat + s.flops / (kH100.peak_bf16_flops * eff);
  s.shape = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
  return s;
}

KernelSample memory(double bytes, double eff, double lat) {
  KernelSample s;
  s.cls = KernelClass::kMemory;
  s.bytes = bytes;
  s.seconds = lat + bytes / (kH100.hbm_bandwidth_Bps * eff);
  s.shape = std::to_string(bytes);
  return s;
}

// One of PyTorch's unvectorized elementwise kernels over `elems` elements (6 bytes each, bf16 read
// twice and written once) at `rate` elements per second plus `lat`: element-bound, since 6 bytes
// at 3.35 TB/s x 0.8 take 2.2 ps against 4 ps per element at 250 G/s.
KernelSample unvectorized(double elems, double rate, double lat) {
  KernelSample s;
  s.cls = KernelClass::kMemory;
  s.elements = elems;
  s.bytes = 6 * elems;
  s.seconds = lat + elems / rate;
  s.shape = "unvectorized " + std::to_string(elems);
  return s;
}

TEST(Calibration, RecoversTheEfficiencyAndLatencyTheSamplesWereMadeWith) {
  std::vector<KernelSample> samples;
  for (double n = 256; n <= 16384; n *= 2) samples.push_back(gemm(4096, n, 4096, 0.62, 4e-6));
  for (double b = 4096; b <= 1e9; b *= 4) samples.push_back(memory(b, 0.8, 2e-6));
  for (double e = 1 << 16; e <= 1 << 28; e *= 4) samples.push_back(unvectorized(e, 250e9, 2e-6));
  CalibrationOptions opt;
  opt.holdout_every = 3;
  topo::HardwareProfile base = topo::default_profile(kH100);
  base.gemm_wave_quantization = false;
  Calibration c = calibrate_kernels(samples, kH100, base, opt);
  ASSERT_EQ(c.kernels.size(), 5u);  // GEMM, attention forward and backward, memory-bound, unvectorized
  const ClassFit& g = c.kernels[0];
  ASSERT_TRUE(g.fitted);
  EXPECT_NEAR(g.efficiency, 0.62, 1e-9);
  EXPECT_NEAR(g.latency.seconds(), 4e-6, 1e-9);
  EXPECT_NEAR(c.profile.gemm_efficiency, 0.62, 1e-9);
  EXPECT_EQ(c.profile.gemm_latency.count_ns(), 4000);
  // 7 GEMM shapes, every third held out: 2 held out, 5 fitted; the fit is exact on both.
  EXPECT_EQ(g.shapes, 7u);
  EXPECT_EQ(g.held_out.n, 2u);
  EXPECT_EQ(g.fit.n, 5u);
  EXPECT_LT(g.held_out.median, 1e-6);
  EXPECT_GT(g.held_out_before.median, 0.01);  // the default (0.80 of peak, no latency) was off
  const ClassFit& m = c.kernels[3];
  ASSERT_TRUE(m.fitted);
  EXPECT_NEAR(m.efficiency, 0.8, 1e-9);
  EXPECT_EQ(c.profile.kernel_latency.count_ns(), 2000);
  EXPECT_FALSE(c.kernels[1].fitted);  // no attention samples: kept, with the reason
  EXPECT_NE(c.kernels[1].note.find("no measured attention"), std::string::npos);
  EXPECT_FALSE(c.kernels[2].fitted);
  EXPECT_NE(c.kernels[2].note.find("no measured backward attention"), std::string::npos);
  EXPECT_EQ(c.profile.attention_efficiency, base.attention_efficiency);
  // The unvectorized kernels: their own rate (the memory class's latency kept), which the memory
  // class's fit above does not see.
  const ClassFit& u = c.kernels[4];
  ASSERT_TRUE(u.fitted);
  EXPECT_TRUE(u.unvectorized);
  EXPECT_NEAR(u.efficiency / 250e9, 1.0, 1e-9);
  EXPECT_NEAR(c.profile.unvectorized_elementwise_rate / 250e9, 1.0, 1e-9);
  EXPECT_EQ(u.shapes, 7u);
  EXPECT_LT(u.held_out.median, 1e-9);
  const KernelSample k = unvectorized(1e8, 250e9, 2e-6);
  EXPECT_NEAR(predict_seconds(k, kH100, c.profile) / k.seconds, 1.0, 1e-9);
}

// A fused attention kernel of batch b, h heads of 128, s keys, causal: 4 b h s^2 128 / 2 FLOPs
// forward, 2.5 times that backward, at `eff` of the peak slowed by (1 + overhead / s).
KernelSample attention(double b, double h, double s, bool backward, double eff, double overhead) {
  KernelSample k;
  k.cls = KernelClass::kAttention;
  k.precision = MatmulPrecision::kBf16;
  k.backward = backward;
  k.keys = s;
  k.flops = (backward ? 2.5 : 1.0) * 4 * b * h * s * s * 128 / 2;
  k.seconds = k.flops / (kH100.peak_bf16_flops * eff) * (1 + overhead / s);
  k.shape = std::to_string(b) + "x" + std::to_string(h) + "x" + std::to_string(s) + (backward ? " bwd" : " fwd");
  return k;
}

TEST(Calibration, AttentionIsFittedPerDirectionWithItsSequenceOverhead) {
  // Forward at 0.70 with 1,600 keys of overhead, backward at 0.52 with 1,400 (about what the H100
  // captures give); sequences of 1k to 16k keys and 1 to 4 sequences x 32 heads. The fit must give
  // the four numbers back exactly (two unknowns, linear: t = x / e + (x / s) overhead / e).
  std::vector<KernelSample> samples;
  for (double s = 1024; s <= 16384; s *= 2)
    for (double b = 1; b <= 4; b *= 2) {
      samples.push_back(attention(b, 32, s, false, 0.70, 1600));
      samples.push_back(attention(b, 32, s, true, 0.52, 1400));
    }
  CalibrationOptions opt;
  opt.holdout_every = 4;
  Calibration c = calibrate_kernels(samples, kH100, topo::default_profile(kH100), opt);
  ASSERT_EQ(c.kernels.size(), 5u);
  const ClassFit& f = c.kernels[1];
  const ClassFit& b = c.kernels[2];
  ASSERT_TRUE(f.fitted);
  ASSERT_TRUE(b.fitted);
  EXPECT_FALSE(f.backward);
  EXPECT_TRUE(b.backward);
  EXPECT_NEAR(f.efficiency, 0.70, 1e-9);
  EXPECT_NEAR(f.seq_overhead, 1600, 1e-6);
  EXPECT_NEAR(b.efficiency, 0.52, 1e-9);
  EXPECT_NEAR(b.seq_overhead, 1400, 1e-6);
  EXPECT_NEAR(c.profile.attention_efficiency, 0.70, 1e-9);
  EXPECT_NEAR(c.profile.attention_backward_efficiency, 0.52, 1e-9);
  EXPECT_NEAR(c.profile.attention_seq_overhead, 1600, 1e-6);
  EXPECT_NEAR(c.profile.attention_backward_seq_overhead, 1400, 1e-6);
  EXPECT_LT(b.held_out.median, 1e-9);
  // The profile predicts a 4k-key backward as the closed form does: 0.52 x (1 + 1400 / 4096) of
  // the peak. And the rate factor the training model applies to the same kernel:
  // (0.52 / 0.70) / (1 + 1400 / 4096) = 0.55351...
  const KernelSample k = attention(2, 32, 4096, true, 0.52, 1400);
  EXPECT_NEAR(predict_seconds(k, kH100, c.profile) / k.seconds, 1.0, 1e-12);
  EXPECT_NEAR(topo::attention_rate_factor(c.profile, true, 4096), (0.52 / 0.70) / (1 + 1400.0 / 4096), 1e-12);
  EXPECT_NEAR(topo::attention_rate_factor(c.profile, false, 4096), 1 / (1 + 1600.0 / 4096), 1e-12);
  // An entry without measured attention (A100: FlashAttention-2's 0.55, no overhead): 1.
  EXPECT_EQ(topo::attention_rate_factor(topo::default_profile(topo::find_gpu("a100-sxm")), true, 4096), 1.0);
}

TEST(Calibration, PredictionsFollowTheClosedForm) {
  topo::HardwareProfile p = topo::default_profile(kH100);
  p.gemm_wave_quantization = false;
  p.gemm_efficiency = 0.5;
  p.gemm_latency = sim::Time::ns(3000);
  // 2 * 8192^3 FLOPs = 1.0995e12 at 494.5 TF/s = 2.2235 ms, plus 3 us.
  KernelSample s = gemm(8192, 8192, 8192, 1, 0);
  EXPECT_NEAR(predict_seconds(s, kH100, p), 3e-6 + 2 * std::pow(8192.0, 3) / (0.5 * 989e12), 1e-12);
}

TEST(Calibration, AnEfficiencyAbovePeakIsClampedAndSaid) {
  std::vector<KernelSample> samples;
  for (double b = 1e6; b <= 1e9; b *= 2) samples.push_back(memory(b, 1.3, 1e-6));
  CalibrationOptions opt;
  opt.holdout_every = 0;
  Calibration c = calibrate_kernels(samples, kH100, topo::default_profile(kH100), opt);
  EXPECT_EQ(c.kernels[3].efficiency, 1.0);
  EXPECT_NE(c.kernels[3].note.find("clamped to 1"), std::string::npos);
}

TEST(Calibration, AClampedEfficiencyGetsItsLatencyRefitted) {
  // Two memory-bound kernels whose ideal times at the H100's full HBM bandwidth are 1 us and 10 us,
  // measured at 2 us and 9 us. The line through them, t = a + x / eff, has 1 / eff = 7/9 (eff
  // 1.29, clamped to 1) and a = 2 - 7/9 = 1.222 us; with eff held at 1 the relative-error fit of a
  // in t - x = a (weights 1 / t^2) is (1/4 x 1 - 1/81 x 1) / (1/4 + 1/81) us = 77/85 us = 906 ns.
  const double bw = kH100.hbm_bandwidth_Bps;
  std::vector<KernelSample> samples = {memory(1e-6 * bw, 1, 1e-6), memory(1e-5 * bw, 1, -1e-6)};
  ASSERT_NEAR(samples[0].seconds, 2e-6, 1e-18);
  ASSERT_NEAR(samples[1].seconds, 9e-6, 1e-18);
  CalibrationOptions opt;
  opt.holdout_every = 0;
  Calibration c = calibrate_kernels(samples, kH100, topo::default_profile(kH100), opt);
  EXPECT_EQ(c.kernels[3].efficiency, 1.0);
  EXPECT_EQ(c.kernels[3].latency.count_ns(), 906);
  EXPECT_EQ(c.profile.kernel_latency.count_ns(), 906);
  EXPECT_NE(c.kernels[3].note.find("clamped to 1, latency refitted"), std::string::npos) << c.kernels[3].note;
}

TEST(Calibration, TestSourcesAreOnlyTested) {
  std::vector<KernelSample> samples;
  for (double b = 1e6; b <= 1e9; b *= 2) samples.push_back(memory(b, 0.7, 1e-6));
  for (double b = 3e6; b <= 3e9; b *= 2) {
    samples.push_back(memory(b, 0.7, 1e-6));
    samples.back().source = 1;
  }
  CalibrationOptions opt;
  opt.holdout_every = 0;
  opt.test_sources = {1};
  topo::GpuSpec gpu = kH100;
  gpu.l2_bytes = 0;  // every size fitted (the L2 rule has its own test)
  Calibration c = calibrate_kernels(samples, gpu, topo::default_profile(kH100), opt);
  EXPECT_EQ(c.kernels[3].fit.n, 10u);  // 1e6 .. 512e6
  EXPECT_EQ(c.kernels[3].held_out.n, 10u);  // 3e6 .. 1536e6
  EXPECT_NEAR(c.kernels[3].efficiency, 0.7, 1e-9);
}

TEST(Calibration, Fp8GemmsGetTheirOwnEfficiencyThroughTheGemmLatency) {
  // BF16 GEMMs at 0.75 of 989 TF plus 5 us, FP8 ones (torch._scaled_mm) at 0.68 of 1,979 TF plus
  // the same 5 us: the GEMM class gives 0.75 and 5 us back from the BF16 ones alone, the FP8 class
  // 0.68 through that latency (fp8_gemm_efficiency), listed last.
  std::vector<KernelSample> samples;
  for (double m = 1024; m <= 16384; m *= 2) {
    samples.push_back(gemm(m, 4096, 4096, 0.75, 5e-6));
    KernelSample s = gemm(m, 4096, 14336, 1.0, 0);
    s.precision = MatmulPrecision::kFp8;
    s.seconds = 5e-6 + s.flops / (kH100.peak_fp8_flops * 0.68);
    s.shape = "fp8 " + s.shape;
    samples.push_back(s);
  }
  CalibrationOptions opt;
  opt.holdout_every = 0;
  Calibration c = calibrate_kernels(samples, kH100, topo::default_profile(kH100), opt);
  ASSERT_TRUE(c.kernels.front().fitted);
  EXPECT_NEAR(c.profile.gemm_efficiency, 0.75, 1e-9);
  EXPECT_NEAR(c.profile.gemm_latency.seconds(), 5e-6, 1e-9);
  const ClassFit& f8 = c.kernels.back();
  ASSERT_TRUE(f8.fp8 && f8.fitted);
  EXPECT_NEAR(f8.efficiency, 0.68, 1e-6);
  EXPECT_NEAR(c.profile.fp8_gemm_efficiency, 0.68, 1e-6);
  EXPECT_LT(f8.fit.median, 1e-6);
  EXPECT_NE(profile_yaml(c, "").find("fp8_gemm_efficiency: 0.6800"), std::string::npos);
  // Without FP8 samples there is no FP8 class.
  samples.erase(std::remove_if(samples.begin(), samples.end(),
                               [](const KernelSample& s) { return s.precision == MatmulPrecision::kFp8; }),
                samples.end());
  EXPECT_FALSE(calibrate_kernels(samples, kH100, topo::default_profile(kH100), opt).kernels.back().fp8);
}

TEST(Calibration, MemoryKernelsTooSmallToShowTheHbmRateKeepTheProfile) {
  // A compiled step's memory-bound kernels: 4-byte memsets and 24 KB copies, latency-bound (1 us),
  // and one 8 MB kernel: fewer than 2 sizes of 1 MiB or more, so the HBM efficiency and the
  // latency stay the profile's, and the note says why.
  std::vector<KernelSample> samples;
  for (int i = 0; i < 10; ++i) samples.push_back(memory(4, 0.85, 1e-6 + i * 1e-8));
  for (int i = 0; i < 10; ++i) samples.push_back(memory(24576, 0.85, 1e-6));
  samples.push_back(memory(8e6, 0.85, 1e-6));
  CalibrationOptions opt;
  opt.holdout_every = 0;
  const topo::HardwareProfile base = topo::default_profile(kH100);
  Calibration c = calibrate_kernels(samples, kH100, base, opt);
  const ClassFit& m = c.kernels[3];
  EXPECT_FALSE(m.fitted);
  EXPECT_DOUBLE_EQ(c.profile.memory_efficiency, base.memory_efficiency);
  EXPECT_NE(m.note.find("1 MiB"), std::string::npos) << m.note;
  // Two sizes of 1 MiB or more: fitted on all sizes, as before.
  samples.push_back(memory(4e6, 0.85, 1e-6));
  EXPECT_TRUE(calibrate_kernels(samples, kH100, base, opt).kernels[3].fitted);
}

// Memory-bound kernels that move no more than the L2 cache (50 MiB on an H100) run from it: made
// here at 1.3x the HBM bandwidth, those above at 0.8 of it. The fit must see only the latter and
// give 0.8 back exactly, saying why the others were left out.
TEST(Calibration, MemoryKernelsInsideTheL2AreLeftOutOfTheHbmFit) {
  std::vector<KernelSample> samples;
  for (double b = 1e6; b <= 50e6; b *= 2) samples.push_back(memory(b, 1.3, 1e-6));
  for (double b = 64e6; b <= 8e9; b *= 2) samples.push_back(memory(b, 0.8, 1e-6));
  CalibrationOptions opt;
  opt.holdout_every = 0;
  Calibration c = calibrate_kernels(samples, kH100, topo::default_profile(kH100), opt);
  const ClassFit& m = c.kernels[3];
  ASSERT_TRUE(m.fitted);
  EXPECT_NEAR(m.efficiency, 0.8, 1e-9);
  EXPECT_EQ(m.fit.n, 7u);  // 64e6 .. 4.096e9
  EXPECT_NE(m.note.find("L2 cache (50 MiB)"), std::string::npos) << m.note;
}

TEST(Calibration, CollectivesGiveBackTheLinkEfficiencyAndStepOverheadTheyWereMeasuredWith) {
  topo::ScaleUpSpec su;
  su.kind = topo::ScaleUpKind::kNvSwitch;
  su.bandwidth_Bps = kH100.scale_up_bandwidth_Bps;
  const topo::Topology node = topo::build_scale_up(8, su);
  topo::HardwareProfile truth = topo::default_profile(kH100);
  truth.scale_up_efficiency = 0.7;
  truth.step_overhead = sim::Time::ns(3000);
  truth.nccl_protocols = "Simple";  // the fit moves Simple's step latency, on rings (calibrate.cc)
  truth.nvls_efficiency = 0.0;
  std::vector<CollectiveSample> samples;
  for (double b = 1024; b <= 1024.0 * 1024 * 1024; b *= 8)
    for (CollectiveOp op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather}) {
      CollectiveSample s;
      s.op = op;
      s.bytes = b;
      s.ranks = 8;
      samples.push_back(s);
    }
  const std::vector<double> measured = simulate_collectives(samples, node, kH100, truth);
  for (size_t i = 0; i < samples.size(); ++i) samples[i].seconds = measured[i];
  Calibration c;
  c.profile = topo::default_profile(kH100);  // 0.82 and 2.9 us
  c.profile.nccl_protocols = "Simple";
  c.profile.nvls_efficiency = 0.0;
  calibrate_collectives(samples, node, kH100, c);
  ASSERT_TRUE(c.collectives.fitted);
  EXPECT_EQ(c.collectives.efficiency_key, "scale_up_efficiency");
  EXPECT_NEAR(c.profile.scale_up_efficiency, 0.7, 0.7 * 0.01);
  EXPECT_NEAR(c.profile.step_overhead.seconds(), 3e-6, 3e-6 * 0.02);
  EXPECT_LT(c.collectives.after.median, 0.01);
  EXPECT_GT(c.collectives.before.median, c.collectives.after.median);
}

TEST(Calibration, TheProfileFileHoldsTheFittedKeys) {
  std::vector<KernelSample> samples;
  for (double n = 256; n <= 16384; n *= 2) samples.push_back(gemm(4096, n, 4096, 0.62, 4e-6));
  topo::HardwareProfile base = topo::default_profile(kH100);
  base.gemm_wave_quantization = false;
  Calibration c = calibrate_kernels(samples, kH100, base, CalibrationOptions{});
  const std::string y = profile_yaml(c, "# header\n");
  EXPECT_EQ(y.rfind("# header\n", 0), 0u);
  EXPECT_NE(y.find("gemm_efficiency: 0.6200\n"), std::string::npos);
  EXPECT_NE(y.find("gemm_latency: 4000ns\n"), std::string::npos);
  EXPECT_NE(y.find("gemm_wave_quantization: false\n"), std::string::npos);
  EXPECT_EQ(y.find("memory_efficiency"), std::string::npos);  // not fitted: not written
}

}  // namespace
}  // namespace wl
