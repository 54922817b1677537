#include "workloads/training/training.h"

#include <memory>

#include <algorithm>
#include <cmath>
#include <string>

#include "sim/error.h"
#include "workloads/program/executor.h"
#include "workloads/training/data_parallel.h"
#include "workloads/training/stage_emitter.h"

namespace wl {

double TrainingJob::peak_flops() const {
  switch (precision) {
    case Precision::kFp8: return gpu.peak_fp8_flops > 0 ? gpu.peak_fp8_flops : gpu.peak_bf16_flops;
    case Precision::kFp16: return gpu.peak_fp16_flops > 0 ? gpu.peak_fp16_flops : gpu.peak_bf16_flops;
    case Precision::kFp32: return gpu.peak_tf32_flops > 0 ? gpu.peak_tf32_flops : gpu.peak_fp32_flops;
    case Precision::kBf16: break;
  }
  return gpu.peak_bf16_flops;
}

double TrainingJob::non_gemm_peak_flops() const {
  return precision == Precision::kFp8 && gpu.peak_bf16_flops > 0 ? gpu.peak_bf16_flops : peak_flops();
}

std::string TrainingJob::batch_problem() const {
  if (global_batch % (dp * dp_outer * micro_batch) != 0)
    return "global_batch " + std::to_string(global_batch) + " is not a multiple of dp x dp_outer x micro_batch = " +
           std::to_string(dp) + " x " + std::to_string(dp_outer) + " x " + std::to_string(micro_batch);
  if (micro_batches() < 1) return "global_batch " + std::to_string(global_batch) + " leaves no micro-batch per DP rank";
  return "";
}

void TrainingJob::validate() const {
  auto err = [](const std::string& m) { throw sim::ConfigError(m); };
  if (fsdp_reduce == Precision::kFp8) err("fsdp_reduce: FSDP reduces gradients in fp32, bf16 or fp16, not fp8");
  if (const std::string batch = batch_problem(); !batch.empty()) err(batch);
  if (seq_len % cp != 0) err("seq_len " + std::to_string(seq_len) + " is not divisible by cp " + std::to_string(cp));
  if (dp_outer > 1 && data_parallel != DataParallel::kFsdp)
    err("dp_outer (HSDP replicate groups) needs data_parallel: fsdp");
  PipelineParams p{schedule, static_cast<int32_t>(pp), static_cast<int32_t>(micro_batches()),
                   static_cast<int32_t>(virtual_stages)};
  validate_pipeline(p);
  split_layers(model.layers, pp * virtual_stages, split);
  // Model/TP compatibility (throws with the head counts).
  local_q_heads(model, tp);
  local_kv_heads(model, tp);
  if (peak_flops() <= 0) err("the accelerator " + gpu.name + " has no peak rate for this precision");
  if (recompute == Recompute::kSelectiveOp && !flash_attention)
    err("recompute: selective-op keeps the fused attention kernel's output (torchtitan's save list) and needs "
        "flash_attention: true");
  if (recompute == Recompute::kSelectiveOp && (model.bias || model.parallel_block))
    err("recompute: selective-op models torchtitan's Llama block (linear layers without bias, attention then MLP); "
        "model " + model.name + " has " + (model.bias ? "biases (its linears call aten.addmm, which torchtitan's save list "
                                                        "leaves out)" : "a parallel attention + MLP block") +
        ": use none, selective or full");
}

namespace {

struct CommSpec {
  Dim dim = Dim::kTp;
  CollectiveOp coll = CollectiveOp::kAllReduce;
  double bytes = 0;
  std::string name;
};

// A pass of a layer (or of the embedding/head) as alternating compute and communication. A
// compute piece is one fused kernel: its cost terms (one per model op) are costed by the executor
// from the hardware profile; `cost` is the same evaluated here (to drop empty pieces, and for MFU).
// TP communication overlapped with GEMMs (tp_comm_overlap): an all-gather runs beside the GEMM
// that consumes it (kWithNext), a reduce-scatter beside the GEMM that produces it (kWithPrev);
// that GEMM is then a piece of its own.
enum class Overlap : uint8_t { kNone, kWithNext, kWithPrev };

struct Piece {
  bool comm = false;
  // A compute piece that a communication library runs for a collective (AsyncTP's copies and
  // sums) is charged to that collective's dimension, not to the pass's category.
  bool for_tp = false;
  // With TP overlap (make_recipe): the piece holds the GEMM that consumes an overlapped
  // all-gather, or the one that produces an overlapped reduce-scatter (or both); once cut into
  // chunks (pipeline_overlapped), the chunk that waits for the all-gather and the one after which
  // the reduce-scatter starts.
  bool consumes_gather = false, produces_scatter = false;
  bool waits_gather = false, starts_scatter = false;
  // A collective whose bytes copy engines move (AsyncTP's overlapped ones): no SM held.
  bool copy_engines = false;
  Overlap overlap = Overlap::kNone;
  Cost cost;
  std::vector<CostTerm> terms;
  CommSpec spec;
  std::string name;
};
using Recipe = std::vector<Piece>;

enum class PassPart { kFwd, kBwd, kBwdInput, kBwdWeight, kRecompute };

// Output shapes of a model GEMM, forward sense: tokens x n, reduced over k.
struct GemmShape {
  double tokens = 0, n = 0, k = 0;
  bool known = false;
};

class Coster {
 public:
  Coster(const TrainingJob& j, int64_t micro_batch, int64_t seq_len, const ParallelShape& shape)
      : job_(j), profile_(j.profile, j.non_gemm_peak_flops(), j.gpu.hbm_bandwidth_Bps, j.peak_flops()) {
    const ModelSpec& m = j.model;
    tokens_ = static_cast<double>(micro_batch * seq_len / shape.cp);
    keys_ = static_cast<double>(seq_len);  // an attention row's keys: the whole sequence, CP or not
    double hd = static_cast<double>(m.effective_head_dim());
    double q = static_cast<double>(local_q_heads(m, shape.tp)) * hd;
    double kv = static_cast<double>(local_kv_heads(m, shape.tp)) * hd;
    h_ = static_cast<double>(m.hidden);
    qkv_n_ = q + 2 * kv;
    k_n_ = kv;
    attn_k_ = q;
    ffn_ = static_cast<double>(m.ffn_hidden) / static_cast<double>(shape.tp);
    vocab_ = static_cast<double>(local_vocab(m, shape.tp));
  }

