#include "workloads/training/data_parallel.h"

#include <map>
#include <string>

namespace wl {

namespace {

// DDP, and ZeRO-1/2 (which reduce-scatter the same buckets and gather parameters before use).
class Bucketed : public DataParallelPolicy {
 public:
  Bucketed(StageEmitter& e, const StageShape& shape, const ParamSplit& split, bool zero12)
      : DataParallelPolicy(e, shape, split), zero12_(zero12) {}

  // ZeRO-1/2: parameters updated on their shard are all-gathered before their first use in the
  // step (equivalently, at the end of the previous step), overlapping earlier layers' forward.
  void before_step() override {
    if (!zero12_ || job_.grad_group() <= 1) return;
    for (int32_t c = 0; c < shape_.virtual_stages; ++c) {
      int32_t g = shape_.global(c);
      gather_.push_back(e_.add_collective(Dim::kDp, CollectiveOp::kAllGather, param_bytes(split_.chunk(g)),
                                          "all-gather params chunk " + std::to_string(c), -1, -1, {}));
    }
  }
  // The first forward of a chunk waits for its parameters.
  void before_layer(int32_t mb, int32_t chunk, int64_t pos, Pass pass) override {
    if (!gather_.empty() && pos == 0 && pass == Pass::kForward && mb == first_fwd_mb[static_cast<size_t>(chunk)])
      e_.wait_for(gather_[static_cast<size_t>(chunk)]);
  }
  void grad_ready(int32_t mb, int64_t layer, double params, bool grads_final, double& bucket) override {
    if (!e_.has(Dim::kDp) && !e_.has(Dim::kDpOuter)) return;
    if (!grads_final) return;
    bucket += params;
    if (grad_bytes(bucket) >= job_.ddp_bucket_bytes) emit_bucket(mb, bucket, layer);
  }
  void flush(int32_t mb, bool grads_final, double& bucket, int32_t g) override {
    if (!grads_final || !e_.has(Dim::kDp)) return;
    if (g == 0) bucket += split_.embed;
    if (g == shape_.last_global()) bucket += split_.head;
    if (bucket > 0) emit_bucket(mb, bucket, -1);
  }
  double optimizer_share(double params) const override {
    return zero12_ ? params / static_cast<double>(job_.grad_group()) : params;
  }
  // Without overlap, the buckets held back go out now, in order, after the last backward.
  void after_passes() override {
    for (const Held& h : held_) {
      double b = h.params;
      send_bucket(h.mb, b, h.layer);
    }
    held_.clear();
  }

 private:
  struct Held {
    int32_t mb;
    double params;
    int64_t layer;
  };
  void emit_bucket(int32_t mb, double& bucket, int64_t layer) {
    if (!job_.overlap_grad_reduce) {
      held_.push_back({mb, bucket, layer});
      bucket = 0;
      return;
    }
    send_bucket(mb, bucket, layer);
  }
  void send_bucket(int32_t mb, double& bucket, int64_t layer) {
    std::vector<uint32_t> deps{static_cast<uint32_t>(e_.last_compute())};
    e_.add_collective(Dim::kDp, zero12_ ? CollectiveOp::kReduceScatter : CollectiveOp::kAllReduce, grad_bytes(bucket),
                      zero12_ ? "reduce-scatter grads" : "all-reduce grads", mb, static_cast<int32_t>(layer), deps);
    bucket = 0;
  }

