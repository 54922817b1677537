#include "workloads/training/data_parallel.h"

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
  void before_layer(int32_t mb, int32_t chunk, int64_t pos, const std::vector<int64_t>&, Pass pass) override {
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

// ZeRO-3 (FSDP), with HSDP's replicate all-reduce when dp_outer > 1.
class Fsdp : public DataParallelPolicy {
 public:
  using DataParallelPolicy::DataParallelPolicy;

  // All-gather of layer position `pos` of this pass, at most `fsdp_prefetch` layers ahead.
  void before_layer(int32_t mb, int32_t chunk, int64_t pos, const std::vector<int64_t>& layer_first,
                    Pass pass) override {
    if (!e_.has(Dim::kDp)) return;
    std::vector<uint32_t> deps;
    int64_t ahead = pos - job_.fsdp_prefetch;
    if (ahead >= 0 && layer_first[static_cast<size_t>(ahead)] >= 0)
      deps.push_back(static_cast<uint32_t>(layer_first[static_cast<size_t>(ahead)]));
    const int32_t g = shape_.global(chunk);
    const bool fwd = pass == Pass::kForward;
    int64_t l = shape_.first_layer[static_cast<size_t>(g)] +
                (fwd ? pos : shape_.chunk_layers[static_cast<size_t>(g)] - 1 - pos);
    e_.wait_for(e_.add_collective(Dim::kDp, CollectiveOp::kAllGather, param_bytes(split_.layer),
                                  std::string("all-gather params ") + (fwd ? "fwd" : "bwd"),
                                  mb, static_cast<int32_t>(l), deps));
  }
  // The embedding or the head: gathered before use, gradient reduce-scattered after.
  void before_whole(double params, const char* what, int32_t mb) override {
    if (!e_.has(Dim::kDp) || params <= 0) return;
    e_.wait_for(e_.add_collective(Dim::kDp, CollectiveOp::kAllGather, param_bytes(params),
                                  std::string("all-gather params ") + what, mb, -1, {}));
  }
  void after_whole_grad(double params, const char* what, int32_t mb, bool grads_final) override {
    if (params <= 0) return;
    std::vector<uint32_t> deps{static_cast<uint32_t>(e_.last_compute())};
    uint32_t rs = static_cast<uint32_t>(e_.last_compute());
    if (e_.has(Dim::kDp))
      rs = e_.add_collective(Dim::kDp, CollectiveOp::kReduceScatter, grad_bytes(params),
                             std::string("reduce-scatter grads ") + what, mb, -1, deps);
    if (grads_final && e_.has(Dim::kDpOuter))
      e_.add_collective(Dim::kDpOuter, CollectiveOp::kAllReduce, grad_bytes(params) / static_cast<double>(job_.grad_group()),
                        std::string("all-reduce grad shard ") + what, mb, -1, {rs});
  }
  // Reduce-scatter this layer's gradient after every micro-batch's backward.
  void grad_ready(int32_t mb, int64_t layer, double params, bool grads_final, double&) override {
    if (!e_.has(Dim::kDp) && !e_.has(Dim::kDpOuter)) return;
    std::vector<uint32_t> deps{static_cast<uint32_t>(e_.last_compute())};
    uint32_t rs = e_.has(Dim::kDp) ? e_.add_collective(Dim::kDp, CollectiveOp::kReduceScatter, grad_bytes(params),
                                                       "reduce-scatter grads", mb,
                                                       static_cast<int32_t>(layer), deps)
                                   : static_cast<uint32_t>(e_.last_compute());
    if (grads_final && e_.has(Dim::kDpOuter))
      e_.add_collective(Dim::kDpOuter, CollectiveOp::kAllReduce, grad_bytes(params) / static_cast<double>(job_.grad_group()),
                        "all-reduce grad shard", mb, static_cast<int32_t>(layer),
                        {rs});
  }
  double optimizer_share(double params) const override { return params / static_cast<double>(job_.grad_group()); }
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
