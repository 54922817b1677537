// workloads/model/transformer.cc: see transformer.h for the conventions.
#include "workloads/model/transformer.h"

#include <algorithm>
#include <array>
#include <sstream>

#include "sim/error.h"

namespace wl {
namespace {

[[noreturn]] void fail(const std::string& msg) { throw sim::ConfigError(msg); }

// ---- Presets ----

// Llama 3 (Dubey et al., "The Llama 3 Herd of Models", arXiv 2407.21783, Table 3): layers, model
// dim, FFN dim, heads, 8 KV heads, SwiGLU, RoPE. Vocabulary 128,256 as in the released
// Hugging Face config.json files (the paper rounds it to "128K"); untied input/output embeddings,
// RMSNorm, no biases, head dim 128.
ModelSpec llama3(const char* name, int64_t layers, int64_t hidden, int64_t ffn, int64_t heads) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.ffn_hidden = ffn;
  m.heads = heads;
  m.kv_heads = 8;
  m.head_dim = 128;
  m.vocab = 128256;
  m.mlp = MlpKind::kSwiGlu;
  m.tied_embeddings = false;
  m.norm = NormKind::kRmsNorm;
  m.bias = false;
  m.position = PositionKind::kRope;
  return m;
}

// GPT-style block as in Megatron-LM: LayerNorm, biases, GELU MLP with ffn = 4h, multi-head
// attention, learned absolute positions of 2,048 rows, input embedding tied to the output layer
// (Narayanan et al. SC'21 Eq. 2 counts V*h once and adds s*h for the position table).
ModelSpec gpt(const char* name, int64_t layers, int64_t hidden, int64_t heads, int64_t vocab) {
  ModelSpec m;
  m.name = name;
  m.layers = layers;
  m.hidden = hidden;
  m.ffn_hidden = 4 * hidden;
  m.heads = heads;
  m.kv_heads = heads;
  m.head_dim = hidden / heads;
  m.vocab = vocab;
  m.mlp = MlpKind::kGelu;
  m.tied_embeddings = true;
  m.norm = NormKind::kLayerNorm;
  m.bias = true;
  m.position = PositionKind::kLearned;
  m.max_seq_len = 2048;
  return m;
}

// Megatron-LM SC'21 (arXiv 2104.04473) Table 1: heads, hidden, layers; vocabulary 51,200 and
// sequence 2,048 for every row.
constexpr int64_t kMegatronVocab = 51200;
struct MegatronRow {
  const char* name;
  int64_t heads, hidden, layers;
};
constexpr std::array<MegatronRow, 10> kMegatronTable1 = {{
    {"megatron-1.7b", 24, 2304, 24},
    {"megatron-3.6b", 32, 3072, 30},
    {"megatron-7.5b", 32, 4096, 36},
    {"megatron-18.4b", 48, 6144, 40},
    {"megatron-39.1b", 64, 8192, 48},
    {"megatron-76.1b", 80, 10240, 60},
    {"megatron-145.6b", 96, 12288, 80},
    {"megatron-310.1b", 128, 16384, 96},
    {"megatron-529.6b", 128, 20480, 105},
    {"megatron-1t", 160, 25600, 128},
}};

std::vector<ModelSpec> all_presets() {
  std::vector<ModelSpec> v;
  v.push_back(llama3("llama3-8b", 32, 4096, 14336, 32));
  v.push_back(llama3("llama3-70b", 80, 8192, 28672, 64));
  v.push_back(llama3("llama3-405b", 126, 16384, 53248, 128));
  // GPT-3 175B (Brown et al. 2020, arXiv 2005.14165, Table 2.1): 96 layers, d_model 12,288,
  // 96 heads of 128, context 2,048. Vocabulary 50,257: GPT-3 reuses GPT-2's BPE tokenizer
  // (Radford et al. 2019 §2.2). Megatron pads it to 51,200; both give 174.6B parameters.
  v.push_back(gpt("gpt3-175b", 96, 12288, 96, 50257));
  for (const auto& r : kMegatronTable1) v.push_back(gpt(r.name, r.layers, r.hidden, r.heads, kMegatronVocab));
  return v;
}

int64_t norm_params(const ModelSpec& s) {
  return s.norm == NormKind::kRmsNorm ? s.hidden : 2 * s.hidden;  // gamma (+ beta)
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void validate_run(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                  const ParallelShape& shape) {
  validate_model(spec);
  std::ostringstream os;
  if (micro_batch <= 0 || seq_len <= 0) {
    os << "model " << spec.name << ": micro_batch (" << micro_batch << ") and seq_len (" << seq_len
       << ") must be positive";
    fail(os.str());
  }
  if (shape.tp <= 0 || shape.cp <= 0) {
    os << "model " << spec.name << ": tp (" << shape.tp << ") and cp (" << shape.cp
       << ") must be positive";
    fail(os.str());
  }
  if (spec.ffn_hidden % shape.tp != 0) {
    os << "model " << spec.name << ": ffn_hidden " << spec.ffn_hidden << " is not divisible by tp "
       << shape.tp;
    fail(os.str());
  }
  local_q_heads(spec, shape.tp);
  local_kv_heads(spec, shape.tp);
  if (shape.cp > 1 && seq_len % (2 * shape.cp) != 0) {
    os << "model " << spec.name << ": seq_len " << seq_len << " must be divisible by 2*cp = "
       << 2 * shape.cp << " (load-balanced causal context parallelism)";
    fail(os.str());
  }
  if (shape.sequence_parallel && shape.tp > 1 && (seq_len / shape.cp) % shape.tp != 0) {
    os << "model " << spec.name << ": with sequence parallelism seq_len/cp = " << seq_len / shape.cp
       << " must be divisible by tp " << shape.tp;
    fail(os.str());
  }
  if (spec.position == PositionKind::kLearned && seq_len > spec.max_seq_len) {
    os << "model " << spec.name << ": seq_len " << seq_len << " exceeds the learned position table ("
       << spec.max_seq_len << " rows)";
    fail(os.str());
  }
}

// Per-rank geometry of one micro-batch.
struct Geometry {
  double tokens;       // b * s / cp: tokens through every GEMM on this rank
  double norm_tokens;  // tokens through norms/residuals: tokens / tp with SP
  double full_seq;     // s: keys per query after the CP all-gather
  double q_heads, kv_heads, head_dim, hidden, ffn_local, vocab_local;
  double eg, ee;       // bytes per GEMM operand / per other element
};

Geometry geometry(const ModelSpec& spec, int64_t b, int64_t s, const ParallelShape& shape,
                  Precision p) {
  Geometry g;
  g.tokens = static_cast<double>(b) * static_cast<double>(s / shape.cp);
  const bool sp = shape.sequence_parallel && shape.tp > 1;
  g.norm_tokens = sp ? g.tokens / static_cast<double>(shape.tp) : g.tokens;
  g.full_seq = static_cast<double>(s);
  g.q_heads = static_cast<double>(local_q_heads(spec, shape.tp));
  g.kv_heads = static_cast<double>(local_kv_heads(spec, shape.tp));
  g.head_dim = static_cast<double>(spec.effective_head_dim());
  g.hidden = static_cast<double>(spec.hidden);
  g.ffn_local = static_cast<double>(spec.ffn_hidden / shape.tp);
  g.vocab_local = static_cast<double>(local_vocab(spec, shape.tp));
  g.eg = static_cast<double>(gemm_operand_bytes(p));
  g.ee = static_cast<double>(elementwise_bytes(p));
  return g;
}

void finish(OpCost& op) {
  op.bwd_flops = op.bwd_input_flops + op.bwd_weight_flops;
  op.bwd_bytes = op.bwd_input_bytes + op.bwd_weight_bytes;
}

// C[M,N] = A[M,K] * W[K,N]. Forward 2MKN; dgrad dA = dC W^T and wgrad dW = A^T dC are each 2MKN
// and each touch the same three matrices once.
OpCost gemm(const char* name, double m, double k, double n, double eb) {
  OpCost op;
  op.name = name;
  op.cls = OpClass::kGemm;
  op.fwd_flops = 2.0 * m * k * n;
  op.bwd_input_flops = op.fwd_flops;
  op.bwd_weight_flops = op.fwd_flops;
  const double bytes = eb * (m * k + k * n + m * n);
  op.fwd_bytes = bytes;
  op.bwd_input_bytes = bytes;
  op.bwd_weight_bytes = bytes;
  op.bwd_weight_kernels = 1;
  finish(op);
  return op;
}

// Tensorwise dynamic scaling (torchao float8/float8_linear.py, float8_ops.py; torchtitan's FP8):
// each FP8 operand gets a scale from its amax, a full reduction before the cast, so a cast costs
// amax (read 2 bytes) + cast (read 2, write 1) = 5 bytes per BF16 element; torch._scaled_mm wants
// its second operand column-major, so the transposes the backward needs are copies (read 1,
// write 1). Where each is charged, for C[M,N] = A[M,K] * W[K,N]:
//  - a block input (the qkv projection's, and the MLP's shared by gate and up) is cast once by
//    the norm that produces it, on its own tokens: the sequence shard under sequence
//    parallelism, before the all-gather (torchao float8_tensor_parallel.py,
//    PrepareFloat8ModuleInput); the gradient into a row-parallel GEMM (attention output, MLP
//    down) likewise by the residual op whose backward produces it, before its all-gather
//    (fp8_input_cast_bytes below);
//  - the rest by a memory-bound op just before the GEMM (fp8_casts): forward W (5 K N) and, for a
//    row-parallel GEMM, its local input A (5 M K); dgrad W^T (2 K N) and, for a column-parallel
//    GEMM, its local output gradient dC (5 M N); wgrad the transposed copies of dC and A
//    (2 (M N + M K)). Kernels: 2 per cast, 1 per transpose. With torchao's FP8 all-gather under
//    FSDP (weight_share = 1 / the sharding group) each rank casts only its shard of W, before
//    the all-gather (torchao float8 fsdp_utils.py, fsdp_pre_all_gather).
// Counted as torch.compile runs them (no eager chains of ATen kernels).
constexpr double kFp8CastBytes = 5.0, kFp8TransposeBytes = 2.0;

OpCost fp8_casts(const char* gemm_name, double m, double k, double n, bool row_parallel, const OpOptions& o) {
  const double weight_share = o.fp8_weight_cast_share;
  OpCost op;
  op.name = std::string(gemm_name) + "_fp8_cast";
  op.cls = OpClass::kElementwise;
  op.fwd_bytes = kFp8CastBytes * (k * n * weight_share + (row_parallel ? m * k : 0.0));
  op.bwd_input_bytes = kFp8TransposeBytes * k * n + (row_parallel ? 0.0 : kFp8CastBytes * m * n) +
                       (o.fp8_weight_recast_backward ? kFp8CastBytes * k * n * weight_share : 0.0);
  op.bwd_weight_bytes = kFp8TransposeBytes * (m * n + m * k);
  op.fwd_kernels = row_parallel ? 4 : 2;
  op.bwd_input_kernels = row_parallel ? 1 : 3;
  op.bwd_weight_kernels = 2;
  finish(op);
  return op;
}

// A block input's cast charged to the norm producing it (forward), or a row-parallel GEMM's
// output gradient's to the residual op producing it (backward): `elems` BF16 elements.
void add_fp8_input_cast(OpCost& op, double elems, bool forward) {
  (forward ? op.fwd_bytes : op.bwd_input_bytes) += kFp8CastBytes * elems;
  (forward ? op.fwd_kernels : op.bwd_input_kernels) += 2;
  finish(op);
}

// Norm over `tokens` rows of `hidden`. Operation counts per element: RMSNorm 4 (square,
// accumulate, scale by rsqrt, gamma); LayerNorm 7 (mean, subtract, square, accumulate, scale,
// gamma, beta). Backward input grad ~2x forward; the gamma(/beta) gradient is a reduction over
// tokens (2 resp. 4 per element). Bytes: forward reads x and writes y; backward reads x and dy
// and writes dx; the weight grad writes the (replicated) norm weights.
//
// Eager RMSNorm (the Llama reference and torchtitan: `self._norm(x.float()).type_as(x) *
// self.weight` with `_norm(x) = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)`), bytes per
// element with activations of ee bytes and FP32 intermediates. Forward, 8 kernels: x.float()
// (read ee, write 4), pow (4 + 4), mean (4), + eps and rsqrt (per row), x * r (4 + 4), type_as
// (4 + ee), * weight (ee + ee): 28 + 4 ee. Input gradient, 13 kernels (autograd's backward of each):
// g * weight (2 ee), to FP32 (ee + 4), g * r (4 + 4), g * x (4 + 4 + 4) and its row sum (4),
// rsqrt and add backward (per row), mean backward (the row gradient expanded and divided: writes
// 4), pow backward (x^1, x 2, x g: 3 x (4 + 4)), the two paths' sum (4 + 4 + 4), to ee (4 + ee):
// 72 + 4 ee. Weight gradient, 2 kernels: g * y (3 ee) and its sum over tokens (ee). Unvectorized
// among them (as the H100 and H200 captures in tests/data/captures run them): forward x.float()
// (a casting copy), x * r (r broadcast over the row) and * weight (broadcast over the tokens), 3
// passes and 12 + 3 ee bytes; input gradient g * weight, to FP32, g * r and mean backward's
// divide (a broadcast operand), 4 passes and 16 + 3 ee bytes. LayerNorm is one ATen kernel each
// way (native_layer_norm): as fused.
OpCost norm(const char* name, const ModelSpec& spec, double tokens, double ee, bool eager = false) {
  const bool rms = spec.norm == NormKind::kRmsNorm;
  const double n = tokens * static_cast<double>(spec.hidden);
  const double w = static_cast<double>(norm_params(spec));
  OpCost op;
  op.name = name;
  op.cls = OpClass::kNorm;
  op.fwd_flops = (rms ? 4.0 : 7.0) * n;
  op.bwd_input_flops = 2.0 * op.fwd_flops;
  op.bwd_weight_flops = (rms ? 2.0 : 4.0) * n;
  op.fwd_bytes = ee * (2.0 * n + w);
  op.bwd_input_bytes = ee * (3.0 * n + w);
  op.bwd_weight_bytes = ee * w;
  op.bwd_weight_kernels = 1;
  if (eager && rms) {
    op.fwd_bytes = (28.0 + 4.0 * ee) * n + ee * w;
    op.bwd_input_bytes = (72.0 + 4.0 * ee) * n + ee * w;
    op.fwd_unvec = {3.0 * n, (12.0 + 3.0 * ee) * n};
    op.bwd_input_unvec = {4.0 * n, (16.0 + 3.0 * ee) * n};
    op.bwd_weight_bytes = 4.0 * ee * n + ee * w;
    op.fwd_kernels = 8;
    op.bwd_input_kernels = 13;
    op.bwd_weight_kernels = 2;
  }
  finish(op);
  return op;
}

// Generic elementwise op: `flops_per_elem` forward, 2x that in backward (all input-grad).
OpCost elementwise(const char* name, double elems, double flops_per_elem, double fwd_accesses,
                   double bwd_accesses, double ee) {
  OpCost op;
  op.name = name;
  op.cls = OpClass::kElementwise;
  op.fwd_flops = flops_per_elem * elems;
  op.bwd_input_flops = 2.0 * op.fwd_flops;
  op.fwd_bytes = ee * fwd_accesses * elems;
  op.bwd_input_bytes = ee * bwd_accesses * elems;
  finish(op);
  return op;
}

}  // namespace

void check_run(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len, const ParallelShape& shape) {
  validate_run(spec, micro_batch, seq_len, shape);
}

void validate_model(const ModelSpec& s) {
  std::ostringstream os;
  os << "model " << (s.name.empty() ? std::string("<unnamed>") : s.name) << ": ";
  if (s.layers <= 0 || s.hidden <= 0 || s.ffn_hidden <= 0 || s.heads <= 0 || s.kv_heads <= 0 ||
      s.vocab <= 0 || s.head_dim < 0) {
    os << "layers, hidden, ffn_hidden, heads, kv_heads and vocab must be positive";
    fail(os.str());
  }
  if (s.heads % s.kv_heads != 0) {
    os << "heads " << s.heads << " is not a multiple of kv_heads " << s.kv_heads;
    fail(os.str());
  }
  if (s.head_dim == 0 && s.hidden % s.heads != 0) {
    os << "hidden " << s.hidden << " is not divisible by heads " << s.heads
       << "; set head_dim explicitly";
    fail(os.str());
  }
  if (s.position == PositionKind::kLearned && s.max_seq_len <= 0) {
    os << "learned positions need max_seq_len > 0";
    fail(os.str());
  }
}

ModelSpec find_model_preset(std::string_view name) {
  for (auto& m : all_presets())
    if (m.name == name) return m;
  std::ostringstream os;
  os << "unknown model preset '" << name << "'; known presets:";
  for (const auto& n : model_preset_names()) os << ' ' << n;
  fail(os.str());
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const auto& m : all_presets()) names.push_back(m.name);
  return names;
}

