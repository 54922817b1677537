#include "workloads/program/program.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "sim/error.h"

namespace wl {

double gemm_wave_factor(double rows, double cols, uint32_t sms) {
  if (sms < 8 || rows <= 0 || cols <= 0) return 1.0;
  double tiles = std::ceil(rows / 128.0) * std::ceil(cols / 256.0);
  double waves = std::ceil(tiles / sms);
  return tiles / (waves * sms);
}

std::string_view op_kind_name(OpKind k) {
  switch (k) {
    case OpKind::kKernel: return "kernel";
    case OpKind::kTimed: return "timed";
    case OpKind::kDelay: return "delay";
    case OpKind::kCollective: return "collective";
    case OpKind::kSend: return "send";
    case OpKind::kRecv: return "recv";
    case OpKind::kMemory: return "memory";
    case OpKind::kMarker: return "marker";
  }
  return "?";
}

uint16_t Program::add_stream(std::string_view name) {
  SIM_ASSERT(!finalized_, "Program::add_stream after finalize");
  SIM_ASSERT(stream_names_.size() < kNoStream, "too many streams");
  stream_names_.emplace_back(name);
  return static_cast<uint16_t>(stream_names_.size() - 1);
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
    deps_.push_back(DepRef{d, 0, 0});
    ++op.deps_count;
  }
  ops_.push_back(op);
  return idx;
}

void Program::add_dep(uint32_t op, uint32_t dep) {
  SIM_ASSERT(op + 1 == ops_.size() && dep < op, "add_dep only extends the most recent op");
  deps_.push_back(DepRef{dep, 0, 0});
  ++ops_[op].deps_count;
}

void Program::finalize() {
  stream_ops_.assign(stream_names_.size(), {});
  free_ops_.clear();
  recv_op_of_slot_.clear();
  recv_lists_.clear();
  relative_peers_.clear();
  has_absolute_recvs_ = false;
  for (uint32_t i = 0; i < ops_.size(); ++i) {
    Op& op = ops_[i];
    if (op.stream == kNoStream) {
      if (op.kind != OpKind::kMarker && op.kind != OpKind::kMemory)
        throw sim::UserError("op " + std::to_string(i) + " ('" + names_.name(op.name) + "') is a " +
                             std::string(op_kind_name(op.kind)) +
                             " on no stream; only markers and memory ops may be dependency-only");
      op.pos = static_cast<uint32_t>(free_ops_.size());
      free_ops_.push_back(i);
    } else {
      if (op.stream >= stream_ops_.size())
        throw sim::UserError("op " + std::to_string(i) + " ('" + names_.name(op.name) + "') is on stream " +
                             std::to_string(op.stream) + " but the program declares " +
                             std::to_string(stream_ops_.size()) + " streams");
      auto& list = stream_ops_[op.stream];
      op.pos = static_cast<uint32_t>(list.size());
      list.push_back(i);
    }
    if (op.kind == OpKind::kRecv || op.kind == OpKind::kSend) {
      if (op.peer >= (1 << 23) || op.peer < -(1 << 23))
        throw sim::UserError("op " + std::to_string(i) + " ('" + names_.name(op.name) + "'): peer " +
                             std::to_string(op.peer) + " is outside the supported range (|peer| < 2^23)");
    }
    if (op.kind == OpKind::kRecv) {
      uint32_t slot = static_cast<uint32_t>(recv_op_of_slot_.size());
      recv_op_of_slot_.push_back(i);
      op.index = slot;
      recv_lists_[recv_key(op.peer_axis, op.peer, op.tag)].push_back(slot);
      if (op.peer_axis == kAbsolutePeer) {
        has_absolute_recvs_ = true;
      } else {
        std::pair<uint8_t, int32_t> ref{op.peer_axis, op.peer};
        if (std::find(relative_peers_.begin(), relative_peers_.end(), ref) == relative_peers_.end())
          relative_peers_.push_back(ref);
      }
    }
  }
  for (DepRef& d : deps_) {
    d.pos = ops_[d.op].pos;
    d.stream = ops_[d.op].stream;
  }
  // A stream's head becomes ready only when one of its dependencies completes, or the op before it
  // on its stream (which is how it became the head): those are the streams to look at afterwards.
  // More than 64 streams do not fit the mask: every op wakes them all.
  const bool few_streams = stream_ops_.size() <= 64;
  for (Op& op : ops_) op.wakes = few_streams ? 0 : ~uint64_t{0};
  if (few_streams) {
    for (Op& op : ops_) {
      if (op.stream == kNoStream) continue;  // dependency-only ops are looked at on every pass
      const uint64_t bit = uint64_t{1} << op.stream;
      op.wakes |= bit;
      for (uint32_t k = 0; k < op.deps_count; ++k) ops_[deps_[op.deps_begin + k].op].wakes |= bit;
    }
  }
  finalized_ = true;
}

const std::vector<uint32_t>* Program::recv_slots(uint8_t peer_axis, int32_t peer, uint32_t tag) const {
  auto it = recv_lists_.find(recv_key(peer_axis, peer, tag));
  return it == recv_lists_.end() ? nullptr : &it->second;
}

uint32_t Program::add_peer_sizes(std::vector<double> bytes_to_each_member) {
  peer_sizes_.push_back(std::move(bytes_to_each_member));
  return static_cast<uint32_t>(peer_sizes_.size());
}

uint32_t Program::add_cost_terms(std::vector<CostTerm> terms) {
  cost_terms_.push_back(std::move(terms));
  return static_cast<uint32_t>(cost_terms_.size());
}

uint16_t JobProgram::add_category(std::string_view name) {
  for (size_t i = 0; i < categories.size(); ++i)
    if (categories[i] == name) return static_cast<uint16_t>(i);
  categories.emplace_back(name);
  return static_cast<uint16_t>(categories.size() - 1);
}

uint32_t JobProgram::add_comm(Communicator c) {
  comms.push_back(std::move(c));
  return static_cast<uint32_t>(comms.size() - 1);
}

}  // namespace wl