  bool zero12_;
  std::vector<uint32_t> gather_;  // per chunk: its parameter all-gather (ZeRO-1/2)
  std::vector<Held> held_;        // buckets held back until after_passes() (no overlap)
};

// ZeRO-3 (FSDP), with HSDP's replicate all-reduce when dp_outer > 1. A chunk's layers are
// gathered (unsharded) or not as a whole: a pass that finds them sharded all-gathers each layer
// before use; after a forward they stay gathered unless fsdp_reshard_after_forward; after a
// backward they are resharded, except under pipeline parallelism before the chunk's last
// backward. There PyTorch's pipeline stage (torch/distributed/pipelining/stage.py,
// backward_maybe_with_nosync) turns FSDP's reshard-after-backward and gradient sync off and, after
// the last micro-batch's backward, runs every FSDP group's post-backward: the chunk's gradients,
// accumulated unsharded, are reduce-scattered then, one collective per layer, back to back.
class Fsdp : public DataParallelPolicy {
 public:
  Fsdp(StageEmitter& e, const StageShape& shape, const ParamSplit& split)
      : DataParallelPolicy(e, shape, split),
        gathered_(static_cast<size_t>(shape.virtual_stages), false),
        gather_now_(static_cast<size_t>(shape.virtual_stages), true) {}

  void begin_pass(int32_t, int32_t chunk, Pass pass, bool grads_final) override {
    const size_t c = static_cast<size_t>(chunk);
    const bool kept_after_backward = job_.fsdp_defers_grad_sync() && !grads_final;
    gather_now_[c] = !gathered_[c];
    gathered_[c] = pass == Pass::kForward ? !job_.fsdp_reshard_after_forward() : kept_after_backward;
    // A pass that gathers: its units in the pass's order (the chunk's layers; in a backward last
    // first, then the embedding on the first chunk), none issued yet.
    const int32_t g = shape_.global(chunk);
    pass_ = pass;
    unit_gather_.clear();
    if (gather_now_[c] && e_.has(Dim::kDp)) {
      first_layer_ = shape_.first_layer[static_cast<size_t>(g)];
      layers_ = shape_.chunk_layers[static_cast<size_t>(g)];
      const bool embedding = pass == Pass::kBackward && g == 0 && split_.embed > 0;
      unit_gather_.assign(static_cast<size_t>(layers_) + (embedding ? 1 : 0), -1);
    }
    if (g == shape_.last_global()) {
      // torchtitan wraps the final norm and head as one FSDP unit that keeps its parameters
      // after the forward unless the policy is "always" (its backward follows at once).
      head_gather_now_ = !head_gathered_;
      head_gathered_ = pass == Pass::kForward ? job_.fsdp_reshard != TrainingJob::Reshard::kAlways
                                              : kept_after_backward;
    }
  }
  // Layer position `pos` of this pass waits for its all-gather, issued at most `fsdp_prefetch`
  // units ahead (use_unit).
  void before_layer(int32_t mb, int32_t, int64_t pos, Pass) override {
    if (!unit_gather_.empty()) use_unit(mb, pos);
  }
  // The embedding or the head: gathered before use, gradient reduce-scattered after. In a
  // backward that gathers, the embedding is the last unit, and the head's pre-backward hook
  // prefetches the first layers.
  void before_whole(Whole which, double params, int32_t mb, int32_t chunk) override {
    if (which == Whole::kEmbedding && unit_gather_.size() > static_cast<size_t>(layers_)) {
      use_unit(mb, layers_);
      return;
    }
    const bool gather = which == Whole::kHead ? head_gather_now_ : gather_now_[static_cast<size_t>(chunk)];
    if (e_.has(Dim::kDp) && params > 0 && gather)
      copy_out(e_.add_collective(Dim::kDp, CollectiveOp::kAllGather, param_bytes(params),
                                 std::string("all-gather params ") + whole_name(which), mb, -1, {}),
               param_bytes(params), mb, -1);
    if (which == Whole::kHead && pass_ == Pass::kBackward) prefetch(mb, -1);
  }
  void after_whole_grad(Whole which, double params, int32_t mb, bool grads_final) override {
    if (params <= 0) return;
    reduce(mb, -1, params, grads_final, whole_name(which));
  }
  void grad_ready(int32_t mb, int64_t layer, double params, bool grads_final, double&) override {
    reduce(mb, static_cast<int32_t>(layer), params, grads_final, nullptr);
  }
  // The end of a chunk's last backward under pipeline parallelism: its held reductions go out.
  void flush(int32_t, bool grads_final, double&, int32_t) override {
    if (!grads_final) return;
    for (const Held& h : held_) send(h.mb, h.layer, h.params, true, h.what);
    held_.clear();
  }
  double optimizer_share(double params) const override { return params / static_cast<double>(job_.grad_group()); }