ParamCounts count_params(const ModelSpec& s) {
  validate_model(s);
  const int64_t h = s.hidden, hd = s.effective_head_dim();
  const int64_t q = s.heads * hd, kv = s.kv_heads * hd;
  const int64_t mats = s.mlp == MlpKind::kSwiGlu ? 3 : 2;
  int64_t layer = 0;
  layer += (s.parallel_block ? 1 : 2) * norm_params(s);  // attention and MLP norms (one, shared, in a parallel block)
  layer += h * (q + 2 * kv) + q * h;            // QKV and output projections
  layer += mats * h * s.ffn_hidden;             // MLP matrices
  if (s.bias) {
    layer += (q + 2 * kv) + h;                  // QKV bias, output-projection bias
    layer += (mats - 1) * s.ffn_hidden + h;     // MLP input bias(es), MLP output bias
  }
  ParamCounts c;
  c.token_embedding = s.vocab * h;
  c.position_embedding = s.position == PositionKind::kLearned ? s.max_seq_len * h : 0;
  c.per_layer = layer;
  c.layers = layer * s.layers;
  c.final_norm = norm_params(s);
  c.lm_head = s.tied_embeddings ? 0 : s.vocab * h;
  c.total = c.token_embedding + c.position_embedding + c.layers + c.final_norm + c.lm_head;
  return c;
}

