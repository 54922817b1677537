// Catalog values against the vendors' datasheets (NVIDIA A100/H100/H200/B200, Cloud TPU v4/v5p docs).
#include "topology/catalog.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/error.h"

namespace topo {
namespace {

TEST(CatalogGpu, H100SxmMatchesDatasheet) {
  const GpuSpec g = find_gpu("h100-sxm");
  EXPECT_EQ(g.kind, AcceleratorKind::kGpu);
  EXPECT_DOUBLE_EQ(g.peak_bf16_flops, 989e12);   // 989 TF dense BF16
  EXPECT_DOUBLE_EQ(g.peak_fp16_flops, 989e12);
  EXPECT_DOUBLE_EQ(g.peak_fp8_flops, 1979e12);   // FP8 1,979 TF dense
  EXPECT_EQ(g.hbm_capacity_bytes, 81559ull << 20);  // "80 GB"; nvidia-smi's total: 81,559 MiB (nccl#1264)
  EXPECT_DOUBLE_EQ(g.hbm_bandwidth_Bps, 3.35e12);      // 3.35 TB/s
  EXPECT_EQ(g.sm_count, 132u);
  EXPECT_DOUBLE_EQ(g.scale_up_bandwidth_Bps, 450e9);   // 900 GB/s bidirectional / 2
  EXPECT_DOUBLE_EQ(g.power_W, 700);
  EXPECT_FALSE(g.source.empty());
}

TEST(CatalogGpu, A100H200B200MatchDatasheet) {
  const GpuSpec a = find_gpu("a100-sxm");
  EXPECT_DOUBLE_EQ(a.peak_bf16_flops, 312e12);
  EXPECT_DOUBLE_EQ(a.peak_fp8_flops, 0);  // no FP8 on Ampere
  EXPECT_EQ(a.hbm_capacity_bytes, 81920ull << 20);  // nvidia-smi's 81,920 MiB (modal-client#2797)
  EXPECT_DOUBLE_EQ(a.hbm_bandwidth_Bps, 2039e9);
  EXPECT_EQ(a.sm_count, 108u);
  EXPECT_DOUBLE_EQ(a.scale_up_bandwidth_Bps, 300e9);  // 600 GB/s total / 2
  EXPECT_DOUBLE_EQ(a.power_W, 400);

  const GpuSpec h = find_gpu("h200");
  EXPECT_DOUBLE_EQ(h.peak_bf16_flops, 989e12);
  EXPECT_EQ(h.hbm_capacity_bytes, 143771ull << 20);  // nvidia-smi's 143,771 MiB (tests/data/captures/h200)
  EXPECT_DOUBLE_EQ(h.hbm_bandwidth_Bps, 4.8e12);
  EXPECT_DOUBLE_EQ(h.scale_up_bandwidth_Bps, 450e9);

  const GpuSpec b = find_gpu("b200");
  EXPECT_DOUBLE_EQ(b.peak_bf16_flops, 2.25e15);
  EXPECT_DOUBLE_EQ(b.peak_fp8_flops, 4.5e15);
  EXPECT_EQ(b.hbm_capacity_bytes, 183359ull << 20);  // nvidia-smi's 183,359 MiB (TensorRT-LLM#10278)
  EXPECT_DOUBLE_EQ(b.hbm_bandwidth_Bps, 8e12);
  EXPECT_DOUBLE_EQ(b.scale_up_bandwidth_Bps, 900e9);  // 1.8 TB/s total / 2
  EXPECT_DOUBLE_EQ(b.power_W, 1000);
}

TEST(CatalogGpu, DeviceNamesAsCudaReportsThemAreMatchedToTheirEntry) {
  // Names from the traces in tests/data (deviceProperties) and an A100's as HTA's sample gives it.
  EXPECT_TRUE(device_is(find_gpu("v100-sxm2"), "Tesla V100-SXM2-32GB"));
  EXPECT_TRUE(device_is(find_gpu("h100-sxm"), "NVIDIA H100 80GB HBM3"));
  EXPECT_TRUE(device_is(find_gpu("h200"), "NVIDIA H200"));
  EXPECT_TRUE(device_is(find_gpu("a100-sxm"), "NVIDIA A100-PG509-200"));
  EXPECT_FALSE(device_is(find_gpu("h100-sxm"), "Tesla V100-SXM2-32GB"));
  EXPECT_FALSE(device_is(find_gpu("h100-sxm"), "NVIDIA H200"));
  // Grace superchips are other parts: GH200 is not an H200, GB200 not a B200.
  EXPECT_FALSE(device_is(find_gpu("h200"), "NVIDIA GH200 480GB"));
  EXPECT_FALSE(device_is(find_gpu("b200"), "NVIDIA GB200"));
}

TEST(CatalogGpu, TpuChipsMatchCloudDocs) {
  const GpuSpec v4 = find_gpu("tpu-v4");
  EXPECT_EQ(v4.kind, AcceleratorKind::kTpu);
  EXPECT_DOUBLE_EQ(v4.peak_bf16_flops, 275e12);
  EXPECT_EQ(v4.hbm_capacity_bytes, 32ull << 30);  // 32 GiB
  EXPECT_DOUBLE_EQ(v4.hbm_bandwidth_Bps, 1200e9);
  EXPECT_EQ(v4.ici_links_per_chip, 6u);
  // 6 links * 50 GB/s per direction = 300 GB/s.
  EXPECT_DOUBLE_EQ(v4.scale_up_bandwidth_Bps, v4.ici_links_per_chip * v4.ici_link_bandwidth_Bps);

  const GpuSpec v5p = find_gpu("tpu-v5p");
  EXPECT_DOUBLE_EQ(v5p.peak_bf16_flops, 459e12);
  EXPECT_EQ(v5p.hbm_capacity_bytes, 95ull << 30);  // 95 GiB
  EXPECT_DOUBLE_EQ(v5p.hbm_bandwidth_Bps, 2765e9);
  // 1,200 GB/s per chip bidirectional = 6 links * 100 GB/s * 2 directions.
  EXPECT_DOUBLE_EQ(v5p.ici_link_bandwidth_Bps * v5p.ici_links_per_chip * 2, 1200e9);
}

TEST(CatalogGpu, NamesInCatalogOrder) {
  const auto names = gpu_names();
  ASSERT_EQ(names.size(), 7u);
  EXPECT_EQ(names[0], "v100-sxm2");
  EXPECT_EQ(names[1], "a100-sxm");
  EXPECT_EQ(names[2], "h100-sxm");
  EXPECT_EQ(names[6], "tpu-v5p");
  for (const auto& n : names) EXPECT_FALSE(find_gpu(n).source.empty()) << n;
}

TEST(CatalogGpu, V100FromItsDatasheet) {
  // NVIDIA Tesla V100 datasheet, SXM2 32 GB: 125 TF tensor (FP16), 15.7 TF FP32, 900 GB/s HBM2,
  // NVLink 300 GB/s in total = 150 GB/s per direction; no BF16 tensor path.
  const auto g = find_gpu("v100-sxm2");
  EXPECT_EQ(g.peak_fp16_flops, 125e12);
  EXPECT_EQ(g.peak_bf16_flops, 0);
  EXPECT_DOUBLE_EQ(g.peak_fp32_flops, 15.7e12);
  EXPECT_EQ(g.hbm_bandwidth_Bps, 900e9);
  EXPECT_EQ(g.scale_up_bandwidth_Bps, 150e9);
  EXPECT_EQ(g.sm_count, 80);
}

TEST(CatalogGpu, UnknownNameListsKnownNames) {
  try {
    find_gpu("h100-pcie-typo");
    FAIL() << "expected TopologyError";
  } catch (const sim::TopologyError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("h100-pcie-typo"), std::string::npos) << msg;
    EXPECT_NE(msg.find("h100-sxm"), std::string::npos) << msg;
    EXPECT_NE(msg.find("tpu-v5p"), std::string::npos) << msg;
  }
  EXPECT_THROW(find_nic("connectx-9"), sim::TopologyError);
  EXPECT_THROW(find_switch("nope"), sim::TopologyError);
}

TEST(CatalogGpu, LookupReturnsACopy) {
  GpuSpec g = find_gpu("h100-sxm");
  g.peak_bf16_flops = 1;  // a scenario override must not leak into the catalog
  EXPECT_DOUBLE_EQ(find_gpu("h100-sxm").peak_bf16_flops, 989e12);
}

TEST(CatalogNetwork, NicsAndSwitches) {
  EXPECT_DOUBLE_EQ(find_nic("connectx-7").bandwidth_Bps, 50e9);  // 400 Gb/s / 8
  EXPECT_DOUBLE_EQ(find_nic("connectx-6").bandwidth_Bps, 25e9);  // 200 Gb/s / 8
  const SwitchSpec q = find_switch("quantum-2");
  EXPECT_EQ(q.ports, 64u);
  EXPECT_DOUBLE_EQ(q.port_bandwidth_Bps, 50e9);
  EXPECT_GT(q.port_to_port_latency, sim::Time::zero());
  EXPECT_EQ(find_switch("nvswitch-gen3").ports, 64u);
  EXPECT_EQ(find_switch("nvswitch-gen4").ports, 72u);
  EXPECT_EQ(nic_names().size(), 2u);
  EXPECT_EQ(switch_names().size(), 3u);
}

}  // namespace
}  // namespace topo
