// workloads/model/transformer.h: the transformer cost model. Model shapes (ModelSpec and
// presets), exact parameter counts, the per-layer op list of one micro-batch on one rank under a
// tensor/context/sequence-parallel layout (FLOPs and HBM bytes per op, forward and backward, with
// the backward split into input-grad B and weight-grad W for zero-bubble schedules), the
// communication each layer needs, and the closed-form FLOP counts used by published MFU figures.
//
// Units: FLOPs are counts of floating-point operations (a multiply-add is 2); bytes are bytes of
// HBM traffic (reads + writes) or of a collective buffer; parameters are element counts.
// Everything is pure arithmetic on doubles/int64 (no engine dependency).
//
// Conventions (each is repeated where it is used):
//  - Causal attention: by default the attention core counts HALF of the full QK^T and PV matmul
//    FLOPs (the masked upper triangle is skipped by flash-attention style kernels). Set
//    OpOptions::causal_half = false for the full count that PaLM MFU, Megatron Eq. 3 and
//    Korthikanti App. A use.
//  - Backward FLOPs of a GEMM are 2x forward: B (dgrad) = 1x, W (wgrad) = 1x. The attention core
//    has no weights: backward = 2x forward, all B. Flash-attention also recomputes QK^T in
//    backward; those hardware-only FLOPs are reported separately in bwd_recompute_flops.
//  - TP (Megatron): GEMMs are split by tp (column-parallel QKV / MLP-up, row-parallel out-proj /
//    MLP-down), query heads by tp. KV heads: kv_local = kv/tp when tp divides kv; when kv divides
//    tp each rank holds ONE KV head, replicated on tp/kv ranks (so summed over ranks the K/V FLOPs
//    and parameters exceed the model's). Anything else is a ConfigError.
//  - SP (sequence parallel, Korthikanti et al. 2022): norms, residual adds and the tensors
//    between them are split over tp along the sequence; the all-reduce of plain TP becomes an
//    all-gather + reduce-scatter pair of the same buffer size.
//  - CP (context parallel, all-gather flavour as in Llama 3 §3.3.2): every op of a rank sees
//    seq_len/cp tokens; K/V are all-gathered before attention. The sequence is cut in 2*cp chunks
//    and rank i holds chunks i and 2cp-1-i ("load-balanced causal"), so every rank does exactly
//    1/cp of the causal attention work; seq_len must be divisible by 2*cp.
//  - Precision: GEMM operands take gemm_operand_bytes (1 for FP8), everything else
//    elementwise_bytes (FP8 training keeps norms/residuals in BF16).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/enum_names.h"

namespace wl {

enum class MlpKind { kSwiGlu, kGelu };
enum class NormKind { kRmsNorm, kLayerNorm };
// kRope: rotary (no parameters); kLearned: a learned absolute table of max_seq_len rows.
enum class PositionKind { kRope, kLearned };

struct ModelSpec {
  std::string name;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t ffn_hidden = 0;
  int64_t heads = 0;
  int64_t kv_heads = 0;   // == heads for multi-head attention; < heads for GQA
  int64_t head_dim = 0;   // 0 means hidden / heads
  int64_t vocab = 0;
  MlpKind mlp = MlpKind::kSwiGlu;
  bool tied_embeddings = false;  // input embedding shared with the LM head
  NormKind norm = NormKind::kRmsNorm;
  bool bias = false;             // biases on every linear layer (GPT / Megatron style)
  PositionKind position = PositionKind::kRope;
  int64_t max_seq_len = 0;       // rows of the learned position table (kLearned only)
  // Parallel attention + MLP block (GPT-J; PaLM, Chowdhery et al. 2022 section 2): y = x +
  // Attn(LN(x)) + MLP(LN(x)), one norm and one residual add per layer, and under TP the two
  // branches' outputs are summed before one reduction (one all-reduce or reduce-scatter forward,
  // one input-gradient reduction backward) instead of one per branch.
  bool parallel_block = false;