  GemmShape shape_of(const OpCost& o) const {
    GemmShape g;
    g.tokens = tokens_;
    g.known = true;
    if (o.name == "qkv_proj") g.n = qkv_n_, g.k = h_;
    else if (o.name == "k_proj") g.n = k_n_, g.k = h_;
    else if (o.name == "attn_out_proj") g.n = h_, g.k = attn_k_;
    else if (o.name == "mlp_gate" || o.name == "mlp_up") g.n = ffn_, g.k = h_;
    else if (o.name == "mlp_down") g.n = h_, g.k = ffn_;
    else if (o.name == "lm_head") g.n = vocab_, g.k = h_;
    else g.known = false;
    return g;
  }

  // A GEMM's FLOPs for one pass part as a cost term, wave quantization included: forward writes
  // tokens x n; backward input gradient tokens x k; weight gradient k x n; a whole backward is half
  // of each.
  void gemm_term(const OpCost& o, PassPart part, double flops, CostTerm& t) const {
    GemmShape g = shape_of(o);
    uint32_t sms = job_.profile.gemm_wave_quantization ? job_.gpu.sm_count : 0;
    t.flops[0] = flops;
    if (!g.known) return;
    double fwd = gemm_wave_factor(g.tokens, g.n, sms);
    double dgrad = gemm_wave_factor(g.tokens, g.k, sms);
    double wgrad = gemm_wave_factor(g.k, g.n, sms);
    switch (part) {
      case PassPart::kFwd:
      case PassPart::kRecompute: t.wave[0] = fwd; return;
      case PassPart::kBwdInput: t.wave[0] = dgrad; return;
      case PassPart::kBwdWeight: t.wave[0] = wgrad; return;
      case PassPart::kBwd:
        t.flops[0] = flops / 2;
        t.wave[0] = dgrad;
        t.flops[1] = flops / 2;
        t.wave[1] = wgrad;
        return;
    }
  }

  // The cost term of one model op in one pass part; `model` gets its model FLOPs (for MFU).
  CostTerm term(const OpCost& o, PassPart part, double& model) const {
    // FLOPs, bytes, model FLOPs, kernels and the unvectorized part of each pass part.
    double f = 0, b = 0;
    int32_t kernels = 1;
    OpCost::Unvectorized unvec;
    switch (part) {
      case PassPart::kFwd:
      case PassPart::kRecompute:
        f = o.fwd_flops, b = o.fwd_bytes, model = part == PassPart::kFwd ? o.fwd_flops : 0;
        kernels = o.fwd_kernels, unvec = o.fwd_unvec;
        break;
      case PassPart::kBwd:
        f = o.bwd_flops + o.bwd_recompute_flops, b = o.bwd_bytes, model = o.bwd_flops;
        kernels = o.bwd_input_kernels + o.bwd_weight_kernels;
        unvec = {o.bwd_input_unvec.elems + o.bwd_weight_unvec.elems, o.bwd_input_unvec.bytes + o.bwd_weight_unvec.bytes};
        break;
      case PassPart::kBwdInput:
        f = o.bwd_input_flops + o.bwd_recompute_flops, b = o.bwd_input_bytes, model = o.bwd_input_flops;
        kernels = o.bwd_input_kernels, unvec = o.bwd_input_unvec;
        break;
      case PassPart::kBwdWeight:
        f = o.bwd_weight_flops, b = o.bwd_weight_bytes, model = o.bwd_weight_flops;
        kernels = o.bwd_weight_kernels, unvec = o.bwd_weight_unvec;
        break;
    }
    // Selective recompute re-runs the attention core's forward before its backward (Korthikanti
    // et al. 2022 §5; Megatron's --recompute-granularity selective checkpoints core attention,
    // FlashAttention or not): its FLOPs, bytes and kernels once more, at the forward kernel's rate.
    double refwd = 0;
    if ((part == PassPart::kBwd || part == PassPart::kBwdInput) && job_.recompute == Recompute::kSelective &&
        o.cls == OpClass::kAttention) {
      refwd = o.fwd_flops;
      b += o.fwd_bytes;
      kernels += o.fwd_kernels;
    }
    CostTerm t;
    // A part with no work and no kernels (an elementwise op's weight gradient, the embedding's
    // input gradient) launches nothing; one with work launches at least one kernel.
    t.kernels = kernels <= 0 && f == 0 && b == 0 ? 0u : static_cast<uint32_t>(std::max(1, kernels));
    t.unvec_elems = unvec.elems;
    t.unvec_bytes = unvec.bytes;
    t.cls = o.cls == OpClass::kGemm ? KernelClass::kGemm
            : o.cls == OpClass::kAttention ? KernelClass::kAttention
                                           : KernelClass::kVector;
    // A BF16 GEMM in an FP8 job: the GEMM class runs at the FP8 peak, so its FLOPs count
    // fp8 peak / bf16 peak times for time (never for MFU: `model` is unchanged).
    if (o.cls == OpClass::kGemm && o.bf16_under_fp8 && job_.non_gemm_peak_flops() > 0)
      f *= job_.peak_flops() / job_.non_gemm_peak_flops();
    // An FP8 GEMM reaches fp8_gemm_efficiency of the FP8 peak, not the GEMM class's
    // gemm_efficiency: its FLOPs count gemm / fp8 efficiency times for time (never for MFU).
    else if (o.cls == OpClass::kGemm && job_.precision == Precision::kFp8 && job_.profile.fp8_gemm_efficiency > 0)
      f *= job_.profile.gemm_efficiency / job_.profile.fp8_gemm_efficiency;
    if (o.cls == OpClass::kGemm) {
      gemm_term(o, part, f, t);
    } else if (o.cls == OpClass::kAttention && job_.flash_attention) {
      // The fused attention kernel's direction and sequence length set its rate (hardware_profile.h);
      // unfused attention (flash_attention: false) is GEMMs and softmax passes at the forward's.
      const bool backward = part != PassPart::kFwd && part != PassPart::kRecompute;
      t.flops[0] = f;
      t.wave[0] = topo::attention_rate_factor(job_.profile, backward, keys_);
      const double fwd_factor = topo::attention_rate_factor(job_.profile, false, keys_);
      if (refwd > 0 && fwd_factor == t.wave[0]) {
        t.flops[0] += refwd;
      } else if (refwd > 0) {
        t.flops[1] = refwd;
        t.wave[1] = fwd_factor;
      }
    } else {
      t.flops[0] = f + refwd;
    }
    t.bytes = b;
    return t;
  }

