// workloads/model/memory.h: device-memory model of one training rank. Model state (weights,
// gradients, optimizer state of mixed-precision Adam, sharded by ZeRO stage over the data-parallel
// group) and activation memory per transformer layer per micro-batch (Korthikanti et al.,
// "Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198, Eq. 1-6,
// plus a per-tensor generalisation to GQA / SwiGLU / no-dropout blocks).
//
// Units: bytes everywhere (MemoryBreakdown fields included); parameters are element counts.
// Assumptions (stated once here, repeated where used):
//  - Activations are stored in 16-bit (2 bytes/element) unless a Precision says otherwise;
//    dropout masks take 1 byte/element (Korthikanti's accounting).
//  - Flash attention never stores the s x s score/softmax/dropout tensors, which removes the
//    5as/h term exactly as selective recompute does. Its fp32 log-sum-exp (4 bytes per query row
//    per head) is ignored (< 0.1% of a layer).
//  - Full recompute keeps only each layer's input (2sbh), sharded over tp with SP.
//  - Adam: 2-byte weights, gradients of `grad` bytes (2 as in the ZeRO paper; 4 for FP32
//    gradient accumulation as Megatron and Llama 3 do), fp32 master weights + m + v = 12 bytes.
#pragma once

#include <cstdint>

#include "workloads/model/transformer.h"

