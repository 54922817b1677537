#include "workloads/program/executor.h"

#include "workloads/collectives/cluster_shape.h"

#include <algorithm>
#include <bit>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "sim/error.h"
#include "sim/log.h"
#include "sim/prefetch.h"
#include "sim/units.h"

namespace wl {

namespace {
// Runtime tags: the top bit tells sends from collectives; the rest is a flight index.
constexpr uint64_t kSendTag = uint64_t{1} << 63;
constexpr uint32_t kNone = 0xFFFFFFFFu;
// A kernel's tag: the slot (state order) of its rank << 16 | its stream.
uint64_t kernel_tag(uint32_t slot, uint16_t s) { return (uint64_t{slot} << 16) | s; }

// A slot of a pool: a freed one if any, else a new one at the end (no allocation once the pool
// has grown to the peak number in flight).
template <class Pool>
uint32_t take_slot(Pool& pool, std::vector<uint32_t>& free_slots) {
  if (!free_slots.empty()) {
    const uint32_t i = free_slots.back();
    free_slots.pop_back();
    return i;
  }
  pool.emplace_back();
  return static_cast<uint32_t>(pool.size() - 1);
}
}  // namespace

ProgramExecutor::ProgramExecutor(topo::ClusterResources& res, CollectiveRuntime& runtime, const JobProgram& job,
                                 const ClusterShape& shape, const CostHints& hints, const ExecutorOptions& opt)
    : res_(res),
      sim_(res.simulation()),
      runtime_(runtime),
      job_(job),
      shape_(shape),
      hints_(hints),
      coster_(opt.coster),
      watchdog_(opt.watchdog) {
  const uint32_t n = job_.world();
  SIM_ASSERT(job_.gpu_of_rank.empty() || job_.gpu_of_rank.size() == n, "one GPU per rank");
  SIM_ASSERT(job_.start_offset.empty() || job_.start_offset.size() == n, "one start offset per rank");
  for (uint32_t r = 0; r < job_.start_offset.size(); ++r)
    if (job_.start_offset[r] < sim::Time::zero())
      throw sim::UserError("rank " + std::to_string(r) + " has a negative start offset (" +
                           std::to_string(job_.start_offset[r].count_ns()) + " ns)");
  for (uint32_t t : job_.template_of_rank)
    if (t >= job_.templates.size()) throw sim::UserError("a rank runs template " + std::to_string(t) + " of " +
                                                         std::to_string(job_.templates.size()));
  for (uint32_t r = 0; r < n; ++r) {
    uint32_t g = job_.gpu_of(r);
    if (g >= res_.topology().num_gpus())
      throw sim::UserError("rank " + std::to_string(r) + " is placed on GPU " + std::to_string(g) +
                           " but the cluster has " + std::to_string(res_.topology().num_gpus()));
  }
  if (!coster_) {
    default_coster_ = std::make_unique<ProfileKernelCoster>(res_.profile(), res_.gpu_spec().peak_bf16_flops,
                                                            res_.gpu_spec().hbm_bandwidth_Bps);
    coster_ = default_coster_.get();
  }
  // Fused kernels (cost terms) are costed from the profile once per distinct term list of each
  // template, before anything runs; plain kernel ops when issued.
  kernel_costs_.resize(job_.templates.size());
  for (size_t t = 0; t < job_.templates.size(); ++t) {
    const Program& p = job_.templates[t];
    kernel_costs_[t].resize(p.num_cost_term_lists());
    for (const Op& op : p.ops())
      if (op.kind == OpKind::kKernel && op.index != 0) kernel_costs_[t][op.index - 1] = coster_->cost(p, op);
  }
  if (job_.host_overhead > sim::Time::zero()) compute_host_ready();
  handler_ = sim_.add_handler(this);
  ncat_ = static_cast<uint16_t>(job_.categories.size());
  state_ranks_ = ranks_to_run_ = n;
  if (opt.symmetric_dp) mark_simulated();
  // Per-rank state for the ranks that keep some: every rank, or in symmetric mode replica 0 when
  // its ranks are the first ones (data-parallel axes outermost, the default order).
  const uint32_t sn = state_ranks_;
  for (uint32_t r = sn; r < n; ++r) ops_total_ += program_of(r).ops().size();
  ranks_.resize(sn);
  where_.resize(sn);
  slot_of_.resize(sn);
  recv_base_.resize(sn + 1);
  free_base_.resize(sn + 1);
  uint64_t streams = 0, recvs = 0, frees = 0;
  bool has_memory_ops = false;
  const std::vector<uint32_t> order = state_order(n);
  order_gpus_like(order);
  for (uint32_t slot = 0; slot < sn; ++slot) {
    const uint32_t r = order[slot];
    const uint16_t ns = program_of(r).num_streams();
    where_[slot] = Where{static_cast<uint32_t>(streams), r, sim::FluidModel::kAnySlot, ns};
    ranks_[r].stream_base = static_cast<uint32_t>(streams);
    ranks_[r].slot = slot_of_[r] = slot;
    streams += ns;
  }
  for (uint32_t r = 0; r < sn; ++r) {
    const Program& p = program_of(r);
    ranks_[r].tmpl = job_.template_of_rank[r];
    recv_base_[r] = static_cast<uint32_t>(recvs);
    free_base_[r] = static_cast<uint32_t>(frees);
    recvs += p.num_recvs();
    frees += p.free_ops().size();
    if (p.ops().size() > 0xFFFFFFFFu) throw sim::UserError("a rank's program has more than 2^32 ops");
    ranks_[r].ops_left = static_cast<uint32_t>(p.ops().size());
    ops_total_ += p.ops().size();
    if (!has_memory_ops) for (const Op& op : p.ops()) has_memory_ops = has_memory_ops || op.kind == OpKind::kMemory;
  }
  if (streams > 0xFFFFFFFFu || recvs > 0xFFFFFFFFu || frees > 0xFFFFFFFFu)
    throw sim::UserError("the job's programs hold more than 2^32 streams, receives or dependency-only ops");
  recv_base_[sn] = static_cast<uint32_t>(recvs);
  free_base_[sn] = static_cast<uint32_t>(frees);
  streams_.resize(streams);
  reserve_kernel_slots(order);
  if (has_memory_ops) memory_.resize(sn);
  arrival_.assign(recvs, sim::Time::infinite());
  free_done_.assign(frees, 0);
  if (opt.record_op_times) {
    op_times_.resize(sn);
    for (uint32_t r = 0; r < sn; ++r) op_times_[r].assign(program_of(r).ops().size(), OpTimes{});
  }
  cat_s_.assign(static_cast<size_t>(sn) * ncat_, 0.0);

  inst_base_.resize(job_.comms.size() + 1);
  gen_index_.assign(job_.comms.size(), kNone);
  explicit_seq_base_.assign(job_.comms.size(), 0);
  member_pos_.resize(job_.comms.size());
  uint32_t instances = 0;
  for (size_t c = 0; c < job_.comms.size(); ++c) {
    const Communicator& cm = job_.comms[c];
    inst_base_[c] = instances;
    // Groups of one never gather (their collectives complete at once): no state for them.
    if (cm.generated) {
      gen_index_[c] = num_generated_++;
      if (job_.layout.size(cm.axis, cm.also) > 1) instances += n / static_cast<uint32_t>(job_.layout.size(cm.axis, cm.also));
    } else {
      if (cm.members.size() > 1) instances += 1;
      auto& pos = member_pos_[c];
      for (uint32_t i = 0; i < cm.members.size(); ++i) {
        if (cm.members[i] >= n)
          throw sim::UserError("communicator '" + cm.name + "' lists rank " + std::to_string(cm.members[i]) +
                               " but the job has " + sim::count_noun(n, "rank", "ranks"));
        pos.emplace_back(cm.members[i], i);
      }
      std::sort(pos.begin(), pos.end());
      for (size_t i = 1; i < pos.size(); ++i)
        if (pos[i].first == pos[i - 1].first)
          throw sim::UserError("communicator '" + cm.name + "' lists rank " + std::to_string(pos[i].first) + " twice");
    }
  }
  inst_base_[job_.comms.size()] = instances;
  gather_.resize(instances);
  gather_need_.resize(job_.comms.size());
  for (size_t c = 0; c < job_.comms.size(); ++c) {
    const Communicator& cm = job_.comms[c];
    gather_need_[c] = static_cast<uint32_t>(cm.generated ? job_.layout.size(cm.axis, cm.also) : cm.members.size());
  }
  if (opt.symmetric_dp) setup_symmetric();
  compute_slot_steps();
  uint64_t seqs = static_cast<uint64_t>(sn) * num_generated_;
  for (size_t c = 0; c < job_.comms.size(); ++c)
    if (!job_.comms[c].generated) {
      explicit_seq_base_[c] = seqs;
      seqs += job_.comms[c].members.size();
    }
  seq_.assign(seqs, 0);

  traced_.assign(sn, 0);
  for (uint32_t r : opt.trace_ranks)
    if (r < sn && (!opt_symmetric_ || simulated_[r])) traced_[r] = 1, ranks_[r].traced = true;
  // Generated communicators and relative peers address ranks through the layout: it must span
  // exactly the job's ranks.
  bool uses_layout = false;
  for (const Communicator& cm : job_.comms) uses_layout = uses_layout || cm.generated;
  for (const Program& p : job_.templates) uses_layout = uses_layout || !p.relative_recv_peers().empty();
  if (uses_layout && job_.layout.world() != n)
    throw sim::UserError("the job's layout spans " + std::to_string(job_.layout.world()) + " ranks but it has " +
                         std::to_string(n));
  // Plans are shared by the groups of a communicator when every group's members sit alike on
  // their nodes: the same node offsets from the group's first member and, on each node, the same
  // number of members in the same order (lowering groups members by node; which GPUs of a node
  // they are does not change a plan written in member positions).
  uniform_comm_.assign(job_.comms.size(), 0);
  {
    const uint32_t gpn = std::max<uint32_t>(1, res_.topology().gpus_per_node());
    std::vector<uint32_t> members;
    // Per node (absolute), how many of the current group's members sit there, valid where its
    // stamp is the group's: no allocation per group (131,072 GPUs: some 25k groups).
    const size_t nodes = res_.topology().num_gpus() / gpn + 1;
    std::vector<uint32_t> on_node(nodes, 0), node_stamp(nodes, 0);
    uint32_t stamp = 0;
    std::vector<int64_t> first_sig;
    for (size_t c = 0; c < job_.comms.size(); ++c) {
      const Communicator& cm = job_.comms[c];
      if (!cm.generated || shape_.torus) continue;  // explicit: one group; torus: per group
      const uint32_t size = static_cast<uint32_t>(job_.layout.size(cm.axis, cm.also));
      if (size <= 1) continue;
      first_sig.clear();
      bool uniform = true;
      std::vector<uint8_t> seen(n / size, 0);
      for (uint32_t r = 0; r < n && uniform; ++r) {
        const uint32_t g = job_.layout.group_id(r, cm.axis, cm.also);
        if (seen[g]) continue;
        seen[g] = 1;
        job_.layout.members(r, cm.axis, cm.also, members);
        ++stamp;
        const bool first = first_sig.empty();
        const int64_t node0 = job_.gpu_of(members[0]) / gpn;
        for (size_t i = 0; i < members.size() && uniform; ++i) {
          const uint32_t abs_node = job_.gpu_of(members[i]) / gpn;
          if (node_stamp[abs_node] != stamp) node_stamp[abs_node] = stamp, on_node[abs_node] = 0;
          const int64_t node = static_cast<int64_t>(abs_node) - node0;
          const int64_t place = on_node[abs_node]++;  // its place among the group's members on that node
          if (first) {
            first_sig.push_back(node);
            first_sig.push_back(place);
          } else {
            uniform = first_sig[2 * i] == node && first_sig[2 * i + 1] == place;
          }
        }
      }
      uniform_comm_[c] = uniform ? 1 : 0;
    }
  }
  check_algorithms();
}

void ProgramExecutor::mark_simulated() {
  const uint32_t n = job_.world();
  const Layout& lay = job_.layout;
  SIM_ASSERT(job_.gpu_of_rank.empty() && job_.start_offset.empty(), "symmetric mode needs the identity placement");
  opt_symmetric_ = true;
  simulated_.assign(n, 0);
  ranks_to_run_ = 0;
  for (uint32_t r = 0; r < n; ++r) {
    simulated_[r] = lay.coord(r, Dim::kDp) == 0 && lay.coord(r, Dim::kDpOuter) == 0;
    ranks_to_run_ += simulated_[r];
    SIM_ASSERT(job_.template_of_rank[r] == job_.template_of_rank[representative(r)],
               "symmetric mode needs the same program in every replica");
  }
  bool prefix = true;
  for (uint32_t r = 0; r < ranks_to_run_ && prefix; ++r) prefix = simulated_[r] != 0;
  state_ranks_ = prefix ? ranks_to_run_ : n;
}

void ProgramExecutor::setup_symmetric() {
  const Layout& lay = job_.layout;
  const uint32_t dp = static_cast<uint32_t>(lay.size(Dim::kDp)), outer = static_cast<uint32_t>(lay.size(Dim::kDpOuter));
  // With the identity placement rank r runs on GPU r, so replica (i, j) is replica 0 shifted by
  // i x stride(dp) + j x stride(dp_outer) GPUs. A group spanning an axis has no copies along it.
  const uint32_t gpn = std::max<uint32_t>(1, res_.topology().gpus_per_node());
  auto copies_along = [&](bool dp_axis, bool outer_axis) {
    ReplicaCopies rc;
    rc.simulated_gpu = &simulated_;
    rc.node_aligned = true;
    if (!duplicate_link_.empty()) rc.duplicate_link = &duplicate_link_;
    for (uint32_t j = 0; j < (outer_axis ? outer : 1); ++j)
      for (uint32_t i = 0; i < (dp_axis ? dp : 1); ++i)
        if (i + j > 0) {
          rc.gpu_offsets.push_back(i * lay.stride(Dim::kDp) + j * lay.stride(Dim::kDpOuter));
          rc.node_aligned = rc.node_aligned && rc.gpu_offsets.back() % gpn == 0;
        }
    return rc;
  };
  copies_ = copies_along(true, true);
  duplicate_link_ = find_duplicate_links();
  if (!duplicate_link_.empty()) copies_.duplicate_link = &duplicate_link_;
  comm_copies_.clear();
  for (size_t c = 0; c < job_.comms.size(); ++c) {
    const Communicator& cm = job_.comms[c];
    SIM_ASSERT(cm.generated, "symmetric mode needs generated communicators");
    auto has = [&](Dim d) { return cm.axis == d || cm.also == d; };
    uint32_t folded = 1;  // members of a group that mirror one simulated member
    if (has(Dim::kDp)) folded *= dp;
    if (has(Dim::kDpOuter)) folded *= outer;
    gather_need_[c] /= folded;
    comm_copies_.push_back(copies_along(!has(Dim::kDp), !has(Dim::kDpOuter)));
  }
}

// The conditions of ReplicaCopies::duplicate_link, for this job: replicas that are consecutive
// blocks of whole nodes in replica order (rank r on GPU r, data-parallel axes outermost), every
// communicator spanning replicas with one member in each (its transfers' hops all go from one
// replica to another; the producer checked that mirrored members send and receive alike), and
// per fabric link, routes up to it without a choice, a lower end spanning a whole group of nodes
// inside one replica j >= 1, and an image in replica 0 of the same bandwidth.
std::vector<uint8_t> ProgramExecutor::find_duplicate_links() const {
  const topo::Topology& topo = res_.topology();
  if (topo.kind() != topo::TopologyKind::kCluster) return {};
  const uint32_t gpn = std::max<uint32_t>(1, topo.gpus_per_node());
  // Replica 0 is ranks (= GPUs) [0, replica_gpus) when its ranks come first (mark_simulated).
  const uint32_t replica_gpus = ranks_to_run_;
  if (state_ranks_ != ranks_to_run_ || replica_gpus == 0 || replica_gpus % gpn != 0) return {};
  std::vector<uint32_t> offsets = copies_.gpu_offsets;
  std::sort(offsets.begin(), offsets.end());
  for (size_t i = 0; i < offsets.size(); ++i)
    if (offsets[i] != (i + 1) * uint64_t{replica_gpus}) return {};
  const uint32_t replicas = static_cast<uint32_t>(offsets.size() + 1);
  // An axis of size 1 adds no member (the "dp+cp" communicator of a job without CP).
  auto inside_replica = [&](Dim d) {
    return d != Dim::kDp && d != Dim::kDpOuter && d != Dim::kCount && job_.layout.size(d) > 1;
  };
  for (const Communicator& cm : job_.comms) {
    const bool spans = cm.axis == Dim::kDp || cm.axis == Dim::kDpOuter || cm.also == Dim::kDp || cm.also == Dim::kDpOuter;
    if (spans && (inside_replica(cm.axis) || inside_replica(cm.also))) return {};
  }
  const auto& links = topo.links();
  const uint32_t replica_nodes = replica_gpus / gpn;
  std::vector<uint8_t> out(links.size(), 0);
  bool any = false;
  for (uint32_t l = 0; l < links.size(); ++l) {
    if (links[l].kind != topo::LinkKind::kFabric) continue;
    const topo::Topology::FabricSpan span = topo.fabric_span(l);
    if (!span.unique_up || span.num_nodes != span.full_nodes || span.num_nodes == 0) continue;
    const uint32_t j = span.first_node / replica_nodes;
    if (j == 0 || j >= replicas || (span.first_node + span.num_nodes - 1) / replica_nodes != j) continue;
    const uint32_t image = topo.fabric_link_shifted(l, -static_cast<int64_t>(j) * replica_nodes);
    if (image == topo::Topology::kNoLink || links[image].bandwidth_Bps != links[l].bandwidth_Bps) continue;
    out[l] = 1;
    any = true;
  }
  if (!any) return {};
  return out;
}

// Every collective the programs run on a communicator with a chosen (not auto) algorithm must be
// one that algorithm implements on that group's shape; checked on one group per (communicator, op)
// before anything is simulated, and reported where the scenario chose the algorithm.
void ProgramExecutor::check_algorithms() const {
  const uint32_t n = job_.world();
  std::vector<uint32_t> first_rank(job_.templates.size(), n);
  for (uint32_t r = n; r-- > 0;) first_rank[job_.template_of_rank[r]] = r;
  std::set<std::pair<uint32_t, CollectiveOp>> checked;
  std::vector<uint32_t> members;
  for (size_t t = 0; t < job_.templates.size(); ++t) {
    if (first_rank[t] == n) continue;  // a template no rank runs
    for (const Op& op : job_.templates[t].ops()) {
      if (op.kind != OpKind::kCollective || op.comm >= job_.comms.size()) continue;
      if (op.coll == CollectiveOp::kAllToAll && op.index != 0) continue;  // all-to-all-v: always direct
      const Communicator& cm = job_.comms[op.comm];
      if (cm.algorithm == Algorithm::kAuto) continue;
      uint32_t inst = 0, size = 0;
      if (!group_of(first_rank[t], op.comm, inst, size) || size <= 1) continue;
      if (!checked.emplace(op.comm, op.coll).second) continue;
      // One group stands for all when they sit alike; otherwise every group is checked.
      std::vector<uint32_t> reps{first_rank[t]};
      if (cm.generated && !uniform_comm_[op.comm]) {
        reps.clear();
        std::vector<uint8_t> seen(n / size, 0);
        for (uint32_t r = 0; r < n; ++r)
          if (!seen[job_.layout.group_id(r, cm.axis, cm.also)]++) reps.push_back(r);
      }
      for (uint32_t rep : reps) {
        CollectiveRequest req;
        req.op = op.coll;
        req.algorithm = cm.algorithm;
        members_of(op.comm, rep, members);
        for (uint32_t m : members) req.group.push_back(job_.gpu_of(m));
        req.bytes = op.bytes;
        const std::string problem = collective_problem(req, shape_);
        if (problem.empty()) continue;
        throw sim::ConfigError(cm.algorithm_at.empty() ? problem : cm.algorithm_at + ": " + problem);
      }
    }
  }
}

void ProgramExecutor::start() {
  step_start_ = sim_.now();
  step_end_ = step_start_;
  auto& bus = sim_.observers();
  if (bus.active()) {
    key_mb_ = bus.names().intern("micro_batch");
    key_layer_ = bus.names().intern("layer");
    key_bytes_ = bus.names().intern("bytes");
    key_ext_ = bus.names().intern("external_id");
    wait_name_ = bus.names().intern("wait");
    cat_names_.clear();
    for (const std::string& c : job_.categories) cat_names_.push_back(bus.names().intern(c));
    bus_names_.resize(job_.templates.size());
    for (size_t t = 0; t < job_.templates.size(); ++t) {
      const Program& p = job_.templates[t];
      for (const Op& op : p.ops()) {
        if (bus_names_[t].size() <= op.name) bus_names_[t].resize(op.name + 1, sim::kNoName);
        if (bus_names_[t][op.name] == sim::kNoName) bus_names_[t][op.name] = bus.names().intern(p.name(op.name));
      }
    }
    for (uint32_t r = 0; r < state_ranks_; ++r) {
      if (!traced_[r]) continue;
      bus.declare_process(r, job_.rank_label ? job_.rank_label(r) : "rank " + std::to_string(r), r);
      const Program& p = program_of(r);
      for (uint16_t s = 0; s < p.num_streams(); ++s)
        if (!p.stream_ops(s).empty()) bus.declare_thread(r, s, p.stream_name(s));
    }
  }
  for (uint32_t r = 0; r < state_ranks_; ++r) {
    ranks_[r].free_since = step_start_;
    if (opt_symmetric_ && !simulated_[r]) continue;  // mirrors replica 0
    if (ranks_[r].ops_left == 0) {
      ranks_[r].end = step_start_;
      ++ranks_done_;
      continue;
    }
    sim::Time offset = job_.start_offset.empty() ? sim::Time::zero() : job_.start_offset[r];
    if (offset > sim::Time::zero()) {
      const uint32_t d = take_slot(delays_, free_delays_);
      delays_[d] = Delay{r, kNoStream, sim_.schedule_after(offset, handler_, d)};
      continue;  // the offset counts as idle time
    }
    pump(r);
  }
}

bool ProgramExecutor::deps_done(uint32_t rank, const Program& p, const Op& op) const {
  const DepRef* d = p.dep_refs(op);
  const StreamState* st = &streams_[ranks_[rank].stream_base];
  for (uint32_t i = 0; i < op.deps_count; ++i) {
    if (d[i].stream == kNoStream) {
      if (!free_done_[free_base_[rank] + d[i].pos]) return false;
    } else if (st[d[i].stream].next <= d[i].pos) {
      return false;
    }
  }
  return true;
}

void ProgramExecutor::pump(uint32_t rank, uint64_t streams) {
  if (pumping_) {  // a pump further up the stack takes it when it is done with its own
    pump_queue_.push_back(PumpRequest{rank, streams});
    return;
  }
  pumping_ = true;
  // The first request is this call's own and the queue is empty: it is taken first, as from the
  // queue, but without the round trip through it (its rank was a 4-byte store read back by an
  // 8-byte load, which the store buffer cannot forward: a stall at every pump).
  PumpRequest req{rank, streams};
  for (bool first = true; first || !pump_queue_.empty(); first = false) {
    if (!first) {
      req = pump_queue_.back();
      pump_queue_.pop_back();
    }
    const uint32_t r = req.rank;
    if (ranks_[r].dead || stopped_) continue;
    const Program& p = state_program(r);
    const uint16_t ns = p.num_streams();
    StreamState* heads = &streams_[ranks_[r].stream_base];
    // One pass over the stream heads issues everything ready. Issuing an op changes only its own
    // stream (busy), so another pass can find more only when an op of this rank completed during
    // the pass (a zero-time op, an arrived message, a trivial collective): then pass again, over
    // the streams those completions woke. A stream woken during a pass, past the stream being
    // looked at, is looked at in the same pass, as a pass over every stream would: the streams
    // become ready, and their ops are issued, in the same order.
    uint64_t candidates = req.streams;
    bool progress = true;
    while (progress) {
      progress = false;
      pass_rank_ = r;
      completed_in_pass_ = false;
      pass_wakes_ = 0;
      for (uint16_t s = 0; s < ns; ++s) {
        if (ns <= 64) {  // skip to the next stream that may be ready (s < ns <= 64)
          const uint64_t rest = (candidates | pass_wakes_) >> s;
          if (rest == 0) break;
          s = static_cast<uint16_t>(s + std::countr_zero(rest));
        }
        StreamState& st = heads[s];
        if (st.busy) continue;
        const auto& list = p.stream_ops(s);
        if (st.next >= list.size()) continue;
        uint32_t idx = list[st.next];
        if (!deps_done(r, p, p.op(idx))) continue;
        if (!host_ready_.empty() && wait_for_host(r, p, s, idx)) continue;
        issue(r, p, idx);
        if (halted(r)) break;
      }
      if (halted(r)) break;
      progress = completed_in_pass_;
      // Dependency-only ops take no time: done as soon as their dependencies are.
      const auto& frees = p.free_ops();
      for (uint32_t k = 0; k < frees.size(); ++k) {
        uint8_t& done = free_done_[free_base_[r] + k];
        if (done) continue;
        const Op& op = p.op(frees[k]);
        if (!deps_done(r, p, op)) continue;
        done = 1;
        if (!op_times_.empty()) op_times_[r][frees[k]] = OpTimes{sim_.now(), sim_.now()};
        finish_op(r, p, op);
        if (ranks_[r].ops_left == 0) break;
        progress = true;
      }
      candidates = pass_wakes_;
    }
  }
  pumping_ = false;
}

// Hot per-rank state (streams, category times, call counters, kernel slots) in the order the
// event loop visits ranks: grouped by pipeline stage, by rank within a stage. The data-parallel
// replicas run in lockstep, so one timestamp's events are a stage's ranks of every replica, in
// increasing rank order; with the stage's state contiguous, that is one sequential walk the
// hardware prefetcher follows, where rank order jumps a whole replica every tensor-parallel group
// (Llama 3 405B step on 65,536 GPUs, expanded: see the commit that made it). Jobs without a layout
// keep rank order. Returns the ranks with state, by slot.
std::vector<uint32_t> ProgramExecutor::state_order(uint32_t world) const {
  std::vector<uint32_t> order(state_ranks_);
  for (uint32_t r = 0; r < state_ranks_; ++r) order[r] = r;
  if (job_.layout.world() == world && job_.layout.size(Dim::kPp) > 1)
    std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
      return job_.layout.coord(a, Dim::kPp) < job_.layout.coord(b, Dim::kPp);
    });
  return order;
}

