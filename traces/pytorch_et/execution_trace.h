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

// Throws sim::UserError naming the file (and node) for anything it cannot read.
std::vector<EtCollective> read_et_collectives(const std::string& path);

}  // namespace traces
