// workloads/training/training.h: a transformer training job and the rank programs it runs.
//
// TrainingJob is the bound description (model, batch, parallelism, schedule, data parallelism,
// efficiencies). build_programs() turns it into one Program per pipeline stage (the rank classes:
// every TP/CP/DP peer of a stage runs the same ops) following the pipeline order of the schedule:
//   forward of a model chunk: [recv activation] [embedding] per layer: compute segments split by
//     their TP/CP collectives [head + loss] [send activation];
//   backward (or B and W for zero-bubble): the mirror, with [recompute of the forward] first under
//     full recompute;
//   data parallel: DDP all-reduces gradient buckets during the last micro-batch's backward;
//     ZeRO-1/2 reduce-scatter them there and all-gather parameters before their first forward;
//     ZeRO-3 (FSDP) all-gathers each layer before its forward and backward of every micro-batch
//     (at most `prefetch` layers ahead) and reduce-scatters its gradient after each backward; HSDP
//     adds an all-reduce of the shard over the replicate group (dp_outer);
//   optimizer step: one memory-bound kernel over the rank's (sharded) parameters at the end.
// Compute ops carry their time alone on the GPU: per model op, max(FLOPs / (peak x efficiency of
// its class), bytes / (HBM bandwidth x memory efficiency)), summed over the ops of a segment.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/time.h"
#include "topology/catalog.h"
#include "topology/hardware_profile.h"
#include "workloads/collectives/collective.h"
#include "workloads/model/memory.h"
#include "workloads/model/transformer.h"
#include "workloads/schedules/pipeline_order.h"
#include "workloads/program/layout.h"
#include "workloads/program/program.h"