// Checked for every rank rather than derived from the state order, so that any order keeps
// correct hints (a communicator that fails the check falls back to slot_of_). Not in symmetric
// mode, whose hints skip the members that are not simulated.
void ProgramExecutor::compute_slot_steps() {
  slot_step_.assign(job_.comms.size(), kNone);
  const uint32_t n = job_.world();
  if (opt_symmetric_ || state_ranks_ != n || job_.layout.world() != n) return;
  for (size_t c = 0; c < job_.comms.size(); ++c) {
    const Communicator& cm = job_.comms[c];
    if (!cm.generated || cm.also != Dim::kCount || job_.layout.size(cm.axis) < 2) continue;
    const uint32_t stride = job_.layout.stride(cm.axis);
    const auto step = static_cast<uint32_t>(slot_of_[stride] - slot_of_[0]);
    bool linear = true;
    for (uint32_t r = 0; r < n && linear; ++r) {
      const uint32_t i = job_.layout.coord(r, cm.axis);
      linear = slot_of_[r] == slot_of_[r - i * stride] + i * step;
    }
    if (linear) slot_step_[c] = step;
  }
}

// The GPUs' records (SM pool, HBM) in the state order of the ranks on them, those of no rank with
// state last. Nothing happens when the GPUs already ran something (order_gpus refuses).
void ProgramExecutor::order_gpus_like(const std::vector<uint32_t>& order) {
  const uint32_t gpus = res_.topology().num_gpus();
  std::vector<uint8_t> seen(gpus, 0);
  std::vector<uint32_t> gpu_order;
  gpu_order.reserve(gpus);
  for (uint32_t r : order) {
    const uint32_t g = job_.gpu_of(r);
    if (!seen[g]) seen[g] = 1, gpu_order.push_back(g);
  }
  for (uint32_t g = 0; g < gpus; ++g)
    if (!seen[g]) gpu_order.push_back(g);
  res_.order_gpus(gpu_order);
}

