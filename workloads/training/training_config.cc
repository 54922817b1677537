#include "workloads/training/training_config.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <tuple>

#include "sim/error.h"
#include "sim/units.h"

namespace wl {

namespace {

template <class F>
auto located(const sim::ConfigNode& node, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const sim::ConfigError& e) {
    // Errors from the model/schedule layers carry no location: attach this node's.
    std::string what = e.what();
    if (what.find(node.location()) == 0) throw;
    node.fail(what);
  }
}

// 16384 -> "16,384".
std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// The job's GPUs in errors about the layout: "64 GPUs", or with hot spare nodes set aside
// "16,128 GPUs (16,384 in the cluster less 32 spare nodes of 8)".
std::string job_gpus_text(uint32_t gpus, SpareNodes spares) {
  std::string t = grouped(gpus) + (gpus == 1 ? " GPU" : " GPUs");
  if (spares.nodes > 0)
    t += " (" + grouped(gpus + static_cast<uint64_t>(spares.nodes) * spares.gpus_per_node) + " in the cluster less " +
         grouped(spares.nodes) + (spares.nodes == 1 ? " spare node of " : " spare nodes of ") +
         std::to_string(spares.gpus_per_node) + ")";
  return t;
}

}  // namespace

ModelSpec bind_model(const sim::ConfigNode& m) {
  ModelSpec spec;
  if (m.has("preset")) {
    auto preset = m.get_enum("preset", model_preset_names());
    spec = find_model_preset(preset);
  }
  bool full = !m.has("preset");
  auto need = [&](const char* key, int64_t def) {
    return full ? m.get_int_in(key, 1, int64_t{1} << 40) : m.get_int_in(key, 1, int64_t{1} << 40, def);
  };
  const int64_t preset_hidden = spec.hidden, preset_heads = spec.heads;
  spec.name = m.get_string("name", spec.name.empty() ? "custom" : spec.name);
  spec.layers = need("layers", spec.layers);
  spec.hidden = need("hidden", spec.hidden);
  spec.ffn_hidden = need("ffn_hidden", spec.ffn_hidden);
  spec.heads = need("heads", spec.heads);
  spec.kv_heads = m.get_int_in("kv_heads", 1, int64_t{1} << 20, spec.kv_heads > 0 ? spec.kv_heads : spec.heads);
  // A preset's head_dim is its hidden / heads (every preset's is): when hidden or heads is changed
  // and head_dim is not given, it follows them, as for a model without preset (keeping the preset's
  // 128 made a hidden-8192 Llama 3 8B attend over 32 x 128 = 4096 columns). Where heads does not
  // divide hidden, validate_model asks for head_dim.
  int64_t head_dim = spec.head_dim;
  if (!full && (spec.hidden != preset_hidden || spec.heads != preset_heads))
    head_dim = spec.hidden % spec.heads == 0 ? spec.hidden / spec.heads : 0;
  spec.head_dim = m.get_int_in("head_dim", 0, int64_t{1} << 20, head_dim);
  spec.vocab = need("vocab", spec.vocab);
  std::string mlp = m.get_enum("mlp", {"swiglu", "gelu"}, spec.mlp == MlpKind::kSwiGlu ? "swiglu" : "gelu");
  spec.mlp = mlp == "swiglu" ? MlpKind::kSwiGlu : MlpKind::kGelu;
  std::string norm = m.get_enum("norm", {"rmsnorm", "layernorm"}, spec.norm == NormKind::kRmsNorm ? "rmsnorm" : "layernorm");
  spec.norm = norm == "rmsnorm" ? NormKind::kRmsNorm : NormKind::kLayerNorm;
  spec.tied_embeddings = m.get_bool("tied_embeddings", spec.tied_embeddings);
  spec.parallel_block = m.get_bool("parallel_block", spec.parallel_block);
  spec.bias = m.get_bool("bias", spec.bias);
  std::string pos = m.get_enum("position", {"rope", "learned"}, spec.position == PositionKind::kRope ? "rope" : "learned");
  spec.position = pos == "rope" ? PositionKind::kRope : PositionKind::kLearned;
  spec.max_seq_len = m.get_int_in("max_seq_len", 0, int64_t{1} << 30, spec.max_seq_len);
  located(m, [&] {
    validate_model(spec);
    return 0;
  });
  // Parameter and activation counts must stay exact in 64 bits: a layer holds about 4 h^2 + 3 h f
  // parameters, the embedding v h.
  const double h = static_cast<double>(spec.hidden), f = static_cast<double>(spec.ffn_hidden);
  const double params = static_cast<double>(spec.layers) * (4 * h * h + 3 * h * f) + 2 * static_cast<double>(spec.vocab) * h;
  if (params > 1e15) {
    // Name the key furthest beyond a plausible size (a 1,000-layer, 10^5-wide, 10^7-token model).
    const char* key = "hidden";
    double worst = -1;
    for (auto [k, v, typical] : {std::tuple{"layers", spec.layers, 1e3}, std::tuple{"hidden", spec.hidden, 1e5},
                                 std::tuple{"ffn_hidden", spec.ffn_hidden, 4e5}, std::tuple{"vocab", spec.vocab, 1e7}})
      if (m.has(k) && static_cast<double>(v) / typical > worst) worst = static_cast<double>(v) / typical, key = k;
    (m.has(key) ? m.child(key) : m)
        .fail([&] {
          char buf[128];
          std::snprintf(buf, sizeof buf, "the model would have about %.2g parameters; clustersim handles up to 1e15", params);
          return std::string(buf);
        }());
  }
  return spec;
}

