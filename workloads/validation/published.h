// workloads/validation/published.h: published training-throughput measurements that the
// simulator is checked against, as plain data with their sources.
//
// Each row is the configuration a paper reports and the throughput it measured. The row holds
// only what the paper gives (or what follows from it by arithmetic, e.g. DP = GPUs / (TP x PP));
// the choices the paper leaves open (micro-batch size, virtual stages, cluster details) are made
// once per source in validate.cc and printed with the results.
//
// Units: TF/GPU is TFLOP/s per GPU as the source counts FLOPs (see FlopConvention); MFU is a
// fraction of the dense BF16 peak (0.43 = 43 %). Invariant of every row: tp*cp*pp*dp == gpus and
// global_batch % (dp * micro_batch) == 0.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace wl {

enum class PublishedSource {
  kMegatronSc21,  // Narayanan et al., SC'21, arXiv 2104.04473, Table 1
  kLlama3,        // Llama 3 Herd of Models, arXiv 2407.21783, Table 4
};

// How the source counts the FLOPs behind its TF/GPU figure.
enum class FlopConvention {
  // Megatron SC'21 Eq. 3: 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)) per iteration, which counts the
  // recompute forward of full activation checkpointing (closer to hardware FLOPs).
  kMegatronEq3,
  // PaLM model FLOPs: 6N + 12*L*H*Q*T per token, no recompute.
  kPalmModelFlops,
  // Model FLOPs with the attention term for causal work only: 6N + 6*L*H*Q*T per token. Llama 3
  // does not state its convention; its TF/GPU stay at 380-430 from 8K to 131K sequences, where the
  // full attention term is 57% of the PaLM count: with the full count the 131K row would imply a
  // far lower hardware rate than the 8K rows on the same machine, with the causal count the rates
  // agree. So the Llama rows are compared on this count (clustersim run still reports PaLM MFU).
  kCausalModelFlops,
};

struct PublishedRow {
  std::string_view id;  // short unique name, e.g. "megatron-1t", "llama3-405b-16k-cp16"
  PublishedSource source;
  FlopConvention convention;
  std::string_view model_preset;  // wl::find_model_preset name
  std::string_view gpu;           // topo::find_gpu name
  int64_t gpus = 0;
  int64_t tp = 1, cp = 1, pp = 1, dp = 1;
  int64_t seq_len = 0;
  int64_t global_batch = 0;   // sequences per step
  double tflops_per_gpu = 0;  // published, in the source's convention
  double mfu = 0;             // published fraction of the BF16 dense peak
  std::string_view citation;  // where the numbers are printed
  std::string_view note;      // deviations from the printed table, or "" when none
};

// Every reference row: the ten Megatron rows first (Table 1 order), then the three Llama 3 rows.
std::span<const PublishedRow> published_rows();

const char* source_name(PublishedSource s);

}  // namespace wl