namespace wl {

enum class DataParallel { kDdp, kZero1, kZero2, kFsdp };
inline constexpr sim::EnumNames<DataParallel, 4> kDataParallelNames{{{
    {DataParallel::kDdp, "ddp"}, {DataParallel::kZero1, "zero1"}, {DataParallel::kZero2, "zero2"}, {DataParallel::kFsdp, "fsdp"}}}};

// Training's streams (trace thread ids) and breakdown categories in its JobProgram. Communicators
// are numbered by Dim (tp 0, cp 1, pp 2, dp 3, dp_outer 4), generated along the layout's axes,
// then kDpCpComm (5): DP x CP, the data-parallel group of a job with CP > 1.
inline constexpr uint32_t kDpCpComm = static_cast<uint32_t>(kNumDims);
inline constexpr uint16_t kComputeStream = 0, kTpStream = 1, kCpStream = 2, kPpSendStream = 3, kPpRecvStream = 4,
                          kDpStream = 5, kDpOuterStream = 6;
enum TrainingCategory : uint16_t { kCompute, kBubble, kTp, kCp, kPp, kDp, kDpOuter, kOptimizer, kHost };
TrainingCategory category_of(Dim d);

struct TrainingJob {
  ModelSpec model;
  int64_t seq_len = 8192;
  int64_t global_batch = 1;  // sequences per step
  int64_t micro_batch = 1;   // sequences per micro-batch
  Precision precision = Precision::kBf16;
  Recompute recompute = Recompute::kNone;
  // Whether each layer's backward is preceded by a recomputation pass of its own (full, or
  // torchtitan's op-level selective; Korthikanti's selective re-runs the attention core inside
  // the backward).
  bool recomputes_layers() const { return recompute == Recompute::kFull || recompute == Recompute::kSelectiveOp; }
  bool flash_attention = true;
  // Parallelism. dp is the (shard) data-parallel size, dp_outer the HSDP replicate size.
  int64_t tp = 1, cp = 1, pp = 1, dp = 1, dp_outer = 1;
  // The group that shares parameters and reduces their gradients: DP, or DP x CP when CP > 1
  // (context-parallel ranks hold the same weights and see different tokens; Megatron-LM reduces
  // gradients and shards the distributed optimizer over the data-parallel group "with context
  // parallel", megatron/core/parallel_state.py).
  int64_t grad_group() const { return dp * cp; }
  bool sequence_parallel = true;
  // With sequence parallelism: a column-parallel GEMM keeps its gathered input for its weight
  // gradient (PyTorch DTensor, torchtitan) instead of its shard and a regather (Megatron-LM); see
  // ParallelShape::sp_keeps_gathered.
  bool sp_keeps_gathered = false;
  std::array<Dim, kNumDims> order = Layout::default_order();
  DataParallel data_parallel = DataParallel::kDdp;
  int64_t fsdp_prefetch = 1;           // ZeRO-3: all-gathers in flight ahead of compute
  // FSDP: free a layer's gathered parameters after its forward (and gather them again for its
  // backward). torchtitan's reshard_after_forward_policy "default" (torchtitan/models/llama3/
  // infra/parallelize.py, apply_fsdp): yes without pipeline parallelism, no with it, "to avoid
  // per-microbatch all-gathers" of the same parameters.
  enum class Reshard { kDefault, kAlways, kNever };
  Reshard fsdp_reshard = Reshard::kDefault;
  bool fsdp_reshard_after_forward() const {
    return fsdp_reshard == Reshard::kDefault ? pp == 1 : fsdp_reshard == Reshard::kAlways;
  }
  // FSDP: the dtype gradients are reduced and accumulated in: FSDP2's MixedPrecisionPolicy
  // reduce_dtype, float32 in torchtitan (training.mixed_precision_reduce); with it, gradients
  // accumulated over micro-batches are kept in float32 too (FSDPParam.to_accumulated_grad_if_needed).
  // fp32, bf16 or fp16.
  Precision fsdp_reduce = Precision::kFp32;
  // torchao's FP8 all-gather (torchtitan --float8.enable_fsdp_float8_all_gather): with FP8
  // tensorwise GEMMs under FSDP, each rank casts its shard of every linear weight to FP8 and the
  // all-gather moves 1 byte per weight instead of the parameter dtype's; the gathered weights are
  // FP8. Norms, the embedding and the output projection (BF16 under FP8) gather as before.
  bool fsdp_float8_all_gather = false;
  // FSDP2's copy kernels around its collectives (torch/distributed/fsdp/_fully_shard/
  // _fsdp_collectives.py): the copy-out of every all-gather's flat buffer into the unsharded
  // parameters on the compute stream, and the copy-in of the gradients into the reduce-scatter's
  // input in the reduce dtype on the reduce-scatter stream. Off: collectives in place (XLA on TPUs).
  bool fsdp_copies = true;
  double fsdp_reduce_bytes() const { return static_cast<double>(elementwise_bytes(fsdp_reduce)); }
  // Under pipeline parallelism PyTorch's pipeline stage keeps FSDP from syncing (and resharding)
  // gradients until a chunk's last backward (torch/distributed/pipelining/stage.py,
  // backward_maybe_with_nosync): the chunk's unsharded gradients accumulate across micro-batches.
  // (Without a data-parallel group there is nothing to sync: torchtitan applies no FSDP then.)
  bool fsdp_defers_grad_sync() const {
    return data_parallel == DataParallel::kFsdp && pp > 1 && (grad_group() > 1 || dp_outer > 1);
  }
  double ddp_bucket_bytes = 25 << 20;  // PyTorch DDP default bucket_cap_mb = 25
  // DDP / ZeRO-1/2: reduce each gradient bucket as soon as the last micro-batch's backward fills
  // it, overlapped with the rest of the backward (PyTorch DDP; Megatron-LM --overlap-grad-reduce),
  // or, off, every bucket after the backward pass ends (Megatron-LM's default without the flag).
  bool overlap_grad_reduce = true;
  // TP all-gathers and reduce-scatters (sequence parallelism) overlapped with the GEMMs that
  // consume or produce them, the GEMM cut into tp chunks along its tokens so that chunk i runs
  // while chunk i+1 moves (training.cc, make_pass_recipes): kUserbuffers as Megatron-LM's
  // --tp-comm-overlap with Transformer Engine's userbuffers, which reduce inside their
  // communication kernels; kAsyncTp as PyTorch's AsyncTP (torch/distributed/_symmetric_memory,
  // fused_all_gather_matmul and fused_matmul_reduce_scatter), which also copies the local shard
  // into its peer-visible buffer before an all-gather and sums the tp partial chunks in a kernel
  // of its own after a reduce-scatter.
  enum class TpOverlap : uint8_t { kOff, kUserbuffers, kAsyncTp };
  TpOverlap tp_overlap = TpOverlap::kOff;
  bool tp_comm_overlap() const { return tp_overlap != TpOverlap::kOff; }
  // Schedule.
  PipelineSchedule schedule = PipelineSchedule::kOneFOneB;
  int64_t virtual_stages = 1;
  PipelineSplit split = PipelineSplit::kEven;
  // Hardware: the accelerator and the cluster's hardware profile (run_training_step uses the one
  // of the ClusterResources it runs on).
  topo::GpuSpec gpu;
  topo::HardwareProfile profile;
  AdamBytes adam;
  double optimizer_bytes_per_param = 32;  // fused Adam's update traffic per (sharded) parameter
  // `training.kernels: eager`: the model's norms, RoPE, activation and loss run unfused
  // (OpOptions::eager), and by default (`training.optimizer`, optimizer_foreach()) the optimizer is
  // PyTorch's default AdamW (foreach, torch/optim/adamw.py _multi_tensor_adamw, one launch per
  // 20,971,520 parameters and pass): 8 passes over FP32 state per parameter, weight decay (4 + 4), lerp of
  // exp_avg (4 + 4 + 4), exp_avg_sq * beta2 (4 + 4) and addcmul (4 + 4 + 4), sqrt, / bias
  // correction and + eps (3 x (4 + 4)), addcdiv into the parameter (4 + 4 + 4 + 4): 80 bytes.
  bool eager_kernels = false;
  // `training.loss: eager` (default: as `kernels`): the loss runs as eager PyTorch's FP32 cast,
  // log_softmax and nll_loss, as torchtitan's does also under torch.compile, which compiles each
  // block and not the loss (OpOptions::eager_loss; its backward holds three fp32 logit tensors).
  // Unset: as eager_kernels (loss_eager()).
  std::optional<bool> eager_loss;
  bool loss_eager() const { return eager_loss.value_or(eager_kernels); }
  // `training.optimizer: foreach|fused` (default: as `kernels`): PyTorch's foreach AdamW (8 passes,
  // one launch per 320 x 65,536 parameters and pass, at foreach_efficiency, with a temporary the
  // size of its second moment at the step's end) or a fused Adam (one pass: Megatron's, Apex's,
  // torch.optim.AdamW(fused=True), torchtitan's default). torch.compile compiles the model, not
  // the optimizer: a compiled model keeps the optimizer it was given. Unset: as eager_kernels.
  std::optional<bool> foreach_optimizer;
  bool optimizer_foreach() const { return foreach_optimizer.value_or(eager_kernels); }
  // `training.gradients: lazy` (default with `kernels: eager` or FSDP, which is PyTorch's FSDP2
  // here): each step's backward allocates the
  // gradients and the optimizer step's zero_grad(set_to_none=True) frees them (PyTorch's default
  // since 2.0; torchtitan, FSDP2), so a stage's gradients count from its first backward on and an
  // activation peak before it holds none (measured: tests/data/captures/h100-sxm/tt-h4096-l8-*
  // peak at the loss's backward with no gradients). `persistent` (default otherwise): a buffer
  // that lives through the step (Megatron-LM's grad buffer, DeepSpeed's contiguous gradients).
  // Unset: lazy with eager kernels or FSDP (gradients_lazy()).
  std::optional<bool> lazy_gradients;
  bool gradients_lazy() const { return lazy_gradients.value_or(eager_kernels || data_parallel == DataParallel::kFsdp); }
  // `training.fp8_recipe: tensorwise`: FP8 GEMMs pay their operands' scaling and casts as kernels
  // of their own (torchao Float8Linear with tensorwise dynamic scaling, as torchtitan runs FP8;
  // OpOptions::fp8_tensorwise_casts). `delayed` (the default): Transformer Engine's delayed
  // scaling, whose casts are fused into neighbouring kernels and are not charged.
  bool fp8_tensorwise = false;
  // `training.master_weights: false`: pure 16-bit training, no fp32 copy of the weights: Adam's
  // m and v in the weights' 16-bit type (adam.optimizer 4 bytes per parameter instead of 12) and
  // its update passes over 2-byte state: PyTorch's foreach AdamW on bf16 parameters moves half of
  // the 80 bytes above (40), a fused one reads weight, gradient, m and v and writes weight, m and
  // v (7 x 2 = 14 bytes instead of 32).
  bool master_weights = true;
  double optimizer_bytes() const {
    if (!master_weights) return optimizer_foreach() ? 40.0 : optimizer_bytes_per_param * (14.0 / 32.0);
    return optimizer_foreach() ? 80.0 : optimizer_bytes_per_param;
  }
  std::array<Algorithm, kNumDims> algorithm{Algorithm::kAuto, Algorithm::kAuto, Algorithm::kAuto, Algorithm::kAuto,
                                            Algorithm::kAuto};