 private:
  struct Held {
    int32_t mb;
    int32_t layer;
    double params;
    const char* what;  // the embedding's or head's name; nullptr: a layer
  };
  double reduce_bytes(double params) const { return params * job_.fsdp_reduce_bytes(); }
  // A pass's all-gathers in the order FSDP2 issues them. A unit's pre-forward or pre-backward hook
  // (FSDPParamGroup.pre_forward / pre_backward, torch/distributed/fsdp/_fully_shard/
  // _fsdp_param_group.py, PyTorch 2.5-2.11) waits for its own all-gather (wait_for_unshard, then
  // the copy-out), and the next units' all-gathers are issued then: explicitly in a backward
  // (_backward_prefetch), implicitly in a forward (the host reaches the next unit's pre-forward
  // while this one's kernels run); fsdp_prefetch units ahead here. Each may start once this unit
  // has begun (its copy-out, or the kernel before it). A unit's post-backward issues its
  // reduce-scatter after its backward's kernels; FSDP2 uses one process group for both, and NCCL
  // runs a communicator's operations in the order they were issued, so on the data-parallel stream
  // the all-gather of unit pos + 1 precedes the reduce-scatter of unit pos and runs beside unit
  // pos's backward. Unit pos is the chunk's layer first + pos in a forward, first + n - 1 - pos
  // in a backward, where pos == n is the embedding.
  void use_unit(int32_t mb, int64_t pos) {
    if (unit_gather_[static_cast<size_t>(pos)] < 0) issue_unit(mb, pos, {});
    copy_out(static_cast<uint32_t>(unit_gather_[static_cast<size_t>(pos)]), unit_gather_bytes(pos), mb, unit_layer(pos));
    prefetch(mb, pos);
  }
  // The units after `pos` (the head's hook in a backward: pos = -1), up to fsdp_prefetch of them.
  void prefetch(int32_t mb, int64_t pos) {
    const int64_t units = static_cast<int64_t>(unit_gather_.size());
    std::vector<uint32_t> deps;
    if (e_.last_compute() >= 0) deps.push_back(static_cast<uint32_t>(e_.last_compute()));
    for (int64_t q = pos + 1; q <= pos + job_.fsdp_prefetch && q < units; ++q)
      if (unit_gather_[static_cast<size_t>(q)] < 0) issue_unit(mb, q, deps);
  }
  void issue_unit(int32_t mb, int64_t pos, const std::vector<uint32_t>& deps) {
    const char* name = pos == layers_ ? "all-gather params embedding"
                       : pass_ == Pass::kForward ? "all-gather params fwd"
                                                 : "all-gather params bwd";
    unit_gather_[static_cast<size_t>(pos)] =
        e_.add_collective(Dim::kDp, CollectiveOp::kAllGather, unit_gather_bytes(pos), name, mb, unit_layer(pos), deps);
  }
  double unit_gather_bytes(int64_t pos) const {
    return pos == layers_ ? param_bytes(split_.embed) : split_.layer_gather_bytes;
  }
  int32_t unit_layer(int64_t pos) const {
    if (pos == layers_) return -1;
    return static_cast<int32_t>(first_layer_ + (pass_ == Pass::kForward ? pos : layers_ - 1 - pos));
  }
  // FSDP2's copies around its collectives (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py,
  // PyTorch 2.5-2.11): the all-gather writes one flat buffer, which foreach_all_gather_copy_out
  // copies into the unsharded parameters with split_with_sizes_copy on the compute stream once the
  // all-gather is done (FSDPParamGroup.wait_for_unshard, just before the module runs): every
  // gathered byte read and written once. Charged to the data-parallel category.
  void copy_out(uint32_t gather, double gathered_bytes, int32_t mb, int32_t layer) {
    e_.wait_for(gather);
    if (!job_.fsdp_copies) return;
    e_.add_compute(Cost{}, memory_terms(2 * gathered_bytes), "fsdp copy-out", TrainingCategory::kDp, mb, layer);
  }
  // One memory-bound kernel moving `bytes` through HBM, stored once per size (the emitter keys
  // cost terms by their address).
  const std::vector<CostTerm>& memory_terms(double bytes) {
    std::vector<CostTerm>& t = memory_terms_[bytes];
    if (t.empty()) t.push_back(memory_term(bytes));
    return t;
  }
  // A gradient is complete for this micro-batch: reduce-scattered now, or, with the sync
  // deferred, accumulated (nothing to send) until the chunk's last backward ends.
  void reduce(int32_t mb, int32_t layer, double params, bool grads_final, const char* what) {
    if (!e_.has(Dim::kDp) && !e_.has(Dim::kDpOuter)) return;
    if (job_.fsdp_defers_grad_sync()) {
      if (grads_final) held_.push_back({mb, layer, params, what});
      return;
    }
    send(mb, layer, params, grads_final, what);
  }
  void send(int32_t mb, int32_t layer, double params, bool grads_final, const char* what) {
    const std::string suffix = what ? std::string(" ") + what : std::string();
    std::vector<uint32_t> deps{static_cast<uint32_t>(e_.last_compute())};
    uint32_t rs = static_cast<uint32_t>(e_.last_compute());
    if (e_.has(Dim::kDp)) {
      // foreach_reduce first copies the unsharded gradients into the reduce-scatter's input in the
      // reduce dtype (torch._chunk_cat), on the reduce-scatter stream: read in the gradients' dtype
      // (the parameters', or the reduce dtype where they were accumulated in it), written in the
      // reduce dtype.
      if (job_.fsdp_copies) {
        const double grad_elem = job_.fsdp_defers_grad_sync() ? job_.fsdp_reduce_bytes() : job_.adam.param;
        deps.assign(1, e_.add_side_kernel(Dim::kDp, memory_terms(params * (grad_elem + job_.fsdp_reduce_bytes())),
                                          "fsdp copy-in grads" + suffix, TrainingCategory::kDp, mb, layer, deps));
      }
      rs = e_.add_collective(Dim::kDp, CollectiveOp::kReduceScatter, reduce_bytes(params),
                             "reduce-scatter grads" + suffix, mb, layer, deps);
    }
    if (grads_final && e_.has(Dim::kDpOuter))
      e_.add_collective(Dim::kDpOuter, CollectiveOp::kAllReduce,
                        reduce_bytes(params) / static_cast<double>(job_.grad_group()), "all-reduce grad shard" + suffix,
                        mb, layer, {rs});
  }

