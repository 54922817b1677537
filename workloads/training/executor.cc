#include "workloads/training/executor.h"

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "sim/error.h"

namespace wl {

namespace {
constexpr uint64_t kSendTag = uint64_t{1} << 63;
}  // namespace

double Breakdown::total() const {
  double t = compute + optimizer + bubble;
  for (double e : exposed) t += e;
  return t;
}

TrainingExecutor::TrainingExecutor(topo::ClusterResources& res, CollectiveRuntime& runtime, const Layout& layout,
                                   const std::vector<Program>& classes, std::vector<uint16_t> class_of_rank,
                                   const ClusterShape& shape, const CostHints& hints, const ExecutorOptions& opt)
    : res_(res),
      sim_(res.simulation()),
      runtime_(runtime),
      layout_(layout),
      classes_(classes),
      class_of_(std::move(class_of_rank)),
      shape_(shape),
      hints_(hints),
      algorithm_(opt.algorithm) {
  uint32_t n = layout_.world();
  SIM_ASSERT(class_of_.size() == n, "one class per rank");
  SIM_ASSERT(n <= res_.topology().num_gpus(), "more ranks than GPUs");
  ranks_.resize(n);
  for (size_t d = 0; d < kNumDims; ++d) {
    int64_t size = layout_.size(static_cast<Dim>(d));
    groups_[d].resize(n / static_cast<uint32_t>(size));
  }
  arrival_offset_.resize(n + 1);
  uint64_t slots = 0;
  for (uint32_t r = 0; r < n; ++r) {
    arrival_offset_[r] = slots;
    const Program& p = program_of(r);
    slots += p.num_messages(-1) + p.num_messages(+1);
  }
  arrival_offset_[n] = slots;
  arrival_send_start_.assign(slots, sim::Time::infinite());
  send_start_.assign(n, sim::Time::zero());
  traced_.assign(n, 0);
  for (uint32_t r : opt.trace_ranks)
    if (r < n) traced_[r] = 1;
  check_algorithms(opt.algorithm_at);
}

// Every collective the programs run with a chosen (not auto) algorithm must be one that
// algorithm implements on that dimension's group shape; checked on one group per (dimension, op)
// before anything is simulated, and reported where the scenario chose the algorithm.
void TrainingExecutor::check_algorithms(const std::array<std::string, kNumDims>& algorithm_at) const {
  std::vector<uint32_t> first_rank(classes_.size(), layout_.world());
  for (uint32_t r = layout_.world(); r-- > 0;) first_rank[class_of_[r]] = r;
  std::set<std::pair<Dim, CollectiveOp>> checked;
  for (size_t c = 0; c < classes_.size(); ++c) {
    if (first_rank[c] == layout_.world()) continue;  // a class no rank runs
    for (const Op& op : classes_[c].ops()) {
      const auto d = static_cast<size_t>(op.dim);
      if (op.kind != OpKind::kCollective || algorithm_[d] == Algorithm::kAuto || layout_.size(op.dim) <= 1) continue;
      if (!checked.emplace(op.dim, op.coll).second) continue;
      CollectiveRequest req;
      req.op = op.coll;
      req.algorithm = algorithm_[d];
      layout_.members(first_rank[c], op.dim, req.group);
      req.bytes = op.bytes;
      const std::string problem = collective_problem(req, shape_);
      if (problem.empty()) continue;
      throw sim::ConfigError(algorithm_at[d].empty() ? problem : algorithm_at[d] + ": " + problem);
    }
  }
}

void TrainingExecutor::start() {
  step_start_ = sim_.now();
  auto& bus = sim_.observers();
  if (bus.active()) {
    key_mb_ = bus.names().intern("micro_batch");
    key_layer_ = bus.names().intern("layer");
    key_bytes_ = bus.names().intern("bytes");
    bus_names_.resize(classes_.size());
    for (size_t c = 0; c < classes_.size(); ++c) {
      const Program& p = classes_[c];
      for (const Op& op : p.ops()) {
        if (bus_names_[c].size() <= op.name) bus_names_[c].resize(op.name + 1, sim::kNoName);
        if (bus_names_[c][op.name] == sim::kNoName) bus_names_[c][op.name] = bus.names().intern(p.name(op.name));
      }
    }
    for (uint32_t r = 0; r < layout_.world(); ++r) {
      if (!traced_[r]) continue;
      std::string label = "rank " + std::to_string(r) + " (node " + std::to_string(res_.topology().node_of(r)) +
                          ", tp " + std::to_string(layout_.coord(r, Dim::kTp)) + " pp " +
                          std::to_string(layout_.coord(r, Dim::kPp)) + " dp " +
                          std::to_string(layout_.coord(r, Dim::kDp)) + ")";
      bus.declare_process(r, label, r);
      const Program& p = program_of(r);
      for (size_t s = 0; s < kNumStreams; ++s)
        if (!p.stream_ops(static_cast<Stream>(s)).empty())
          bus.declare_thread(r, static_cast<uint32_t>(s), stream_name(static_cast<Stream>(s)));
    }
  }
  for (uint32_t r = 0; r < layout_.world(); ++r) {
    ranks_[r].compute_free_since = step_start_;
    pump(r);
  }
}

bool TrainingExecutor::deps_done(uint32_t rank, const Program& p, const Op& op) const {
  const RankState& st = ranks_[rank];
  const uint32_t* d = p.deps(op);
  for (uint32_t i = 0; i < op.deps_count; ++i) {
    const Op& dep = p.op(d[i]);
    if (st.next[static_cast<size_t>(dep.stream)] <= dep.pos) return false;
  }
  return true;
}

void TrainingExecutor::pump(uint32_t rank) {
  pump_queue_.push_back(rank);
  if (pumping_) return;
  pumping_ = true;
  while (!pump_queue_.empty()) {
    uint32_t r = pump_queue_.back();
    pump_queue_.pop_back();
    const Program& p = program_of(r);
    bool progress = true;
    while (progress) {
      progress = false;
      for (size_t s = 0; s < kNumStreams; ++s) {
        RankState& st = ranks_[r];
        if (st.busy & (1u << s)) continue;
        const auto& list = p.stream_ops(static_cast<Stream>(s));
        if (st.next[s] >= list.size()) continue;
        uint32_t idx = list[st.next[s]];
        if (!deps_done(r, p, p.op(idx))) continue;
        issue(r, p, idx);
        progress = true;
      }
    }
  }
  pumping_ = false;
}

void TrainingExecutor::charge_compute_gap(uint32_t rank, const Program& p, const Op& op) {
  RankState& st = ranks_[rank];
  sim::Time now = sim_.now();
  if (now <= st.compute_free_since) return;
  double gap = (now - st.compute_free_since).seconds();
  // The dependency that finished last is what the compute stream was waiting for.
  const Op* blocker = nullptr;
  sim::Time latest = sim::Time::zero();
  const uint32_t* d = p.deps(op);
  for (uint32_t i = 0; i < op.deps_count; ++i) {
    const Op& dep = p.op(d[i]);
    sim::Time t = st.last_done[static_cast<size_t>(dep.stream)];
    if (!blocker || t > latest) {
      blocker = &dep;
      latest = t;
    }
  }
  if (!blocker) {
    st.bubble_s += gap;
    return;
  }
  switch (blocker->kind) {
    case OpKind::kRecv: {
      // Before the sender started sending, the stage was idle in the pipeline bubble; after, the
      // transfer itself was exposed.
      sim::Time ts = std::clamp(st.last_recv_send_start, st.compute_free_since, now);
      st.bubble_s += (ts - st.compute_free_since).seconds();
      st.exposed_s[static_cast<size_t>(Dim::kPp)] += (now - ts).seconds();
      break;
    }
    case OpKind::kSend: st.exposed_s[static_cast<size_t>(Dim::kPp)] += gap; break;
    case OpKind::kCollective: st.exposed_s[static_cast<size_t>(blocker->dim)] += gap; break;
    case OpKind::kCompute: st.bubble_s += gap; break;
  }
}

void TrainingExecutor::issue(uint32_t rank, const Program& p, uint32_t idx) {
  const Op& op = p.op(idx);
  auto s = static_cast<size_t>(op.stream);
  RankState& st = ranks_[rank];
  st.busy |= static_cast<uint8_t>(1u << s);
  st.started[s] = sim_.now();
  switch (op.kind) {
    case OpKind::kCompute:
      charge_compute_gap(rank, p, op);
      res_.start_timed_kernel(rank, op.seconds, op.sm_load, op.hbm_load, this, rank);
      break;
    case OpKind::kCollective: {
      auto d = static_cast<size_t>(op.dim);
      uint32_t size = static_cast<uint32_t>(layout_.size(op.dim));
      if (size <= 1) {
        complete(rank, op.stream);
        break;
      }
      uint32_t g = layout_.group_id(rank, op.dim);
      GroupState& gs = groups_[d][g];
      if (gs.arrived++ == 0) gs.any_member = rank;
      if (gs.arrived == size) {
        gs.arrived = 0;
        const CollectivePlan& plan = plan_for(op.dim, op.coll, op.bytes, rank);
        layout_.members(rank, op.dim, scratch_members_);
        runtime_.start(plan, scratch_members_, this, (uint64_t{d} << 32) | g, true);
      }
      break;
    }
    case OpKind::kSend: {
      uint32_t peer = layout_.pp_neighbor(rank, op.peer);
      send_start_[rank] = sim_.now();
      const CollectivePlan& plan = plan_for(Dim::kPp, CollectiveOp::kSendRecv, op.bytes, rank);
      uint32_t pair[2] = {rank, peer};
      runtime_.start(plan, pair, this, kSendTag | rank, true);
      break;
    }
    case OpKind::kRecv:
      if (arrived(rank, op.peer, op.message)) {
        st.last_recv_send_start = arrival_send_start_[slot(rank, op.peer, op.message)];
        complete(rank, op.stream);
      }
      break;
  }
}

void TrainingExecutor::complete(uint32_t rank, Stream s) {
  auto si = static_cast<size_t>(s);
  RankState& st = ranks_[rank];
  const Program& p = program_of(rank);
  uint32_t idx = p.stream_ops(s)[st.next[si]];
  const Op& op = p.op(idx);
  sim::Time now = sim_.now();
  if (traced_[rank]) emit_span(rank, op, st.started[si], now);
  st.busy &= static_cast<uint8_t>(~(1u << si));
  ++st.next[si];
  st.last_done[si] = now;
  ++ops_executed_;
  if (s == Stream::kCompute) {
    double busy = (now - st.started[si]).seconds();
    if (op.category == Category::kOptimizer)
      st.optimizer_s += busy;
    else
      st.compute_s += busy;
    st.compute_free_since = now;
  }
  bool all_done = true;
  for (size_t k = 0; k < kNumStreams; ++k)
    if (st.next[k] < p.stream_ops(static_cast<Stream>(k)).size()) all_done = false;
  if (all_done) {
    st.end = now;
    ++ranks_done_;
    step_end_ = std::max(step_end_, now);
    return;
  }
  pump(rank);
}

void TrainingExecutor::on_activity_done(sim::ActivityId, uint64_t tag) {
  complete(static_cast<uint32_t>(tag), Stream::kCompute);
}

void TrainingExecutor::on_collective_done(uint64_t tag) {
  if (tag & kSendTag) {
    auto rank = static_cast<uint32_t>(tag & 0xFFFFFFFFu);
    const Program& p = program_of(rank);
    const Op& op = p.op(p.stream_ops(Stream::kPpSend)[ranks_[rank].next[static_cast<size_t>(Stream::kPpSend)]]);
    uint32_t peer = layout_.pp_neighbor(rank, op.peer);
    sim::Time started = send_start_[rank];
    complete(rank, Stream::kPpSend);
    // At the receiver the message comes from the opposite side.
    auto from = static_cast<int8_t>(-op.peer);
    arrival_send_start_[slot(peer, from, op.message)] = started;
    RankState& rs = ranks_[peer];
    const Program& rp = program_of(peer);
    const auto& recvs = rp.stream_ops(Stream::kPpRecv);
    size_t ri = static_cast<size_t>(Stream::kPpRecv);
    if ((rs.busy & (1u << ri)) && rs.next[ri] < recvs.size()) {
      const Op& head = rp.op(recvs[rs.next[ri]]);
      if (head.peer == from && head.message == op.message) {
        rs.last_recv_send_start = started;
        complete(peer, Stream::kPpRecv);
      }
    }
    return;
  }
  auto d = static_cast<size_t>(tag >> 32);
  auto g = static_cast<uint32_t>(tag & 0xFFFFFFFFu);
  Dim dim = static_cast<Dim>(d);
  // Completing members can start (and, for degenerate plans, finish) other collectives, so each
  // nesting level gets its own member buffer.
  if (member_buffers_.size() <= completion_depth_) member_buffers_.emplace_back();
  std::vector<uint32_t>& members = member_buffers_[completion_depth_];
  layout_.members(groups_[d][g].any_member, dim, members);
  ++completion_depth_;
  for (size_t i = 0; i < members.size(); ++i) complete(members[i], stream_of_dim(dim));
  --completion_depth_;
}

size_t TrainingExecutor::pending_count() const { return layout_.world() - ranks_done_; }

void TrainingExecutor::describe_pending(std::string& out, size_t max_lines) const {
  size_t lines = 0;
  for (uint32_t r = 0; r < layout_.world() && lines < max_lines; ++r) {
    const RankState& st = ranks_[r];
    const Program& p = program_of(r);
    for (size_t s = 0; s < kNumStreams && lines < max_lines; ++s) {
      const auto& list = p.stream_ops(static_cast<Stream>(s));
      if (st.next[s] >= list.size()) continue;
      const Op& op = p.op(list[st.next[s]]);
      out += "  rank " + std::to_string(r) + " " + std::string(stream_name(static_cast<Stream>(s))) + ": '" +
             p.name(op.name) + "' ";
      if (st.busy & (1u << s)) {
        if (op.kind == OpKind::kCollective) {
          const GroupState& gs = groups_[static_cast<size_t>(op.dim)][layout_.group_id(r, op.dim)];
          out += "waits for its " + std::string(dim_name(op.dim)) + " group (" + std::to_string(gs.arrived) + " of " +
                 std::to_string(layout_.size(op.dim)) + " members arrived)";
        } else if (op.kind == OpKind::kRecv) {
          out += "waits for message " + std::to_string(op.message) + " from rank " +
                 std::to_string(layout_.pp_neighbor(r, op.peer));
        } else {
          out += "is running";
        }
      } else {
        out += "waits on its dependencies";
      }
      out += "\n";
      ++lines;
    }
  }
}

Stream TrainingExecutor::stream_of_dim(Dim d) {
  switch (d) {
    case Dim::kTp: return Stream::kTp;
    case Dim::kCp: return Stream::kCp;
    case Dim::kPp: return Stream::kPpSend;
    case Dim::kDp: return Stream::kDp;
    case Dim::kDpOuter: return Stream::kDpOuter;
    case Dim::kCount: break;
  }
  return Stream::kCompute;
}

const CollectivePlan& TrainingExecutor::plan_for(Dim d, CollectiveOp op, double bytes, uint32_t any_member) {
  auto key = std::make_tuple(static_cast<uint8_t>(d), static_cast<uint8_t>(op), bytes);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;
  auto plan = std::make_unique<CollectivePlan>();
  if (op == CollectiveOp::kSendRecv) {
    plan->op = op;
    plan->algorithm = Algorithm::kDirect;
    Transfer t;
    t.hops.emplace_back(0, 1);
    t.bytes = bytes;
    t.latency_steps = 1;
    plan->phases.push_back(Phase{{t}});
  } else {
    // Lower on this rank's group, then rewrite GPU ids as positions in the (sorted) member list.
    CollectiveRequest req;
    req.op = op;
    req.algorithm = algorithm_[static_cast<size_t>(d)];
    layout_.members(any_member, d, req.group);
    req.bytes = bytes;
    *plan = lower_collective(req, shape_, hints_);
    for (auto& ph : plan->phases)
      for (auto& tr : ph.transfers)
        for (auto& [a, b] : tr.hops) {
          a = static_cast<uint32_t>(std::lower_bound(req.group.begin(), req.group.end(), a) - req.group.begin());
          b = static_cast<uint32_t>(std::lower_bound(req.group.begin(), req.group.end(), b) - req.group.begin());
        }
  }
  return *(plans_[key] = std::move(plan));
}

uint64_t TrainingExecutor::slot(uint32_t rank, int8_t peer, uint32_t message) const {
  const Program& p = program_of(rank);
  SIM_ASSERT(message < p.num_messages(peer), "pipeline message id out of range");
  return arrival_offset_[rank] + (peer > 0 ? p.num_messages(-1) : 0) + message;
}

bool TrainingExecutor::arrived(uint32_t rank, int8_t peer, uint32_t message) const {
  return !arrival_send_start_[slot(rank, peer, message)].is_infinite();
}

void TrainingExecutor::emit_span(uint32_t rank, const Op& op, sim::Time start, sim::Time end) {
  auto& bus = sim_.observers();
  if (!bus.active()) return;
  sim::SpanRecord r;
  r.process = rank;
  r.thread = static_cast<uint32_t>(op.stream);
  r.name = bus_names_[class_of_[rank]][op.name];
  r.start = start;
  r.end = end;
  size_t a = 0;
  if (op.micro_batch >= 0) r.args[a++] = {key_mb_, static_cast<double>(op.micro_batch)};
  if (op.layer >= 0) r.args[a++] = {key_layer_, static_cast<double>(op.layer)};
  if (op.bytes > 0) r.args[a++] = {key_bytes_, op.bytes};
  bus.span(r);
}

Breakdown TrainingExecutor::breakdown(uint32_t rank) const {
  const RankState& st = ranks_[rank];
  Breakdown b;
  b.compute = st.compute_s;
  b.optimizer = st.optimizer_s;
  b.bubble = st.bubble_s + (step_end_ - st.end).seconds();
  b.exposed = st.exposed_s;
  return b;
}

}  // namespace wl