  int64_t world() const { return tp * cp * pp * dp * dp_outer; }
  int64_t micro_batches() const { return global_batch / (dp * dp_outer * micro_batch); }
  double peak_flops() const;  // of the chosen precision (MFU's denominator; GEMMs run at it)
  // What the other ops run at: BF16 under FP8 (Transformer Engine runs only the linear layers in
  // FP8; attention, norms, softmax and elementwise stay BF16), else the precision's peak.
  double non_gemm_peak_flops() const;
  // Throws sim::ConfigError for impossible combinations, naming the values.
  void validate() const;
  // The global batch against the data parallelism and the micro-batch (empty: fine; validate
  // throws it), for binding to name training.global_batch.
  std::string batch_problem() const;
};

// Per-rank memory of one pipeline stage at its peak.
struct StageMemory {
  int64_t stage = 0;
  MemoryBreakdown bytes;
  // Chunk-forwards holding activations at the peak: the schedule's most, or, where FSDP
  // accumulates unsharded gradients, those at the largest sum of activations and gradients.
  int32_t in_flight_chunks = 0;
};

struct TrainingPlan {
  std::vector<Program> programs;  // one per pipeline stage
  std::vector<StageMemory> memory;
  double model_flops_per_step = 0;  // PaLM convention, whole job
  double tokens_per_step = 0;
};

TrainingPlan build_training(const TrainingJob& job);

// The job's JobProgram: the plan's programs (moved out) as templates, one per pipeline stage, the
// layout, a generated communicator per parallel dimension with the job's algorithm (errors
// prefixed with algorithm_at[d] where given), the training categories.
JobProgram training_job_program(const TrainingJob& job, TrainingPlan& plan,
                                const std::array<std::string, kNumDims>& algorithm_at);

}  // namespace wl