  int64_t effective_head_dim() const { return head_dim > 0 ? head_dim : hidden / heads; }
};

// Throws sim::ConfigError when the shape is impossible (non-positive sizes, heads not divisible
// by kv_heads, hidden not divisible by heads without an explicit head_dim, ...).
void validate_model(const ModelSpec& spec);

// Presets: llama3-8b, llama3-70b, llama3-405b, gpt3-175b, and the ten Megatron-LM SC'21 Table 1
// GPT shapes megatron-1.7b ... megatron-1t. Unknown name -> ConfigError listing the names.
ModelSpec find_model_preset(std::string_view name);
std::vector<std::string> model_preset_names();

// Exact parameter counts of the whole (unsharded) model.
struct ParamCounts {
  int64_t token_embedding = 0;     // vocab * hidden
  int64_t position_embedding = 0;  // max_seq_len * hidden for learned positions, else 0
  int64_t per_layer = 0;           // one transformer block incl. its two norms and biases
  int64_t layers = 0;              // per_layer * spec.layers
  int64_t final_norm = 0;
  int64_t lm_head = 0;             // vocab * hidden when untied, 0 when tied
  int64_t total = 0;
  // "Embedding" = token + position tables. For untied models the LM head is NOT embedding: it
  // is a matmul on every token (torchtitan's convention for 6N). For tied models the head shares
  // the table, so its matmul is outside 6N (PaLM's convention).
  int64_t embedding() const { return token_embedding + position_embedding; }
  int64_t non_embedding() const { return total - embedding(); }
};
ParamCounts count_params(const ModelSpec& spec);

enum class Precision { kFp32, kBf16, kFp16, kFp8 };
inline constexpr sim::EnumNames<Precision, 4> kPrecisionNames{{{
    {Precision::kBf16, "bf16"}, {Precision::kFp16, "fp16"}, {Precision::kFp8, "fp8"}, {Precision::kFp32, "fp32"}}}};
int64_t gemm_operand_bytes(Precision p);   // 4 / 2 / 2 / 1
int64_t elementwise_bytes(Precision p);    // 4 / 2 / 2 / 2

struct ParallelShape {
  int64_t tp = 1;
  int64_t cp = 1;
  bool sequence_parallel = false;  // only meaningful when tp > 1
  // With sequence parallelism, what a column-parallel GEMM keeps for its weight gradient: false,
  // its input's sequence shard, all-gathered again in the backward (Megatron-LM, Korthikanti et
  // al. §4.2.2); true, the gathered input itself, with no regather (PyTorch's DTensor tensor
  // parallelism, as torchtitan runs it: the all-gather is an autograd op and the matmul saves its
  // output).
  bool sp_keeps_gathered = false;
};

// The model with a micro-batch, sequence length and TP/CP/SP shape: positive sizes, heads and
// ffn_hidden divisible by tp, seq_len within a learned position table and divisible as CP and SP
// need. Throws sim::ConfigError saying what does not fit.
void check_run(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len, const ParallelShape& shape);

// Local head counts under TP (see the KV replication convention above). Throws ConfigError.
int64_t local_q_heads(const ModelSpec& spec, int64_t tp);
int64_t local_kv_heads(const ModelSpec& spec, int64_t tp);
// Vocabulary rows held by one TP rank of a vocab-parallel embedding/head: ceil(vocab / tp)
// (Megatron pads the vocabulary so it divides).
int64_t local_vocab(const ModelSpec& spec, int64_t tp);

// Parameters held by ONE rank. Norm weights and row-parallel output biases are replicated on
// every TP rank; K/V projections follow the KV replication convention.
int64_t layer_params_per_rank(const ModelSpec& spec, int64_t tp);
// The weight matrices among them (the linear layers' weights: what FP8 GEMMs cast), per rank.
int64_t layer_matrix_params_per_rank(const ModelSpec& spec, int64_t tp);
// A pipeline stage with `stage_layers` blocks. The first stage also holds the token (and
// position) embedding; the last the final norm and the LM head. With tied embeddings and pp > 1
// the last stage keeps its own copy of the table (Megatron does, and all-reduces its gradient
// with the first stage); with pp == 1 the single stage holds it once.
int64_t stage_params_per_rank(const ModelSpec& spec, int64_t stage_layers, bool first_stage,
                              bool last_stage, int64_t pp, int64_t tp);

enum class PipelineSplit {
  kEven,               // layers % pp == 0 required
  kFirstLastOneFewer,  // Llama 3 §3.3.2: first and last stage get one layer fewer (126 = 16*8-2)
};
inline constexpr sim::EnumNames<PipelineSplit, 2> kPipelineSplitNames{{{
    {PipelineSplit::kEven, "even"}, {PipelineSplit::kFirstLastOneFewer, "first-last-one-fewer"}}}};
// Blocks per stage, first stage first. Throws ConfigError when the split is impossible.
std::vector<int64_t> split_layers(int64_t layers, int64_t pp, PipelineSplit split);

enum class OpClass { kGemm, kAttention, kElementwise, kNorm, kEmbedding, kLoss };
const char* op_class_name(OpClass c);

// One op of one micro-batch on one rank. Invariants: bwd_flops == bwd_input_flops +
// bwd_weight_flops and bwd_bytes == bwd_input_bytes + bwd_weight_bytes. Elementwise/norm FLOP
// counts are approximate operation counts (these ops are memory-bound: bytes set their time).
struct OpCost {
  std::string name;  // e.g. "qkv_proj"
  OpClass cls = OpClass::kGemm;
  double fwd_flops = 0;
  double bwd_flops = 0;         // model FLOPs of the backward pass
  double bwd_input_flops = 0;   // B: gradient w.r.t. the op's inputs
  double bwd_weight_flops = 0;  // W: gradient w.r.t. the op's weights
  double fwd_bytes = 0;         // HBM bytes read + written
  double bwd_bytes = 0;
  double bwd_input_bytes = 0;
  double bwd_weight_bytes = 0;
  // Hardware-only FLOPs in backward that are not model FLOPs (flash-attention recomputing
  // QK^T: 0.5x the forward attention FLOPs). Add them for time, never for MFU.
  double bwd_recompute_flops = 0;
  // GPU kernels each pass part launches: a GEMM's backward is two (dgrad, wgrad), a norm's weight
  // gradient a reduction of its own; an unfused (eager) op several (OpOptions::eager).
  int32_t fwd_kernels = 1, bwd_input_kernels = 1, bwd_weight_kernels = 0;
  // A GEMM that runs in BF16 in an FP8 job (the output projection): the BF16 rate, 2-byte operands.
  bool bf16_under_fp8 = false;
  // The part of each pass's work that eager PyTorch runs through its unvectorized elementwise
  // kernels (ATen's generic `elementwise_kernel` for broadcast or strided operands,
  // `unrolled_elementwise_kernel` for dtype-casting copies): their elements, and their HBM bytes
  // (already among the pass's bytes above). Such kernels issue a fixed number of elements per
  // second whatever the HBM (HardwareProfile::unvectorized_elementwise_rate); vectorized ones are
  // bandwidth-bound. 0 for fused kernels.
  struct Unvectorized {
    double elems = 0, bytes = 0;
  };
  Unvectorized fwd_unvec, bwd_input_unvec, bwd_weight_unvec;
};

struct OpOptions {
  // Count half of the full score+value matmuls for causal masking (see header comment).
  bool causal_half = true;
  // Flash-attention style core: no s x s matrix touches HBM; backward recomputes the scores.
  // false: the scores, the softmax output and their gradients are materialised in HBM.
  bool flash_attention = true;
  // Eager PyTorch without fusion (torchtitan-style model code, no torch.compile): RMSNorm, RoPE,
  // SwiGLU's activation and the loss run as the chains of ATen kernels their reference
  // implementations launch, each reading and writing HBM, with FP32 intermediates (transformer.cc
  // counts them). false: fused kernels (Megatron / Transformer Engine, or torch.compile).
  bool eager = false;
  // The loss as eager PyTorch runs it (head_ops: the FP32 cast, log_softmax, nll_loss), with eager
  // kernels or alone, as torchtitan's is under torch.compile (it compiles the blocks, not the loss).
  bool eager_loss = false;
  // FP8 with tensorwise dynamic scaling (torchao's Float8Linear, torchtitan's default float8
  // recipe): every FP8 GEMM's operands are scaled and cast by kernels of their own around it
  // (transformer.cc counts them). false: the casts are free (Transformer Engine's delayed scaling
  // fuses them into the neighbouring norm and activation kernels and caches the weights' casts).
  bool fp8_tensorwise_casts = false;
  // The share of each weight this rank casts to FP8 under tensorwise casts: 1, or 1 / the FSDP
  // group with torchao's FP8 all-gather (each rank casts its shard before the all-gather).
  double fp8_weight_cast_share = 1.0;
  // With that FP8 all-gather and FSDP resharding after forward, the backward gathers the weights
  // again and each rank casts its shard again.
  bool fp8_weight_recast_backward = false;
};

// One transformer block, forward order: attn_norm, qkv_proj, [rope], attention, [attn_copies
// (eager only)], attn_out_proj, attn_residual, mlp_norm, mlp_gate (SwiGLU only), mlp_up, mlp_act,
// mlp_down, mlp_residual.
// Dropout is not modelled (Llama 3 trains without it; Megatron fuses it into the bias adds).
std::vector<OpCost> layer_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                              const ParallelShape& shape, Precision precision,
                              const OpOptions& options = {});
