#include "workloads/collectives/runtime.h"

#include <algorithm>

#include "sim/error.h"
#include "sim/prefetch.h"
#include "sim/random.h"

namespace wl {

CollectiveRuntime::CollectiveRuntime(topo::ClusterResources& res, const RuntimeOptions& opt)
    : res_(res), opt_(opt), ecmp_salt_(res.simulation().random().stream_seed("ecmp")) {
  handler_ = res_.simulation().add_handler(this);
  link_mark_.assign(res_.topology().links().size(), LinkMark{});
}

uint32_t CollectiveRuntime::alloc_transfer() {
  if (!free_transfers_.empty()) {
    uint32_t t = free_transfers_.back().transfer;
    free_transfers_.pop_back();
    // The next one taken, perhaps freed long ago (a phase starts its transfers one after another):
    // ask for its record and its list of uses now, as start does for instances (where the list
    // lies was noted when it was freed, so that asking needs no load from the record).
    if (!free_transfers_.empty()) {
      const FreeTransfer& next = free_transfers_.back();
      __builtin_prefetch(&transfers_[next.transfer], 1);
      if (next.uses) __builtin_prefetch(next.uses, 1);
    }
    return t;
  }
  transfers_.emplace_back();
  return static_cast<uint32_t>(transfers_.size() - 1);
}

void CollectiveRuntime::start(const CollectivePlan& plan, std::span<const uint32_t> members,
                              CollectiveListener* listener, uint64_t tag, bool relative_hops,
                              const ReplicaCopies* copies, bool holds_sms) {
  SIM_ASSERT(!members.empty() && members.size() <= UINT32_MAX, "a collective needs members");
  uint32_t id;
  if (!free_instances_.empty()) {
    id = free_instances_.back();
    free_instances_.pop_back();
    // The next start takes the record below, perhaps freed long ago: ask for it now.
    if (!free_instances_.empty()) {
      const char* next = reinterpret_cast<const char*>(&instances_[free_instances_.back()]);
      __builtin_prefetch(next, 1);
      __builtin_prefetch(next + 64, 1);
    }
  } else {
    id = static_cast<uint32_t>(instances_.size());
    instances_.emplace_back();
  }
  Instance& in = instances_[id];
  in.plan = &plan;
  in.num_members = static_cast<uint32_t>(members.size());
  if (members.size() <= Instance::kInlineMembers)
    std::copy(members.begin(), members.end(), in.inline_members);
  else
    in.more_members.assign(members.begin(), members.end());
  in.phase = 0;
  in.outstanding = 0;
  in.listener = listener;
  in.tag = tag;
  in.relative = relative_hops;
  in.holds_sms = holds_sms;
  in.copies = copies;
  uint64_t comm = 0;
  for (uint32_t g : in.members()) comm = sim::splitmix64(comm ^ g);
  in.flow_base = sim::splitmix64(ecmp_salt_ ^ comm);
  in.shape_base = in.flow_base;
  in.node_shift = 0;
  const uint32_t stride = res_.node_constraint_stride();
  if (relative_hops && copies == nullptr && stride > 0) {
    const uint32_t gpn = res_.topology().gpus_per_node();
    const uint32_t node = in.members().front() / gpn;
    bool one_node = true;
    uint64_t places = 0x6e6f64652d6c6f63ull;  // "node-loc": not a fold of GPU ids
    for (uint32_t g : in.members()) {
      one_node = one_node && g / gpn == node;
      places = sim::splitmix64(places ^ (g - node * gpn));
    }
    if (one_node && static_cast<uint64_t>(node) * stride <= UINT32_MAX) {
      in.node_shift = node * stride;
      in.shape_base = places;
    }
  }
  ++live_;
  mark_members(in, true);
  start_phase(id);
}

// A collective's member GPUs are far apart at 16k GPUs and more: each one's records are asked for
// 16 members before they are touched (sim::for_each_prefetched).
void CollectiveRuntime::mark_members(const Instance& in, bool begin) {
  const std::span<const uint32_t> m = in.members();
  auto simulated = [&](uint32_t g) { return !in.copies || in.copies->simulated(g); };
  sim::for_each_prefetched(
      m.size(), 16,
      [&](size_t j) {
        if (simulated(m[j])) res_.prefetch_gpu(m[j]);
      },
      [&](size_t i) {
        if (!simulated(m[i])) return;
        if (begin)
          res_.comm_begin(m[i], in.holds_sms);
        else
          res_.comm_end(m[i], in.holds_sms);
      });
}

namespace {
// The first phase with transfers (empty phases are skipped).
size_t first_phase(const CollectivePlan& plan) {
  size_t i = 0;
  while (i < plan.phases.size() && plan.phases[i].transfers.empty()) ++i;
  return i;
}
}  // namespace

void CollectiveRuntime::start_phase(uint32_t inst) {
  auto& sim = res_.simulation();
  Instance& in = instances_[inst];
  // Skip empty phases (a degenerate group); finish when none are left.
  while (in.phase < in.plan->phases.size() && in.plan->phases[in.phase].transfers.empty()) ++in.phase;
  if (in.phase >= in.plan->phases.size()) {
    mark_members(in, false);
    CollectiveListener* l = in.listener;
    uint64_t tag = in.tag;
    in.num_members = 0;
    free_instances_.push_back(inst);
    --live_;
    if (l) l->on_collective_done(tag);
    return;
  }
  const Phase& ph = in.plan->phases[in.phase];
  in.outstanding = static_cast<uint32_t>(ph.transfers.size());
  const Protocol protocol = in.plan->protocol;
  const ProtocolCost& cost = opt_.costs.of(protocol);
  const bool nvls = in.plan->algorithm == Algorithm::kNvls || in.plan->algorithm == Algorithm::kNvlsTree;
  const bool path_latency = in.plan->algorithm == Algorithm::kTree || in.plan->algorithm == Algorithm::kNvlsTree;
  const sim::Time step = protocol == Protocol::kSimple ? opt_.step_overhead : sim::Time::from_seconds(cost.step_s);
  sim::Time launch = sim::Time::zero();
  if (in.phase == first_phase(*in.plan)) {
    launch = sim::Time::from_seconds(nvls ? opt_.costs.nvls_launch_s : cost.launch_s);
  }
  const double payload = cost.payload > 0.0 ? cost.payload : 1.0;
  // Caps in wire bytes per second per transfer: LL's bus bandwidth; a small collective's share of
  // the channels (of its slowest link's capacity); NVLS's port rate.
  double cap = sim::kUnbounded;
  const double channels = opt_.costs.channel_fraction(protocol, in.plan->bytes, in.plan->ranks);
  if (cost.max_busbw_Bps > 0.0) cap = cost.max_busbw_Bps / static_cast<double>(ph.transfers.size()) / payload;
  const double nvls_cap = opt_.scale_up_Bps > 0.0 && opt_.costs.nvls_efficiency > 0.0
                              ? opt_.costs.nvls_efficiency * opt_.scale_up_Bps
                              : sim::kUnbounded;
  const bool copies = in.copies && !in.copies->gpu_offsets.empty() && !intra_node_aligned(in);
  const sim::Time fill = sim::Time::from_seconds(ph.fill_s);
  for (size_t channel = 0; channel < ph.transfers.size(); ++channel) {
    const Transfer& tr = ph.transfers[channel];
    uint32_t t = alloc_transfer();
    TransferRun& run = transfers_[t];
    run.instance = inst;
    run.bytes = tr.bytes / payload;
    run.max_rate = tr.in_switch ? std::min(cap, nvls_cap) : cap;
    run.uses.clear();
    run.kept_at = kNotKept;
    run.shift = 0;
    RouteSummary walked;
    const RouteSummary* sum = &walked;
    // Kept (see ShapeSlot): a group of more than two (a ring of 8 to 1,024 hops) or a transfer
    // standing for its copies. A pair's single hop is cheaper to route again: at 131k GPUs, keeping
    // the pipeline sends too quadrupled the table (64 MB) for 2% more speed.
    if (in.plan->keep_id != 0 && (in.num_members > 2 || copies)) {
      const ShapeSlot& sh = kept_shape(ShapeKey{in.copies, in.plan->keep_id, in.phase, static_cast<uint32_t>(channel),
                                                in.shape_base},
                                       in, channel, tr, copies, channels < 1.0);
      run.kept_at = sh.uses_at;
      run.kept_count = sh.num_uses;
      run.shift = in.node_shift;
      sum = &sh.summary;
    } else {
      walked = walk_routes(in, channel, tr, copies, channels < 1.0, run.uses);
    }
    if (channels < 1.0 && !tr.in_switch && in.plan->algorithm != Algorithm::kDirect && sum->slowest < sim::kUnbounded)
      run.max_rate = std::min(run.max_rate, channels * sum->slowest);
    // A ring's chunks cross its hops in turn, so its steps pay the hops' mean route latency; a
    // tree's steps run down its deepest path, so they pay the largest.
    const sim::Time hop_latency =
        path_latency ? sum->max_latency
                     : sim::Time::ns(sum->sum_latency.count_ns() / static_cast<int64_t>(std::max<size_t>(1, tr.hops.size())));
    sim::Time latency = launch + (step + hop_latency) * tr.latency_steps + fill;
    run.moving = false;
    run.live = true;
    run.wait = sim.schedule_after(latency, handler_, t);
  }
}

CollectiveRuntime::RouteSummary CollectiveRuntime::walk_routes(const Instance& in, size_t channel, const Transfer& tr,
                                                               bool copies, bool want_slowest,
                                                               std::vector<sim::Use>& uses) {
  const auto& topo = res_.topology();
  const std::span<const uint32_t> members = in.members();
  const uint64_t connection = sim::splitmix64(in.flow_base ^ channel);
  const CopyUses* copied = copies ? &copy_uses(in, channel, tr) : nullptr;
  use_links_.clear();
  use_seen_ = 0;
  use_marks_ = false;
  RouteSummary out;
  for (auto [hs, hd] : tr.hops) {
    uint32_t src = in.relative ? members[hs] : hs;
    uint32_t dst = in.relative ? members[hd] : hd;
    topo.route(src, dst, sim::splitmix64(connection ^ ((uint64_t{src} << 32) | dst)), route_);
    out.max_latency = std::max(out.max_latency, route_.latency);
    out.sum_latency += route_.latency;
    for (uint32_t l : route_.links) {
      if (want_slowest) out.slowest = std::min(out.slowest, res_.link_capacity(l));
      if (in.copies && mirror_private(l, *in.copies)) continue;  // see ReplicaCopies
      add_use(uses, l, 1.0);
    }
  }
  if (copied)
    for (auto [l, w] : *copied) add_use(uses, l, w);
  return out;
}

const CollectiveRuntime::ShapeSlot& CollectiveRuntime::kept_shape(const ShapeKey& key, const Instance& in,
                                                                   size_t channel, const Transfer& tr, bool copies,
                                                                   bool want_slowest) {
  auto slot_of = [&](const ShapeKey& k) {
    const uint64_t h = sim::splitmix64(k.group ^ (k.plan << 20) ^ (uint64_t{k.phase} << 44) ^ k.channel ^
                                       reinterpret_cast<uintptr_t>(k.copies));
    size_t i = h & (shape_table_.size() - 1);
    while (shape_table_[i].key.plan != 0 && !(shape_table_[i].key == k)) i = (i + 1) & (shape_table_.size() - 1);
    return i;
  };
  if (!shape_table_.empty()) {
    ShapeSlot& found = shape_table_[slot_of(key)];
    if (found.key.plan != 0) {
      // Its flow starts on these links' records once its latency has passed: ask for them now,
      // as a fresh walk does (a few links; not the thousands of a transfer standing for copies).
      if (found.num_uses <= kLinearUses)
        for (uint32_t i = 0; i < found.num_uses; ++i)
          res_.simulation().fluid().prefetch_constraint(shape_uses_[found.uses_at + i].constraint.value + in.node_shift);
      return found;
    }
  }
  if (2 * (shapes_kept_ + 1) > shape_table_.size()) {  // grow: at most half full
    sim::BigVector<ShapeSlot> old(std::max<size_t>(1024, 2 * shape_table_.size()));
    old.swap(shape_table_);
    for (const ShapeSlot& s : old)
      if (s.key.plan != 0) shape_table_[slot_of(s.key)] = s;
  }
  ShapeSlot& slot = shape_table_[slot_of(key)];
  shape_scratch_.clear();
  slot.summary = walk_routes(in, channel, tr, copies, want_slowest, shape_scratch_);
  for (sim::Use& u : shape_scratch_) u.constraint = sim::ConstraintId(u.constraint.value - in.node_shift);  // as node 0's
  if (shape_uses_.size() + shape_scratch_.size() > UINT32_MAX)
    throw sim::UserError("the collectives' routes need more than 2^32 link uses: the cluster and its collectives are "
                         "too large for the collective runtime");
  slot.key = key;
  slot.uses_at = static_cast<uint32_t>(shape_uses_.size());
  slot.num_uses = static_cast<uint32_t>(shape_scratch_.size());
  shape_uses_.insert(shape_uses_.end(), shape_scratch_.begin(), shape_scratch_.end());
  ++shapes_kept_;
  return slot;
}

void CollectiveRuntime::add_use(std::vector<sim::Use>& uses, uint32_t l, double weight) {
  size_t slot = uses.size();  // l's entry; uses.size() while l is new to this transfer
  if (!use_marks_) {
    // A bit per link, hashed: a clear bit proves the link is new, and most of a transfer's links are.
    const uint64_t bit = uint64_t{1} << ((l * 0x9E3779B9u) >> 26);
    if (use_seen_ & bit) {
      for (size_t i = 0; i < use_links_.size() && slot == uses.size(); ++i)
        if (use_links_[i] == l) slot = i;
    }
    use_seen_ |= bit;
  } else if (link_mark_[l].stamp == stamp_) {
    slot = link_mark_[l].slot;
  }
  if (slot == uses.size()) {
    uses.push_back(sim::Use{res_.link(l), 0.0});
    // The flow starts on this link's record once the transfer's latency has passed, a few
    // microseconds from now: ask for it while the route is at hand.
    res_.simulation().fluid().prefetch_constraint(res_.link(l).value);
    if (use_marks_) {
      link_mark_[l] = LinkMark{stamp_, static_cast<uint32_t>(slot)};
    } else {
      use_links_.push_back(l);
      if (use_links_.size() == kLinearUses) {  // a long list: mark its links from now on
        ++stamp_;
        for (size_t i = 0; i < use_links_.size(); ++i) link_mark_[use_links_[i]] = LinkMark{stamp_, static_cast<uint32_t>(i)};
        use_marks_ = true;
      }
    }
  }
  uses[slot].weight += weight;
}

bool CollectiveRuntime::mirror_private(uint32_t l, const ReplicaCopies& copies) const {
  const topo::Link& link = res_.topology().links()[l];
  if (link.kind == topo::LinkKind::kFabric) return copies.duplicate(l);
  if (link.kind != topo::LinkKind::kNic && link.kind != topo::LinkKind::kScaleUp) return false;
  const uint32_t gpu = link.src < res_.topology().num_gpus() ? link.src : link.dst;
  return !copies.simulated(gpu);
}

bool CollectiveRuntime::intra_node_aligned(const Instance& in) const {
  // A group inside one node whose copies are whole nodes away moves only scale-up bytes, private
  // to its GPUs: its copies load nothing it shares. (Nodes without a scale-up switch send even
  // these through their NICs, and across rails through the fabric.)
  if (!in.copies->node_aligned || res_.topology().kind() != topo::TopologyKind::kCluster ||
      !res_.topology().has_scale_up())
    return false;
  const uint32_t gpn = std::max<uint32_t>(1, res_.topology().gpus_per_node());
  const std::span<const uint32_t> members = in.members();
  for (uint32_t g : members)
    if (g / gpn != members.front() / gpn) return false;
  return true;
}

const CollectiveRuntime::CopyUses& CollectiveRuntime::copy_uses(const Instance& in, size_t channel,
                                                                     const Transfer& tr) {
  CopyUses& out = copy_scratch_;
  out.clear();
  const auto& topo = res_.topology();
  const uint32_t gpn = std::max<uint32_t>(1, topo.gpus_per_node());
  const std::span<const uint32_t> members = in.members();
  ++stamp_;
  for (const uint32_t off : in.copies->gpu_offsets) {
    // Each copy's connections hash as its own communicator's would (its members shifted).
    uint64_t comm = 0;
    for (uint32_t g : members) comm = sim::splitmix64(comm ^ (g + off));
    const uint64_t connection = sim::splitmix64(sim::splitmix64(ecmp_salt_ ^ comm) ^ channel);
    for (auto [hs, hd] : tr.hops) {
      const uint32_t src = (in.relative ? members[hs] : hs) + off;
      const uint32_t dst = (in.relative ? members[hd] : hd) + off;
      if (src / gpn == dst / gpn && topo.kind() == topo::TopologyKind::kCluster && topo.has_scale_up())
        continue;  // scale-up only
      topo.route(src, dst, sim::splitmix64(connection ^ ((uint64_t{src} << 32) | dst)), route_);
      for (uint32_t l : route_.links) {
        if (mirror_private(l, *in.copies)) continue;  // a copy's own NIC and scale-up links, duplicates
        LinkMark& m = link_mark_[l];
        if (m.stamp != stamp_) {
          m = LinkMark{stamp_, static_cast<uint32_t>(out.size())};
          out.emplace_back(l, 0.0);
        }
        out[m.slot].second += 1.0;
      }
    }
  }
  return out;
}

void CollectiveRuntime::on_event(uint32_t t) {
  ++transfers_started_;
  TransferRun& run = transfers_[t];
  run.moving = true;
  std::span<const sim::Use> uses = uses_of(run);
  if (run.shift != 0) {
    shifted_.assign(uses.begin(), uses.end());
    for (sim::Use& u : shifted_) u.constraint = sim::ConstraintId(u.constraint.value + run.shift);
    uses = shifted_;
  }
  run.activity = res_.simulation().fluid().start(run.bytes, uses, run.max_rate, this, flow_tag(t, run.instance));
}

// Stage by stage down the chain on_event follows: the transfer's record, then its list of uses
// (fluid start then reads the constraint records of its links, misses it overlaps).
void CollectiveRuntime::prefetch(uint32_t t, int stage) const {
  if (t >= transfers_.size()) return;
  const TransferRun& run = transfers_[t];
  if (stage == 0) {
    __builtin_prefetch(&run);
    return;
  }
  if (!run.live || run.moving) return;
  const std::span<const sim::Use> uses = uses_of(run);
  if (run.kept_at != kNotKept && run.shift != 0 && uses.size() <= kLinearUses) {
    // A node-local group's kept uses, shared by every node, are in cache; its own links' records,
    // last touched at its previous collective, are not (at 131k GPUs, the first of them was a
    // quarter of fluid start's time there). Node 0's groups, whose shift is 0, are not told apart
    // from groups with uses of their own (a miss to read here) and take the path below.
    for (const sim::Use& u : uses) res_.simulation().fluid().prefetch_constraint(u.constraint.value + run.shift);
    return;
  }
  sim::prefetch_range(uses.data(), uses.data() + uses.size());
}

void CollectiveRuntime::prefetch_done(uint64_t tag) const {
  const auto t = static_cast<uint32_t>(tag);
  const auto inst = static_cast<uint32_t>(tag >> 32);
  if (t >= transfers_.size() || inst >= instances_.size()) return;
  __builtin_prefetch(&transfers_[t]);
  // Both lines: the members, in the second, are read when the collective ends (mark_members).
  const char* in = reinterpret_cast<const char*>(&instances_[inst]);
  __builtin_prefetch(in, 1);
  __builtin_prefetch(in + 64, 1);
}

std::string CollectiveRuntime::describe_activity(uint64_t tag) const {
  const auto inst = static_cast<uint32_t>(tag >> 32);
  if (inst >= instances_.size() || instances_[inst].num_members == 0) return "a collective's transfer";
  const std::span<const uint32_t> m = instances_[inst].members();
  std::string out = "a transfer of a collective on GPUs ";
  for (size_t i = 0; i < m.size() && i < 4; ++i) out += (i ? ", " : "") + std::to_string(m[i]);
  if (m.size() > 4) out += ", ... (" + std::to_string(m.size()) + " GPUs)";
  return out;
}

void CollectiveRuntime::free_transfer(uint32_t t) {
  const std::vector<sim::Use>& uses = transfers_[t].uses;
  free_transfers_.push_back(FreeTransfer{t, uses.capacity() > 0 ? uses.data() : nullptr});
}

void CollectiveRuntime::on_activity_done(sim::ActivityId, uint64_t tag) { finish_transfer(static_cast<uint32_t>(tag)); }

void CollectiveRuntime::finish_transfer(uint32_t t) {
  uint32_t inst = transfers_[t].instance;
  transfers_[t].live = false;
  free_transfer(t);
  Instance& in = instances_[inst];
  SIM_ASSERT(in.outstanding > 0, "transfer finished for a phase with none outstanding");
  if (--in.outstanding == 0) {
    ++in.phase;
    start_phase(inst);
  }
}

size_t CollectiveRuntime::cancel(const CollectiveListener* listener) {
  auto& sim = res_.simulation();
  std::vector<uint8_t> withdrawn(instances_.size(), 0);
  for (size_t i = 0; i < instances_.size(); ++i) {
    const Instance& in = instances_[i];
    withdrawn[i] = in.listener == listener && in.num_members > 0;
  }
  for (uint32_t t = 0; t < transfers_.size(); ++t) {
    TransferRun& run = transfers_[t];
    if (!run.live || !withdrawn[run.instance]) continue;
    if (run.moving) {
      // A transfer stalled behind a failed link is still active; one the fluid model failed is not.
      if (sim.fluid().active(run.activity)) sim.fluid().cancel(run.activity);
    } else {
      sim.cancel(run.wait);
    }
    run.live = false;
    free_transfer(t);
  }
  size_t n = 0;
  for (uint32_t i = 0; i < instances_.size(); ++i) {
    if (!withdrawn[i]) continue;
    Instance& in = instances_[i];
    for (uint32_t g : in.members())
      if (!in.copies || in.copies->simulated(g)) res_.comm_end(g, in.holds_sms);
    in.num_members = 0;
    in.listener = nullptr;
    free_instances_.push_back(i);
    --live_;
    ++n;
  }
  return n;
}

}  // namespace wl