int64_t gemm_operand_bytes(Precision p) {
  switch (p) {
    case Precision::kFp32: return 4;
    case Precision::kBf16:
    case Precision::kFp16: return 2;
    case Precision::kFp8: return 1;
  }
  return 2;
}

int64_t elementwise_bytes(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

int64_t local_q_heads(const ModelSpec& spec, int64_t tp) {
  if (tp <= 0 || spec.heads % tp != 0) {
    std::ostringstream os;
    os << "model " << spec.name << ": " << spec.heads << " attention heads cannot be split over tp "
       << tp;
    fail(os.str());
  }
  return spec.heads / tp;
}

int64_t local_kv_heads(const ModelSpec& spec, int64_t tp) {
  if (tp > 0 && spec.kv_heads % tp == 0) return spec.kv_heads / tp;
  if (tp > 0 && tp % spec.kv_heads == 0) return 1;  // replicated on tp / kv_heads ranks
  std::ostringstream os;
  os << "model " << spec.name << ": " << spec.kv_heads << " KV heads and tp " << tp
     << " do not divide one another (neither shardable nor replicable)";
  fail(os.str());
}

int64_t local_vocab(const ModelSpec& spec, int64_t tp) { return ceil_div(spec.vocab, tp); }

int64_t layer_matrix_params_per_rank(const ModelSpec& s, int64_t tp) {
  const int64_t h = s.hidden, hd = s.effective_head_dim();
  const int64_t q = local_q_heads(s, tp) * hd, kv = local_kv_heads(s, tp) * hd;
  const int64_t mats = s.mlp == MlpKind::kSwiGlu ? 3 : 2;
  return h * (q + 2 * kv) + q * h + mats * h * (s.ffn_hidden / tp);
}

int64_t layer_params_per_rank(const ModelSpec& s, int64_t tp) {
  validate_model(s);
  if (s.ffn_hidden % tp != 0) {
    std::ostringstream os;
    os << "model " << s.name << ": ffn_hidden " << s.ffn_hidden << " is not divisible by tp " << tp;
    fail(os.str());
  }
  const int64_t h = s.hidden, hd = s.effective_head_dim();
  const int64_t q = local_q_heads(s, tp) * hd, kv = local_kv_heads(s, tp) * hd;
  const int64_t f = s.ffn_hidden / tp;
  const int64_t mats = s.mlp == MlpKind::kSwiGlu ? 3 : 2;
  int64_t p = (s.parallel_block ? 1 : 2) * norm_params(s) + layer_matrix_params_per_rank(s, tp);
  if (s.bias) p += (q + 2 * kv) + h + (mats - 1) * f + h;  // row-parallel biases replicated
  return p;
}

int64_t stage_params_per_rank(const ModelSpec& s, int64_t stage_layers, bool first_stage,
                              bool last_stage, int64_t pp, int64_t tp) {
  int64_t p = stage_layers * layer_params_per_rank(s, tp);
  const int64_t table = local_vocab(s, tp) * s.hidden;
  if (first_stage) {
    p += table;
    if (s.position == PositionKind::kLearned) p += s.max_seq_len * s.hidden;
  }
  if (last_stage) {
    p += norm_params(s);
    if (!s.tied_embeddings || (pp > 1 && !first_stage)) p += table;
  }
  return p;
}

std::vector<int64_t> split_layers(int64_t layers, int64_t pp, PipelineSplit split) {
  std::ostringstream os;
  if (pp <= 0 || layers <= 0) {
    os << "split_layers: layers (" << layers << ") and pp (" << pp << ") must be positive";
    fail(os.str());
  }
  if (split == PipelineSplit::kEven || pp == 1) {
    if (layers % pp != 0) {
      os << layers << " layers cannot be split evenly over " << pp << " pipeline stages";
      fail(os.str());
    }
    return std::vector<int64_t>(static_cast<size_t>(pp), layers / pp);
  }
  if ((layers + 2) % pp != 0 || (layers + 2) / pp < 2) {
    os << layers << " layers: the first/last-one-fewer split needs (layers + 2) divisible by pp "
       << pp << " with at least 2 layers per stage";
    fail(os.str());
  }
  std::vector<int64_t> v(static_cast<size_t>(pp), (layers + 2) / pp);
  v.front() -= 1;
  v.back() -= 1;
  return v;
}

const char* op_class_name(OpClass c) {
  switch (c) {
    case OpClass::kGemm: return "gemm";
    case OpClass::kAttention: return "attention";
    case OpClass::kElementwise: return "elementwise";
    case OpClass::kNorm: return "norm";
    case OpClass::kEmbedding: return "embedding";
    case OpClass::kLoss: return "loss";
  }
  return "?";
}

std::vector<OpCost> layer_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                              const ParallelShape& shape, Precision precision,
                              const OpOptions& options) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  const double q_cols = g.q_heads * g.head_dim;
  const double kv_cols = 2.0 * g.kv_heads * g.head_dim;
  std::vector<OpCost> ops;
  const bool eager = options.eager;
  const bool casts = options.fp8_tensorwise_casts && precision == Precision::kFp8;
  const double shard_elems = g.norm_tokens * g.hidden;  // a block input or output, as the norm sees it
  ops.push_back(norm("attn_norm", spec, g.norm_tokens, g.ee, eager));
  if (casts) add_fp8_input_cast(ops.back(), shard_elems, true);
  if (casts) ops.push_back(fp8_casts("qkv_proj", g.tokens, g.hidden, q_cols + kv_cols, false, options));
  ops.push_back(gemm("qkv_proj", g.tokens, g.hidden, q_cols + kv_cols, g.eg));
  if (spec.position == PositionKind::kRope) {
    // Rotation of Q and K: 6 operations per pair of elements = 3 per element; read + write.
    const double elems = g.tokens * (g.q_heads + g.kv_heads) * g.head_dim;
    OpCost rope = elementwise("rope", elems, 3.0, 2.0, 2.0, g.ee);
    rope.bwd_input_flops = rope.fwd_flops;  // the inverse rotation costs the same
    if (eager) {
      // torchtitan's apply_rotary_emb, for Q and for K: x.float() (ee + 4), the complex product
      // with freqs_cis (4 + 4), type_as (4 + ee): 3 kernels and 16 + 2 ee bytes per element; the
      // backward runs the same three in reverse. Unvectorized: the casting copy to FP32 (one pass)
      // and the complex product, freqs_cis broadcast over batch and heads (one pass over elems / 2
      // complex numbers): 12 + ee bytes per element.
      rope.fwd_bytes = rope.bwd_input_bytes = (16.0 + 2.0 * g.ee) * elems;
      rope.fwd_kernels = rope.bwd_input_kernels = 6;
      rope.fwd_unvec = rope.bwd_input_unvec = {1.5 * elems, (12.0 + g.ee) * elems};
    }
    finish(rope);
    ops.push_back(rope);
  }
  {
    // Attention core. Full count: QK^T and PV are each 2 * (s/cp) * s * head_dim per query head
    // and sequence. Causal: half of it (the load-balanced CP layout gives each rank exactly 1/cp
    // of the causal work, so the same factor applies per rank).
    OpCost at;
    at.name = "attention";
    at.cls = OpClass::kAttention;
    const double q_len = g.tokens;  // b * s / cp query rows
    const double full = 4.0 * q_len * g.full_seq * g.q_heads * g.head_dim;
    at.fwd_flops = options.causal_half ? 0.5 * full : full;
    at.bwd_input_flops = 2.0 * at.fwd_flops;  // dQ, dK (via dS) and dV, dP: four matmuls
    const double qo = g.tokens * q_cols;                          // Q and O elements
    const double kv = static_cast<double>(micro_batch) * g.full_seq * kv_cols;  // gathered K, V
    const double lse = 4.0 * g.tokens * g.q_heads;               // fp32 log-sum-exp per row
    if (options.flash_attention) {
      at.bwd_recompute_flops = 0.5 * at.fwd_flops;  // QK^T again
      at.fwd_bytes = g.ee * (2.0 * qo + kv) + lse;
      at.bwd_input_bytes = g.ee * (4.0 * qo + 2.0 * kv) + lse;  // Q,K,V,O,dO in; dQ,dK,dV out
    } else {
      const double scores = q_len * g.full_seq * g.q_heads;  // full s x s matrix, masked
      at.fwd_bytes = g.ee * (2.0 * qo + kv + 4.0 * scores);  // write S, read S, write P, read P
      at.bwd_input_bytes = g.ee * (4.0 * qo + 2.0 * kv + 5.0 * scores);
    }
    finish(at);
    ops.push_back(at);
  }
  const bool gqa = g.q_heads > g.kv_heads;
  if (eager && (gqa || !options.flash_attention)) {
    // The copies torchtitan's attention makes around SDPA (models/llama3/model/model.py):
    // repeat_kv expands K and V to the query heads and reshapes them, one unvectorized copy each
    // (the expanded source has a zero stride); its backward sums the copies back, one reduction
    // each. The output's transpose(1, 2) costs nothing: torchtitan rotates Q and K in
    // [batch, seq, heads, dim] and hands SDPA transposed views, so cuDNN's fused attention writes
    // its output in that layout and the transpose is contiguous (tests/data/captures/h100-sxm/
    // tt-*: no kernel between the attention and the output projection, whose saved input is the
    // attention's output itself). Unfused attention (flash_attention: false, PyTorch's math SDPA)
    // computes its output with a batched matmul in [batch, heads, seq, dim]: there the transpose
    // copies it (one unvectorized copy; its backward is a view).
    const double q_elems = g.tokens * q_cols;
    const double kv_elems = g.tokens * kv_cols;  // K and V
    OpCost cp;
    cp.name = "attn_copies";
    cp.cls = OpClass::kElementwise;
    cp.fwd_kernels = 0;
    cp.bwd_input_kernels = 0;
    if (gqa) {
      cp.fwd_bytes = g.ee * (kv_elems + 2.0 * q_elems);
      cp.fwd_unvec = {2.0 * q_elems, g.ee * (kv_elems + 2.0 * q_elems)};
      cp.fwd_kernels = 2;
      cp.bwd_input_bytes = g.ee * (2.0 * q_elems + kv_elems);
      cp.bwd_input_kernels = 2;
    }
    if (!options.flash_attention) {
      cp.fwd_bytes += 2.0 * g.ee * q_elems;
      cp.fwd_unvec.elems += q_elems;
      cp.fwd_unvec.bytes += 2.0 * g.ee * q_elems;
      cp.fwd_kernels += 1;
    }
    finish(cp);
    ops.push_back(cp);
  }
  if (casts) ops.push_back(fp8_casts("attn_out_proj", g.tokens, q_cols, g.hidden, true, options));
  ops.push_back(gemm("attn_out_proj", g.tokens, q_cols, g.hidden, g.eg));
  if (!spec.parallel_block) {
    // Residual add: 1 operation, read 2 + write 1; backward adds the two gradient streams.
    ops.push_back(elementwise("attn_residual", g.norm_tokens * g.hidden, 1.0, 3.0, 3.0, g.ee));
    ops.back().bwd_input_flops = ops.back().fwd_flops;
    finish(ops.back());
    if (casts) add_fp8_input_cast(ops.back(), shard_elems, false);  // attn_out_proj's dC
    ops.push_back(norm("mlp_norm", spec, g.norm_tokens, g.ee, eager));
    if (casts) add_fp8_input_cast(ops.back(), shard_elems, true);
  }
  const double ffn_elems = g.tokens * g.ffn_local;
  if (spec.mlp == MlpKind::kSwiGlu) {
    if (casts) ops.push_back(fp8_casts("mlp_gate", g.tokens, g.hidden, g.ffn_local, false, options));
    ops.push_back(gemm("mlp_gate", g.tokens, g.hidden, g.ffn_local, g.eg));
    if (casts) ops.push_back(fp8_casts("mlp_up", g.tokens, g.hidden, g.ffn_local, false, options));
    ops.push_back(gemm("mlp_up", g.tokens, g.hidden, g.ffn_local, g.eg));
    // silu(gate) * up: sigmoid ~4, two multiplies; read gate and up, write the product;
    // backward reads dy, gate, up and writes dgate, dup.
    ops.push_back(elementwise("mlp_act", ffn_elems, 6.0, 3.0, 5.0, g.ee));
    if (eager) {
      // `F.silu(w1(x)) * w3(x)`: silu (2 accesses) and the product (3); backward: the product's
      // two gradients (3 each) and silu's (3).
      ops.back().fwd_bytes = 5.0 * g.ee * ffn_elems;
      ops.back().bwd_input_bytes = 9.0 * g.ee * ffn_elems;
      ops.back().fwd_kernels = 2;
      ops.back().bwd_input_kernels = 3;
      finish(ops.back());
    }
  } else {
    if (casts) ops.push_back(fp8_casts("mlp_up", g.tokens, g.hidden, g.ffn_local, false, options));
    ops.push_back(gemm("mlp_up", g.tokens, g.hidden, g.ffn_local, g.eg));
    // tanh-approximated GELU ~8 operations; read x, write y; backward reads dy and x, writes dx.
    ops.push_back(elementwise("mlp_act", ffn_elems, 8.0, 2.0, 3.0, g.ee));
  }
  if (casts) ops.push_back(fp8_casts("mlp_down", g.tokens, g.ffn_local, g.hidden, true, options));
  ops.push_back(gemm("mlp_down", g.tokens, g.ffn_local, g.hidden, g.eg));
  if (spec.parallel_block) {
    // x + attention branch + MLP branch: 2 operations, read 3 + write 1.
    ops.push_back(elementwise("block_residual", g.norm_tokens * g.hidden, 2.0, 4.0, 4.0, g.ee));
  } else {
    ops.push_back(elementwise("mlp_residual", g.norm_tokens * g.hidden, 1.0, 3.0, 3.0, g.ee));
  }
  ops.back().bwd_input_flops = ops.back().fwd_flops;
  finish(ops.back());
  if (casts) add_fp8_input_cast(ops.back(), shard_elems, false);  // mlp_down's dC (and attn_out's in a parallel block)
  return ops;
}

