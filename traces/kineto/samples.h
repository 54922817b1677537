// traces/kineto/samples.h: calibration samples (workloads/calibration/calibrate.h) from profiler
// traces read with KinetoReadOptions::ops.
//
// Kernels, each attributed to the PyTorch op that launched it (the innermost op recording shapes):
//  - GEMM: aten::mm [M,K]x[K,N], aten::addmm (bias, [M,K], [K,N]), aten::bmm / aten::baddbmm
//    ([B,M,K]x[B,K,N]), aten::linear ([..,K], weight [N,K]): 2 B M N K FLOPs; every kernel the op
//    launched counts (a split-K GEMM's reduction kernel is part of it). Precision from the first
//    input's type: float is FP32 unless the kernel's name says TF32 ("tf32", "s1688", "s16816").
//  - Attention core: aten::_scaled_dot_product_{flash,efficient,cudnn}_attention ([B,H,S,D]) and
//    aten::_{flash,efficient}_attention_forward ([B,S,H,D]): 4 B H S Sk D / 2 FLOPs, a causal mask
//    assumed (the kernels skip the masked half); their _backward: 2.5 times that (five matrix
//    products for the forward's two; FlashAttention-2, Dao 2023, arXiv 2307.08691).
//  - Memory-bound: memset (bytes written) and an op that launched exactly one PyTorch elementwise
//    kernel (name holds "elementwise_kernel"):
//    every tensor input read plus an output the size of the first input written (fill_ / zero_
//    write only; copy_ reads its source and writes its destination). Approximate: broadcasting and
//    type promotion are not modelled. Memcpys are left out: copy engines move them, not the
//    kernels the profile models (on the HTA A100 sample a device-to-device copy reaches half the
//    bandwidth a memset of the same size does).
// Collectives: matched per process group as replay matches them (match_collectives); a
// collective's time is that of the member that waited least (the shortest kernel), its size
// recorded in the trace or given by the execution traces, its group the recorded ranks (rank r on
// GPU r).
#pragma once

#include <vector>

#include "traces/kineto/kineto.h"
#include "traces/pytorch_et/execution_trace.h"
#include "workloads/calibration/calibrate.h"

namespace traces {

std::vector<wl::KernelSample> kernel_samples(const KinetoRank& rank, uint32_t source);

// Host launch intervals (seconds): between the starts of consecutive runtime calls that launched
// a kernel or an NCCL kernel on the same host thread (the training loop's; autograd's backward
// thread is another), thread by thread, each in time order.
std::vector<double> launch_intervals(const KinetoRank& rank);

// Gaps (seconds) between consecutive kernels of a stream where the second was queued: its launch
// call started at least 20 us (longer than a launch call takes) before the first kernel ended.
std::vector<double> queued_kernel_gaps(const KinetoRank& rank);

// `sizes`: per rank, from its execution trace (empty: the sizes the traces record). Throws
// sim::UserError when the ranks' NCCL kernels cannot be matched or a size is missing.
std::vector<wl::CollectiveSample> collective_samples(const std::vector<KinetoRank>& ranks,
                                                     const std::vector<std::vector<EtCollective>>& sizes);

}  // namespace traces