// A fluid activity slot of its own for every stream with kernel ops, in state order.
void ProgramExecutor::reserve_kernel_slots(const std::vector<uint32_t>& order) {
  std::vector<uint16_t> kernel_streams(job_.templates.size(), 0);  // per template
  kernel_index_.resize(job_.templates.size());
  for (size_t t = 0; t < job_.templates.size(); ++t) {
    const Program& p = job_.templates[t];
    std::vector<uint8_t> runs_kernels(p.num_streams(), 0);
    for (const Op& op : p.ops())
      if ((op.kind == OpKind::kKernel || op.kind == OpKind::kTimed) && op.stream != kNoStream)
        runs_kernels[op.stream] = 1;
    // A stream without kernel ops never asks for its slot; it shares its index with the next.
    kernel_index_[t].assign(p.num_streams(), 0);
    for (uint16_t s = 0; s < p.num_streams(); ++s) {
      kernel_index_[t][s] = kernel_streams[t];
      kernel_streams[t] += runs_kernels[s];
    }
  }
  uint64_t total = 0;
  for (uint32_t r : order) total += kernel_streams[ranks_[r].tmpl];
  if (total > 0xFFFFFFFEu) throw sim::UserError("the job runs kernels on more than 2^32 streams");
  uint32_t next = sim_.fluid().reserve_slots(static_cast<uint32_t>(total));
  for (uint32_t r : order) {
    const uint16_t k = kernel_streams[ranks_[r].tmpl];
    if (k == 0) continue;
    ranks_[r].kernel_base = where_[ranks_[r].slot].kernel_slot = next;
    next += k;
  }
}

void ProgramExecutor::compute_host_ready() {
  const double h = job_.host_overhead.seconds();
  std::vector<double> ks;
  host_ready_.resize(job_.templates.size());
  for (size_t t = 0; t < job_.templates.size(); ++t) {
    const Program& p = job_.templates[t];
    std::vector<sim::Time>& ready = host_ready_[t];
    ready.resize(p.ops().size());
    double host = 0;  // host seconds spent before the op's first launch
    for (uint32_t i = 0; i < p.ops().size(); ++i) {
      const Op& op = p.op(i);
      double at = host;
      switch (op.kind) {
        case OpKind::kKernel:
        case OpKind::kTimed: {
          if (op.kind == OpKind::kTimed)
            ks.assign(1, op.seconds);
          else
            coster_->kernel_seconds(p, op, ks);
          // Kernel j (1-based) launches at host + j h; the op ends no earlier than
          // host + max_j(j h + d_j + ... + d_k), so it starts no earlier than that less its sum.
          double suffix = 0;
          for (double d : ks) suffix += d;
          const double total = suffix;
          double end = 0;
          for (size_t j = 0; j < ks.size(); ++j) {
            end = std::max(end, static_cast<double>(j + 1) * h + suffix);
            suffix -= ks[j];
          }
          at = host + std::max(h, end - total);
          host += static_cast<double>(ks.size()) * h;
          break;
        }
        case OpKind::kCollective:
        case OpKind::kSend:
        case OpKind::kRecv:
          host += h;
          at = host;
          break;
        default: break;
      }
      if (!(at < 1e9))
        throw sim::UserError("the host needs more than 1e9 s to launch a rank's ops (host_overhead " +
                             std::to_string(job_.host_overhead.count_ns()) + " ns)");
      ready[i] = sim::Time::from_seconds(at);
    }
  }
}

