#include "sim/fluid.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cmath>
#include <string>

#include "sim/error.h"
#include "sim/simulation.h"

namespace sim {

namespace {
// Relative tolerance under which a constraint counts as saturated / a weight sum as empty.
constexpr double kEps = 1e-12;

}  // namespace

FluidModel::FluidModel(Simulation& sim) : sim_(sim) { handler_ = sim_.add_handler(this); }

ConstraintId FluidModel::add_constraint(double capacity, std::string name) {
  SIM_ASSERT(capacity >= 0.0 && std::isfinite(capacity), "constraint capacity must be finite and >= 0");
  constraints_.emplace_back();
  settings_.push_back(Settings{});
  const auto c = static_cast<uint32_t>(constraints_.size() - 1);
  if ((c & 63) == 0) in_use_.push_back(0);
  if (!name.empty()) names_.emplace(c, std::move(name));
  constraints_[c].capacity = capacity;
  constraints_[c].effective = capacity;
  return ConstraintId(c);
}

void FluidModel::reserve_constraints(size_t more) {
  constraints_.reserve(constraints_.size() + more);
  settings_.reserve(settings_.size() + more);
  in_use_.reserve((constraints_.capacity() + 63) / 64);
}

void FluidModel::set_effective(uint32_t c) {
  ConstraintRec& r = constraints_[c];
  const Settings& s = settings_[c];
  r.plain = s.up && s.speed == 1.0;
  r.effective = s.up ? r.capacity * s.speed : 0.0;
  if (!r.users.empty()) mark_dirty(c);
}

void FluidModel::set_capacity(ConstraintId c, double capacity) {
  SIM_ASSERT(capacity >= 0.0 && std::isfinite(capacity), "constraint capacity must be finite and >= 0");
  ConstraintRec& r = constraints_[c.value];
  r.capacity = capacity;
  if (r.plain) {
    r.effective = capacity;
    if (!r.users.empty()) mark_dirty(c.value);
  } else {
    set_effective(c.value);
  }
}

void ActivityOwner::on_activity_failed(ActivityId id, uint64_t tag) {
  SIM_ASSERT(false, "an activity failed and its owner does not handle failures (activity " + std::to_string(id.value) +
                        ", tag " + std::to_string(tag) + ")");
}

void FluidModel::set_up(ConstraintId c, bool up, DownPolicy policy) {
  settings_[c.value].up = up;
  set_effective(c.value);
  if (!up && policy == DownPolicy::kFail) fail_users(c.value);
}

void FluidModel::fail_users(uint32_t c) {
  // Snapshot first: the owners' callbacks may start, cancel or fail activities, which reorders
  // the users list and frees or reuses slots. An entry whose slot is no longer live, now holds
  // another owner's or tag's activity, or no longer uses c, was cancelled (or failed) by an
  // earlier callback and is skipped.
  const size_t begin = failing_.size();
  for (UserRef ur : constraints_[c].users) failing_.emplace_back(ur.activity, owners_[ur.activity]);
  const size_t end = failing_.size();
  for (size_t i = begin; i < end; ++i) {
    const auto [a, who] = failing_[i];
    const ActivityRec& r = activities_[a];
    if (!r.live || owners_[a].owner != who.owner || owners_[a].tag != who.tag) continue;
    bool uses_c = false;
    for (const UseRec& u : uses(r)) uses_c = uses_c || u.constraint == c;
    if (!uses_c) continue;
    remove(a);
    if (who.owner) who.owner->on_activity_failed(ActivityId(a), who.tag);
  }
  failing_.erase(failing_.begin() + static_cast<std::ptrdiff_t>(begin), failing_.end());  // (resize needs a default-constructible pair: not under clang 14)
}

void FluidModel::set_speed_factor(ConstraintId c, double factor) {
  SIM_ASSERT(factor >= 0.0 && std::isfinite(factor), "speed factor must be finite and >= 0");
  settings_[c.value].speed = factor;
  set_effective(c.value);
}

void FluidModel::mark_dirty(uint32_t c) {
  if (!constraints_[c].dirty) {
    constraints_[c].dirty = true;
    dirty_.push_back(c);
  }
}

uint32_t FluidModel::reserve_slots(uint32_t n) {
  SIM_ASSERT(activities_.size() + n < kAnySlot, "too many activity slots");
  const auto first = static_cast<uint32_t>(activities_.size());
  activities_.resize(activities_.size() + n);
  owners_.resize(owners_.size() + n);
  for (uint32_t a = first; a < first + n; ++a) activities_[a].reserved = true;
  return first;
}

ActivityId FluidModel::start(double work, std::span<const Use> uses, double rate_bound, ActivityOwner* owner,
                             uint64_t tag, uint32_t slot) {
  SIM_ASSERT(work >= 0.0 && std::isfinite(work), "activity work must be finite and >= 0");
  SIM_ASSERT(rate_bound > 0.0, "activity rate bound must be > 0");
  uint32_t a;
  if (slot != kAnySlot) {
    SIM_ASSERT(slot < activities_.size() && activities_[slot].reserved && !activities_[slot].live,
               "start in a slot that is not reserved or is running");
    a = slot;
  } else if (!free_activities_.empty()) {
    a = free_activities_.back();
    free_activities_.pop_back();
    // The next start takes the slot below; it may have been freed long ago (a collective's
    // flows start many at once), so ask for its record now.
    if (!free_activities_.empty()) prefetch_activity(free_activities_.back());
  } else {
    a = static_cast<uint32_t>(activities_.size());
    activities_.emplace_back();
    owners_.emplace_back();
  }
  ActivityRec& r = activities_[a];
  r.live = true;
  r.remaining = work;
  r.rate = 0.0;
  r.bound = rate_bound;
  r.last_update = sim_.now();
  r.completion = EventId();
  owners_[a] = OwnerRec{owner, tag};
  r.num_uses = 0;
  ++num_live_;
  if (work > 0.0) {
    size_t n = 0;
    for (const Use& u : uses) n += u.weight > 0.0 ? 1 : 0;
    if (n > kInlineUses) {  // a pool region of 2^k >= n uses, the last freed of its size if any
      const auto k = static_cast<uint8_t>(std::bit_width(n - 1));
      std::vector<uint32_t>& free_k = free_regions_[k];
      if (!free_k.empty()) {
        r.uses_at = free_k.back();
        free_k.pop_back();
        // The next region of this size taken may have been freed long ago: ask for it now.
        if (!free_k.empty()) __builtin_prefetch(use_pool_.data() + free_k.back(), 1);
      } else {
        const size_t cap = size_t{1} << k;
        if (use_pool_.size() + cap > UINT32_MAX)
          throw UserError("the simulation needs more than 2^32 link uses at once: the cluster and its collectives are "
                          "too large for the fluid model");
        r.uses_at = static_cast<uint32_t>(use_pool_.size());
        use_pool_.resize(use_pool_.size() + cap);
      }
      r.uses_capacity_log2 = k;
    }
    UseRec* const out = n <= kInlineUses ? r.inline_uses : use_pool_.data() + r.uses_at;
    bool alone = true;  // every constraint it uses is idle and unwatched
    for (const Use& u : uses) {
      if (u.weight <= 0.0) continue;
      SIM_ASSERT(u.constraint.value < constraints_.size(), "activity uses an unknown constraint");
      auto& c = constraints_[u.constraint.value];
      alone = alone && c.users.empty() && !c.watched;
      out[r.num_uses] = UseRec{u.constraint.value, static_cast<uint32_t>(c.users.size()), u.weight};
      if (c.users.empty()) in_use_[u.constraint.value >> 6] |= uint64_t{1} << (u.constraint.value & 63);
      c.users.push_back(UserRef{a, r.num_uses});
      ++r.num_uses;
    }
    if (alone && r.num_uses > 0) {
      // Its component is itself alone: solve it now, as settle would (solve_component's
      // one-activity case), instead of marking its constraints for a second visit at the settle.
      // A kernel following another on the same GPU then touches its two constraint records once;
      // at 131k GPUs the settle's visit, after every event of the timestamp, found them evicted.
      // Anything else joining or changing these constraints before the settle marks them dirty,
      // and the settle re-solves the component from the same start (its rate set at `now`).
      ++solves_;
      ++solved_activities_;
      double rate = r.bound;
      for (const UseRec& u : std::span<const UseRec>(out, r.num_uses))
        rate = std::min(rate, constraints_[u.constraint].effective / u.weight);
      apply_rate(a, rate);
    } else {
      for (const UseRec& u : std::span<const UseRec>(out, r.num_uses)) mark_dirty(u.constraint);
    }
  }
  if (r.num_uses == 0) {
    // Nothing to share: it runs at its bound (or finishes at once when unbounded or empty).
    bool instant = work <= 0.0 || !std::isfinite(rate_bound);
    r.rate = instant ? kUnbounded : rate_bound;
    Time done = instant ? sim_.now() : sim_.now() + Time::from_seconds_ceil(work / rate_bound);
    r.completion = sim_.schedule_at(done, handler_, a);
  }
  return ActivityId(a);
}

void FluidModel::detach(uint32_t a) {
  ActivityRec& r = activities_[a];
  for (const UseRec& u : uses(r)) {
    auto& users = constraints_[u.constraint].users;
    UserRef moved = users.back();
    users[u.pos] = moved;
    users.pop_back();
    if (moved.activity != a) use_data(activities_[moved.activity])[moved.use].pos = u.pos;
    if (users.empty()) in_use_[u.constraint >> 6] &= ~(uint64_t{1} << (u.constraint & 63));
    // An emptied constraint has nothing to re-solve; only a watched one has a load (now 0) to tell.
    if (!users.empty() || constraints_[u.constraint].watched) mark_dirty(u.constraint);
  }
  if (r.num_uses > kInlineUses) free_regions_[r.uses_capacity_log2].push_back(r.uses_at);
  r.num_uses = 0;
  r.live = false;
  --num_live_;
  if (!r.reserved) free_activities_.push_back(a);
}

void FluidModel::remove(uint32_t a) {
  ActivityRec& r = activities_[a];
  if (r.completion.valid()) sim_.cancel(r.completion);
  r.completion = EventId();
  detach(a);
}

void FluidModel::cancel(ActivityId id) {
  SIM_ASSERT(id.value < activities_.size() && activities_[id.value].live, "cancel of an activity that is not running");
  remove(id.value);
}

void FluidModel::fail(ActivityId id) {
  SIM_ASSERT(id.value < activities_.size() && activities_[id.value].live, "fail of an activity that is not running");
  const OwnerRec who = owners_[id.value];
  remove(id.value);
  if (who.owner) who.owner->on_activity_failed(id, who.tag);
}

double FluidModel::remaining(ActivityId id) const {
  const ActivityRec& r = activities_[id.value];
  if (!r.live) return 0.0;
  if (!std::isfinite(r.rate)) return 0.0;
  double left = r.remaining - r.rate * (sim_.now() - r.last_update).seconds();
  return left > 0.0 ? left : 0.0;
}

void FluidModel::on_event(uint32_t a) {
  ActivityRec& r = activities_[a];
  SIM_ASSERT(r.live, "completion event for a finished activity");
  r.completion = EventId();
  r.remaining = 0.0;
  ActivityOwner* owner = owners_[a].owner;
  uint64_t tag = owners_[a].tag;
  detach(a);
  if (owner) owner->on_activity_done(ActivityId(a), tag);
}

// Prefetch distances in settle's walk of the dirty list: the constraint record kDirtyAhead
// entries ahead, then, once it has arrived, its users' activity records kUsersAhead ahead.
// All events at one timestamp run before the settle, and at 131k GPUs the data-parallel replicas
// move in lockstep, so a timestamp's events dirty thousands of constraints whose lines are gone
// from the near caches when settle comes back to them (the walk's loads were most of its time).
static constexpr size_t kDirtyAhead = 16, kUsersAhead = 8;

void FluidModel::settle() {
  ++epoch_;
  // Index loop: solving never adds dirty constraints, but stay safe against reallocation.
  for (size_t i = 0; i < dirty_.size(); ++i) {
    if (i + kDirtyAhead < dirty_.size()) __builtin_prefetch(&constraints_[dirty_[i + kDirtyAhead]]);
    if (i + kUsersAhead < dirty_.size()) {
      const ConstraintRec& ahead = constraints_[dirty_[i + kUsersAhead]];
      if (ahead.users.size() <= UserList::kInline)  // a GPU's pool or a quiet link: its few users
        for (const UserRef& u : ahead.users) prefetch_activity(u.activity);
    }
    uint32_t c = dirty_[i];
    auto& rec = constraints_[c];
    // Cleared here, not in a second pass over the list (each record one more miss at 131k
    // GPUs). Nothing marks a constraint dirty while settling (solving and the watcher's counters
    // change no capacity or user), so the list is complete when the walk starts.
    rec.dirty = false;
    if (rec.mark == epoch_) continue;
    if (rec.users.empty()) {
      // Emptied: nothing to share; only its load (now 0) changes.
      rec.mark = epoch_;
      if (rec.watched && settings_[c].told_load != 0.0) {
        settings_[c].told_load = 0.0;
        if (watcher_) watcher_->on_load_change(ConstraintId(c), sim_.now(), 0.0, rec.effective);
      }
      continue;
    }
    solve_component(c);
  }
  dirty_.clear();
}

void FluidModel::solve_component(uint32_t seed) {
  ++solves_;
  comp_constraints_.clear();
  comp_activities_.clear();
  // Collect the connected component: constraints linked through shared activities.
  stack_.clear();
  stack_.push_back(seed);
  constraints_[seed].mark = epoch_;
  while (!stack_.empty()) {
    uint32_t c = stack_.back();
    stack_.pop_back();
    comp_constraints_.push_back(c);
    for (UserRef ur : constraints_[c].users) {
      uint32_t a = ur.activity;
      ActivityRec& ar = activities_[a];
      if (ar.mark == epoch_) continue;
      ar.mark = epoch_;
      comp_activities_.push_back(a);
      for (const UseRec& u : uses(ar)) {
        if (constraints_[u.constraint].mark != epoch_) {
          constraints_[u.constraint].mark = epoch_;
          stack_.push_back(u.constraint);
        }
      }
    }
  }
  solved_activities_ += comp_activities_.size();
  if (comp_activities_.size() == 1) {
    // One activity alone: its rate is the tightest of its bound and capacity / weight on each
    // constraint, which is what progressive filling gives; skip the general machinery.
    uint32_t a = comp_activities_[0];
    ActivityRec& ar = activities_[a];
    double rate = ar.bound;
    for (const UseRec& u : uses(ar)) {
      const auto& c = constraints_[u.constraint];
      rate = std::min(rate, c.effective / u.weight);
    }
    apply_rate(a, rate);
    notify_watchers();
    return;
  }

  // Progressive filling. Every unfrozen activity runs at a common rate `lambda`; a constraint with
  // remaining capacity R and unfrozen weight W saturates at lambda = R / W (R net of frozen load).
  // Repeatedly take the smallest of those shares and of the unfrozen activities' bounds; freeze.
  heap_.clear();
  for (size_t i = 0; i < comp_constraints_.size(); ++i) {
    auto& c = constraints_[comp_constraints_[i]];
    c.remaining = c.effective;
    c.weight_sum = 0.0;
  }
  size_t unfixed = 0;
  for (uint32_t a : comp_activities_) {
    ActivityRec& ar = activities_[a];
    ar.fixed = false;
    ar.new_rate = 0.0;
    ++unfixed;
    for (const UseRec& u : uses(ar)) constraints_[u.constraint].weight_sum += u.weight;
  }
  // Bounded activities sorted by bound (stable on index for determinism).
  std::vector<uint32_t>& bounded = bounded_;
  bounded.clear();
  for (uint32_t a : comp_activities_)
    if (std::isfinite(activities_[a].bound)) bounded.push_back(a);
  std::sort(bounded.begin(), bounded.end(), [&](uint32_t x, uint32_t y) {
    double bx = activities_[x].bound, by = activities_[y].bound;
    return bx < by || (bx == by && x < y);
  });
  size_t next_bounded = 0;

  // Heap of (share, constraint); entries go stale when a constraint's weight or capacity changes,
  // detected by comparing the stored share with the current one.
  auto share_of = [&](uint32_t c) {
    const auto& r = constraints_[c];
    return std::max(r.remaining, 0.0) / r.weight_sum;
  };
  auto cmp = [](const std::pair<double, uint32_t>& x, const std::pair<double, uint32_t>& y) {
    return x.first > y.first || (x.first == y.first && x.second > y.second);
  };
  auto push = [&](uint32_t c) {
    if (constraints_[c].weight_sum > kEps) {
      heap_.emplace_back(share_of(c), c);
      std::push_heap(heap_.begin(), heap_.end(), cmp);
    }
  };
  for (uint32_t c : comp_constraints_) push(c);

  auto freeze = [&](uint32_t a, double rate) {
    ActivityRec& ar = activities_[a];
    ar.fixed = true;
    ar.new_rate = rate;
    --unfixed;
    for (const UseRec& u : uses(ar)) {
      auto& c = constraints_[u.constraint];
      c.remaining -= u.weight * rate;
      c.weight_sum -= u.weight;
      if (c.weight_sum < kEps) c.weight_sum = 0.0;
    }
  };

  while (unfixed > 0) {
    // Drop stale heap entries.
    while (!heap_.empty()) {
      auto [s, c] = heap_.front();
      const auto& r = constraints_[c];
      if (r.weight_sum > kEps && s == share_of(c)) break;
      std::pop_heap(heap_.begin(), heap_.end(), cmp);
      heap_.pop_back();
    }
    while (next_bounded < bounded.size() && activities_[bounded[next_bounded]].fixed) ++next_bounded;
    double best_bound = next_bounded < bounded.size() ? activities_[bounded[next_bounded]].bound : kUnbounded;
    if (heap_.empty() && !std::isfinite(best_bound)) break;  // only unbounded, unconstrained left
    if (heap_.empty() || best_bound <= heap_.front().first) {
      uint32_t a = bounded[next_bounded++];
      freeze(a, best_bound);
      for (const UseRec& u : uses(activities_[a])) push(u.constraint);
      continue;
    }
    auto [share, c] = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    heap_.pop_back();
    // Freeze every unfrozen user of the bottleneck at the share (membership does not change).
    for (UserRef ur : constraints_[c].users) {
      uint32_t a = ur.activity;
      if (activities_[a].fixed) continue;
      freeze(a, share);
      for (const UseRec& u : uses(activities_[a]))
        if (u.constraint != c) push(u.constraint);
    }
  }

  for (uint32_t a : comp_activities_) {
    ActivityRec& ar = activities_[a];
    apply_rate(a, ar.fixed ? ar.new_rate : kUnbounded);
  }
  notify_watchers();
}

double FluidModel::current_load(const ConstraintRec& r) const {
  double load = 0.0;
  for (UserRef ur : r.users) {
    const ActivityRec& ar = activities_[ur.activity];
    load += uses(ar)[ur.use].weight * ar.rate;
  }
  return load;
}

double FluidModel::load(ConstraintId c) const { return current_load(constraints_[c.value]); }

void FluidModel::notify_watchers() {
  // Watchers, for the watched constraints of the component whose load changed.
  for (uint32_t c : comp_constraints_) {
    const auto& r = constraints_[c];
    if (!r.watched) continue;
    const double load = current_load(r);
    if (load != settings_[c].told_load) {
      settings_[c].told_load = load;
      if (watcher_) watcher_->on_load_change(ConstraintId(c), sim_.now(), load, r.effective);
    }
  }
}

void FluidModel::apply_rate(uint32_t a, double new_rate) {
  ActivityRec& r = activities_[a];
  Time now = sim_.now();
  if (new_rate == r.rate && r.last_update == now) {
    if (!r.completion.valid()) schedule_completion(a);
    return;
  }
  if (new_rate == r.rate && r.completion.valid()) return;  // unchanged: its completion stands
  // Bring progress up to date under the old rate, then switch.
  if (std::isfinite(r.rate)) {
    r.remaining -= r.rate * (now - r.last_update).seconds();
    if (r.remaining < 0.0) r.remaining = 0.0;
  }
  r.last_update = now;
  r.rate = new_rate;
  schedule_completion(a);
}

void FluidModel::schedule_completion(uint32_t a) {
  ActivityRec& r = activities_[a];
  Time now = sim_.now();
  if (r.rate <= 0.0) {
    if (r.completion.valid()) sim_.cancel(r.completion);
    r.completion = EventId();
    return;
  }
  Time done = std::isfinite(r.rate) ? now + Time::from_seconds_ceil(r.remaining / r.rate) : now;
  if (r.completion.valid())
    sim_.reschedule(r.completion, done);
  else
    r.completion = sim_.schedule_at(done, handler_, a);
}

void FluidModel::add_namer(ConstraintId first, uint32_t count, const ConstraintNamer* namer) {
  namers_.push_back(NamerRange{first.value, count, namer});
}

void FluidModel::remove_namer(const ConstraintNamer* namer) {
  std::erase_if(namers_, [namer](const NamerRange& r) { return r.namer == namer; });
}

std::string FluidModel::name(ConstraintId c) const {
  if (auto it = names_.find(c.value); it != names_.end()) return it->second;
  for (const NamerRange& r : namers_)
    if (c.value >= r.first && c.value - r.first < r.count) return r.namer->constraint_name(c);
  std::string id = "#";
  id += std::to_string(c.value);
  return id;
}

void FluidModel::describe_stalled(std::string& out, size_t max_lines) const {
  size_t lines = 0;
  for (size_t a = 0; a < activities_.size() && lines < max_lines; ++a) {
    const ActivityRec& r = activities_[a];
    if (!r.live || r.rate > 0.0) continue;
    const OwnerRec& o = owners_[a];
    out += "  " + (o.owner ? o.owner->describe_activity(o.tag) : "activity tagged " + std::to_string(o.tag)) +
           " cannot progress:";
    for (const UseRec& u : uses(r)) {
      const Settings& s = settings_[u.constraint];
      if (!s.up || constraints_[u.constraint].effective <= 0.0)
        out += " constraint '" + name(ConstraintId(u.constraint)) + "' is " + (s.up ? "at zero capacity" : "down");
    }
    out += "\n";
    ++lines;
  }
}

}  // namespace sim
