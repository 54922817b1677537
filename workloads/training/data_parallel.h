// workloads/training/data_parallel.h: how a stage's program synchronises data-parallel replicas,
// one policy per strategy, called by the pipeline walker (training.cc) at fixed hooks:
//   DDP        gradients all-reduced in buckets during the last micro-batch's backward (PyTorch
//              DDP, Li et al. VLDB 2020);
//   ZeRO-1/2   gradients reduce-scattered in the same buckets, parameters all-gathered before their
//              first use in the step (Rajbhandari et al. SC'20);
//   FSDP       (ZeRO-3) a layer all-gathered before a pass that finds it sharded, at most
//              `fsdp_prefetch` layers ahead, and resharded after its forward only with
//              reshard_after_forward; gradients reduce-scattered after every backward, or, under
//              pipeline parallelism, accumulated unsharded and reduce-scattered after each chunk's
//              last backward (PyTorch FSDP2 as torchtitan runs it, see TrainingJob), with FSDP2's
//              copy-out after each all-gather and copy-in before each reduce-scatter; HSDP adds an
//              all-reduce of the gradient shard over the replicate group dp_outer (Zhao et al.,
//              VLDB 2023).
// Internal to workloads/training/.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "workloads/training/stage_emitter.h"

namespace wl {

// The parts outside the layers: the embedding (first chunk), the final norm and head (last).
enum class Whole { kEmbedding, kHead };
inline const char* whole_name(Whole w) { return w == Whole::kEmbedding ? "embedding" : "head"; }

class DataParallelPolicy {
 public:
  DataParallelPolicy(StageEmitter& e, const StageShape& shape, const ParamSplit& split)
      : e_(e), job_(e.job()), shape_(shape), split_(split) {}
  virtual ~DataParallelPolicy() = default;

  // Before the first pass of the step.
  virtual void before_step() {}
  // A forward or backward pass of (mb, chunk) begins (grads_final: its gradients are complete
  // after it); before any of its hooks below.
  virtual void begin_pass(int32_t mb, int32_t chunk, Pass pass, bool grads_final) {}
  // Before layer position `pos` (0 = first of the pass) of a forward or backward pass of
  // (mb, chunk).
  virtual void before_layer(int32_t mb, int32_t chunk, int64_t pos, Pass pass) {}
  // The embedding's or head's parameters (of `chunk`) are about to be used; their gradient was
  // just computed.
  virtual void before_whole(Whole which, double params, int32_t mb, int32_t chunk) {}
  virtual void after_whole_grad(Whole which, double params, int32_t mb, bool grads_final) {}
  // A layer's gradient is complete for this micro-batch; `bucket` collects parameters whose
  // gradients wait to be sent. flush() ends the chunk's pass (global chunk g).
  virtual void grad_ready(int32_t mb, int64_t layer, double params, bool grads_final, double& bucket) {}
  virtual void flush(int32_t mb, bool grads_final, double& bucket, int32_t g) {}
  // After the step's last pass, before the optimizer waits for the data-parallel streams.
  virtual void after_passes() {}
  // Parameters whose optimizer state this rank updates, of `params` held.
  virtual double optimizer_share(double params) const { return params; }

  // Per chunk: the micro-batch of its first forward (set by the walker before before_step()).
  std::vector<int32_t> first_fwd_mb;

 protected:
  double grad_bytes(double params) const { return params * job_.adam.grad; }
  double param_bytes(double params) const { return params * job_.adam.param; }

  StageEmitter& e_;
  const TrainingJob& job_;
  const StageShape& shape_;
  const ParamSplit& split_;
};

std::unique_ptr<DataParallelPolicy> make_data_parallel_policy(StageEmitter& e, const StageShape& shape,
                                                              const ParamSplit& split);

}  // namespace wl
