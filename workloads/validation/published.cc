#include "workloads/validation/published.h"

#include <array>

namespace wl {

namespace {

constexpr std::string_view kMegatronCite =
    "Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM, "
    "SC'21, arXiv 2104.04473, Table 1";
constexpr std::string_view kLlama3Cite =
    "Llama Team, The Llama 3 Herd of Models, arXiv 2407.21783, Table 4";

// Megatron SC'21 Table 1: every row trains GPT with sequence 2,048 and vocabulary 51,200 on
// DGX A100 80 GB nodes. Columns printed: params, heads, hidden, layers (the presets), TP, PP,
// GPUs, batch, achieved TF/GPU and "% of theoretical peak" (of 312 TF). DP = GPUs / (TP x PP).
constexpr PublishedRow megatron(std::string_view id, int64_t gpus, int64_t tp, int64_t pp, int64_t batch, double tf,
                                double pct) {
  return PublishedRow{id,
                      PublishedSource::kMegatronSc21,
                      FlopConvention::kMegatronEq3,
                      id,
                      "a100-sxm",
                      gpus,
                      tp,
                      1,
                      pp,
                      gpus / (tp * pp),
                      2048,
                      batch,
                      tf,
                      pct / 100,
                      kMegatronCite,
                      ""};
}

// Llama 3 405B Table 4: TP, CP, PP, DP, sequence, sequences per DP group, TF/GPU, BF16 MFU, on
// H100 80 GB (989 TF dense BF16). global batch = DP x batch/DP.
constexpr PublishedRow llama3(std::string_view id, int64_t gpus, int64_t cp, int64_t dp, int64_t seq,
                              int64_t batch_per_dp, double tf, double mfu_pct, std::string_view note) {
  return PublishedRow{id,
                      PublishedSource::kLlama3,
                      FlopConvention::kCausalModelFlops,
                      "llama3-405b",
                      "h100-sxm",
                      gpus,
                      8,
                      cp,
                      16,
                      dp,
                      seq,
                      dp * batch_per_dp,
                      tf,
                      mfu_pct / 100,
                      kLlama3Cite,
                      note};
}

constexpr std::array<PublishedRow, 13> kRows = {{
    //        id                gpus  tp  pp  batch  TF/GPU  % of 312
    megatron("megatron-1.7b", 32, 1, 1, 512, 137, 44),
    megatron("megatron-3.6b", 64, 2, 1, 512, 138, 44),
    megatron("megatron-7.5b", 128, 4, 1, 512, 142, 46),
    megatron("megatron-18.4b", 256, 8, 1, 1024, 135, 43),
    megatron("megatron-39.1b", 512, 8, 2, 1536, 138, 44),
    megatron("megatron-76.1b", 1024, 8, 4, 1792, 140, 45),
    megatron("megatron-145.6b", 1536, 8, 8, 2304, 148, 47),
    megatron("megatron-310.1b", 1920, 8, 16, 2160, 155, 50),
    megatron("megatron-529.6b", 2520, 8, 35, 2520, 163, 52),
    megatron("megatron-1t", 3072, 8, 64, 3072, 163, 52),
    //      id                      gpus    cp  dp  seq      batch/DP  TF/GPU  MFU %
    llama3("llama3-405b-8k-gpus", 8192, 1, 64, 8192, 32, 430, 43, ""),
    llama3("llama3-405b-16k-gpus", 16384, 1, 128, 8192, 16, 400, 41, ""),
    llama3("llama3-405b-16k-cp16", 16384, 16, 8, 131072, 16, 380, 38,
           "the PDF prints DP = 4, an erratum: 8x16x16x4 = 8,192 GPUs, not 16,384, and 16 x 131,072 x 4 = 8.4M "
           "tokens, not the 16M of the table; DP = 8 makes both products consistent"),
}};

// The table's own arithmetic: catch a typo in the rows at compile time.
constexpr bool rows_consistent() {
  for (const auto& r : kRows)
    if (r.tp * r.cp * r.pp * r.dp != r.gpus || r.global_batch % r.dp != 0) return false;
  return true;
}
static_assert(rows_consistent(), "a published row's parallel sizes do not multiply to its GPU count");

}  // namespace

std::span<const PublishedRow> published_rows() { return kRows; }

const char* source_name(PublishedSource s) {
  switch (s) {
    case PublishedSource::kMegatronSc21:
      return "Megatron-LM SC'21 Table 1";
    case PublishedSource::kLlama3:
      return "Llama 3 Table 4";
  }
  return "?";
}

}  // namespace wl