  // What the executor will charge for these terms on this job's hardware profile.
  Cost evaluate(const std::vector<CostTerm>& terms, double model_flops) const {
    ProfileKernelCoster::Sums s = profile_.sum(terms);
    Cost c;
    c.seconds = s.seconds;
    c.sm_s = s.sm_s;
    c.hbm_s = s.hbm_s;
    c.model_flops = model_flops;
    return c;
  }
  const ProfileKernelCoster& profile() const { return profile_; }
  int64_t tp() const { return job_.tp; }

 private:
  const TrainingJob& job_;
  ProfileKernelCoster profile_;
  double tokens_ = 0, keys_ = 0, h_ = 0, qkv_n_ = 0, k_n_ = 0, attn_k_ = 0, ffn_ = 0, vocab_ = 0;
};

CollectiveOp to_coll(CollectiveKind k) {
  switch (k) {
    case CollectiveKind::kAllReduce: return CollectiveOp::kAllReduce;
    case CollectiveKind::kAllGather: return CollectiveOp::kAllGather;
    case CollectiveKind::kReduceScatter: return CollectiveOp::kReduceScatter;
  }
  return CollectiveOp::kAllReduce;
}

// The fraction `f` of a compute piece's work (every term's FLOPs, bytes and unvectorized work,
// its model FLOPs) as `chunks` kernels per kernel of the piece: chunks of a GEMM cut along its
// tokens. Each chunk keeps the whole GEMM's wave factor: AsyncTP runs consecutive chunks on two
// streams so that one's last wave overlaps the next's first, which its authors introduced to
// avoid the smaller GEMMs' quantization loss (torch/distributed/_symmetric_memory/__init__.py,
// _pipelined_all_gather_and_consume); Transformer Engine's userbuffers overlap theirs likewise.
Piece piece_part(const Piece& p, double f, uint32_t chunks, const Coster& coster, const std::string& what) {
  Piece q = p;
  for (CostTerm& t : q.terms) {
    t.flops[0] *= f;
    t.flops[1] *= f;
    t.bytes *= f;
    t.unvec_elems *= f;
    t.unvec_bytes *= f;
    t.kernels *= chunks;
  }
  q.cost = coster.evaluate(q.terms, p.cost.model_flops * f);
  q.name = p.name + " (" + what + ")";
  return q;
}

// One memory-bound kernel moving `bytes` through HBM, charged to TP.
Piece memory_piece(double bytes, const Coster& coster, const std::string& name) {
  Piece q;
  q.terms.push_back(memory_term(bytes));
  q.cost = coster.evaluate(q.terms, 0);
  q.name = name;
  q.for_tp = true;
  return q;
}

// Overlapped TP collectives as the frameworks pipeline them: the GEMM is cut into tp chunks along
// its tokens, one per rank's shard. An all-gather's consumer starts on the local shard while the
// others arrive, so only its last chunk must wait for the whole all-gather: (tp - 1) / tp of it
// runs beside the collective, 1 / tp after it. A reduce-scatter's producer must finish its first
// chunk before anything can be sent: 1 / tp of it runs first, (tp - 1) / tp beside the
// collective. AsyncTP adds two kernels of its own (torch/distributed/_symmetric_memory/
// __init__.py, PyTorch 2.5-2.11): before an all-gather, each rank copies its shard into its
// peer-visible buffer (copy_shard before the first barrier: 2 x bytes / tp through HBM); after a
// reduce-scatter, the tp partial chunks each rank received are summed by one reduction kernel
// (_fused_matmul_reduce_scatter_impl's reduce_fn: it reads the whole stacked input, `bytes`, and
// writes bytes / tp). Userbuffers reduce inside their communication kernels. A GEMM that both
// consumes an all-gather and produces a reduce-scatter (a backward's regathered input feeding the
// input gradient that is reduce-scattered) runs its first chunk, on the local shard, before the
// reduce-scatter starts, its middle beside both, and its last after the all-gather.
void pipeline_overlapped(Recipe& r, const Coster& coster, TrainingJob::TpOverlap overlap, const std::string& label) {
  const double n = static_cast<double>(coster.tp());
  const uint32_t chunks = static_cast<uint32_t>(coster.tp());
  const bool asynctp = overlap == TrainingJob::TpOverlap::kAsyncTp;
  const std::string whole = " of " + std::to_string(chunks);
  auto part = [&](const Piece& pc, uint32_t from, uint32_t to, Recipe& out) -> Piece& {
    const std::string what = from == to ? "chunk " + std::to_string(from) : "chunks " + std::to_string(from) + "-" + std::to_string(to);
    out.push_back(piece_part(pc, static_cast<double>(to - from + 1) / n, to - from + 1, coster, what + whole));
    out.back().consumes_gather = out.back().produces_scatter = false;
    return out.back();
  };
  Recipe out;
  for (Piece& pc : r) {
    // AsyncTP pulls each peer's chunk with a copy-engine copy (copy_shard's and the produced
    // chunks' copy_ between symmetric-memory buffers): no SM taken from the GEMMs.
    if (pc.comm && pc.overlap != Overlap::kNone && asynctp) pc.copy_engines = true;
    if (pc.comm && pc.overlap == Overlap::kWithNext && asynctp)
      out.push_back(memory_piece(2 * pc.spec.bytes / n, coster, label + " asynctp copy shard"));
    if (!pc.comm && pc.consumes_gather && pc.produces_scatter) {
      part(pc, 1, 1, out).starts_scatter = true;
      if (chunks > 2) part(pc, 2, chunks - 1, out);
      part(pc, chunks, chunks, out).waits_gather = true;
    } else if (!pc.comm && pc.consumes_gather) {
      part(pc, 1, chunks - 1, out);
      part(pc, chunks, chunks, out).waits_gather = true;
    } else if (!pc.comm && pc.produces_scatter) {
      part(pc, 1, 1, out).starts_scatter = true;
      part(pc, 2, chunks, out);
    } else {
      out.push_back(pc);
    }
    if (pc.comm && pc.overlap == Overlap::kWithPrev && asynctp)
      out.push_back(memory_piece(pc.spec.bytes * (1 + 1 / n), coster, label + " asynctp reduce"));
  }
  r = std::move(out);
}

bool has_op(const std::vector<OpCost>& ops, std::string_view name) {
  for (const OpCost& o : ops)
    if (o.name == name) return true;
  return false;
}

// Ops run in `ops` order; a communication op whose after_op matches follows that op. A compute
// piece is named by the pass and the model ops it covers: "fwd attn_norm..attn_out_proj".
Recipe make_recipe(const std::vector<OpCost>& ops, const LayerComm& comm, Pass pass, PassPart part,
                   const Coster& coster, const std::string& label, bool with_comm, TrainingJob::TpOverlap overlap) {
  const bool tp_overlap = overlap != TrainingJob::TpOverlap::kOff;
  Recipe r;
  Piece cur;
  double model_flops = 0;
  std::string first, last;
  // With TP overlap: the GEMMs that produce a reduce-scatter's input (the op it follows) and the
  // GEMMs that consume an all-gather's output become pieces of their own. In the forward a SwiGLU
  // block's gate and up projections both read the gathered MLP input: AsyncTP fuses the gather
  // with both matmuls (fused_all_gather_matmul takes a list of weights) and Megatron-LM runs them
  // as one linear (linear_fc1), so the piece runs through mlp_up.
  auto overlapped = [&](const CommOp& c) {
    return tp_overlap && c.group == CommGroup::kTp &&
           (c.kind == CollectiveKind::kAllGather || c.kind == CollectiveKind::kReduceScatter);
  };
  bool isolate_next = false;
  auto flush = [&] {
    cur.cost = coster.evaluate(cur.terms, model_flops);
    if (!cur.cost.empty()) {
      cur.name = label + " " + first + (last != first ? ".." + last : "");
      r.push_back(cur);
    }
    cur = Piece{};
    model_flops = 0;
    first.clear();
  };
  for (const OpCost& o : ops) {
    const bool gemm = o.cls == OpClass::kGemm;
    bool produces_rs = false;
    if (with_comm && gemm)
      for (const CommOp& c : comm.ops)
        produces_rs |= c.pass == pass && c.after_op == o.name && overlapped(c) && c.kind == CollectiveKind::kReduceScatter;
    // The producing GEMM alone, unless it also consumes a pending all-gather: the ops from that
    // all-gather on stay in the consumer's piece.
    if (produces_rs && !cur.terms.empty() && !isolate_next) flush();
    double model = 0;
    cur.terms.push_back(coster.term(o, part, model));
    model_flops += model;
    if (first.empty()) first = o.name;
    last = o.name;
    if (isolate_next && gemm && !(pass == Pass::kForward && o.name == "mlp_gate" && has_op(ops, "mlp_up"))) {
      const size_t before = r.size();
      flush();  // the consuming GEMMs alone
      if (r.size() > before) r.back().consumes_gather = true;
      isolate_next = false;
    }
    if (!with_comm) continue;
    for (const CommOp& c : comm.ops) {
      if (c.pass != pass || c.after_op != o.name) continue;
      flush();
      Piece cp;
      cp.comm = true;
      cp.spec = CommSpec{c.group == CommGroup::kTp ? Dim::kTp : Dim::kCp, to_coll(c.kind), c.bytes, c.name};
      cp.name = c.name;
      if (overlapped(c) && c.kind == CollectiveKind::kAllGather) {
        cp.overlap = Overlap::kWithNext;
        isolate_next = true;
      } else if (overlapped(c) && gemm && !r.empty() && !r.back().comm) {
        cp.overlap = Overlap::kWithPrev;
        r.back().produces_scatter = true;
      }
      r.push_back(cp);
    }
  }
  flush();
  if (tp_overlap) pipeline_overlapped(r, coster, overlap, label);
  return r;
}

// The recipes of one layer/embedding/head for every pass part.
struct PassRecipes {
  Recipe fwd, bwd, bwd_input, bwd_weight, recompute;
};

// What a recomputation re-runs, ops and collectives (null: every forward op and collective).
struct Recomputed {
  std::vector<OpCost> ops;
  LayerComm comm;
};

PassRecipes make_pass_recipes(const std::vector<OpCost>& ops, const LayerComm& comm, const Coster& coster,
                              TrainingJob::TpOverlap tp_overlap, const Recomputed* recomputed = nullptr) {
  PassRecipes p;
  auto rev = backward_order(ops);
  p.fwd = make_recipe(ops, comm, Pass::kForward, PassPart::kFwd, coster, "fwd", true, tp_overlap);
  p.recompute = make_recipe(recomputed != nullptr ? recomputed->ops : ops, recomputed != nullptr ? recomputed->comm : comm,
                            Pass::kForward, PassPart::kRecompute, coster, "recompute", true, tp_overlap);
  p.bwd = make_recipe(rev, comm, Pass::kBackward, PassPart::kBwd, coster, "bwd", true, tp_overlap);
  // Split backward (zero-bubble): the collectives that feed only the weight gradients (sequence
  // parallelism's regathers) run in the weight pass, just before the GEMMs that need them.
  LayerComm input_comm, weight_comm;
  for (const CommOp& c : comm.ops) (c.for_weight_grad ? weight_comm : input_comm).ops.push_back(c);
  p.bwd_input = make_recipe(rev, input_comm, Pass::kBackward, PassPart::kBwdInput, coster, "bwd-input", true, tp_overlap);
  p.bwd_weight = make_recipe(rev, weight_comm, Pass::kBackward, PassPart::kBwdWeight, coster, "bwd-weight", true,
                             TrainingJob::TpOverlap::kOff);
  return p;
}

// Walks one stage's pipeline order and emits its program: each forward, backward (or input and
// weight halves) of a model chunk as compute segments split by their TP/CP collectives, pipeline
// messages between stages, the data-parallel policy's collectives at its hooks, the optimizer.
class StageBuilder {
 public:
  StageBuilder(const TrainingJob& job, int32_t stage, const ParamSplit& split, const PassRecipes& layer,
               const PassRecipes& embed, const PassRecipes& head, double pp_bytes)
      : job_(job), split_(split), layer_(layer), embed_(embed), head_(head), pp_bytes_(pp_bytes), e_(job) {
    params_.schedule = job.schedule;
    params_.stages = static_cast<int32_t>(job.pp);
    params_.micro_batches = static_cast<int32_t>(job.micro_batches());
    params_.virtual_stages = static_cast<int32_t>(job.virtual_stages);
    shape_.stage = stage;
    shape_.stages = params_.stages;
    shape_.micro_batches = params_.micro_batches;
    shape_.virtual_stages = params_.virtual_stages;
    shape_.chunk_layers = split.chunk_layers;
    shape_.first_layer.assign(shape_.chunk_layers.size() + 1, 0);
    for (size_t g = 0; g < shape_.chunk_layers.size(); ++g)
      shape_.first_layer[g + 1] = shape_.first_layer[g] + shape_.chunk_layers[g];
    dp_ = make_data_parallel_policy(e_, shape_, split_);
  }