bool ProgramExecutor::wait_for_host(uint32_t rank, const Program& p, uint16_t s, uint32_t idx) {
  const sim::Time ready = rank_start(rank) + host_ready_[ranks_[rank].tmpl][idx];
  const sim::Time now = sim_.now();
  if (ready <= now) return false;
  StreamState& st = ss(rank, s);
  st.busy = 1;  // waiting for the host: not issued yet, no kernel running
  st.started = now;
  if (s == 0) {
    charge_gap(rank, p, p.op(idx));  // what it waited for before the host became the bottleneck
    ranks_[rank].free_since = now;
  }
  const uint32_t d = take_slot(delays_, free_delays_);
  delays_[d] = Delay{rank, s, sim_.schedule_at(ready, handler_, d), kHostWait};
  return true;
}

void ProgramExecutor::charge_gap(uint32_t rank, const Program& p, const Op& op) {
  RankState& st = ranks_[rank];
  sim::Time now = sim_.now();
  if (now <= st.free_since) return;
  double gap = (now - st.free_since).seconds();
  double* cat = cat_s_.data() + static_cast<size_t>(st.slot) * ncat_;
  // The dependency that finished last is what stream 0 was waiting for.
  const DepRef* d = p.dep_refs(op);
  const StreamState* streams = &streams_[st.stream_base];
  uint32_t blocker_op = kNone;
  uint16_t blocker_stream = 0;
  sim::Time latest = sim::Time::zero();
  for (uint32_t i = 0; i < op.deps_count; ++i) {
    if (d[i].stream == kNoStream) continue;
    sim::Time t = streams[d[i].stream].last_done;
    if (blocker_op == kNone || t > latest) {
      blocker_op = d[i].op;
      blocker_stream = d[i].stream;
      latest = t;
    }
  }
  if (blocker_op == kNone || blocker_stream == 0) {
    cat[job_.idle_category] += gap;
    return;
  }
  const Op* blocker = &p.op(blocker_op);
  if (blocker->kind == OpKind::kRecv) {
    // Before the sender started sending, the rank was idle (a pipeline bubble); after, the
    // transfer itself was exposed.
    sim::Time ts = std::clamp(st.last_recv_send_start, st.free_since, now);
    cat[job_.idle_category] += (ts - st.free_since).seconds();
    cat[blocker->category] += (now - ts).seconds();
    return;
  }
  cat[blocker->category] += gap;
}

void ProgramExecutor::issue(uint32_t rank, const Program& p, uint32_t idx) {
  const Op& op = p.op(idx);
  const uint16_t s = op.stream;
  StreamState& st = ss(rank, s);
  st.busy = 1;
  st.started = sim_.now();
  if (s == 0) charge_gap(rank, p, op);
  if (watching_ && !watchdog_armed_ &&
      (op.kind == OpKind::kCollective || op.kind == OpKind::kSend || op.kind == OpKind::kRecv))
    schedule_watchdog();
  switch (op.kind) {
    case OpKind::kTimed:
    case OpKind::kKernel: {
      const uint32_t gpu = job_.gpu_of(rank);
      if (res_.gpu_failed(gpu)) {
        st.busy = 0;  // never issued
        kill_rank(rank);  // its GPU is down: the rank cannot run anything
        return;
      }
      double seconds = op.seconds, sm = op.sm_load, hbm = op.hbm_load;
      if (op.kind == OpKind::kKernel) {
        const KernelCoster::Cost c =
            op.index != 0 ? kernel_costs_[ranks_[rank].tmpl][op.index - 1] : coster_->cost(p, op);
        seconds = c.seconds;
        sm = c.sm_load;
        hbm = c.hbm_load;
      }
      res_.start_timed_kernel(gpu, seconds, sm, hbm, this, kernel_tag(ranks_[rank].slot, s), kernel_slot(ranks_[rank], s));
      break;
    }
    case OpKind::kDelay: {
      const uint32_t d = take_slot(delays_, free_delays_);
      delays_[d] = Delay{rank, s, sim_.schedule_after(sim::Time::from_seconds(op.seconds), handler_, d)};
      break;
    }
    case OpKind::kCollective: issue_collective(rank, p, s, op, idx); break;
    case OpKind::kSend: issue_send(rank, s, op); break;
    case OpKind::kRecv: {
      const sim::Time sent = arrival_[recv_base_[rank] + op.index];
      if (!sent.is_infinite()) {
        ranks_[rank].last_recv_send_start = sent;
        if (!flow_of_slot_.empty() && flow_of_slot_[recv_base_[rank] + op.index] != 0) {
          end_flow(rank, s, flow_of_slot_[recv_base_[rank] + op.index], false);
          flow_of_slot_[recv_base_[rank] + op.index] = 0;
        }
        complete(rank, s);
      }
      break;
    }
    case OpKind::kMemory:
    case OpKind::kMarker: complete(rank, s); break;
  }
}

inline bool ProgramExecutor::group_of(uint32_t rank, uint32_t c, uint32_t& instance, uint32_t& size) const {
  const Communicator& cm = job_.comms[c];
  if (cm.generated) {
    size = static_cast<uint32_t>(job_.layout.size(cm.axis, cm.also));
    instance = inst_base_[c] + job_.layout.group_id(rank, cm.axis, cm.also);
    return true;
  }
  const auto& pos = member_pos_[c];
  auto it = std::lower_bound(pos.begin(), pos.end(), std::make_pair(rank, uint32_t{0}));
  if (it == pos.end() || it->first != rank) return false;
  size = static_cast<uint32_t>(cm.members.size());
  instance = inst_base_[c];
  return true;
}

void ProgramExecutor::members_of(uint32_t c, uint32_t any_member, std::vector<uint32_t>& out) const {
  const Communicator& cm = job_.comms[c];
  if (cm.generated) {
    job_.layout.members(any_member, cm.axis, cm.also, out);
  } else {
    out = cm.members;
  }
}

uint32_t& ProgramExecutor::seq_of(uint32_t rank, uint32_t c) {
  if (gen_index_[c] != kNone) return seq_[static_cast<uint64_t>(ranks_[rank].slot) * num_generated_ + gen_index_[c]];
  const auto& pos = member_pos_[c];
  auto it = std::lower_bound(pos.begin(), pos.end(), std::make_pair(rank, uint32_t{0}));
  return seq_[explicit_seq_base_[c] + it->second];
}

void ProgramExecutor::issue_collective(uint32_t rank, const Program& p, uint16_t s, const Op& op, uint32_t idx) {
  if (op.comm >= job_.comms.size()) {
    fail("rank " + std::to_string(rank) + " op '" + p.name(op.name) + "' uses communicator " +
         std::to_string(op.comm) + " of " + std::to_string(job_.comms.size()));
    return;
  }
  uint32_t inst = 0, size = 0;
  if (!group_of(rank, op.comm, inst, size)) {
    fail("rank " + std::to_string(rank) + " op '" + p.name(op.name) + "' runs a collective on communicator '" +
         job_.comms[op.comm].name + "', which it is not a member of");
    return;
  }
  if (size <= 1) {
    complete(rank, s);
    return;
  }
  uint32_t& seq = seq_of(rank, op.comm);
  StreamState& st = ss(rank, s);
  st.seq = seq++ & 0x7FFFFFFFu;
  if (st.seq != gather_[inst].seq) {
    parked_.push_back(Parked{inst, rank, s, idx});  // ran ahead of its group: wait for its turn
    return;
  }
  arrive(inst, size, rank, s, op, idx);
}

void ProgramExecutor::arrive(uint32_t inst, uint32_t size, uint32_t rank, uint16_t s, const Op& op, uint32_t idx) {
  Gather& g = gather_[inst];
  if (g.arrived == 0) {
    // The collective starts when its last member arrives, its other members' kernels usually
    // finishing in the events right after this one (a tensor-parallel group's): its start then
    // counts the communication of every member GPU (CollectiveRuntime::mark_members), whose
    // records, a node's in one line, were a cache miss per collective at 131k GPUs. Ask now.
    res_.prefetch_gpu(job_.gpu_of(rank));
    g.first_rank = rank;
    g.first_op = idx;
    g.op = op.coll;
    g.bytes = op.bytes;
    g.stream = s;
    g.mixed = false;
    g.v = op.index != 0 && op.coll == CollectiveOp::kAllToAll;
  } else {
    const bool v = op.index != 0 && op.coll == CollectiveOp::kAllToAll;
    if (op.coll != g.op || v != g.v || (!v && op.bytes != g.bytes)) {
      const Program& fp = program_of(g.first_rank);
      fail("collective mismatch on communicator '" + job_.comms[op.comm].name + "' (call " + std::to_string(g.seq) +
           "): rank " + std::to_string(g.first_rank) + " runs " + describe_op(g.first_rank, fp.op(g.first_op)) +
           " but rank " + std::to_string(rank) + " runs " + describe_op(rank, op) +
           " (NCCL would hang or corrupt data)");
      return;
    }
    if (s != g.stream) g.mixed = true;
  }
  if (++g.arrived < gather_need_[op.comm]) return;
  // The last member arrived: start the collective.
  const uint32_t f = take_slot(coll_flights_, free_coll_flights_);
  uint32_t first_slot = 0;
  if (slot_step_[op.comm] != kNone) {
    const Communicator& cm = job_.comms[op.comm];
    first_slot = ranks_[rank].slot - job_.layout.coord(rank, cm.axis) * slot_step_[op.comm];
  }
  coll_flights_[f] = CollFlight{op.comm, inst, g.seq, rank, first_slot, g.stream, g.mixed, nullptr, sim_.now()};
  const bool v = op.index != 0 && op.coll == CollectiveOp::kAllToAll;
  if (v) {
    // All-to-all-v: a plan of its own from every member's per-peer sizes.
    members_of(op.comm, rank, scratch_members_);
    auto plan = std::make_unique<CollectivePlan>();
    plan->op = CollectiveOp::kAllToAll;
    plan->algorithm = Algorithm::kDirect;
    Phase ph;
    for (uint32_t i = 0; i < scratch_members_.size(); ++i) {
      const uint32_t m = representative(scratch_members_[i]);  // a mirror sends what its representative does
      const uint16_t ms = g.mixed ? waiting_stream(m, op.comm, g.seq) : g.stream;
      const Program& mp = program_of(m);
      const Op& mop = mp.op(mp.stream_ops(ms)[ss(m, ms).next]);
      const std::vector<double>& sizes = mp.peer_sizes(mop.index);
      if (sizes.size() != scratch_members_.size()) {
        fail("rank " + std::to_string(m) + " op '" + mp.name(mop.name) + "' gives " + std::to_string(sizes.size()) +
             " per-peer sizes for an all-to-all-v on communicator '" + job_.comms[op.comm].name + "' of " +
             std::to_string(scratch_members_.size()) + " members");
        return;
      }
      for (uint32_t j = 0; j < sizes.size(); ++j) {
        if (j == i || sizes[j] <= 0) continue;
        Transfer t;
        t.hops.emplace_back(i, j);
        t.bytes = sizes[j];
        t.latency_steps = 1;
        ph.transfers.push_back(std::move(t));
      }
    }
    plan->phases.push_back(std::move(ph));
    coll_flights_[f].own_plan = std::move(plan);
  }
  if (sim_.observers().active()) link_members(op, rank, g.stream, g.mixed, g.seq);
  g.arrived = 0;
  g.seq = (g.seq + 1) & 0x7FFFFFFFu;
  if (op.seconds > 0) {
    // Measured: its fixed time from the last arrival, no network.
    const uint32_t d = take_slot(delays_, free_delays_);
    delays_[d] = Delay{kNone, kNoStream, sim_.schedule_after(sim::Time::from_seconds(op.seconds), handler_, d), f};
    release_parked(inst, size);
    return;
  }
  const CollectivePlan* planp = v ? coll_flights_[f].own_plan.get() : plan_for(op.comm, inst, op.coll, op.bytes, rank);
  if (!planp) return;  // fail() said why
  const CollectivePlan& plan = *planp;
  members_of(op.comm, rank, scratch_members_);
  scratch_gpus_.clear();
  for (uint32_t m : scratch_members_) scratch_gpus_.push_back(job_.gpu_of(m));
  runtime_.start(plan, scratch_gpus_, this, f, true, opt_symmetric_ ? &comm_copies_[op.comm] : nullptr,
                 op.op_class != static_cast<uint8_t>(CollectiveEngine::kCopyEngines));
  release_parked(inst, size);
}

