// The hardware profile: defaults from the catalog entry, a profile file, overrides in the
// scenario, every field in the resolved scenario, and clear errors for keys that moved into it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config.h"
#include "sim/error.h"
#include "topology/catalog.h"
#include "topology/cluster_config.h"
#include "topology/hardware_profile.h"

namespace topo {
namespace {

namespace fs = std::filesystem;

TEST(HardwareProfile, DefaultsComeFromTheCatalogEntry) {
  // A100: GEMM 0.66 (catalog.cc, fit to Megatron SC'21 Table 1); H100: 0.80. Vector math at the
  // FP32/BF16 datasheet ratio: 19.5/312 and 67/989. TPUs hold no cores for communication.
  EXPECT_DOUBLE_EQ(default_profile(find_gpu("a100-sxm")).gemm_efficiency, 0.66);
  EXPECT_DOUBLE_EQ(default_profile(find_gpu("h100-sxm")).gemm_efficiency, 0.80);
  EXPECT_DOUBLE_EQ(default_profile(find_gpu("a100-sxm")).vector_efficiency, 19.5 / 312);
  EXPECT_DOUBLE_EQ(default_profile(find_gpu("h100-sxm")).vector_efficiency, 67.0 / 989);
  // No BF16 on Volta: FP32 over the FP16 tensor peak (V100 datasheet: 15.7 and 125 TFLOP/s).
  EXPECT_DOUBLE_EQ(default_profile(find_gpu("v100-sxm2")).vector_efficiency, 15.7 / 125);
  EXPECT_EQ(default_profile(find_gpu("h100-sxm")).comm_sms, 16u);
  EXPECT_EQ(default_profile(find_gpu("tpu-v5p")).comm_sms, 0u);
  // NVLS channels: NCCL's NVLS_NCHANNELS_SM90 16 and _SM100 32 (src/transport/nvls.cc v2.26.2);
  // its latency NCCL's 25 us (tuning.cc).
  EXPECT_EQ(default_profile(find_gpu("h100-sxm")).nvls_channels, 16u);
  EXPECT_EQ(default_profile(find_gpu("b200")).nvls_channels, 32u);
  EXPECT_EQ(default_profile(find_gpu("h100-sxm")).nvls_latency, sim::Time::us(25));
  EXPECT_DOUBLE_EQ(default_profile(find_gpu("h100-sxm")).nvls_chunk, 131072.0);
  // The catalog entry decides, not its name: a renamed copy of the A100 keeps 0.66.
  GpuSpec g = find_gpu("a100-sxm");
  g.name = "my-a100";
  EXPECT_DOUBLE_EQ(default_profile(g).gemm_efficiency, 0.66);
}

class ProfileFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("clustersim_profile_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) { std::ofstream(dir_ / name) << text; }
  fs::path dir_;
};

TEST_F(ProfileFiles, FileThenScenarioOverridesAndEveryFieldResolved) {
  write("prof.yaml", "gemm_efficiency: 0.7\nnic_latency: 2us\nstep_overhead: 3us\n");
  write("s.yaml",
        "cluster:\n"
        "  gpu: h100-sxm\n"
        "  nodes: 1\n"
        "  profile: {file: prof.yaml, step_overhead: 1.5us, nvls_chunk: 256KiB, nvls_channels: 8}\n");
  auto doc = sim::ConfigDoc::load_file((dir_ / "s.yaml").string());
  ClusterConfig c = bind_cluster(doc.root().child("cluster"));
  EXPECT_DOUBLE_EQ(c.profile.gemm_efficiency, 0.7);                 // from the file
  EXPECT_EQ(c.profile.nic_latency, sim::Time::ns(2000));            // from the file
  EXPECT_EQ(c.profile.step_overhead, sim::Time::ns(1500));          // the scenario wins
  EXPECT_DOUBLE_EQ(c.profile.nvls_chunk, 262144.0);
  EXPECT_EQ(c.profile.nvls_channels, 8u);
  EXPECT_DOUBLE_EQ(c.profile.attention_efficiency, 0.71);           // the H100 entry's (catalog.cc)
  EXPECT_DOUBLE_EQ(c.profile.attention_backward_efficiency, 0.52);
  EXPECT_EQ(c.spec.scale_out.fat_tree.nic_latency, sim::Time::ns(2000));  // the topology uses it
  std::string resolved = doc.resolved_yaml();
  for (const char* key : {"gemm_efficiency: 0.7", "nic_latency: 2us", "step_overhead: 1.5us", "attention_efficiency",
                          "attention_backward_efficiency", "attention_seq_overhead",
                          "attention_backward_seq_overhead", "vector_efficiency", "memory_efficiency", "gemm_wave_quantization", "scale_up_efficiency",
                          "nic_efficiency", "fabric_efficiency", "torus_efficiency", "scale_up_latency",
                          "fabric_latency", "torus_latency", "dcn_latency", "comm_sms", "comm_hbm_fraction"})
    EXPECT_NE(resolved.find(key), std::string::npos) << key << " missing from\n" << resolved;
}

TEST_F(ProfileFiles, UnknownKeyInTheFileIsNamedWithItsLocation) {
  write("prof.yaml", "gemm_efficiency: 0.7\ngem_efficiency: 0.6\n");
  write("s.yaml", "cluster: {gpu: h100-sxm, nodes: 1, profile: {file: prof.yaml}}\n");
  auto doc = sim::ConfigDoc::load_file((dir_ / "s.yaml").string());
  try {
    bind_cluster(doc.root().child("cluster"));
    FAIL() << "expected an error";
  } catch (const sim::ConfigError& e) {
    std::string what = e.what();
    EXPECT_NE(what.find("prof.yaml:2:1: gem_efficiency: unknown key"), std::string::npos) << what;
  }
}

TEST_F(ProfileFiles, MissingFileAndMovedKeysAreClearErrors) {
  auto bind = [&](const std::string& text) -> std::string {
    write("s.yaml", text);
    auto doc = sim::ConfigDoc::load_file((dir_ / "s.yaml").string());
    try {
      bind_cluster(doc.root().child("cluster"));
    } catch (const sim::ConfigError& e) {
      return e.what();
    }
    return "";
  };
  std::string e = bind("cluster: {gpu: h100-sxm, nodes: 1, profile: {file: nope.yaml}}\n");
  EXPECT_NE(e.find("cluster.profile.file: cannot load the profile"), std::string::npos) << e;
  e = bind("cluster: {gpu: h100-sxm, nodes: 1, comm_sms: 8}\n");
  EXPECT_NE(e.find("cluster.comm_sms: moved"), std::string::npos) << e;
  EXPECT_NE(e.find("cluster.profile.comm_sms"), std::string::npos) << e;
  e = bind("cluster: {gpu: h100-sxm, nodes: 1, efficiency: {nic: 0.9}}\n");
  EXPECT_NE(e.find("cluster.efficiency: moved"), std::string::npos) << e;
  e = bind("cluster: {gpu: h100-sxm, nodes: 1, profile: {gemm_efficiency: 1.5}}\n");
  EXPECT_NE(e.find("cluster.profile.gemm_efficiency: must be <= 1"), std::string::npos) << e;
}

}  // namespace
}  // namespace topo