std::vector<OpCost> op_sac_recompute_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                         const ParallelShape& shape, Precision precision,
                                         const OpOptions& options) {
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  std::vector<OpCost> out;
  int mm = 0;  // aten.mm calls so far in the block's forward; the even-numbered are recomputed
  for (const OpCost& o : layer_ops(spec, micro_batch, seq_len, shape, precision, options)) {
    if (o.cls == OpClass::kAttention) continue;  // SDPA's output is saved
    if (o.cls != OpClass::kGemm || precision == Precision::kFp8) {
      out.push_back(o);
      continue;
    }
    if (o.name == "qkv_proj") {  // wq (saved), wk (recomputed), wv (saved)
      mm += 3;
      out.push_back(gemm("k_proj", g.tokens, g.hidden, g.kv_heads * g.head_dim, g.eg));
      continue;
    }
    if (++mm % 2 == 0) out.push_back(o);
  }
  return out;
}

LayerComm op_sac_recompute_comm(const LayerComm& forward) {
  LayerComm out;
  for (const CommOp& c : forward.ops)
    if (c.pass == Pass::kForward && c.group == CommGroup::kTp && c.kind != CollectiveKind::kReduceScatter)
      out.ops.push_back(c);
  return out;
}

std::vector<OpCost> embedding_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                                  const ParallelShape& shape, Precision precision) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  const double n = g.tokens * g.hidden;
  const bool learned = spec.position == PositionKind::kLearned;
  OpCost op;
  op.name = "embedding";
  op.cls = OpClass::kEmbedding;
  // Forward: read int32 ids, gather rows, write the hidden states (each vocab-parallel rank writes
  // the full b*(s/cp) x h tensor, zeros outside its shard, before the TP reduction). Learned
  // positions: read the position rows and add (1 op, read 2 + write 1 more).
  op.fwd_flops = learned ? n : 0.0;
  op.fwd_bytes = 4.0 * g.tokens + g.ee * 2.0 * n + (learned ? g.ee * 3.0 * n : 0.0);
  // Backward is all weight gradient: scatter-add dY rows into the table gradient (read dY, read
  // and write the rows), and the same for the position table.
  op.bwd_weight_flops = learned ? 2.0 * n : n;
  op.bwd_weight_bytes = 4.0 * g.tokens + g.ee * 3.0 * n * (learned ? 2.0 : 1.0);
  finish(op);
  return {op};
}