// What torchtitan's op-level selective activation checkpointing (Recompute::kSelectiveOp)
// recomputes of one block before its backward, in forward order: every op but the attention core
// and the outputs of the odd-numbered aten.mm calls in the forward (wq, wk, wv, wo, w1, w3, w2:
// wk, wo and w3 are recomputed; the wk part of the fused qkv_proj is the op "k_proj"). FP8 linear
// layers call torch._scaled_mm, which the save list leaves out: all of them are recomputed.
std::vector<OpCost> op_sac_recompute_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                         const ParallelShape& shape, Precision precision,
                                         const OpOptions& options = {});
// The ops in the order their backward runs: reversed, except that an FP8 GEMM's cast op
// ("<gemm>_fp8_cast") stays just before its GEMM (its backward casts feed the GEMM's).
std::vector<OpCost> backward_order(std::vector<OpCost> ops);
// First pipeline stage: "embedding" (token lookup + learned position add when present).
std::vector<OpCost> embedding_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                  const ParallelShape& shape, Precision precision);
// Last pipeline stage: "final_norm", "lm_head" (vocab-parallel GEMM), "cross_entropy".
std::vector<OpCost> head_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                             const ParallelShape& shape, Precision precision, const OpOptions& options = {});

double total_fwd_flops(const std::vector<OpCost>& ops);
double total_bwd_flops(const std::vector<OpCost>& ops);