// Members that ran ahead to the group's next collective now take their turn, every one of them
// (until that collective starts in turn: the arrive() that starts it releases the next ones).
void ProgramExecutor::release_parked(uint32_t inst, uint32_t size) {
  const uint32_t next_seq = gather_[inst].seq;
  for (size_t i = 0; i < parked_.size();) {
    Parked pk = parked_[i];
    if (pk.instance != inst || ss(pk.rank, pk.stream).seq != next_seq || ranks_[pk.rank].dead) {
      ++i;
      continue;
    }
    parked_.erase(parked_.begin() + static_cast<std::ptrdiff_t>(i));
    arrive(inst, size, pk.rank, pk.stream, program_of(pk.rank).op(pk.op_index), pk.op_index);
    if (gather_[inst].seq != next_seq || stopped_) return;
  }
}

bool ProgramExecutor::resolve_peer(uint32_t rank, const Op& op, uint32_t& peer) const {
  if (op.peer_axis == kAbsolutePeer) {
    if (op.peer < 0 || static_cast<uint32_t>(op.peer) >= job_.world()) return false;
    peer = static_cast<uint32_t>(op.peer);
    return true;
  }
  if (op.peer_axis >= kNumDims) return false;
  peer = job_.layout.neighbor(rank, static_cast<Dim>(op.peer_axis), op.peer);
  return true;
}

void ProgramExecutor::issue_send(uint32_t rank, uint16_t s, const Op& op) {
  uint32_t dst = 0;
  if (!resolve_peer(rank, op, dst) || dst == rank) {
    fail("rank " + std::to_string(rank) + " op '" + program_of(rank).name(op.name) + "' sends to peer " +
         std::to_string(op.peer) + ", which is not another rank of the job (0.." + std::to_string(job_.world() - 1) +
         ")");
    return;
  }
  const uint32_t f = take_slot(send_flights_, free_send_flights_);
  send_flights_[f] = SendFlight{rank, dst, op.tag, s, sim_.now()};
  auto& bus = sim_.observers();
  if (bus.active() && traced_[rank] && traced_[dst]) {
    // An arrow from the send (on the sender's stream) to the recv it completes.
    sim::FlowRecord fr;
    fr.id = ++flows_;
    fr.process = rank;
    fr.thread = s;
    fr.name = bus.names().intern(program_of(rank).name(op.name));
    fr.time = sim_.now();
    fr.start = true;
    bus.flow(fr);
    send_flights_[f].flow = fr.id;
  }
  const CollectivePlan& plan = send_plan(op.bytes);
  uint32_t pair[2] = {job_.gpu_of(rank), job_.gpu_of(dst)};
  runtime_.start(plan, pair, this, kSendTag | f, true, opt_symmetric_ ? &copies_ : nullptr);
}

void ProgramExecutor::deliver(uint32_t dst, uint32_t src, uint32_t tag, sim::Time send_start, uint64_t flow) {
  const Program& p = program_of(dst);
  auto take = [&](const std::vector<uint32_t>* slots) -> int64_t {
    if (!slots) return -1;
    for (uint32_t k : *slots)
      if (arrival_[recv_base_[dst] + k].is_infinite()) return k;
    return -1;
  };
  int64_t slot = -1;
  for (const auto& [axis, offset] : p.relative_recv_peers()) {
    if (job_.layout.neighbor(dst, static_cast<Dim>(axis), offset) != src) continue;
    slot = take(p.recv_slots(axis, offset, tag));
    if (slot >= 0) break;
  }
  if (slot < 0 && p.has_absolute_recvs()) slot = take(p.recv_slots(kAbsolutePeer, static_cast<int32_t>(src), tag));
  if (slot < 0) {
    fail("rank " + std::to_string(src) + " sent a message with tag " + std::to_string(tag) + " to rank " +
         std::to_string(dst) + ", which has no recv left for it");
    return;
  }
  arrival_[recv_base_[dst] + static_cast<uint64_t>(slot)] = send_start;
  if (ranks_[dst].dead) return;
  const uint32_t op_index = p.recv_op_of_slot(static_cast<uint32_t>(slot));
  const Op& op = p.op(op_index);
  StreamState& st = ss(dst, op.stream);
  if (flow != 0) {
    // The recv already waits: the arrow ends in its span, which ends now. Otherwise it ends when
    // the recv runs (issue()).
    if (st.busy && p.stream_ops(op.stream)[st.next] == op_index) {
      end_flow(dst, op.stream, flow, st.started < sim_.now());
    } else {
      if (flow_of_slot_.empty()) flow_of_slot_.assign(arrival_.size(), 0);
      flow_of_slot_[recv_base_[dst] + static_cast<uint64_t>(slot)] = flow;
    }
  }
  if (st.busy && p.stream_ops(op.stream)[st.next] == op_index) {
    ranks_[dst].last_recv_send_start = send_start;
    const sim::Time outer_moving = moving_since_;
    moving_since_ = send_start;
    complete(dst, op.stream);
    moving_since_ = outer_moving;
  }
}

void ProgramExecutor::complete(uint32_t rank, uint16_t s) {
  StreamState& st = ss(rank, s);
  const Program& p = state_program(rank);
  prefetch_slots_after(ranks_[rank], p.num_streams());
  const uint32_t idx = p.stream_ops(s)[st.next];
  const Op& op = p.op(idx);
  sim::Time now = sim_.now();
  if (ranks_[rank].traced) {
    // A collective or recv that waited for its peers: the wait, then the transfer.
    const bool comm = op.kind == OpKind::kCollective || op.kind == OpKind::kRecv;
    if (comm && moving_since_ > st.started && moving_since_ < now) {
      emit_wait(rank, op, st.started, moving_since_);
      emit_span(rank, op, moving_since_, now);
    } else {
      emit_span(rank, op, st.started, now);
    }
  }
  if (!op_times_.empty()) op_times_[rank][idx] = OpTimes{st.started, now};
  st.busy = 0;
  ++st.next;
  st.last_done = now;
  if (s == 0) {
    RankState& rs = ranks_[rank];
    cat_s_[static_cast<size_t>(rs.slot) * ncat_ + op.category] += (now - st.started).seconds();
    rs.free_since = now;
  }
  finish_op(rank, p, op);
}

[[gnu::always_inline]] inline void ProgramExecutor::finish_op(uint32_t rank, const Program& p, const Op& op) {
  RankState& rs = ranks_[rank];
  if (rank == pass_rank_) {
    completed_in_pass_ = true;
    pass_wakes_ |= op.wakes;
  }
  ++ops_executed_;
  if (op.kind == OpKind::kMemory) {
    Memory& m = memory_[rank];
    m.now += static_cast<int64_t>(op.bytes);
    m.peak = std::max(m.peak, m.now);
  } else if (op.kind == OpKind::kMarker && traced_[rank] && sim_.observers().active()) {
    sim::InstantRecord ir;
    ir.process = rank;
    ir.thread = op.stream == kNoStream ? 0 : op.stream;
    ir.name = bus_names_[job_.template_of_rank[rank]][op.name];
    ir.time = sim_.now();
    sim_.observers().instant(ir);
  }
  if (--rs.ops_left == 0) {
    rs.end = sim_.now();
    ++ranks_done_;
    step_end_ = std::max(step_end_, rs.end);
    return;
  }
  pump(rank, op.wakes);
}

// The streams and category times of the rank kSlotsAhead places after `rs` in state order, taking
// its stream count as rs's (a hint: a wrong guess fetches lines for nothing). A timestamp's
// completions walk the state order (at 16,384 GPUs 92% of completions are of the next slot), and
// the hardware prefetcher alone left these lines a miss at 65,536 GPUs and more.
void ProgramExecutor::prefetch_slots_after(const RankState& rs, uint16_t streams) const {
  const size_t sb = rs.stream_base + static_cast<size_t>(kSlotsAhead) * streams;
  if (sb + streams <= streams_.size()) sim::prefetch_range(streams_.data() + sb, streams_.data() + sb + streams, true);
  const size_t cb = (static_cast<size_t>(rs.slot) + kSlotsAhead) * ncat_;
  if (cb + ncat_ <= cat_s_.size()) sim::prefetch_range(cat_s_.data() + cb, cat_s_.data() + cb + ncat_, true);
}

// A kernel of the rank at the tag's slot finishes soon: complete() and pump() will read its
// streams, its state and its time categories (each a cache miss at 16k ranks).
void ProgramExecutor::prefetch_done(uint64_t tag) const { prefetch_slot(static_cast<uint32_t>(tag >> 16)); }

void ProgramExecutor::prefetch_rank(uint32_t rank) const {
  if (rank < state_ranks_) prefetch_slot(slot_of_[rank]);
}

void ProgramExecutor::prefetch_slot(uint32_t slot) const {
  if (slot >= where_.size()) return;
  const Where w = where_[slot];
  sim::prefetch_range(streams_.data() + w.stream_base, streams_.data() + w.stream_base + w.streams, true);
  __builtin_prefetch(&ranks_[w.rank], 1);
  __builtin_prefetch(cat_s_.data() + static_cast<size_t>(slot) * ncat_, 1);
  // Its call counters on the generated communicators (a few words): read when its next op is a
  // collective.
  if (num_generated_ > 0) __builtin_prefetch(seq_.data() + static_cast<uint64_t>(slot) * num_generated_, 1);
  // The activity record its next kernel starts in (and its owner entry). After a collective it was
  // last touched before it: at 65,536 GPUs this took 4-7% off the 405B step. After a kernel it is
  // the record just finished; asking again there still measured 3-4% faster at 65,536 GPUs, and
  // about 3% slower at 16,384, where it is cached.
  if (w.kernel_slot != sim::FluidModel::kAnySlot) sim_.fluid().prefetch(w.kernel_slot, 0);
}