std::vector<OpCost> head_ops(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                             const ParallelShape& shape, Precision precision, const OpOptions& options) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  std::vector<OpCost> ops;
  // The final norm sits outside torchtitan's compiled blocks with the loss: eager with either.
  ops.push_back(norm("final_norm", spec, g.norm_tokens, g.ee, options.eager || options.eager_loss));
  // The output projection stays in BF16 under FP8: torchtitan's float8 converter leaves out
  // "output" (its filter_fqns), and Megatron-LM's output layer is not a Transformer Engine module.
  ops.push_back(gemm("lm_head", g.tokens, g.hidden, g.vocab_local, precision == Precision::kFp8 ? g.ee : g.eg));
  ops.back().bf16_under_fp8 = precision == Precision::kFp8;
  // Vocab-parallel cross-entropy over the local logits: max, subtract, exp, sum ~4 operations per
  // logit, reading the logits once; backward softmax - onehot, scaled (~2), read + write.
  OpCost ce;
  ce.name = "cross_entropy";
  ce.cls = OpClass::kLoss;
  const double logits = g.tokens * g.vocab_local;
  ce.fwd_flops = 4.0 * logits;
  ce.fwd_bytes = g.ee * logits + 4.0 * g.tokens;
  ce.bwd_input_flops = 2.0 * logits;
  ce.bwd_input_bytes = g.ee * 2.0 * logits;
  if (options.eager_loss) {
    // torchtitan's `cross_entropy(pred.flatten(0, 1).float(), labels)`: to FP32 (ee + 4),
    // log_softmax (4 + 4), nll_loss (per token): 3 kernels; backward: nll_loss's zero-filled FP32
    // gradient (4) and scatter, log_softmax's (4 + 4 + 4), to ee (4 + ee): 4 kernels.
    ce.fwd_bytes = (12.0 + g.ee) * logits + 4.0 * g.tokens;
    ce.bwd_input_bytes = (20.0 + g.ee) * logits;
    ce.fwd_kernels = 3;
    ce.bwd_input_kernels = 4;
    ce.fwd_unvec = {logits, (g.ee + 4.0) * logits};  // the casting copy to FP32
  }
  finish(ce);
  ops.push_back(ce);
  return ops;
}