  // The stage's pipeline order (after build()).
  const std::vector<PipelineWork>& order() const { return order_; }

  Program build(int32_t* peak_in_flight_out) {
    order_ = pipeline_order(params_, shape_.stage);
    *peak_in_flight_out = peak_in_flight(order_);
    int32_t v = params_.virtual_stages;
    // The micro-batch whose gradient pass of each chunk comes last: gradients are complete then.
    last_grad_mb_.assign(v, -1);
    bool split_w = job_.schedule == PipelineSchedule::kZeroBubbleH1;
    for (const auto& w : order_) {
      bool grad_done = split_w ? w.pass == PassKind::kBackwardWeight : w.pass == PassKind::kBackward;
      if (grad_done) last_grad_mb_[w.chunk] = w.micro_batch;
    }
    dp_->first_fwd_mb.assign(v, -1);
    for (const auto& w : order_)
      if (w.pass == PassKind::kForward && dp_->first_fwd_mb[w.chunk] < 0) dp_->first_fwd_mb[w.chunk] = w.micro_batch;

    dp_->before_step();
    for (const auto& w : order_) {
      switch (w.pass) {
        case PassKind::kForward: forward(w.micro_batch, w.chunk); break;
        case PassKind::kBackward:
        case PassKind::kBackwardInput: backward(w.micro_batch, w.chunk, w.pass == PassKind::kBackwardInput); break;
        case PassKind::kBackwardWeight: weight_grad(w.micro_batch, w.chunk); break;
      }
    }
    dp_->after_passes();
    optimizer();
    Program& p = e_.program();
    p.finalize();
    return std::move(p);
  }