std::string ProgramExecutor::describe_activity(uint64_t tag) const {
  const auto slot = static_cast<uint32_t>(tag >> 16);
  const auto s = static_cast<uint16_t>(tag & 0xFFFF);
  if (slot >= where_.size()) return "a kernel (tag " + std::to_string(tag) + ")";
  const uint32_t rank = where_[slot].rank;
  if (s >= program_of(rank).num_streams()) return "a kernel (tag " + std::to_string(tag) + ")";
  return "a kernel of rank " + std::to_string(rank) + " on stream '" + program_of(rank).stream_name(s) + "'";
}

void ProgramExecutor::on_activity_done(sim::ActivityId, uint64_t tag) {
  complete(where_[static_cast<uint32_t>(tag >> 16)].rank, static_cast<uint16_t>(tag & 0xFFFF));
}

void ProgramExecutor::on_activity_failed(sim::ActivityId, uint64_t tag) {
  kill_rank(where_[static_cast<uint32_t>(tag >> 16)].rank);
}

void ProgramExecutor::on_event(uint32_t d) {
  if (d == kNone) {
    on_watchdog();
    return;
  }
  Delay dl = delays_[d];
  free_delays_.push_back(d);
  if (dl.flight == kHostWait) {  // the host launched the stream's head op: issue it
    if (halted(dl.rank)) return;
    StreamState& st = ss(dl.rank, dl.stream);
    st.busy = 0;
    if (dl.stream == 0) {
      RankState& rs = ranks_[dl.rank];
      cat_s_[static_cast<size_t>(rs.slot) * ncat_ + job_.host_category] += (sim_.now() - rs.free_since).seconds();
      rs.free_since = sim_.now();
    }
    const Program& p = state_program(dl.rank);
    issue(dl.rank, p, p.stream_ops(dl.stream)[st.next]);
    return;
  }
  if (dl.flight != kNone) {  // a measured collective's time elapsed
    on_collective_done(dl.flight);
    return;
  }
  if (dl.stream == kNoStream) {  // the rank's start offset elapsed
    pump(dl.rank);
    return;
  }
  complete(dl.rank, dl.stream);
}

void ProgramExecutor::on_collective_done(uint64_t tag) {
  if (tag & kSendTag) {
    const auto f = static_cast<uint32_t>(tag & ~kSendTag);
    SendFlight sf = send_flights_[f];
    free_send_flights_.push_back(f);
    if (!ranks_[sf.src].dead) complete(sf.src, sf.stream);
    deliver(sf.dst, sf.src, sf.tag, sf.start, sf.flow);
    return;
  }
  const auto f = static_cast<uint32_t>(tag);
  CollFlight cf = std::move(coll_flights_[f]);
  free_coll_flights_.push_back(f);
  // Completing members can start (and, for degenerate plans, finish) other collectives, so each
  // nesting level gets its own member buffer (a deque: a deeper level's buffer, added while this
  // one is in use, must not move it).
  if (member_buffers_.size() <= completion_depth_) member_buffers_.emplace_back();
  std::vector<uint32_t>& members = member_buffers_[completion_depth_];
  members_of(cf.comm, cf.any_member, members);
  ++completion_depth_;
  const sim::Time outer_moving = moving_since_;
  // The members are far apart at 16k ranks: each one's state is asked for 4 members ahead. A
  // member's state is about 9 lines (streams, rank record, category times, call counters); with
  // 16 ahead, a tensor-parallel group asked for all 8 members' 72 lines at once, more than the
  // core keeps in flight, and measured 2% slower at 65,536 GPUs.
  const uint32_t step = slot_step_[cf.comm];
  sim::for_each_prefetched(
      members.size(), 4,
      [&](size_t j) {
        if (step != kNone)
          prefetch_slot(cf.first_slot + static_cast<uint32_t>(j) * step);
        else if (!opt_symmetric_ || simulated_[members[j]])
          prefetch_rank(members[j]);
      },
      [&](size_t i) {
        moving_since_ = cf.started;
        const uint32_t m = members[i];
        if ((opt_symmetric_ && !simulated_[m]) || ranks_[m].dead) return;
        const uint16_t s = cf.mixed ? waiting_stream(m, cf.comm, cf.seq) : cf.stream;
        if (s != kNoStream) complete(m, s);
      });
  moving_since_ = outer_moving;
  --completion_depth_;
}

uint16_t ProgramExecutor::waiting_stream(uint32_t rank, uint32_t comm, uint32_t seq) const {
  const Program& p = program_of(rank);
  for (uint16_t s = 0; s < p.num_streams(); ++s) {
    const StreamState& st = ss(rank, s);
    if (!st.busy || st.next >= p.stream_ops(s).size()) continue;
    const Op& op = p.op(p.stream_ops(s)[st.next]);
    if (op.kind == OpKind::kCollective && op.comm == comm && st.seq == seq) return s;
  }
  return kNoStream;
}

void ProgramExecutor::kill_rank(uint32_t rank) {
  RankState& rs = ranks_[rank];
  if (rs.dead) return;
  rs.dead = true;
  if (dead_at_.empty()) dead_at_.assign(state_ranks_, sim::Time::infinite());
  dead_at_[rank] = sim_.now();
  ++dead_count_;
  trace_instant(rank, 0, "rank dead (GPU " + std::to_string(job_.gpu_of(rank)) + ")");
  if (failed_at_.is_infinite()) note_failure("rank " + std::to_string(rank) + " (GPU " + std::to_string(job_.gpu_of(rank)) + ") died");
  withdraw(rank);
}

// Cancels the running kernels and pending delays of `rank` (kNone: of every rank, and measured
// collectives' timers too).
void ProgramExecutor::withdraw(uint32_t rank) {
  const uint32_t first = rank == kNone ? 0 : rank, last = rank == kNone ? state_ranks_ : rank + 1;
  for (uint32_t r = first; r < last; ++r) {
    const Program& p = program_of(r);
    for (uint16_t s = 0; s < p.num_streams(); ++s) {
      // An issued kernel head op runs in the stream's slot until it completes or fails (a head
      // op waiting for the host has not started: its slot is not active).
      const StreamState& st = ss(r, s);
      if (st.busy && st.next < p.stream_ops(s).size()) {
        const OpKind k = p.op(p.stream_ops(s)[st.next]).kind;
        if (k != OpKind::kTimed && k != OpKind::kKernel) continue;
        const sim::ActivityId a(kernel_slot(ranks_[r], s));
        if (sim_.fluid().active(a)) sim_.fluid().cancel(a);
      }
    }
  }
  for (uint32_t d = 0; d < delays_.size(); ++d) {
    if ((rank != kNone && delays_[d].rank != rank) ||
        std::find(free_delays_.begin(), free_delays_.end(), d) != free_delays_.end())
      continue;
    sim_.cancel(delays_[d].event);
    free_delays_.push_back(d);
  }
}

double ProfileKernelCoster::latency_s(KernelClass c) const {
  const double gap = profile_.kernel_gap.seconds();  // between this kernel and the one before
  switch (c) {
    case KernelClass::kGemm: return gap + profile_.gemm_latency.seconds();
    case KernelClass::kAttention: return gap + profile_.attention_latency.seconds();
    default: return gap + profile_.kernel_latency.seconds();
  }
}

ProfileKernelCoster::Sums ProfileKernelCoster::term(const CostTerm& t) const {
  double eff = profile_.vector_efficiency;
  if (t.cls == KernelClass::kGemm) eff = profile_.gemm_efficiency;
  if (t.cls == KernelClass::kAttention) eff = profile_.attention_efficiency;
  const double rate = (t.cls == KernelClass::kGemm ? gemm_peak_ : peak_) * eff;
  Sums s;
  if (t.cls != KernelClass::kMemory) {
    s.sm_s = t.flops[0] / (rate * t.wave[0]);
    if (t.flops[1] != 0) s.sm_s += t.flops[1] / (rate * t.wave[1]);
  }
  const double hbm_rate =
      hbm_ * (t.foreach && profile_.foreach_efficiency > 0 ? profile_.foreach_efficiency : profile_.memory_efficiency);
  s.hbm_s = t.bytes / hbm_rate;
  double memory_s = s.hbm_s;
  const double unvec_rate = profile_.unvectorized_elementwise_rate;
  if (t.unvec_elems > 0 && unvec_rate > 0) {
    // The unvectorized kernels take the longer of their bytes' time and their elements' issue time;
    // the term's other kernels their bytes' time.
    memory_s = (t.bytes - t.unvec_bytes) / hbm_rate + std::max(t.unvec_bytes / hbm_rate, t.unvec_elems / unvec_rate);
  }
  s.seconds = static_cast<double>(t.kernels) * latency_s(t.cls) + std::max(s.sm_s, memory_s);
  return s;
}

ProfileKernelCoster::Sums ProfileKernelCoster::sum(const std::vector<CostTerm>& terms) const {
  Sums s;
  for (const CostTerm& t : terms) {
    const Sums one = term(t);
    s.seconds += one.seconds;
    s.sm_s += one.sm_s;
    s.hbm_s += one.hbm_s;
  }
  return s;
}

void ProfileKernelCoster::kernel_seconds(const Program& p, const Op& op, std::vector<double>& out) const {
  if (op.index == 0) {
    out.assign(1, cost(p, op).seconds);
    return;
  }
  out.clear();
  for (const CostTerm& t : p.cost_terms(op.index)) {
    SIM_ASSERT(t.kernels > 0 || term(t).seconds == 0, "a cost term with work launches at least one kernel");
    if (t.kernels == 0) continue;  // launches nothing
    const uint32_t k = t.kernels;
    out.insert(out.end(), k, term(t).seconds / k);
  }
}

KernelCoster::Cost ProfileKernelCoster::cost(const Program& p, const Op& op) const {
  if (op.index != 0) {
    Sums s = sum(p.cost_terms(op.index));
    Cost c;
    c.seconds = s.seconds;
    c.sm_load = s.seconds > 0 ? s.sm_s / s.seconds : 0;
    c.hbm_load = s.seconds > 0 ? s.hbm_s / s.seconds : 0;
    return c;
  }
  double eff = profile_.vector_efficiency;
  switch (static_cast<KernelClass>(op.op_class)) {
    case KernelClass::kGemm: eff = profile_.gemm_efficiency; break;
    case KernelClass::kAttention: eff = profile_.attention_efficiency; break;
    case KernelClass::kVector: eff = profile_.vector_efficiency; break;
    case KernelClass::kMemory: eff = 0; break;
  }
  const double peak = static_cast<KernelClass>(op.op_class) == KernelClass::kGemm ? gemm_peak_ : peak_;
  const double t_sm = eff > 0 && peak > 0 ? op.flops / (peak * eff) : 0.0;
  const double t_hbm = hbm_ > 0 ? op.bytes / (hbm_ * profile_.memory_efficiency) : 0.0;
  Cost c;
  c.seconds = latency_s(static_cast<KernelClass>(op.op_class)) + std::max(t_sm, t_hbm);
  if (c.seconds > 0) {
    c.sm_load = t_sm / c.seconds;
    c.hbm_load = t_hbm / c.seconds;
  }
  return c;
}