// ---- Communication per micro-batch per rank ----

enum class CollectiveKind { kAllReduce, kAllGather, kReduceScatter };
enum class CommGroup { kTp, kCp };
enum class Pass { kForward, kBackward };

// bytes is the size of the whole buffer on one rank, as nccl-tests sizes it: the buffer for an
// all-reduce, the gathered OUTPUT for an all-gather, the INPUT for a reduce-scatter. So an
// all-reduce and an all-gather + reduce-scatter pair of the same tensor have the same `bytes`.
// after_op names the op (in that pass's execution order; backward runs the ops in reverse) after
// which the collective is issued; the next op listed waits for it.
struct CommOp {
  std::string name;
  CollectiveKind kind = CollectiveKind::kAllReduce;
  CommGroup group = CommGroup::kTp;
  Pass pass = Pass::kForward;
  double bytes = 0;
  std::string after_op;
  // Backward only: it feeds the weight gradients alone (sequence parallelism's regather of a
  // saved GEMM input), so a schedule that splits the backward (zero-bubble) runs it with them.
  bool for_weight_grad = false;
};

struct LayerComm {
  std::vector<CommOp> ops;  // in issue order, forward ops first
  // Sum of `bytes` over the ops of one group and pass.
  double bytes(CommGroup group, Pass pass) const;
  int count(CommGroup group, Pass pass) const;
};