 private:
  int32_t global(int32_t chunk) const { return shape_.global(chunk); }
  int32_t last_global() const { return shape_.last_global(); }

  // Emits a recipe; the first compute waits on the frontier; returns the index of its first compute.
  // Overlapped TP collectives (Piece::overlap, cut by pipeline_overlapped): an all-gather starts
  // where it would and only its consumer's last chunk (waits_gather) waits for it; a
  // reduce-scatter starts after its producer's first chunk (starts_scatter) and the next op waits
  // for both it and the producer's last chunk.
  int64_t emit(const Recipe& r, int32_t mb, int32_t layer, TrainingCategory cat) {
    int64_t first = -1;
    int64_t before_last = -1;   // the compute op before the last one emitted here
    int64_t held = -1;          // an overlapped all-gather not yet waited for
    int64_t scatter_from = -1;  // the chunk an overlapped reduce-scatter starts after
    for (const Piece& pc : r) {
      if (pc.comm) {
        if (!e_.has(pc.spec.dim)) continue;
        std::vector<uint32_t> deps = e_.frontier();
        const int64_t after = pc.overlap != Overlap::kWithPrev ? e_.last_compute()
                              : scatter_from >= 0          ? scatter_from
                                                           : before_last;
        if (pc.overlap == Overlap::kWithPrev) scatter_from = -1;
        if (after >= 0) deps.push_back(static_cast<uint32_t>(after));
        uint32_t c = e_.add_collective(pc.spec.dim, pc.spec.coll, pc.spec.bytes,
                                       pc.name, mb, layer, deps, pc.copy_engines);
        e_.frontier().clear();
        if (pc.overlap == Overlap::kWithNext) {
          held = c;
        } else {
          e_.wait_for(c);
          if (pc.overlap == Overlap::kWithPrev && e_.last_compute() >= 0)
            e_.wait_for(static_cast<uint32_t>(e_.last_compute()));
        }
      } else {
        before_last = e_.last_compute();
        if (pc.waits_gather && held >= 0) {
          e_.wait_for(static_cast<uint32_t>(held));
          held = -1;
        }
        uint32_t c = e_.add_compute(pc.cost, pc.terms, pc.name, pc.for_tp ? TrainingCategory::kTp : cat, mb, layer);
        if (first < 0) first = c;
        if (pc.starts_scatter) scatter_from = c;
      }
    }
    if (held >= 0) e_.wait_for(static_cast<uint32_t>(held));
    return first;
  }

  int64_t first_layer(int32_t g) const { return shape_.first_layer[static_cast<size_t>(g)]; }
  int64_t chunk_layers(int32_t g) const { return shape_.chunk_layers[static_cast<size_t>(g)]; }

  void forward(int32_t mb, int32_t chunk) {
    int32_t g = global(chunk);
    if (g > 0) e_.recv(-1, static_cast<uint32_t>(chunk * params_.micro_batches + mb), mb, "recv act");
    dp_->begin_pass(mb, chunk, Pass::kForward, false);
    if (g == 0) {
      dp_->before_whole(Whole::kEmbedding, split_.embed, mb, chunk);
      emit(embed_.fwd, mb, -1, TrainingCategory::kCompute);
    }
    int64_t l0 = first_layer(g), n = chunk_layers(g);
    for (int64_t i = 0; i < n; ++i) {
      dp_->before_layer(mb, chunk, i, Pass::kForward);
      emit(layer_.fwd, mb, static_cast<int32_t>(l0 + i), TrainingCategory::kCompute);
    }
    if (g == last_global()) {
      dp_->before_whole(Whole::kHead, split_.head, mb, chunk);
      emit(head_.fwd, mb, -1, TrainingCategory::kCompute);
    }
    if (g < last_global())
      e_.send(+1, static_cast<uint32_t>(((g + 1) / params_.stages) * params_.micro_batches + mb), pp_bytes_,
              "send act", mb);
  }

