// traces/pytorch_et/execution_trace.h: the PyTorch execution trace (ExecutionTraceObserver JSON,
// plain or .gz; schema 1.0.x as in the samples) read for what a Kineto trace lacks: the size and
// kind of every collective. Each node named "nccl:<op>" (nccl:all_reduce, nccl:all_to_all, ...) is
// one collective, in node id order (the order the host issued them); its size is its first input
// tensor's element count times its element size (an input is [id, storage, offset, numel,
// element bytes, device]).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "workloads/collectives/collective.h"

namespace traces {

struct EtCollective {
  std::string name;  // "nccl:all_reduce"
  wl::CollectiveOp op = wl::CollectiveOp::kAllReduce;
  double bytes = 0;
};

struct EtCollectives {
  // The process that recorded it (the trace's top-level "pid"; -1 when absent): the training
  // process, whose profiler trace carries the same pid on its host events.
  int64_t pid = -1;
  std::vector<EtCollective> collectives;  // in node id order
};

// Throws sim::UserError naming the file (and node) for anything it cannot read.
EtCollectives read_et_collectives(const std::string& path);

}  // namespace traces
