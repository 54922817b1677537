#include "workloads/training/program.h"

#include "sim/error.h"

namespace wl {

std::string_view stream_name(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTp: return "tp";
    case Stream::kCp: return "cp";
    case Stream::kPpSend: return "pp send";
    case Stream::kPpRecv: return "pp recv";
    case Stream::kDp: return "dp";
    case Stream::kDpOuter: return "dp outer";
    case Stream::kCount: break;
  }
  return "?";
}

std::string_view dim_name(Dim d) {
  switch (d) {
    case Dim::kTp: return "tp";
    case Dim::kCp: return "cp";
    case Dim::kPp: return "pp";
    case Dim::kDp: return "dp";
    case Dim::kDpOuter: return "dp_outer";
    case Dim::kCount: break;
  }
  return "?";
}

std::string_view category_name(Category c) {
  switch (c) {
    case Category::kCompute: return "compute";
    case Category::kTp: return "tp";
    case Category::kCp: return "cp";
    case Category::kPp: return "pp";
    case Category::kDp: return "dp";
    case Category::kOptimizer: return "optimizer";
    case Category::kCount: break;
  }
  return "?";
}

uint32_t Program::add(Op op, std::initializer_list<uint32_t> deps) {
  return add(std::move(op), std::vector<uint32_t>(deps));
}

uint32_t Program::add(Op op, const std::vector<uint32_t>& deps) {
  SIM_ASSERT(!finalized_, "Program::add after finalize");
  uint32_t idx = static_cast<uint32_t>(ops_.size());
  op.deps_begin = static_cast<uint32_t>(deps_.size());
  op.deps_count = 0;
  for (uint32_t d : deps) {
    SIM_ASSERT(d < idx, "an op may depend only on earlier ops");
    deps_.push_back(d);
    ++op.deps_count;
  }
  ops_.push_back(op);
  return idx;
}

void Program::add_dep(uint32_t op, uint32_t dep) {
  SIM_ASSERT(op + 1 == ops_.size() && dep < op, "add_dep only extends the most recent op");
  deps_.push_back(dep);
  ++ops_[op].deps_count;
}

void Program::finalize() {
  for (auto& v : stream_ops_) v.clear();
  for (uint32_t i = 0; i < ops_.size(); ++i) {
    auto& list = stream_ops_[static_cast<size_t>(ops_[i].stream)];
    ops_[i].pos = static_cast<uint32_t>(list.size());
    list.push_back(i);
  }
  finalized_ = true;
}

}  // namespace wl
