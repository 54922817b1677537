#include "workloads/training/stage_emitter.h"

namespace wl {

namespace {

uint16_t stream_for(Dim d) {
  switch (d) {
    case Dim::kTp: return kTpStream;
    case Dim::kCp: return kCpStream;
    case Dim::kDp: return kDpStream;
    case Dim::kDpOuter: return kDpOuterStream;
    default: return kPpSendStream;
  }
}

// A message's tag is its index within its direction of travel times 2, plus 1 when it travels
// backwards, so activations and gradients between the same two ranks never match.
uint32_t message_tag(uint32_t message, bool travels_forward) { return 2 * message + (travels_forward ? 0 : 1); }

}  // namespace

StageEmitter::StageEmitter(const TrainingJob& job) : job_(job) {
  // Streams in the order of their trace thread ids.
  for (const char* name : {"compute", "tp", "cp", "pp send", "pp recv", "dp", "dp outer"}) p_.add_stream(name);
}

bool StageEmitter::has(Dim d) const {
  switch (d) {
    case Dim::kTp: return job_.tp > 1;
    case Dim::kCp: return job_.cp > 1;
    case Dim::kDp: return job_.grad_group() > 1;  // DP x CP when CP > 1
    case Dim::kDpOuter: return job_.dp_outer > 1;
    default: return false;
  }
}

uint32_t StageEmitter::add_compute(const Cost& c, const std::vector<CostTerm>& terms, const std::string& name,
                                   TrainingCategory cat, int32_t mb, int32_t layer) {
  Op op;
  op.kind = OpKind::kKernel;
  op.stream = kComputeStream;
  op.category = cat;
  auto [it, fresh] = term_index_.try_emplace(&terms, 0);
  if (fresh) it->second = p_.add_cost_terms(terms);
  op.index = it->second;
  op.model_flops = c.model_flops;
  op.name = p_.intern(name);
  op.micro_batch = mb;
  op.layer = layer;
  uint32_t idx = p_.add(op, frontier_);
  frontier_.clear();
  last_compute_ = idx;
  return idx;
}

uint32_t StageEmitter::add_side_kernel(Dim d, const std::vector<CostTerm>& terms, const std::string& name,
                                       TrainingCategory cat, int32_t mb, int32_t layer,
                                       const std::vector<uint32_t>& deps) {
  Op op;
  op.kind = OpKind::kKernel;
  op.stream = stream_for(d);
  op.category = cat;
  auto [it, fresh] = term_index_.try_emplace(&terms, 0);
  if (fresh) it->second = p_.add_cost_terms(terms);
  op.index = it->second;
  op.name = p_.intern(name);
  op.micro_batch = mb;
  op.layer = layer;
  return p_.add(op, deps);
}

uint32_t StageEmitter::add_collective(Dim d, CollectiveOp coll, double bytes, const std::string& name, int32_t mb,
                                      int32_t layer, const std::vector<uint32_t>& deps, bool copy_engines) {
  Op op;
  op.kind = OpKind::kCollective;
  op.op_class = static_cast<uint8_t>(copy_engines ? CollectiveEngine::kCopyEngines : CollectiveEngine::kSmKernels);
  // Training's communicators are numbered by Dim, then kDpCpComm; data-parallel collectives of a
  // job with CP > 1 run on DP x CP (TrainingJob::grad_group).
  op.comm = d == Dim::kDp && job_.cp > 1 ? kDpCpComm : static_cast<uint32_t>(d);
  op.coll = coll;
  op.bytes = bytes;
  op.stream = stream_for(d);
  op.category = category_of(d);
  op.name = p_.intern(name);
  op.micro_batch = mb;
  op.layer = layer;
  return p_.add(op, deps);
}

void StageEmitter::recv(int8_t peer, uint32_t message, int32_t mb, const std::string& what) {
  Op op;
  op.kind = OpKind::kRecv;
  op.stream = kPpRecvStream;
  op.category = TrainingCategory::kPp;
  op.peer_axis = static_cast<uint8_t>(Dim::kPp);
  op.peer = peer;
  op.tag = message_tag(message, peer < 0);
  op.name = p_.intern(what);
  op.micro_batch = mb;
  frontier_.push_back(p_.add(op));
}

void StageEmitter::send(int8_t peer, uint32_t message, double bytes, const std::string& what, int32_t mb) {
  Op op;
  op.kind = OpKind::kSend;
  op.stream = kPpSendStream;
  op.category = TrainingCategory::kPp;
  op.peer_axis = static_cast<uint8_t>(Dim::kPp);
  op.peer = peer;
  op.tag = message_tag(message, peer > 0);
  op.bytes = bytes;
  op.name = p_.intern(what);
  op.micro_batch = mb;
  std::vector<uint32_t> deps = frontier_;
  if (last_compute_ >= 0) deps.push_back(static_cast<uint32_t>(last_compute_));
  p_.add(op, deps);
  frontier_.clear();
}

}  // namespace wl
