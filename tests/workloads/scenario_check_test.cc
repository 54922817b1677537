// What a scenario is refused for before anything runs: the step's programs against the memory the
// run may use (bind_scenario's max_memory_bytes), and `run --check` (check_scenario), which finds
// what the job's prepare finds (memory per rank) without simulating.
#include <gtest/gtest.h>

#include <string>

#include "sim/config.h"
#include "sim/error.h"
#include "workloads/job/scenario.h"
#include "workloads/training/training_config.h"

namespace wl {
namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

Scenario bind_default(const std::string& override, uint64_t max_memory) {
  sim::ConfigDoc doc = sim::ConfigDoc::load_string(default_scenario_yaml(), "default.yaml");
  if (!override.empty()) doc.apply_override(override);
  return bind_scenario(std::move(doc), "default", true, max_memory);
}

std::string bind_error(const std::string& override, uint64_t max_memory) {
  try {
    bind_default(override, max_memory);
  } catch (const sim::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ScenarioCheck, AGlobalBatchInTokensIsRefusedForItsProgramsMemory) {
  // The default scenario (Llama 3 8B, 32 layers; TP 8, PP 4, DP 2; micro-batch 1) with the global
  // batch given in tokens (4 Mi) instead of sequences: 4,194,304 / 2 = 2,097,152 micro-batches per
  // rank; x 32 layers = 67,108,864 = 2^26 layer passes in the four stages' programs; at 2 KiB each,
  // 2^37 bytes = 128 GiB. It once took 16 GiB before std::bad_alloc.
  const std::string err = bind_error("workload.training.global_batch=4194304", 16 * kGiB);
  EXPECT_NE(err.find("--set workload.training.global_batch: 2097152 micro-batches per rank x 32 layers is 67108864 "
                     "layer passes"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("at least 128 GiB"), std::string::npos) << err;
  EXPECT_NE(err.find("limit of 16 GiB"), std::string::npos) << err;
  EXPECT_NE(err.find("counts sequences"), std::string::npos) << err;
  // The same programs are allowed where the run may take more (128 GiB < 1 TiB): the refusal is
  // the memory's, not a fixed cap.
  EXPECT_EQ(bind_error("workload.training.global_batch=4194304", 1024 * kGiB), "");
  // And the default's own 32 micro-batches x 32 layers (2 MiB of programs) pass a 1 GiB limit.
  EXPECT_EQ(bind_error("", kGiB), "");
}

TEST(ScenarioCheck, CheckFindsWhatTheRunFindsBeforeItsFirstEvent) {
  // 8B with seq_len 10^6 on TP 8: stage 0 holds 4 micro-batches' activations of a million tokens,
  // hundreds of GiB against an H100's 80 GB (the run's own message; --check said "checked").
  Scenario sc = bind_default("workload.training.seq_len=1000000", 0);
  try {
    check_scenario(sc);
    ADD_FAILURE() << "check_scenario accepted a step that does not fit in memory";
  } catch (const sim::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("out of memory: pipeline stage 0"), std::string::npos) << e.what();
  }
  Scenario fine = bind_default("", 0);
  EXPECT_NO_THROW(check_scenario(fine));
}

TEST(ScenarioCheck, AGlobalBatchTheDataParallelismCannotSplitIsNamedAtItsKey) {
  // The default job has dp 2 and micro-batches of 1: 63 sequences do not split in two.
  EXPECT_EQ(bind_error("workload.training.global_batch=63", 0),
            "--set workload.training.global_batch: global_batch 63 is not a multiple of dp x dp_outer x micro_batch = "
            "2 x 1 x 1");
}

// The layout must fill the job's GPUs, which leave out the cluster's hot spare nodes: the error
// says so, with where the count comes from. The default job is tp 8 x pp 4 x dp 2 = 64 ranks; on
// 9 nodes of 8 with 1 spare the job has 64 GPUs, so dp 4 (128 ranks) is refused.
TEST(ScenarioCheck, ALayoutAgainstSpareNodesSaysTheJobsGpus) {
  sim::ConfigDoc doc = sim::ConfigDoc::load_string(default_scenario_yaml(), "default.yaml");
  doc.apply_override("cluster.nodes=9");
  doc.apply_override("cluster.spare_nodes=1");
  doc.apply_override("workload.parallelism.dp=4");
  try {
    bind_scenario(std::move(doc), "default", true, 0);
    ADD_FAILURE() << "128 ranks on a job of 64 GPUs were accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("= 128 ranks, but the job has 64 GPUs (72 in the cluster less 1 spare node "
                                         "of 8)"),
              std::string::npos)
        << e.what();
  }
  // Without spares the cluster's GPUs are the job's.
  // tp 8 x pp 4 = 32 divides the 64 GPUs: the error offers dp: auto, which gives 64 / 32 = 2.
  EXPECT_NE(bind_error("workload.parallelism.dp=4", 0)
                .find("= 128 ranks, but the cluster has 64 GPUs (dp: auto takes what the others leave: dp = 2)"),
            std::string::npos)
      << bind_error("workload.parallelism.dp=4", 0);
  // tp 8 x pp 3 = 24 does not divide 64: no such offer.
  sim::ConfigDoc three = sim::ConfigDoc::load_string(default_scenario_yaml(), "default.yaml");
  three.apply_override("workload.parallelism.pp=3");
  try {
    bind_scenario(std::move(three), "default", true, 0);
    ADD_FAILURE() << "48 ranks on 64 GPUs were accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks, but the cluster has 64 GPUs"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("auto"), std::string::npos) << e.what();
  }
  // Large counts are grouped: 2,048 nodes of 8 less 32 spare nodes leave 2,016 x 8 = 16,128 GPUs.
  // tp 8 x pp 4 x dp_outer 5 = 160 does not divide 16,128 (16,128 / 160 = 100.8); the default
  // job's 64 ranks are not 16,128.
  const topo::GpuSpec gpu = bind_default("", 0).cluster.gpu;
  auto layout_error = [&](const std::string& override) {
    sim::ConfigDoc d = sim::ConfigDoc::load_string(default_scenario_yaml(), "default.yaml");
    if (!override.empty()) d.apply_override(override);
    try {
      (void)bind_training(d.root().child("workload"), gpu, 16128, 0, SpareNodes{32, 8});
    } catch (const sim::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(layout_error("").find("8 x 1 x 4 x 2 x 1 = 64 ranks, but the job has 16,128 GPUs (16,384 in the cluster "
                                  "less 32 spare nodes of 8)"),
            std::string::npos)
      << layout_error("");
  EXPECT_NE(layout_error("workload.parallelism={tp: 8, pp: 4, dp: auto, dp_outer: 5}")
                .find("auto: tp x cp x pp x dp_outer = 8 x 1 x 4 x 5 = 160 does not divide the job's 16,128 GPUs "
                      "(16,384 in the cluster less 32 spare nodes of 8)"),
            std::string::npos)
      << layout_error("workload.parallelism={tp: 8, pp: 4, dp: auto, dp_outer: 5}");
}

TEST(ScenarioCheck, MemorySizesThatLeaveNothingAreNamed) {
  // A plain number is bytes: 80 B of HBM, below the 1 GiB any accelerator has.
  EXPECT_NE(bind_error("cluster.gpu={preset: h100-sxm, hbm_capacity: 80}", 0)
                .find("cluster.gpu.hbm_capacity: is 80 B, below 1 GiB: a number without a unit is bytes"),
            std::string::npos);
  EXPECT_EQ(bind_error("cluster.gpu={preset: h100-sxm, hbm_capacity: 80GB}", 0), "");
  // The CUDA context as large as the H100's 81,559 MiB (79.6 GiB).
  EXPECT_NE(bind_error("cluster.profile.context_memory=100GiB", 0)
                .find("--set cluster.profile.context_memory: is 100 GiB, as much as the h100-sxm's 79.6 GiB"),
            std::string::npos);
  // 30 GiB of NCCL buffers for each of the default job's 3 communicators (TP, PP, DP) leave
  // nothing: the step's refusal says where the memory went.
  Scenario sc = bind_default("cluster.profile.nccl_memory=30GiB", 0);
  try {
    check_scenario(sc);
    ADD_FAILURE() << "a step with no memory left was accepted";
  } catch (const sim::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("(the 0 B left of the h100-sxm's 79.6 GiB after cluster.profile.context_memory "
                                         "512 MiB and nccl_memory 30 GiB for each of 3 communicators)"),
              std::string::npos)
        << e.what();
  }
}

ModelSpec model_of(const std::string& yaml) {
  sim::ConfigDoc doc = sim::ConfigDoc::load_string(yaml, "m.yaml");
  return bind_model(doc.root().child("model"));
}

TEST(BindModel, APresetsHeadDimFollowsAChangedHiddenOrHeads) {
  // Llama 3 8B: hidden 4096, 32 heads, head_dim 128 = 4096 / 32.
  EXPECT_EQ(model_of("model: {preset: llama3-8b}").head_dim, 128);
  // hidden 8192 with 32 heads: 8192 / 32 = 256 (the preset's 128 was kept, attending over 4096
  // columns of an 8192-wide model).
  EXPECT_EQ(model_of("model: {preset: llama3-8b, hidden: 8192}").head_dim, 256);
  // 64 heads of 4096: 64 each.
  EXPECT_EQ(model_of("model: {preset: llama3-8b, heads: 64}").head_dim, 64);
  // Given explicitly, it is kept.
  EXPECT_EQ(model_of("model: {preset: llama3-8b, hidden: 8192, head_dim: 128}").head_dim, 128);
  // 4097 is not a multiple of 32: head_dim must be given, as without a preset.
  try {
    model_of("model: {preset: llama3-8b, hidden: 4097}");
    ADD_FAILURE() << "hidden 4097 with 32 heads was accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("hidden 4097 is not divisible by heads 32; set head_dim explicitly"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace wl