double total_fwd_flops(const std::vector<OpCost>& ops) {
  double f = 0;
  for (const auto& o : ops) f += o.fwd_flops;
  return f;
}

double total_bwd_flops(const std::vector<OpCost>& ops) {
  double f = 0;
  for (const auto& o : ops) f += o.bwd_flops;
  return f;
}

double LayerComm::bytes(CommGroup group, Pass pass) const {
  double b = 0;
  for (const auto& o : ops)
    if (o.group == group && o.pass == pass) b += o.bytes;
  return b;
}

int LayerComm::count(CommGroup group, Pass pass) const {
  int n = 0;
  for (const auto& o : ops)
    if (o.group == group && o.pass == pass) ++n;
  return n;
}

namespace {

CommOp& add(LayerComm& c, const char* name, CollectiveKind kind, CommGroup group, Pass pass,
            double bytes, const char* after_op) {
  c.ops.push_back(CommOp{name, kind, group, pass, bytes, after_op});
  return c.ops.back();
}

}  // namespace

LayerComm layer_comm(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                     const ParallelShape& shape, Precision precision, const OpOptions& options) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  const double act = g.tokens * g.hidden * g.ee;  // one b*(s/cp)*h activation
  // Under tensorwise FP8 a block input, and a row-parallel GEMM's output gradient, are cast on
  // their sequence shard before the all-gather (layer_ops), which then moves 1-byte elements
  // (torchao float8_tensor_parallel.py). The regathers for the weight gradients and every
  // reduction stay BF16.
  const double gathered =
      options.fp8_tensorwise_casts && precision == Precision::kFp8 ? g.tokens * g.hidden : act;
  const double kv = static_cast<double>(micro_batch) * g.full_seq * 2.0 * g.kv_heads * g.head_dim * g.ee;
  const bool tp = shape.tp > 1, sp = tp && shape.sequence_parallel, cp = shape.cp > 1;
  const char* qkv_last = spec.position == PositionKind::kRope ? "rope" : "qkv_proj";
  // Backward runs the ops in reverse; the last MLP-input GEMM to run there is mlp_gate (SwiGLU)
  // or mlp_up (GELU).
  const char* mlp_in_last_bwd = spec.mlp == MlpKind::kSwiGlu ? "mlp_gate" : "mlp_up";
  LayerComm c;
  using CK = CollectiveKind;
  if (spec.parallel_block) {
    // One gathered input for both branches, their outputs summed before one reduction (forward);
    // backward: the output gradient gathered once, the shared input regathered once for the weight
    // gradients, and the two branches' input gradients summed before one reduction.
    if (sp) add(c, "block_input_allgather", CK::kAllGather, CommGroup::kTp, Pass::kForward, gathered, "attn_norm");
    if (cp) add(c, "kv_allgather", CK::kAllGather, CommGroup::kCp, Pass::kForward, kv, qkv_last);
    if (tp)
      add(c, sp ? "block_out_reducescatter" : "block_out_allreduce", sp ? CK::kReduceScatter : CK::kAllReduce,
          CommGroup::kTp, Pass::kForward, act, "mlp_down");
    if (sp) {
      add(c, "block_out_grad_allgather", CK::kAllGather, CommGroup::kTp, Pass::kBackward, gathered, "block_residual");
      if (!shape.sp_keeps_gathered)
        add(c, "block_input_regather", CK::kAllGather, CommGroup::kTp, Pass::kBackward, act, "mlp_act").for_weight_grad = true;
    }
    if (cp) {
      add(c, "kv_regather", CK::kAllGather, CommGroup::kCp, Pass::kBackward, kv, "attn_out_proj");
      add(c, "dkv_reducescatter", CK::kReduceScatter, CommGroup::kCp, Pass::kBackward, kv, "attention");
    }
    if (tp)
      add(c, sp ? "block_input_grad_reducescatter" : "block_input_grad_allreduce",
          sp ? CK::kReduceScatter : CK::kAllReduce, CommGroup::kTp, Pass::kBackward, act, "qkv_proj");
    return c;
  }
  // Forward.
  if (sp) add(c, "qkv_input_allgather", CK::kAllGather, CommGroup::kTp, Pass::kForward, gathered, "attn_norm");
  if (cp) add(c, "kv_allgather", CK::kAllGather, CommGroup::kCp, Pass::kForward, kv, qkv_last);
  if (tp)
    add(c, sp ? "attn_out_reducescatter" : "attn_out_allreduce",
        sp ? CK::kReduceScatter : CK::kAllReduce, CommGroup::kTp, Pass::kForward, act, "attn_out_proj");
  if (sp) add(c, "mlp_input_allgather", CK::kAllGather, CommGroup::kTp, Pass::kForward, gathered, "mlp_norm");
  if (tp)
    add(c, sp ? "mlp_down_reducescatter" : "mlp_down_allreduce",
        sp ? CK::kReduceScatter : CK::kAllReduce, CommGroup::kTp, Pass::kForward, act, "mlp_down");
  // Backward (reverse op order).
  if (sp) {
    add(c, "mlp_down_grad_allgather", CK::kAllGather, CommGroup::kTp, Pass::kBackward, gathered, "mlp_residual");
    if (!shape.sp_keeps_gathered)
      add(c, "mlp_input_regather", CK::kAllGather, CommGroup::kTp, Pass::kBackward, act, "mlp_act").for_weight_grad = true;
    add(c, "mlp_input_grad_reducescatter", CK::kReduceScatter, CommGroup::kTp, Pass::kBackward, act,
        mlp_in_last_bwd);
    add(c, "attn_out_grad_allgather", CK::kAllGather, CommGroup::kTp, Pass::kBackward, gathered, "attn_residual");
  } else if (tp) {
    add(c, "mlp_input_grad_allreduce", CK::kAllReduce, CommGroup::kTp, Pass::kBackward, act, mlp_in_last_bwd);
  }
  if (cp) {
    add(c, "kv_regather", CK::kAllGather, CommGroup::kCp, Pass::kBackward, kv, "attn_out_proj");
    add(c, "dkv_reducescatter", CK::kReduceScatter, CommGroup::kCp, Pass::kBackward, kv, "attention");
  }
  if (sp) {
    if (!shape.sp_keeps_gathered)
      add(c, "qkv_input_regather", CK::kAllGather, CommGroup::kTp, Pass::kBackward, act, "attention").for_weight_grad = true;
    add(c, "qkv_input_grad_reducescatter", CK::kReduceScatter, CommGroup::kTp, Pass::kBackward, act, "qkv_proj");
  } else if (tp) {
    add(c, "qkv_input_grad_allreduce", CK::kAllReduce, CommGroup::kTp, Pass::kBackward, act, "qkv_proj");
  }
  return c;
}