TrainingSettings bind_training(const sim::ConfigNode& w, const topo::GpuSpec& gpu, uint32_t gpus,
                               uint64_t memory_limit, SpareNodes spares) {
  // Whose GPUs the layout must fill: the cluster's, or the job's when spare nodes are set aside.
  const char* owner = spares.nodes > 0 ? "job" : "cluster";
  TrainingSettings ts;
  TrainingJob& j = ts.job;
  j.gpu = gpu;
  j.profile = topo::default_profile(gpu);  // run_training_step uses the cluster's profile
  j.model = bind_model(w.child("model"));

  auto t = w.child("training");
  j.seq_len = t.get_int_in("seq_len", 1, int64_t{1} << 24);
  j.global_batch = t.get_int_in("global_batch", 1, int64_t{1} << 30);
  j.micro_batch = t.get_int_in("micro_batch", 1, int64_t{1} << 20, 1);
  j.precision = kPrecisionNames.value(t.get_enum("precision", kPrecisionNames.names(), "bf16"));
  j.recompute = kRecomputeNames.value(t.get_enum("recompute", kRecomputeNames.names(), "none"));
  j.flash_attention = t.get_bool("flash_attention", true);
  j.eager_kernels = t.get_enum("kernels", {"fused", "eager"}, "fused") == "eager";
  j.eager_loss = t.get_enum("loss", {"fused", "eager"}, j.eager_kernels ? "eager" : "fused") == "eager";
  j.foreach_optimizer = t.get_enum("optimizer", {"fused", "foreach"}, j.eager_kernels ? "foreach" : "fused") == "foreach";
  j.master_weights = t.get_bool("master_weights", true);
  if (!j.master_weights) {
    if (j.precision == Precision::kFp32)
      t.child("master_weights").fail("false applies to 16-bit training (bf16, fp16, fp8): fp32 weights are their own master copy");
    j.adam.optimizer = 2 * j.adam.param;  // m and v in the weights' 16-bit type
  }
  // fp8_recipe, read for FP8 or where given; delayed (its default) passes for any precision, as
  // resolved FP8 scenarios list it.
  if (j.precision == Precision::kFp8 || t.has("fp8_recipe")) {
    j.fp8_tensorwise = t.get_enum("fp8_recipe", {"delayed", "tensorwise"}, "delayed") == "tensorwise";
    if (j.fp8_tensorwise && j.precision != Precision::kFp8)
      t.child("fp8_recipe").fail("applies to precision: fp8 only (this job's is " +
                                 std::string(kPrecisionNames.name(j.precision)) + ")");
  }

  auto p = w.child("parallelism");
  j.tp = p.get_int_in("tp", 1, 1 << 20, 1);
  j.cp = p.get_int_in("cp", 1, 1 << 20, 1);
  j.pp = p.get_int_in("pp", 1, 1 << 20, 1);
  j.dp_outer = p.get_int_in("dp_outer", 1, 1 << 24, 1);
  // dp: auto (torchtitan's -1): whatever the other dimensions leave of the cluster's GPUs.
  if (auto d = p.find("dp"); d && d->is_scalar() && d->as_string() == "auto") {
    const uint64_t others = static_cast<uint64_t>(j.tp) * static_cast<uint64_t>(j.cp) * static_cast<uint64_t>(j.pp) *
                            static_cast<uint64_t>(j.dp_outer);
    if (others == 0 || gpus % others != 0)
      d->fail("auto: tp x cp x pp x dp_outer = " + std::to_string(j.tp) + " x " + std::to_string(j.cp) + " x " +
              std::to_string(j.pp) + " x " + std::to_string(j.dp_outer) + " = " + std::to_string(others) +
              " does not divide the " + owner + "'s " + job_gpus_text(gpus, spares));
    j.dp = static_cast<int64_t>(gpus / others);
  } else {
    j.dp = p.get_int_in("dp", 1, 1 << 24, 1);
  }
  j.sequence_parallel = p.get_bool("sequence_parallel", j.tp > 1);
  j.sp_keeps_gathered = p.get_enum("sequence_parallel_saves", {"shard", "gathered"}, "shard") == "gathered";
  if (j.sp_keeps_gathered && !(j.sequence_parallel && j.tp > 1))
    p.child("sequence_parallel_saves")
        .fail("says what sequence parallelism keeps for the weight gradients: needs tp > 1 and sequence_parallel: true");
  auto order = p.get_string_list("order", {"tp", "cp", "pp", "dp", "dp_outer"});
  {
    std::array<Dim, kNumDims> o{};
    std::array<bool, kNumDims> seen{};
    std::vector<std::string> names = {"tp", "cp", "pp", "dp", "dp_outer"};
    size_t k = 0;
    for (const auto& name : order) {
      auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end()) p.child("order").fail("unknown dimension \"" + name + "\" (expected tp, cp, pp, dp, dp_outer)");
      size_t d = static_cast<size_t>(it - names.begin());
      if (seen[d]) p.child("order").fail("dimension \"" + name + "\" appears twice");
      seen[d] = true;
      if (k < kNumDims) o[k++] = static_cast<Dim>(d);
    }
    // Dimensions left out go outermost, in the default order.
    for (size_t d = 0; d < kNumDims; ++d)
      if (!seen[d]) o[k++] = static_cast<Dim>(d);
    j.order = o;
  }
  j.data_parallel = kDataParallelNames.value(p.get_enum("data_parallel", kDataParallelNames.names(), "ddp"));
  // training.gradients' default follows the kernels and the data parallelism (TrainingJob::gradients_lazy),
  // read here, where both are known, so that the resolved scenario lists it.
  j.lazy_gradients = t.get_enum("gradients", {"persistent", "lazy"},
                                j.eager_kernels || j.data_parallel == DataParallel::kFsdp ? "lazy" : "persistent") == "lazy";
  // Keys of FSDP only, read for FSDP (which records their defaults in the resolved scenario) or
  // where given. For another strategy a value other than the default is refused, naming the
  // strategy; the default passes (resolved scenarios of earlier releases list fsdp_prefetch for
  // every strategy, and a sweep across strategies may set them).
  {
    const bool fsdp = j.data_parallel == DataParallel::kFsdp;
    auto only_fsdp = [&](const char* key, bool at_default) {
      if (!fsdp && !at_default)
        p.child(key).fail(std::string("applies to data_parallel: fsdp only (this job's is ") +
                          std::string(kDataParallelNames.name(j.data_parallel)) + ")");
    };
    if (fsdp || p.has("fsdp_prefetch")) {
      j.fsdp_prefetch = p.get_int_in("fsdp_prefetch", 0, 1024, 1);
      only_fsdp("fsdp_prefetch", j.fsdp_prefetch == 1);
    }
    if (fsdp || p.has("fsdp_reshard_after_forward")) {
      // torchtitan's reshard_after_forward_policy (default = always without PP, never with it),
      // or PyTorch's boolean flag.
      const std::string r =
          p.get_enum("fsdp_reshard_after_forward", {"default", "always", "never", "true", "false"}, "default");
      j.fsdp_reshard = r == "default"                    ? TrainingJob::Reshard::kDefault
                       : r == "always" || r == "true" ? TrainingJob::Reshard::kAlways
                                                      : TrainingJob::Reshard::kNever;
      only_fsdp("fsdp_reshard_after_forward", r == "default");
    }
    if (fsdp || p.has("fsdp_reduce_dtype")) {
      // fp32 as torchtitan sets FSDP2's reduce_dtype; without master weights the parameters'
      // 16-bit type, as FSDP2 reduces with no mixed-precision policy.
      const char* def = j.master_weights ? "fp32" : (j.precision == Precision::kFp16 ? "fp16" : "bf16");
      j.fsdp_reduce = kPrecisionNames.value(p.get_enum("fsdp_reduce_dtype", {"fp32", "bf16", "fp16"}, def));
      only_fsdp("fsdp_reduce_dtype", kPrecisionNames.name(j.fsdp_reduce) == std::string_view(def));
    }
    if (fsdp || p.has("fsdp_copies")) {
      // PyTorch FSDP2 copies each gathered flat buffer out into the parameters and each layer's
      // gradients into the reduce-scatter's input; XLA's sharded programs (TPUs) gather in place.
      const bool def = j.gpu.kind == topo::AcceleratorKind::kGpu;
      j.fsdp_copies = p.get_bool("fsdp_copies", def);
      only_fsdp("fsdp_copies", j.fsdp_copies == def);
    }
    if (fsdp || p.has("fsdp_float8_all_gather")) {
      j.fsdp_float8_all_gather = p.get_bool("fsdp_float8_all_gather", false);
      only_fsdp("fsdp_float8_all_gather", !j.fsdp_float8_all_gather);
      if (j.fsdp_float8_all_gather && !(j.precision == Precision::kFp8 && j.fp8_tensorwise))
        p.child("fsdp_float8_all_gather")
            .fail("gathers torchao's FP8 weights: needs training.precision: fp8 with fp8_recipe: tensorwise (this job's "
                  "precision is " + std::string(kPrecisionNames.name(j.precision)) +
                  (j.precision == Precision::kFp8 ? ", recipe delayed)" : ")"));
    }
  }
  j.ddp_bucket_bytes = p.get_bytes("bucket", j.ddp_bucket_bytes);
  if (j.ddp_bucket_bytes <= 0) p.child("bucket").fail("must be > 0");
  j.overlap_grad_reduce = p.get_bool("overlap_grad_reduce", j.overlap_grad_reduce);
  {
    // A YAML boolean (true/false, yes/no, on/off) as before: on is Megatron-LM's flag of that name
    // (Transformer Engine's userbuffers); or an implementation's name.
    const bool spelled_bool = p.has("tp_comm_overlap") && p.child("tp_comm_overlap").is_bool();
    const std::string o = spelled_bool ? (p.get_bool("tp_comm_overlap") ? "true" : "false")
                                       : p.get_enum("tp_comm_overlap", {"false", "true", "userbuffers", "asynctp"}, "false");
    j.tp_overlap = o == "false"     ? TrainingJob::TpOverlap::kOff
                   : o == "asynctp" ? TrainingJob::TpOverlap::kAsyncTp
                                    : TrainingJob::TpOverlap::kUserbuffers;
  }
  if (j.tp_comm_overlap() && (j.tp < 2 || !j.sequence_parallel))
    p.child("tp_comm_overlap").fail("overlaps the all-gathers and reduce-scatters of sequence parallelism: needs tp > 1 and sequence_parallel: true (as Megatron-LM's --tp-comm-overlap does)");
  j.split = kPipelineSplitNames.value(p.get_enum("layer_split", kPipelineSplitNames.names(), "even"));

  auto s = w.child("schedule");
  j.schedule = kPipelineScheduleNames.value(s.get_enum("kind", kPipelineScheduleNames.names()));
  j.virtual_stages = s.get_int_in("virtual_stages", 1, 1024, 1);

  w.refuse_moved("efficiency", "compute efficiencies are the hardware profile's; set cluster.profile.gemm_efficiency, "
                                "attention_efficiency, memory_efficiency, vector_efficiency");
  w.refuse_moved("step_overhead", "set cluster.profile.step_overhead (the hardware profile's)");
  if (auto c = w.find("collectives")) {
    c->refuse_moved("step_overhead", "set cluster.profile.step_overhead (the hardware profile's)");
    const char* keys[] = {"tp", "cp", "pp", "dp", "dp_outer"};
    for (size_t d = 0; d < kNumDims; ++d) {
      if (d == static_cast<size_t>(Dim::kPp)) continue;
      std::string a = c->get_enum(keys[d], {"auto", "ring", "tree", "halving-doubling", "hierarchical", "torus", "direct"},
                                  "auto");
      j.algorithm[d] = parse_algorithm(a);
      if (auto node = c->find(keys[d])) ts.algorithm_at[d] = node->where();
    }
  }
  if (auto m = w.find("memory")) ts.allow_oom = m->get_bool("allow_oom", false);
  {
    const std::string f = w.get_enum("fidelity", {"expanded", "symmetric", "auto"}, "expanded");
    ts.fidelity = f == "symmetric" ? Fidelity::kSymmetric : f == "auto" ? Fidelity::kAuto : Fidelity::kExpanded;
    if (auto node = w.find("fidelity")) ts.fidelity_at = node->where();
  }

  // The product in 128 bits: each factor may be up to 2^24, so five of them can overflow int64.
  const unsigned __int128 ranks = static_cast<unsigned __int128>(j.tp) * static_cast<unsigned __int128>(j.cp) *
                                  static_cast<unsigned __int128>(j.pp) * static_cast<unsigned __int128>(j.dp) *
                                  static_cast<unsigned __int128>(j.dp_outer);
  if (ranks != static_cast<unsigned __int128>(gpus)) {
    const std::string product = ranks > static_cast<unsigned __int128>(UINT64_MAX)
                                    ? std::string("more than 2^64")
                                    : std::to_string(static_cast<uint64_t>(ranks));
    // When the other dimensions divide the GPUs, dp: auto is the fix a cluster-size sweep wants.
    const unsigned __int128 others = ranks / static_cast<unsigned __int128>(j.dp);
    const std::string hint =
        others > 0 && static_cast<unsigned __int128>(gpus) % others == 0
            ? " (dp: auto takes what the others leave: dp = " +
                  std::to_string(static_cast<uint64_t>(static_cast<unsigned __int128>(gpus) / others)) + ")"
            : "";
    p.fail("tp x cp x pp x dp x dp_outer = " + std::to_string(j.tp) + " x " + std::to_string(j.cp) + " x " +
           std::to_string(j.pp) + " x " + std::to_string(j.dp) + " x " + std::to_string(j.dp_outer) + " = " +
           product + (product == "1" ? " rank" : " ranks") + ", but the " + owner + " has " +
           job_gpus_text(gpus, spares) + hint);
  }
  // FP8 needs an FP8 tensor path (Hopper and later): on a GPU without one the run would silently
  // fall back to another precision's peak.
  if (j.precision == Precision::kFp8 && j.gpu.peak_fp8_flops <= 0)
    w.child("training").child("precision").fail("the accelerator " + j.gpu.name + " has no FP8 tensor path");
  // The batch against the data parallelism, named at global_batch (the usual slip).
  if (const std::string batch = j.batch_problem(); !batch.empty()) w.child("training").child("global_batch").fail(batch);
  // What the step's programs will hold: one rank runs micro-batches x (its layers, forward and
  // backward) ops, and the stages' programs together micro-batches x the model's layers. Beyond
  // 2^26 per rank a program alone outgrows memory (p20: 2^29 micro-batches filled 8 GiB and was
  // killed; p22: 2^40 layers ran out of memory); below it, the programs may still need more than
  // the machine has: a global batch given in tokens instead of sequences (4,194,304 on the default
  // scenario: 2^21 micro-batches per rank) took 16 GiB and ended in std::bad_alloc. Each layer pass
  // costs at least kProgramBytesPerLayerPass (the default scenario's fused-kernel programs, measured
  // from max RSS at 2^18 and 2^20 layer passes: 3.0 KiB each; eager kernels have more ops).
  {
    constexpr uint64_t kProgramBytesPerLayerPass = 2048;  // "2 KiB" in the message
    const unsigned __int128 mb = static_cast<unsigned __int128>(j.micro_batches());
    const unsigned __int128 layers = static_cast<unsigned __int128>((j.model.layers + j.pp - 1) / j.pp);
    const unsigned __int128 passes = mb * static_cast<unsigned __int128>(j.model.layers);
    const unsigned __int128 need = passes * kProgramBytesPerLayerPass;
    const bool too_many = mb * layers > (static_cast<unsigned __int128>(1) << 26);
    const bool too_big = memory_limit > 0 && need > memory_limit;
    if (too_many || too_big) {
      const bool by_batch = mb > layers;
      sim::ConfigNode model = w.child("model");
      sim::ConfigNode where = by_batch                 ? w.child("training").child("global_batch")
                              : model.has("layers") ? model.child("layers")
                                                    : model;
      // Raising pp shortens each rank's program (the 2^26 bound) but not the stages' programs
      // together (micro-batches x all layers; fewer replicas even mean more micro-batches each).
      const std::string hint = by_batch ? "; global_batch counts sequences of seq_len tokens, not tokens: lower it, or "
                                          "raise micro_batch or dp"
                                        : too_many ? "; use fewer layers, or raise pp" : "; use fewer layers";
      if (too_many)
        where.fail(std::to_string(j.micro_batches()) + " micro-batches per rank x " +
                   std::to_string(static_cast<long long>(layers)) +
                   " layers per pipeline stage is more than 2^26 layer passes per rank: the step's program would "
                   "not fit in memory" + hint);
      where.fail(std::to_string(j.micro_batches()) + " micro-batches per rank x " + std::to_string(j.model.layers) +
                 " layers is " + std::to_string(static_cast<uint64_t>(passes)) +
                 " layer passes in the step's programs, which need at least " +
                 sim::format_bytes(static_cast<double>(need)) + " (2 KiB each), more than the run's limit of " +
                 sim::format_bytes(static_cast<double>(memory_limit)) + " (--max-memory, else MemAvailable)" + hint);
    }
  }
  located(w, [&] {
    j.validate();
    return 0;
  });
  {
    // The sequence against the model and the layout (a learned position table, CP's and SP's
    // divisibility): named at training.seq_len.
    sim::ConfigNode t = w.child("training");
    located(t.has("seq_len") ? t.child("seq_len") : t, [&] {
      check_run(j.model, j.micro_batch, j.seq_len, ParallelShape{j.tp, j.cp, j.sequence_parallel && j.tp > 1});
      return 0;
    });
  }
  return ts;
}

}  // namespace wl
