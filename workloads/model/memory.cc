// workloads/model/memory.cc: see memory.h.
#include "workloads/model/memory.h"

#include <algorithm>
#include <sstream>

#include "sim/error.h"

namespace wl {

MemoryBreakdown model_state_memory(int64_t params_on_rank, int64_t dp, int zero_stage,
                                   const AdamBytes& adam) {
  if (dp <= 0 || zero_stage < 0 || zero_stage > 3 || params_on_rank < 0) {
    std::ostringstream os;
    os << "model state memory: need dp > 0 (got " << dp << "), ZeRO stage 0..3 (got " << zero_stage
       << ") and a non-negative parameter count";
    throw sim::ConfigError(os.str());
  }
  const double p = static_cast<double>(params_on_rank);
  const double d = static_cast<double>(dp);
  MemoryBreakdown m;
  m.optimizer = p * adam.optimizer / (zero_stage >= 1 ? d : 1.0);
  m.grads = p * adam.grad / (zero_stage >= 2 ? d : 1.0);
  m.params = p * adam.param / (zero_stage >= 3 ? d : 1.0);
  return m;
}

MemoryBreakdown stage_model_state_memory(const ModelSpec& spec, int64_t stage, int64_t tp,
                                         int64_t pp, int64_t dp, int zero_stage,
                                         PipelineSplit split, const AdamBytes& adam) {
  const std::vector<int64_t> layers = split_layers(spec.layers, pp, split);
  if (stage < 0 || stage >= pp) {
    std::ostringstream os;
    os << "model " << spec.name << ": pipeline stage " << stage << " out of range [0, " << pp << ")";
    throw sim::ConfigError(os.str());
  }
  const int64_t params = stage_params_per_rank(spec, layers[static_cast<size_t>(stage)], stage == 0,
                                               stage == pp - 1, pp, tp);
  return model_state_memory(params, dp, zero_stage, adam);
}

double korthikanti_activation_bytes_per_layer(double s, double b, double h, double a, double t,
                                              bool sequence_parallel, Recompute recompute,
                                              bool flash_attention) {
  const double sbh = s * b * h;
  const double scores = 5.0 * a * s / h;  // softmax output, dropout mask, dropout output
  switch (recompute) {
    case Recompute::kFull:
      return sequence_parallel ? 2.0 * sbh / t : 2.0 * sbh;
    case Recompute::kSelective:
      return sequence_parallel ? 34.0 * sbh / t : sbh * (10.0 + 24.0 / t);
    case Recompute::kNone: {
      const double sc = flash_attention ? 0.0 : scores;
      return sequence_parallel ? sbh * (34.0 + sc) / t : sbh * (10.0 + 24.0 / t + sc / t);
    }
    case Recompute::kSelectiveOp:
      throw sim::ConfigError("Korthikanti's closed forms have no op-level selective recomputation (selective-op)");
  }
  return 0.0;
}

namespace {
// What eager PyTorch's hand-written RMSNorm (x.float(), pow, mean, rsqrt, two multiplies) keeps
// for its backward over n tokens of width h: the FP32 input copy (4 bytes), the normalised
// e-byte tensor the weight multiplies and the rsqrt (4 bytes per token).
double eager_rms_norm_saved(double n, double h, double e) { return n * h * (4.0 + e) + 4.0 * n; }
}  // namespace

double activation_bytes_per_layer(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                  const ParallelShape& shape, const ActivationOptions& opt) {
  // layer_ops validates the whole combination and throws ConfigError with a clear message.
  (void)layer_ops(spec, micro_batch, seq_len, shape, opt.precision);
  const double e = static_cast<double>(elementwise_bytes(opt.precision));
  const double t = static_cast<double>(shape.tp);
  const bool sp = shape.sequence_parallel && shape.tp > 1;
  const double n = static_cast<double>(micro_batch) * static_cast<double>(seq_len / shape.cp);
  const double h = static_cast<double>(spec.hidden);
  const double seq_shard = sp ? t : 1.0;  // sequence-shaped tensors are split over tp only with SP
  if (opt.recompute == Recompute::kFull) return n * h * e / seq_shard;

  const double hd = static_cast<double>(spec.effective_head_dim());
  const double q_cols = static_cast<double>(local_q_heads(spec, shape.tp)) * hd;
  const double kv_cols = 2.0 * static_cast<double>(local_kv_heads(spec, shape.tp)) * hd;
  const double ffn = static_cast<double>(spec.ffn_hidden / shape.tp);
  const double mask = opt.dropout ? 1.0 : 0.0;  // 1-byte masks
  const double heads = static_cast<double>(local_q_heads(spec, shape.tp));

  // Sequence-shaped, replicated over TP without SP: 2 norm inputs, QKV input, MLP input (all e
  // bytes) and the two dropout masks after the out-projection and the MLP. A parallel block
  // (GPT-J, PaLM) has one norm, whose output both the QKV and the MLP projections read.
  const double norm_pairs = spec.parallel_block ? 1.0 : 2.0;
  double replicated = n * h * (2.0 * norm_pairs * e + 2.0 * mask);
  // TP-sharded: Q, K, V, attention output; MLP intermediates.
  double sharded = n * (2.0 * q_cols + kv_cols) * e;
  sharded += n * ffn * e * (spec.mlp == MlpKind::kSwiGlu ? 3.0 : 2.0);
  if (opt.recompute == Recompute::kSelectiveOp) {
    // torchtitan's op-level selective checkpointing keeps the block's input, the SDPA output and
    // its FP32 log-sum-exp per query head, and the outputs of the odd-numbered aten.mm calls in
    // forward order (wq, wk, wv, wo, w1, w3, w2 for SwiGLU: wq, wv, w1, w2; with a GELU MLP wq, wv,
    // up). FP8 linear layers call torch._scaled_mm, not in the save list: none kept.
    double kept = n * h * e / seq_shard + n * q_cols * e + 4.0 * n * heads;
    // With sequence parallelism the two reduce-scatters' outputs (after wo and w2), also in the
    // save list: sequence shards of the block's width.
    if (sp) kept += 2.0 * n * h * e / seq_shard;
    if (!opt.flash_attention) {
      std::ostringstream os;
      os << "recompute: selective-op keeps the fused attention kernel's output (torchtitan's save list); "
            "it needs flash_attention: true";
      throw sim::ConfigError(os.str());
    }
    if (opt.precision != Precision::kFp8) {
      kept += n * (q_cols + kv_cols / 2.0) * e;                        // wq, wv
      kept += n * (spec.mlp == MlpKind::kSwiGlu ? ffn + h : ffn) * e;  // w1 and w2, or up
    }
    return kept;
  }
  if (opt.eager) {
    // Eager PyTorch keeps what each ATen op's backward needs (torchtitan's llama3 block, its
    // hand-written RMSNorm): per RMSNorm the FP32 copy of its input (which pow and the rsqrt
    // multiply save), the normalised 16-bit tensor the weight multiplies and the rsqrt (4 bytes
    // per token); LayerNorm (one native_layer_norm) its input, mean and rstd (8 bytes per token).
    // Per norm, its output, which the projections after it save. SDPA's Q, its K and V after
    // repeat_kv (the query heads' width each), its output (the out-projection's saved input: no
    // copy, see layer_ops' attn_copies) and its FP32 log-sum-exp per head. SwiGLU: w1's output
    // (silu's input), silu's output and w3's output (the multiply's operands) and their product
    // (w2's input); GELU: its input and output.
    const double norms = spec.parallel_block ? 1.0 : 2.0;
    const double per_norm = spec.norm == NormKind::kRmsNorm ? eager_rms_norm_saved(n, h, e) : n * h * e + 8.0 * n;
    replicated = norms * (per_norm + n * h * e) + 2.0 * n * h * mask;
    sharded = 4.0 * n * q_cols * e + (opt.flash_attention ? 4.0 * n * heads : 0.0);
    sharded += n * ffn * e * (spec.mlp == MlpKind::kSwiGlu ? 4.0 : 2.0);
  }
  if (!opt.flash_attention && opt.recompute == Recompute::kNone) {
    // s x s per local query head: softmax output, and with dropout its mask and output.
    const double scores = n * static_cast<double>(seq_len) * heads;
    sharded += scores * (e + (opt.dropout ? 1.0 + e : 0.0));
  }
  // PyTorch's DTensor SP: the GEMMs after each norm keep their gathered input, whole (in FP8 when
  // it was gathered in FP8), instead of its 16-bit shard.
  const double gathered_e = opt.fp8_gathered ? 1.0 : e;
  const double gathered_inputs = sp && shape.sp_keeps_gathered ? norm_pairs * n * h * (gathered_e - e / t) : 0.0;
  return replicated / seq_shard + gathered_inputs + sharded;
}

double head_activation_bytes(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                             const ParallelShape& shape, Precision precision, bool eager_loss,
                             bool eager_norm) {
  (void)head_ops(spec, micro_batch, seq_len, shape, precision);  // validation
  const double e = static_cast<double>(elementwise_bytes(precision));
  const bool sp = shape.sequence_parallel && shape.tp > 1;
  const double n = static_cast<double>(micro_batch) * static_cast<double>(seq_len / shape.cp);
  const double h = static_cast<double>(spec.hidden);
  const double seq_shard = sp ? static_cast<double>(shape.tp) : 1.0;
  const double logits = n * static_cast<double>(local_vocab(spec, shape.tp)) * 4.0;
  // The final norm's saved tensors and the head's input; an eager final norm (eager kernels, or an
  // eager loss, beside which it runs eager) keeps what activation_bytes_per_layer's eager count
  // gives a norm.
  const bool eager_rms = (eager_loss || eager_norm) && spec.norm == NormKind::kRmsNorm;
  const double norm = (eager_rms ? eager_rms_norm_saved(n, h, e) : n * h * e) + n * h * e;  // + the head's input
  return norm / seq_shard + logits * (eager_loss ? 3.0 : 1.0);
}

int64_t inflight_microbatches_1f1b(int64_t pp, int64_t stage, int64_t microbatches) {
  if (pp <= 0 || stage < 0 || stage >= pp || microbatches <= 0) {
    std::ostringstream os;
    os << "inflight_microbatches_1f1b: need 0 <= stage (" << stage << ") < pp (" << pp
       << ") and microbatches > 0 (got " << microbatches << ")";
    throw sim::ConfigError(os.str());
  }
  return std::min(pp - stage, microbatches);
}

}  // namespace wl