// One block. TP without SP: forward all-reduce after attn_out_proj and mlp_down; backward
// all-reduce of the input gradient of qkv_proj and of the MLP input. TP with SP: forward
// all-gather before qkv_proj / mlp_gate|up and reduce-scatter after attn_out_proj / mlp_down;
// backward the mirror pair plus one more all-gather of each saved (sequence-sharded) GEMM input
// for its weight gradient (Korthikanti §4.2.2), none where the GEMMs keep their gathered input
// (ParallelShape::sp_keeps_gathered). Each buffer is b*(s/cp)*h elements. CP:
// all-gather of K and V before attention; in backward K/V are gathered again (not kept, so
// activation memory stays per-rank) and dK/dV reduce-scattered; buffer b*s*2*kv_local*head_dim.
LayerComm layer_comm(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                     const ParallelShape& shape, Precision precision, const OpOptions& options = {});
// What torchtitan's op-level selective checkpointing re-runs of a block's collectives before its
// backward (op_sac_recompute_ops): the forward's TP all-gathers and all-reduces. Its save list
// keeps reduce-scatter outputs (_c10d_functional.reduce_scatter_tensor), and CP's K/V gather
// belongs to the attention core, which is kept.
LayerComm op_sac_recompute_comm(const LayerComm& forward);
// Embedding (vocab-parallel): forward all-reduce (reduce-scatter with SP) of b*(s/cp)*h.
LayerComm embedding_comm(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                         const ParallelShape& shape, Precision precision);
// Head: with SP an all-gather of the hidden states before lm_head and a reduce-scatter of their
// gradient; without SP a backward all-reduce of that gradient. Vocab-parallel cross-entropy adds
// three fp32 all-reduces of b*(s/cp) values (max logit, sum of exp, target logit).
LayerComm head_comm(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                    const ParallelShape& shape, Precision precision);

// Bytes one rank sends for `op` under a ring algorithm over `group_size` ranks: all-reduce
// 2(n-1)/n * bytes, all-gather and reduce-scatter (n-1)/n * bytes each. This is where "an
// all-reduce costs the same as the all-gather + reduce-scatter pair of SP" shows.
double ring_bytes_sent_per_rank(const CommOp& op, int64_t group_size);

// Bytes sent across one pipeline boundary per micro-batch in each direction (activations forward,
// their gradients backward): b*(s/cp)*h*elem, divided by tp with SP (each TP rank sends its
// sequence shard).
double pp_boundary_bytes(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                         const ParallelShape& shape, Precision precision);

// ---- Closed-form FLOP counts ----

// PaLM (arXiv 2204.02311 App. B): 6N + 12*L*H*Q*T per token, N = count_params().non_embedding(),
// L layers, H query heads, Q head dim, T seq_len. The attention term is the FULL (non-causal)
// count, kept as PaLM wrote it so MFU figures stay comparable with published ones.
double model_flops_per_token(const ModelSpec& spec, int64_t seq_len);
// Megatron-LM SC'21 Eq. 3, with full activation recompute (one extra forward):
// 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h)).
double megatron_flops_per_iteration(double batch, double seq_len, double layers, double hidden,
                                    double vocab);
// Korthikanti et al. 2022 App. A model FLOPs (no recompute): 72*B*L*s*h^2*(1 + s/(6h) + V/(12hL)).
double korthikanti_model_flops_per_iteration(double batch, double seq_len, double layers,
                                             double hidden, double vocab);
// Korthikanti hardware FLOPs with selective recompute: 72*B*L*s*h^2*(1 + s/(3h) + V/(12hL)).
double korthikanti_selective_hw_flops_per_iteration(double batch, double seq_len, double layers,
                                                    double hidden, double vocab);

}  // namespace wl