void ProgramExecutor::fail_gpu(uint32_t gpu) {
  res_.fail_gpu(gpu);
  for (uint32_t r = 0; r < state_ranks_; ++r)
    if (job_.gpu_of(r) == gpu && (!opt_symmetric_ || simulated_[r])) kill_rank(r);
}

void ProgramExecutor::fail(std::string message) {
  if (error_.empty()) error_ = std::move(message);
  stopped_ = true;
}

size_t ProgramExecutor::pending_count() const { return ranks_to_run_ - ranks_done_; }

std::string ProgramExecutor::describe_op(uint32_t rank, const Op& op) const {
  std::string s = "'" + program_of(rank).name(op.name) + "' (" + std::string(op_kind_name(op.kind));
  if (op.layer >= 0) s += ", layer " + std::to_string(op.layer);
  if (op.micro_batch >= 0) s += ", micro-batch " + std::to_string(op.micro_batch);
  if (op.kind == OpKind::kCollective)
    s += " " + std::string(op_name(op.coll)) + " of " + std::to_string(static_cast<int64_t>(op.bytes)) + " bytes";
  return s + ")";
}

void ProgramExecutor::describe_pending(std::string& out, size_t max_lines) const {
  size_t lines = 0;
  if (stopped_ && lines < max_lines) {
    out += "  error: " + error_ + "\n";
    ++lines;
  }
  for (uint32_t r = 0; r < state_ranks_ && lines < max_lines; ++r) {
    const RankState& rs = ranks_[r];
    if (rs.ops_left == 0 || (opt_symmetric_ && !simulated_[r])) continue;
    const Program& p = program_of(r);
    if (rs.dead) {
      out += "  rank " + std::to_string(r) + " (GPU " + std::to_string(job_.gpu_of(r)) + ") is dead since t=" +
             std::to_string(dead_at_[r].count_ns()) + " ns with " + std::to_string(rs.ops_left) + " ops not done\n";
      ++lines;
      continue;
    }
    for (uint16_t s = 0; s < p.num_streams() && lines < max_lines; ++s) {
      const StreamState& st = ss(r, s);
      const auto& list = p.stream_ops(s);
      if (st.next >= list.size()) continue;
      const Op& op = p.op(list[st.next]);
      out += "  rank " + std::to_string(r) + " " + p.stream_name(s) + ": '" + p.name(op.name) + "' ";
      if (st.busy) {
        uint32_t inst = 0, size = 0;
        if (op.kind == OpKind::kCollective && op.comm < job_.comms.size() && group_of(r, op.comm, inst, size) &&
            size > 1 && gather_[inst].seq != st.seq) {
          out += "is in its " + job_.comms[op.comm].name +
                 " group's collective, which started and cannot finish (a member's GPU or link is down?)";
        } else if (op.kind == OpKind::kCollective && op.comm < job_.comms.size()) {
          std::vector<uint32_t> members;
          members_of(op.comm, r, members);
          std::string missing;
          size_t arrived = 0, listed = 0;
          for (uint32_t m : members) {
            if (waiting_stream(m, op.comm, st.seq) != kNoStream) {
              ++arrived;
              continue;
            }
            if (listed++ < 4)
              missing += std::string(missing.empty() ? "" : ", ") + "rank " + std::to_string(m) +
                         (ranks_[m].dead ? " (dead)" : res_.gpu_failed(job_.gpu_of(m)) ? " (its GPU failed)" : "");
          }
          if (listed > 4) missing += ", ...";
          // A generated communicator is named by its axis ("its tp group"); a traced one by its id.
          const std::string& name = job_.comms[op.comm].name;
          const bool numbered = !name.empty() && name.find_first_not_of("0123456789") == std::string::npos;
          out += numbered ? "waits for its group on communicator " + name : "waits for its " + name + " group";
          if (!members.empty() && arrived == members.size())
            out += " (all " + std::to_string(arrived) + " members arrived; it cannot start)";
          else if (!members.empty())
            out += " (" + std::to_string(arrived) + " of " + std::to_string(members.size()) +
                   " members arrived; missing: " + missing + ")";
        } else if (op.kind == OpKind::kRecv) {
          uint32_t peer = 0;
          out += "waits for message " + std::to_string(op.tag) + " from rank " +
                 (resolve_peer(r, op, peer) ? std::to_string(peer) : std::string("?")) +
                 (resolve_peer(r, op, peer) && ranks_[peer].dead ? " (dead)" : "");
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

const CollectivePlan* ProgramExecutor::plan_for(uint32_t c, uint32_t instance, CollectiveOp op, double bytes,
                                                uint32_t any_member) {
  // The groups of a generated communicator whose members sit alike on their nodes (checked at
  // construction) share one plan; otherwise each group gets its own.
  const Communicator& cm = job_.comms[c];
  const uint32_t key_instance = uniform_comm_[c] ? 0 : instance;
  auto key = std::make_tuple(c, key_instance, static_cast<uint8_t>(op), bytes);
  auto it = plans_.find(key);
  if (it != plans_.end()) return it->second.get();
  // Lower on this group's GPUs, then rewrite GPU ids as positions in the member list.
  CollectiveRequest req;
  req.op = op;
  req.algorithm = cm.algorithm;
  members_of(c, any_member, scratch_members_);
  std::unordered_map<uint32_t, uint32_t> position;
  for (uint32_t i = 0; i < scratch_members_.size(); ++i) {
    req.group.push_back(job_.gpu_of(scratch_members_[i]));
    position[req.group.back()] = i;
  }
  req.bytes = bytes;
  if (position.size() != req.group.size()) {
    fail("communicator '" + cm.name + "' places two of its members on one GPU; a collective needs distinct GPUs");
    return nullptr;
  }
  std::unique_ptr<CollectivePlan> plan;
  try {
    plan = std::make_unique<CollectivePlan>(lower_collective(req, shape_, hints_));
  } catch (const sim::UserError& e) {
    fail("communicator '" + cm.name + "': " + e.what());
    return nullptr;
  }
  for (auto& ph : plan->phases)
    for (auto& tr : ph.transfers)
      for (auto& [a, b] : tr.hops) {
        a = position.at(a);
        b = position.at(b);
      }
  if (sim::Log* log = sim_.log())
    log->at(sim::Layer::kWorkloads)
        .debug("lowered {} of {} B on communicator '{}' ({} ranks, first GPU {}): {} {} ({}), {} phase(s)", op_name(op),
               bytes, cm.name, req.group.size(), req.group.front(), algorithm_name(plan->algorithm),
               protocol_name(plan->protocol), cm.algorithm == Algorithm::kAuto ? "auto" : "requested",
               plan->phases.size());
  plan->keep_id = ++plan_ids_;  // kept in plans_ for the executor's (and its runtime's) lifetime
  return (plans_[key] = std::move(plan)).get();
}

const CollectivePlan& ProgramExecutor::send_plan(double bytes) {
  auto it = send_plans_.find(bytes);
  if (it != send_plans_.end()) return *it->second;
  auto plan = std::make_unique<CollectivePlan>();
  plan->op = CollectiveOp::kSendRecv;
  plan->algorithm = Algorithm::kDirect;
  Transfer t;
  t.hops.emplace_back(0, 1);
  t.bytes = bytes;
  t.latency_steps = 1;
  plan->phases.push_back(Phase{{t}});
  plan->keep_id = ++plan_ids_;
  return *(send_plans_[bytes] = std::move(plan));
}

// The trace arrows of a collective that starts now: from the member that arrived last (its span)
// to every other traced member's transfer span, 1 ns into both (where the arrows bind).
void ProgramExecutor::link_members(const Op& op, uint32_t last, uint16_t stream, bool mixed, uint32_t seq) {
  if (last >= state_ranks_ || !traced_[last]) return;
  members_of(op.comm, last, scratch_members_);
  auto& bus = sim_.observers();
  const sim::Time at = sim_.now() + sim::Time::ns(1);
  for (uint32_t m : scratch_members_) {
    if (m == last || m >= state_ranks_ || !traced_[m]) continue;
    const uint16_t ms = mixed ? waiting_stream(m, op.comm, seq) : stream;
    if (ms == kNoStream) continue;
    sim::FlowRecord fr;
    fr.id = ++flows_;
    fr.process = last;
    fr.thread = stream;
    fr.name = bus_names_[job_.template_of_rank[last]][op.name];
    fr.time = at;
    fr.start = true;
    bus.flow(fr);
    fr.process = m;
    fr.thread = ms;
    fr.start = false;
    bus.flow(fr);
  }
}

void ProgramExecutor::end_flow(uint32_t rank, uint16_t stream, uint64_t flow, bool inside_span) {
  sim::FlowRecord fr;
  fr.id = flow;
  fr.process = rank;
  fr.thread = stream;
  // 1 ns before the end of a span that ends now, so that the arrow binds to it.
  fr.time = inside_span ? sim_.now() - sim::Time::ns(1) : sim_.now();
  fr.start = false;
  sim_.observers().flow(fr);
}

void ProgramExecutor::trace_instant(uint32_t rank, uint16_t stream, const std::string& name) {
  auto& bus = sim_.observers();
  if (!bus.active() || rank >= traced_.size() || !traced_[rank]) return;
  sim::InstantRecord ir;
  ir.process = rank;
  ir.thread = stream;
  ir.name = bus.names().intern(name);
  ir.time = sim_.now();
  bus.instant(ir);
}

void ProgramExecutor::mark(const std::string& what) {
  for (uint32_t r = 0; r < state_ranks_; ++r) trace_instant(r, 0, what);
}

void ProgramExecutor::note_failure(const std::string& what) {
  if (sim::Log* log = sim_.log())
    log->at(sim::Layer::kWorkloads).info("failure at {} ns after the start: {}", (sim_.now() - step_start_).count_ns(), what);
  mark("failure: " + what);
  if (failed_at_.is_infinite()) {
    failed_at_ = sim_.now();
    failure_what_ = what;
  }
  if (watchdog_.is_infinite() || watching_ || stopped_) return;
  watching_ = true;
  schedule_watchdog();
}

bool ProgramExecutor::oldest_comm_op(uint32_t& rank, uint16_t& stream) const {
  bool found = false;
  sim::Time oldest = sim::Time::infinite();
  for (uint32_t r = 0; r < state_ranks_; ++r) {
    if (ranks_[r].dead || ranks_[r].ops_left == 0) continue;
    const Program& p = program_of(r);
    for (uint16_t s = 0; s < p.num_streams(); ++s) {
      const StreamState& st = ss(r, s);
      if (!st.busy || st.next >= p.stream_ops(s).size() || st.started >= oldest) continue;
      const OpKind k = p.op(p.stream_ops(s)[st.next]).kind;
      if (k != OpKind::kCollective && k != OpKind::kSend && k != OpKind::kRecv) continue;
      oldest = st.started;
      rank = r;
      stream = s;
      found = true;
    }
  }
  return found;
}

// Schedules the watchdog at the deadline of the oldest communication op in flight (none: it is
// scheduled again when the next one is issued).
void ProgramExecutor::schedule_watchdog() {
  if (watchdog_armed_) sim_.cancel(watchdog_event_);
  watchdog_armed_ = false;
  uint32_t r = 0;
  uint16_t s = 0;
  if (stopped_ || !oldest_comm_op(r, s)) return;
  const sim::Time deadline = std::max(sim_.now(), ss(r, s).started + watchdog_);
  watchdog_event_ = sim_.schedule_at(deadline, handler_, kNone);
  watchdog_armed_ = true;
}

void ProgramExecutor::on_watchdog() {
  watchdog_armed_ = false;
  if (stopped_) return;
  uint32_t r = 0;
  uint16_t s = 0;
  if (oldest_comm_op(r, s) && ss(r, s).started + watchdog_ <= sim_.now()) {
    abort_job(r, s);
    return;
  }
  schedule_watchdog();  // the op it was set for completed: watch the next oldest
}

void ProgramExecutor::abort_job(uint32_t rank, uint16_t stream) {
  const sim::Time now = sim_.now();
  const Program& p = program_of(rank);
  const Op& op = p.op(p.stream_ops(stream)[ss(rank, stream).next]);
  std::string& rep = abort_report_;
  rep = "watchdog: rank " + std::to_string(rank) + " waited " + sim::format_duration(watchdog_) + " for " +
        describe_op(rank, op) + ", issued at t=" + std::to_string(ss(rank, stream).started.count_ns()) + " ns";
  if (op.kind == OpKind::kCollective && op.comm < job_.comms.size())
    rep += " on communicator '" + job_.comms[op.comm].name + "' (call " + std::to_string(ss(rank, stream).seq) + ")";
  rep += "; the job aborts at t=" + std::to_string(now.count_ns()) + " ns.\n";
  if (!failed_at_.is_infinite())
    rep += "first failure: " + failure_what_ + " at t=" + std::to_string(failed_at_.count_ns()) + " ns.\n";
  describe_hang(rep);
  // The trace: the watchdog and the abort as instants, every op in flight on a live traced rank
  // (the hung collectives among them) as a span up to the abort.
  trace_instant(rank, stream, "watchdog timeout: " + p.name(op.name));
  for (uint32_t r = 0; r < state_ranks_; ++r) {
    if (!traced_[r] || ranks_[r].dead || ranks_[r].ops_left == 0) continue;
    const Program& rp = program_of(r);
    for (uint16_t s = 0; s < rp.num_streams(); ++s) {
      const StreamState& st = ss(r, s);
      if (st.busy && st.next < rp.stream_ops(s).size()) emit_span(r, rp.op(rp.stream_ops(s)[st.next]), st.started, now);
    }
    trace_instant(r, 0, "job aborted (watchdog)");
  }
  // Withdraw everything the job has in flight.
  withdraw(kNone);
  runtime_.cancel(this);
  aborted_ = true;
  aborted_at_ = now;
  stopped_ = true;
  step_end_ = now;
}

// What a hang looks like at the abort, grouped: the dead ranks, then the live ranks' pending
// communication by op (how many ranks, and one of them with whom it waits for), then the rest.
void ProgramExecutor::describe_hang(std::string& out) const {
  std::string dead;
  uint32_t ndead = 0;
  for (uint32_t r = 0; r < state_ranks_; ++r) {
    if (!ranks_[r].dead) continue;
    if (ndead++ < 16) dead += (dead.empty() ? "" : ", ") + std::to_string(r);
  }
  if (ndead > 16) dead += ", ...";
  if (ndead) out += "dead ranks (" + std::to_string(ndead) + "): " + dead + "\n";
  struct Group {
    uint32_t ranks = 0;
    std::string example;
  };
  std::map<std::string, Group> groups;
  uint32_t waiting_deps = 0, running = 0;
  std::vector<uint32_t> members;
  for (uint32_t r = 0; r < state_ranks_; ++r) {
    if (ranks_[r].dead || ranks_[r].ops_left == 0) continue;
    const Program& p = program_of(r);
    for (uint16_t s = 0; s < p.num_streams(); ++s) {
      const StreamState& st = ss(r, s);
      const auto& list = p.stream_ops(s);
      if (st.next >= list.size()) continue;
      const Op& op = p.op(list[st.next]);
      if (!st.busy) {
        ++waiting_deps;
        continue;
      }
      std::string key, example = "rank " + std::to_string(r);
      if (op.kind == OpKind::kCollective && op.comm < job_.comms.size()) {
        uint32_t inst = 0, size = 0;
        group_of(r, op.comm, inst, size);
        key = "'" + p.name(op.name) + "' (" + std::string(op_name(op.coll)) + " on " + job_.comms[op.comm].name + ")";
        if (gather_[inst].seq != st.seq) {
          key += " started, cannot finish (a link on its path is down)";
        } else {
          members_of(op.comm, r, members);
          std::string missing;
          uint32_t arrived = 0;
          for (uint32_t m : members) {
            if (waiting_stream(m, op.comm, st.seq) != kNoStream) {
              ++arrived;
            } else if (missing.empty()) {
              missing = "rank " + std::to_string(m) + (ranks_[m].dead ? " (dead)" : " (alive, not there yet)");
            }
          }
          key += ", " + std::to_string(arrived) + " of " + std::to_string(size) + " arrived";
          example += " misses " + missing;
        }
      } else if (op.kind == OpKind::kRecv || op.kind == OpKind::kSend) {
        uint32_t peer = 0;
        const bool ok = resolve_peer(r, op, peer);
        key = "'" + p.name(op.name) + "' (" + std::string(op_kind_name(op.kind)) + ")";
        example += std::string(op.kind == OpKind::kRecv ? " from" : " to") + " rank " +
                   (ok ? std::to_string(peer) + (ranks_[peer].dead ? " (dead)" : "") : std::string("?"));
      } else {
        ++running;
        continue;
      }
      Group& g = groups[key];
      if (g.ranks++ == 0) g.example = example;
    }
  }
  if (!groups.empty()) out += "hung communication on live ranks:\n";
  size_t shown = 0;
  for (const auto& [key, g] : groups) {
    if (shown++ == 12) {
      out += "  ... " + std::to_string(groups.size() - 12) + " more ops\n";
      break;
    }
    out += "  " + std::to_string(g.ranks) + " rank(s) in " + key + "; e.g. " + g.example + "\n";
  }
  if (waiting_deps || running)
    out += "other live streams: " + std::to_string(waiting_deps) + " wait on their dependencies, " +
           std::to_string(running) + " were running a kernel\n";
}

void ProgramExecutor::emit_span(uint32_t rank, const Op& op, sim::Time start, sim::Time end) {
  auto& bus = sim_.observers();
  if (!bus.active() || (op.kind == OpKind::kDelay && op.name == 0)) return;  // unnamed delays: idle gaps
  sim::SpanRecord r;
  r.process = rank;
  r.thread = op.stream;
  r.name = bus_names_[job_.template_of_rank[rank]][op.name];
  r.start = start;
  r.end = end;
  if (op.category < cat_names_.size()) r.category = cat_names_[op.category];
  size_t a = 0;
  if (op.micro_batch >= 0) r.args[a++] = {key_mb_, static_cast<double>(op.micro_batch)};
  if (op.layer >= 0) r.args[a++] = {key_layer_, static_cast<double>(op.layer)};
  if (op.bytes > 0 && op.kind != OpKind::kMemory) r.args[a++] = {key_bytes_, op.bytes};
  if (op.external_id != 0) r.args[a++] = {key_ext_, static_cast<double>(op.external_id)};
  bus.span(r);
}

void ProgramExecutor::emit_wait(uint32_t rank, const Op& op, sim::Time start, sim::Time end) {
  auto& bus = sim_.observers();
  if (!bus.active()) return;
  sim::SpanRecord r;
  r.process = rank;
  r.thread = op.stream;
  r.name = wait_name_;
  r.category = wait_name_;
  r.start = start;
  r.end = end;
  size_t a = 0;
  if (op.micro_batch >= 0) r.args[a++] = {key_mb_, static_cast<double>(op.micro_batch)};
  if (op.layer >= 0) r.args[a++] = {key_layer_, static_cast<double>(op.layer)};
  bus.span(r);
}

double ProgramExecutor::category_seconds(uint32_t rank, uint16_t c) const {
  rank = representative(rank);
  double v = cat_s_[static_cast<size_t>(ranks_[rank].slot) * ncat_ + c];
  if (c == job_.idle_category && ranks_[rank].ops_left == 0) v += (step_end_ - ranks_[rank].end).seconds();
  return v;
}

ProgramRun run_program(sim::Simulation& sim, const topo::Topology& topo, const topo::GpuSpec& gpu,
                       const topo::HardwareProfile& profile, const JobProgram& job, const ExecutorOptions& opt) {
  topo::ClusterResources res(sim, topo, gpu, profile);
  RuntimeOptions ro = runtime_options_for(res);
  CollectiveRuntime runtime(res, ro);
  ProgramExecutor exec(res, runtime, job, cluster_shape_of(res), cost_hints_for(res, ro), opt);
  sim.add_pending_work(&exec);
  exec.start();
  const sim::RunResult run = sim.run();
  sim.remove_pending_work(&exec);
  ProgramRun out;
  out.finished = exec.error().empty() && exec.finished();
  if (!out.finished) {
    // The error first, then the report of what waits, without its own copy of the error line.
    std::string report = run.deadlock_report;
    const std::string error_line = "  error: " + exec.error() + "\n";
    if (const size_t at = report.find(error_line); !exec.error().empty() && at != std::string::npos)
      report.erase(at, error_line.size());
    out.problem = exec.error().empty() ? report : report.empty() ? exec.error() : exec.error() + "\n" + report;
  }
  out.end = exec.step_end();
  for (uint32_t r = 0; r < job.world(); ++r) out.rank_end.push_back(exec.rank_end(r));
  if (opt.record_op_times)
    for (uint32_t r = 0; r < job.world(); ++r) out.op_times.push_back(exec.op_times(r));
  return out;
}

}  // namespace wl