std::vector<OpCost> backward_order(std::vector<OpCost> ops) {
  std::reverse(ops.begin(), ops.end());
  for (size_t i = 0; i + 1 < ops.size(); ++i)
    if (ops[i + 1].name == ops[i].name + "_fp8_cast") {
      std::swap(ops[i], ops[i + 1]);
      ++i;
    }
  return ops;
}

LayerComm embedding_comm(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                         const ParallelShape& shape, Precision precision) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  const double act = g.tokens * g.hidden * g.ee;
  LayerComm c;
  if (shape.tp <= 1) return c;
  if (shape.sequence_parallel) {
    add(c, "embedding_reducescatter", CollectiveKind::kReduceScatter, CommGroup::kTp, Pass::kForward, act,
        "embedding");
    add(c, "embedding_grad_allgather", CollectiveKind::kAllGather, CommGroup::kTp, Pass::kBackward, act, "");
  } else {
    add(c, "embedding_allreduce", CollectiveKind::kAllReduce, CommGroup::kTp, Pass::kForward, act, "embedding");
  }
  return c;
}

LayerComm head_comm(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                    const ParallelShape& shape, Precision precision) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  const double act = g.tokens * g.hidden * g.ee;
  const double per_token = 4.0 * g.tokens;  // one fp32 value per token
  LayerComm c;
  if (shape.tp <= 1) return c;
  const bool sp = shape.sequence_parallel;
  if (sp)
    add(c, "head_input_allgather", CollectiveKind::kAllGather, CommGroup::kTp, Pass::kForward, act, "final_norm");
  add(c, "ce_max_allreduce", CollectiveKind::kAllReduce, CommGroup::kTp, Pass::kForward, per_token, "lm_head");
  add(c, "ce_sumexp_allreduce", CollectiveKind::kAllReduce, CommGroup::kTp, Pass::kForward, per_token, "lm_head");
  add(c, "ce_target_allreduce", CollectiveKind::kAllReduce, CommGroup::kTp, Pass::kForward, per_token, "lm_head");
  add(c, sp ? "head_input_grad_reducescatter" : "head_input_grad_allreduce",
      sp ? CollectiveKind::kReduceScatter : CollectiveKind::kAllReduce, CommGroup::kTp, Pass::kBackward, act,
      "lm_head");
  return c;
}