  void backward(int32_t mb, int32_t chunk, bool input_only) {
    int32_t g = global(chunk);
    if (g < last_global()) e_.recv(+1, static_cast<uint32_t>(chunk * params_.micro_batches + mb), mb, "recv grad");
    const Recipe& hb = input_only ? head_.bwd_input : head_.bwd;
    bool grads_final = !input_only && mb == last_grad_mb_[chunk];
    dp_->begin_pass(mb, chunk, Pass::kBackward, grads_final);
    if (g == last_global()) {
      dp_->before_whole(Whole::kHead, split_.head, mb, chunk);
      emit(hb, mb, -1, TrainingCategory::kCompute);
      if (!input_only) dp_->after_whole_grad(Whole::kHead, split_.head, mb, grads_final);
    }
    int64_t l0 = first_layer(g), n = chunk_layers(g);
    double bucket = 0;
    for (int64_t i = n - 1; i >= 0; --i) {
      int64_t l = l0 + i;
      dp_->before_layer(mb, chunk, n - 1 - i, Pass::kBackward);
      if (job_.recomputes_layers()) emit(layer_.recompute, mb, static_cast<int32_t>(l), TrainingCategory::kCompute);
      emit(input_only ? layer_.bwd_input : layer_.bwd, mb, static_cast<int32_t>(l), TrainingCategory::kCompute);
      if (!input_only) dp_->grad_ready(mb, l, split_.layer, grads_final, bucket);
    }
    if (g == 0) {
      dp_->before_whole(Whole::kEmbedding, split_.embed, mb, chunk);
      emit(input_only ? embed_.bwd_input : embed_.bwd, mb, -1, TrainingCategory::kCompute);
      if (!input_only) dp_->after_whole_grad(Whole::kEmbedding, split_.embed, mb, grads_final);
    }
    if (!input_only) dp_->flush(mb, grads_final, bucket, g);
    if (g > 0)
      e_.send(-1, static_cast<uint32_t>(((g - 1) / params_.stages) * params_.micro_batches + mb), pp_bytes_,
              "send grad", mb);
  }

  void weight_grad(int32_t mb, int32_t chunk) {
    int32_t g = global(chunk);
    bool grads_final = mb == last_grad_mb_[chunk];
    if (g == last_global()) {
      emit(head_.bwd_weight, mb, -1, TrainingCategory::kCompute);
      dp_->after_whole_grad(Whole::kHead, split_.head, mb, grads_final);
    }
    int64_t l0 = first_layer(g), n = chunk_layers(g);
    double bucket = 0;
    for (int64_t i = n - 1; i >= 0; --i) {
      int64_t l = l0 + i;
      emit(layer_.bwd_weight, mb, static_cast<int32_t>(l), TrainingCategory::kCompute);
      dp_->grad_ready(mb, l, split_.layer, grads_final, bucket);
    }
    if (g == 0) {
      emit(embed_.bwd_weight, mb, -1, TrainingCategory::kCompute);
      dp_->after_whole_grad(Whole::kEmbedding, split_.embed, mb, grads_final);
    }
    dp_->flush(mb, grads_final, bucket, g);
  }

  // One memory-bound kernel over the parameters whose optimizer state this rank holds, after every
  // gradient collective (the last op of each data-parallel stream).
  void optimizer() {
    double params = 0;
    for (int32_t c = 0; c < params_.virtual_stages; ++c) params += split_.chunk(global(c));
    double shard = dp_->optimizer_share(params);
    optimizer_terms_.assign(1, memory_term(shard * job_.optimizer_bytes()));
    // Eager: PyTorch's foreach AdamW, 8 passes, each launched by multi_tensor_apply once per 320
    // blocks of 65,536 elements (aten/src/ATen/native/cuda/MultiTensorApply.cuh: kChunkSize,
    // depth_to_max_blocks), i.e. per 20,971,520 parameters; per-tensor partial chunks and the
    // tensors-per-launch limit are left out (3,064 launches for Llama 3 8B; its capture shows 3,072).
    constexpr double kForeachLaunchElems = 320.0 * 65536.0;
    optimizer_terms_[0].kernels =
        job_.optimizer_foreach() ? 8u * static_cast<uint32_t>(std::max(1.0, std::ceil(shard / kForeachLaunchElems))) : 1u;
    optimizer_terms_[0].foreach = job_.optimizer_foreach();  // its rate: ProfileKernelCoster's
    Cost c;  // no model FLOPs; the executor costs the terms
    const Program& p = e_.program();
    for (uint16_t s : {kDpStream, kDpOuterStream}) {
      for (int64_t i = static_cast<int64_t>(p.ops().size()) - 1; i >= 0; --i)
        if (p.op(static_cast<uint32_t>(i)).stream == s) {
          e_.wait_for(static_cast<uint32_t>(i));
          break;
        }
    }
    tied_embedding_grads();
    e_.add_compute(c, optimizer_terms_, "optimizer step", TrainingCategory::kOptimizer, -1, -1);
  }

  // Tied embeddings with pp > 1: the first stage's input embedding and the last stage's LM head
  // are two copies of one table, so after the data-parallel reduction the two stages all-reduce
  // its gradient between them (Megatron-LM finalize_model_grads, _allreduce_embedding_grads, on
  // the embedding group {first, last stage}). An all-reduce of two ranks is one exchange: each
  // sends its vocab/tp x hidden gradient to the other (the previous stage of the first is the last,
  // wrapping around), and the optimizer waits for what it receives.
  void tied_embedding_grads() {
    if (!job_.model.tied_embeddings || params_.stages < 2) return;
    const bool first = shape_.stage == 0, last = shape_.stage == params_.stages - 1;
    if (!first && !last) return;
    const double bytes = static_cast<double>(local_vocab(job_.model, job_.tp)) * static_cast<double>(job_.model.hidden) *
                         job_.adam.grad;
    constexpr uint32_t kMessage = 1u << 30;  // apart from the pipeline's messages
    const int8_t peer = first ? -1 : +1;
    e_.send(peer, kMessage, bytes, "tied embedding grad", -1);
    e_.recv(peer, kMessage, -1, "tied embedding grad");
  }