namespace wl {

// Bytes per rank. total() is the sum of the five fields.
struct MemoryBreakdown {
  double params = 0;
  double grads = 0;
  double optimizer = 0;
  double activations = 0;
  double comm_buffers = 0;  // e.g. DP gradient buckets, ZeRO-3 gathered layers; set by the caller
  double total() const { return params + grads + optimizer + activations + comm_buffers; }
};

// Mixed-precision Adam, bytes per parameter (ZeRO paper, Rajbhandari et al. SC'20,
// arXiv 1910.02054 §3.1: 2 + 2 + 12 = 16).
struct AdamBytes {
  double param = 2;       // bf16/fp16 working weights
  double grad = 2;        // bf16/fp16 gradients (4 for fp32 main grads)
  double optimizer = 12;  // fp32 master weights, momentum, variance
};

// ZeRO stage 0: nothing sharded; 1: optimizer state / dp; 2: + gradients / dp; 3: + weights / dp.
// params_on_rank is the count after TP/PP slicing (see stage_params_per_rank). dp is the sharding
// group (pass dp*cp when the optimizer is also sharded across context-parallel ranks, as
// Megatron's distributed optimizer does). activations and comm_buffers are left 0.
MemoryBreakdown model_state_memory(int64_t params_on_rank, int64_t dp, int zero_stage,
                                   const AdamBytes& adam = {});

// The same for one rank of pipeline stage `stage` (0-based) of a tp x pp x dp layout, using the
// stage's own parameter count (embedding on the first stage, final norm + head on the last).
MemoryBreakdown stage_model_state_memory(const ModelSpec& spec, int64_t stage, int64_t tp,
                                         int64_t pp, int64_t dp, int zero_stage,
                                         PipelineSplit split = PipelineSplit::kEven,
                                         const AdamBytes& adam = {});

// kSelective: Korthikanti et al.'s selective recomputation (the attention core). kSelectiveOp:
// torchtitan's op-level selective activation checkpointing (`selective_ac_option = "op"`,
// torchtitan/models/llama/parallelize_llama.py, `_apply_ac_to_transformer_block`): each block
// keeps its input and the outputs of the ops in torchtitan's save list (aten.mm, except every
// second one, the SDPA kernels, aten.max), recomputes everything else before its backward
// (wl::op_sac_recompute_ops). kFull: every block recomputed from its input.
enum class Recompute { kNone, kSelective, kFull, kSelectiveOp };
inline constexpr sim::EnumNames<Recompute, 4> kRecomputeNames{{{{Recompute::kNone, "none"},
                                                                {Recompute::kSelective, "selective"},
                                                                {Recompute::kFull, "full"},
                                                                {Recompute::kSelectiveOp, "selective-op"}}}};

// Korthikanti's closed forms for the GPT block (MHA, GELU 4h MLP, dropout, 16-bit activations),
// bytes per layer per micro-batch on one rank (s sequence, b micro-batch, h hidden, a heads,
// t tensor-parallel size):
//   kNone, t=1:        s b h (34 + 5 a s / h)
//   kNone, TP only:    s b h (10 + 24/t + 5 a s / (h t))
//   kNone, TP + SP:    s b h (34 + 5 a s / h) / t
//   kSelective:        s b h (10 + 24/t) without SP, 34 s b h / t with SP
//   kFull:             2 s b h (layer input only), / t with SP
// flash_attention drops the 5as/h term (same effect as selective recompute).
double korthikanti_activation_bytes_per_layer(double s, double b, double h, double a, double t,
                                              bool sequence_parallel, Recompute recompute,
                                              bool flash_attention = false);

struct ActivationOptions {
  Recompute recompute = Recompute::kNone;
  bool flash_attention = true;
  bool dropout = false;  // GPT/Megatron train with dropout (masks stored); Llama 3 does not
  Precision precision = Precision::kBf16;  // element size of stored activations
  // Eager PyTorch (training.kernels: eager) with recompute none or selective: the tensors its
  // ATen ops save, counted as activation_bytes_per_layer says (RMSNorm's FP32 input copies,
  // repeat_kv's K and V, silu's output); 213,128 bytes per token for Llama 3 8B's block, as
  // measured on an H100 (tests/data/captures/h100-sxm/tt-h4096-l8-*), against 139,264 fused.
  bool eager = false;
  // Tensorwise FP8 under tensor parallelism: the block inputs are cast to FP8 on their sequence
  // shard before the all-gather (torchao's PrepareFloat8ModuleInput), so a GEMM that keeps its
  // gathered input (ParallelShape::sp_keeps_gathered) keeps it in FP8, 1 byte per element, as
  // torchao's Float8 matmul saves the Float8 input it was given.
  bool fp8_gathered = false;
};

// Per-tensor count for any ModelSpec, one layer, one micro-batch, one rank. Stored tensors:
// attention-norm input, QKV input, Q, K, V (local heads, KV replication as in layer_ops), the
// attention output (out-projection input), [attention dropout mask], MLP-norm input, MLP input,
// the MLP intermediates (GELU: its input and output; SwiGLU: gate, up and their product),
// [MLP dropout mask], and without flash attention / selective recompute the softmax output
// [+ its dropout mask and output]. Norm inputs, GEMM inputs of the sequence-shaped tensors and
// the masks are replicated over TP unless SP; CP divides every token count by cp. For the GPT
// block with dropout and bf16 this reproduces Korthikanti's formulas exactly.
double activation_bytes_per_layer(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                  const ParallelShape& shape, const ActivationOptions& options);

// Last stage extras per micro-batch: final-norm input, LM-head input (both / tp with SP; with an
// eager loss an RMSNorm keeps its FP32 input copy, normalised tensor and rsqrt instead) and the
// fp32 logits kept for the cross-entropy backward (b*(s/cp)*ceil(V/tp)*4) -- large for a 128K
// vocabulary. `eager_loss`: the loss runs as eager PyTorch's log_softmax and nll_loss, whose
// backward holds two more fp32 logit-sized tensors beside the saved log-softmax output at its
// peak (nll_loss's zero-filled gradient, and log_softmax's gradient written to a new tensor).
double head_activation_bytes(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                             const ParallelShape& shape, Precision precision, bool eager_loss = false,
                             bool eager_norm = false);

// Micro-batches whose activations stage `stage` holds at peak under 1F1B: min(pp - stage, m)
// (Megatron SC'21 §2.2); under GPipe all m.
int64_t inflight_microbatches_1f1b(int64_t pp, int64_t stage, int64_t microbatches);

}  // namespace wl