double ring_bytes_sent_per_rank(const CommOp& op, int64_t group_size) {
  if (group_size <= 1) return 0.0;
  const double n = static_cast<double>(group_size);
  const double frac = (n - 1.0) / n;
  return op.kind == CollectiveKind::kAllReduce ? 2.0 * frac * op.bytes : frac * op.bytes;
}

double pp_boundary_bytes(const ModelSpec& spec, int64_t micro_batch, int64_t seq_len,
                         const ParallelShape& shape, Precision precision) {
  validate_run(spec, micro_batch, seq_len, shape);
  const Geometry g = geometry(spec, micro_batch, seq_len, shape, precision);
  const double bytes = g.tokens * g.hidden * g.ee;
  return shape.sequence_parallel && shape.tp > 1 ? bytes / static_cast<double>(shape.tp) : bytes;
}

double model_flops_per_token(const ModelSpec& spec, int64_t seq_len) {
  const double n = static_cast<double>(count_params(spec).non_embedding());
  return 6.0 * n + 12.0 * static_cast<double>(spec.layers) * static_cast<double>(spec.heads) *
                       static_cast<double>(spec.effective_head_dim()) * static_cast<double>(seq_len);
}

double megatron_flops_per_iteration(double B, double s, double l, double h, double V) {
  return 96.0 * B * s * l * h * h * (1.0 + s / (6.0 * h) + V / (16.0 * l * h));
}

double korthikanti_model_flops_per_iteration(double B, double s, double L, double h, double V) {
  return 72.0 * B * L * s * h * h * (1.0 + s / (6.0 * h) + V / (12.0 * h * L));
}

double korthikanti_selective_hw_flops_per_iteration(double B, double s, double L, double h, double V) {
  return 72.0 * B * L * s * h * h * (1.0 + s / (3.0 * h) + V / (12.0 * h * L));
}

}  // namespace wl