  const TrainingJob& job_;
  const ParamSplit& split_;
  const PassRecipes& layer_;
  const PassRecipes& embed_;
  const PassRecipes& head_;
  double pp_bytes_;
  PipelineParams params_;
  StageShape shape_;
  StageEmitter e_;
  std::unique_ptr<DataParallelPolicy> dp_;
  std::vector<PipelineWork> order_;
  std::vector<int32_t> last_grad_mb_;
  std::vector<CostTerm> optimizer_terms_;
};

}  // namespace

TrainingCategory category_of(Dim d) {
  switch (d) {
    case Dim::kTp: return TrainingCategory::kTp;
    case Dim::kCp: return TrainingCategory::kCp;
    case Dim::kPp: return TrainingCategory::kPp;
    case Dim::kDp: return TrainingCategory::kDp;
    case Dim::kDpOuter: return TrainingCategory::kDpOuter;
    case Dim::kCount: break;
  }
  return TrainingCategory::kCompute;
}

JobProgram training_job_program(const TrainingJob& job, TrainingPlan& plan,
                                const std::array<std::string, kNumDims>& algorithm_at) {
  JobProgram jp;
  jp.layout = Layout({job.tp, job.cp, job.pp, job.dp, job.dp_outer}, job.order);
  jp.templates = std::move(plan.programs);
  const uint32_t world = jp.layout.world();
  jp.template_of_rank.resize(world);
  for (uint32_t rank = 0; rank < world; ++rank) jp.template_of_rank[rank] = jp.layout.coord(rank, Dim::kPp);
  for (size_t d = 0; d < kNumDims; ++d) {
    Communicator c;
    c.name = std::string(dim_name(static_cast<Dim>(d)));
    c.generated = true;
    c.axis = static_cast<Dim>(d);
    c.algorithm = job.algorithm[d];
    c.algorithm_at = algorithm_at[d];
    jp.add_comm(std::move(c));
  }
  {
    // kDpCpComm: data-parallel collectives of a job with CP > 1 (TrainingJob::grad_group).
    Communicator c;
    c.name = "dp+cp";
    c.generated = true;
    c.axis = Dim::kDp;
    c.also = Dim::kCp;
    c.algorithm = job.algorithm[static_cast<size_t>(Dim::kDp)];
    c.algorithm_at = algorithm_at[static_cast<size_t>(Dim::kDp)];
    jp.add_comm(std::move(c));
  }
  jp.categories = {"compute", "bubble", "tp", "cp", "pp", "dp", "dp_outer", "optimizer", "host"};
  jp.idle_category = TrainingCategory::kBubble;
  // Eager PyTorch launches every kernel from the host (hardware profile host_overhead).
  jp.host_overhead = job.profile.host_overhead;
  jp.host_category = TrainingCategory::kHost;
  return jp;
}

TrainingPlan build_training(const TrainingJob& job) {
  job.validate();
  ParallelShape shape{job.tp, job.cp, job.sequence_parallel && job.tp > 1, job.sp_keeps_gathered};
  OpOptions oo;
  oo.flash_attention = job.flash_attention;
  oo.eager = job.eager_kernels;
  oo.eager_loss = job.loss_eager();
  oo.fp8_tensorwise_casts = job.fp8_tensorwise;
  if (job.fsdp_float8_all_gather && job.grad_group() > 1) {
    oo.fp8_weight_cast_share = 1.0 / static_cast<double>(job.grad_group());
    oo.fp8_weight_recast_backward = job.fsdp_reshard_after_forward();
  }
  int64_t b = job.micro_batch, s = job.seq_len;
  Coster coster(job, b, s, shape);
  auto lops = layer_ops(job.model, b, s, shape, job.precision, oo);
  auto lcomm = layer_comm(job.model, b, s, shape, job.precision, oo);
  Recomputed sac;
  if (job.recompute == Recompute::kSelectiveOp) {
    sac.ops = op_sac_recompute_ops(job.model, b, s, shape, job.precision, oo);
    sac.comm = op_sac_recompute_comm(lcomm);
  }
  PassRecipes layer = make_pass_recipes(lops, lcomm, coster, job.tp_overlap,
                                        job.recompute == Recompute::kSelectiveOp ? &sac : nullptr);
  PassRecipes embed = make_pass_recipes(embedding_ops(job.model, b, s, shape, job.precision),
                                        embedding_comm(job.model, b, s, shape, job.precision), coster,
                                        TrainingJob::TpOverlap::kOff);
  PassRecipes head = make_pass_recipes(head_ops(job.model, b, s, shape, job.precision, oo),
                                       head_comm(job.model, b, s, shape, job.precision), coster,
                                       TrainingJob::TpOverlap::kOff);
  // Parameters per rank: a layer, the embedding (first chunk), the final norm + head (last chunk).
  double layer_params = static_cast<double>(layer_params_per_rank(job.model, job.tp));
  int64_t chunks = job.pp * job.virtual_stages;
  ParamSplit split;
  split.layer = layer_params;
  // A layer's FSDP all-gather: every parameter in the parameter dtype, or the linear weights in
  // FP8 (1 byte) under torchao's FP8 all-gather.
  const double matrix_params = static_cast<double>(layer_matrix_params_per_rank(job.model, job.tp));
  const double fp8_saving = job.fsdp_float8_all_gather ? matrix_params * (job.adam.param - 1.0) : 0.0;
  split.layer_gather_bytes = layer_params * job.adam.param - fp8_saving;
  split.embed = static_cast<double>(stage_params_per_rank(job.model, 0, true, false, chunks, job.tp));
  split.head = static_cast<double>(stage_params_per_rank(job.model, 0, false, true, chunks, job.tp));
  split.chunk_layers = split_layers(job.model.layers, chunks, job.split);
  const std::vector<int64_t>& chunk_layers = split.chunk_layers;

  TrainingPlan plan;
  double pp_bytes = pp_boundary_bytes(job.model, b, s, shape, job.precision);
  ActivationOptions ao;
  ao.recompute = job.recompute;
  ao.flash_attention = job.flash_attention;
  ao.precision = job.precision;
  ao.eager = job.eager_kernels;
  ao.fp8_gathered = job.precision == Precision::kFp8 && job.fp8_tensorwise;
  double act_layer = activation_bytes_per_layer(job.model, b, s, shape, ao);
  ActivationOptions full = ao;
  full.recompute = Recompute::kNone;
  double act_layer_full = activation_bytes_per_layer(job.model, b, s, shape, full);
  double act_head = head_activation_bytes(job.model, b, s, shape, job.precision, job.loss_eager(), job.eager_kernels);
  // What the head keeps from its forward to its backward (the loss's backward adds its own).
  const double head_saved = head_activation_bytes(job.model, b, s, shape, job.precision, false,
                                                  job.eager_kernels || job.loss_eager());
  int zero = job.data_parallel == DataParallel::kDdp ? 0
             : job.data_parallel == DataParallel::kZero1 ? 1
             : job.data_parallel == DataParallel::kZero2 ? 2
                                                         : 3;
  for (int32_t st = 0; st < job.pp; ++st) {
    StageBuilder sb(job, st, split, layer, embed, head, pp_bytes);
    int32_t in_flight = 0;
    plan.programs.push_back(sb.build(&in_flight));
    // Memory at the peak: model state, activations of the chunk-forwards in flight, buffers.
    double params = 0, layers_held = 0;
    bool has_head = false;
    for (int64_t c = 0; c < job.virtual_stages; ++c) {
      int64_t g = c * job.pp + st;
      params += split.chunk(g);
      layers_held += static_cast<double>(chunk_layers[static_cast<size_t>(g)]);
      has_head = has_head || g == chunks - 1;
    }
    StageMemory mem;
    mem.stage = st;
    mem.bytes = model_state_memory(static_cast<int64_t>(params), job.grad_group(), zero, job.adam);
    const MemoryBreakdown full_state = mem.bytes;
    const double act_chunk = layers_held / static_cast<double>(job.virtual_stages) * act_layer;
    // The peak of activations in flight plus the gradients that exist by then, where they come
    // and go within the step: FSDP's unsharded accumulators where it defers its gradient sync (a
    // chunk's from its first backward on), or with lazy gradients each chunk's (sharded) gradients
    // from its first backward on. Persistent gradients count whole at any point.
    const bool deferred = job.fsdp_defers_grad_sync();
    // Beside the stashed activations, while any are held: the head's (the last chunk's loss and
    // logits, one micro-batch's) or the working set of the layer being recomputed, whichever is
    // larger: the head's are freed by its backward before the first layer is recomputed. A
    // schedule that runs several forwards of the last chunk before their backwards (GPipe: all m)
    // keeps the other micro-batches' head tensors (their saved logits for the loss's backward, the
    // final norm's and the head's inputs) beside either, until their own backwards.
    const int32_t heads = has_head ? peak_in_flight(sb.order(), static_cast<int32_t>(job.virtual_stages - 1)) : 0;
    const double transient = std::max(has_head ? act_head : 0.0, job.recomputes_layers() ? act_layer_full : 0.0) +
                             std::max(0, heads - 1) * head_saved;
    double accumulated = 0;
    mem.in_flight_chunks = in_flight;
    if (deferred || job.gradients_lazy()) {
      std::vector<double> chunk_grad(static_cast<size_t>(job.virtual_stages), 0);
      for (int64_t c = 0; c < job.virtual_stages; ++c) {
        const double p = split.chunk(c * job.pp + st);
        chunk_grad[static_cast<size_t>(c)] =
            deferred ? p * job.fsdp_reduce_bytes()
                     : model_state_memory(static_cast<int64_t>(p), job.grad_group(), zero, job.adam).grads;
      }
      const bool split_w = job.schedule == PipelineSchedule::kZeroBubbleH1;
      int32_t live = 0;
      double acc = 0, best = -1;
      for (const PipelineWork& w : sb.order()) {
        live += in_flight_change(w.pass);
        if (w.pass == (split_w ? PassKind::kBackwardWeight : PassKind::kBackward)) {
          acc += chunk_grad[static_cast<size_t>(w.chunk)];
          chunk_grad[static_cast<size_t>(w.chunk)] = 0;
        }
        const double held = live * act_chunk + (live > 0 ? transient : 0.0) + acc;
        if (held > best) {
          best = held;
          mem.in_flight_chunks = live;
          accumulated = acc;
        }
      }
    }
    // Deferred and lazy, the sharded gradients exist only from the reduce-scatters at the step's
    // end, when the accumulators go (torchtitan zeroes gradients with set_to_none): the larger of
    // the two; persistent, they are there beside the accumulators.
    if (deferred) mem.bytes.grads = job.gradients_lazy() ? std::max(mem.bytes.grads, accumulated) : mem.bytes.grads + accumulated;
    else if (job.gradients_lazy()) mem.bytes.grads = accumulated;
    mem.bytes.activations = mem.in_flight_chunks > 0 ? mem.in_flight_chunks * act_chunk + transient : 0;
    // Eager PyTorch's foreach AdamW allocates one temporary the size of its second-moment state
    // (torch/optim/adamw.py, _multi_tensor_adamw: exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)),
    // while every (sharded) gradient exists and no activation does: the step's end, which is the
    // peak where the model state outweighs the activations (tests/data/captures/h100-sxm/
    // h8192-l2-b1: 2 bytes per parameter above weights, gradients and states).
    if (job.optimizer_foreach()) {
      const double state_bytes = job.master_weights ? 4.0 : job.adam.param;  // v's element
      const double temp = full_state.optimizer * state_bytes / job.adam.optimizer;
      if (full_state.grads + temp > mem.bytes.grads + mem.bytes.activations) {
        mem.bytes.grads = full_state.grads;
        mem.bytes.optimizer += temp;
        mem.bytes.activations = 0;
        mem.in_flight_chunks = 0;
      }
    }
    if (job.data_parallel == DataParallel::kFsdp) {
      // Gathered parameters: the layers in flight (and the head, kept between its forward and
      // backward unless the policy is "always"), or all of the stage's where they stay gathered
      // between passes (no reshard after forward, or none after backward under the deferral).
      // Nothing is gathered without a sharding group.
      const bool all = !job.fsdp_reshard_after_forward() || job.fsdp_defers_grad_sync();
      const double head = has_head && job.fsdp_reshard != TrainingJob::Reshard::kAlways ? split.head : 0;
      const double layers_gathered =
          all ? layers_held : std::min(layers_held, static_cast<double>(job.fsdp_prefetch + 1));
      if (job.grad_group() > 1)
        mem.bytes.comm_buffers = (all ? params : layers_gathered * layer_params + head) * job.adam.param -
                                 layers_gathered * fp8_saving;
    } else if (job.dp > 1) {
      mem.bytes.comm_buffers = 2 * job.ddp_bucket_bytes;
    }
    plan.memory.push_back(mem);
  }
  plan.tokens_per_step = static_cast<double>(job.global_batch) * static_cast<double>(job.seq_len);
  plan.model_flops_per_step = model_flops_per_token(job.model, job.seq_len) * plan.tokens_per_step;
  return plan;
}

}  // namespace wl