  std::vector<bool> gathered_;    // per chunk: its layers are unsharded now
  std::vector<bool> gather_now_;  // per chunk: the current pass gathers them
  bool head_gathered_ = false, head_gather_now_ = true;  // the same for the final norm and head
  // The current pass, its all-gathers per unit in its order (-1: not issued yet; empty when it
  // gathers nothing), its chunk's first layer and layer count.
  Pass pass_ = Pass::kForward;
  std::vector<int64_t> unit_gather_;
  int64_t first_layer_ = 0, layers_ = 0;
  std::vector<Held> held_;        // deferred reductions of the chunk being finished
  std::map<double, std::vector<CostTerm>> memory_terms_;  // by bytes; node-based: stable addresses
};

}  // namespace

std::unique_ptr<DataParallelPolicy> make_data_parallel_policy(StageEmitter& e, const StageShape& shape,
                                                              const ParamSplit& split) {
  switch (e.job().data_parallel) {
    case DataParallel::kDdp: return std::make_unique<Bucketed>(e, shape, split, false);
    case DataParallel::kZero1:
    case DataParallel::kZero2: return std::make_unique<Bucketed>(e, shape, split, true);
    case DataParallel::kFsdp: return std::make_unique<Fsdp>(e, shape, split);
  }
  return std::make_unique<Bucketed>(e, shape, split, false);
}

}  // namespace wl
