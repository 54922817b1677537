// sim/fluid.h: the fluid resource model shared by GPUs and networks.
//
// A *constraint* is anything with a rate: an SM pool (FLOP/s), an HBM channel (bytes/s), one
// direction of a link (bytes/s). It has a capacity, an up/down state and a speed factor; its
// effective capacity is capacity * speed_factor when up, 0 when down.
// An *activity* consumes rate: it has `work` units to do, an optional rate bound, and uses
// several constraints with a weight each: at rate r it loads constraint c with weight_c * r.
//   - a network flow: work = bytes, weight 1 on every link of its route;
//   - a kernel: work = 1 (the whole kernel), weight FLOPs on the SM pool and bytes on HBM, so
//     alone it runs at the roofline rate min(P/F, BW/B) and takes max(F/P, B/BW).
// Rates are max-min fair (progressive filling): all unfrozen activities grow at one common rate
// until a constraint saturates (its activities freeze) or an activity reaches its bound.
// Solving is batched: changes mark constraints dirty and `settle()` (called by Simulation once
// per timestamp, after every event at that time ran) re-solves only the connected components
// that contain a dirty constraint, then moves the completion events of activities whose rate
// changed. One shortcut: an activity started on constraints that are all idle and unwatched is
// a component by itself and is solved at its start (what settle would compute); anything that
// joins or changes those constraints before the settle marks them dirty as usual. Progress is lazy: remaining work is brought up to date only when a rate changes.
// Completion times round up to the next nanosecond, so an activity never ends before its work.
//
// Failure is model state, not an exception. A constraint taken down (`set_up(c, false, policy)`)
// has effective capacity 0 until it is brought up again; what happens to its users depends on the
// policy: kStall (the default) leaves them in place at rate 0 from the next settle on (bringing
// the constraint up resumes them with the work they had left; if it never comes up they show in
// the deadlock report), kFail removes them at once, one after another: each is detached from all
// its constraints, its completion event is cancelled, its slot is freed as a finished one's, and
// then its owner's on_activity_failed runs. Activities started on the constraint while it is
// down stall. `fail(a)` fails one activity the same way; `cancel(a)` removes one without telling
// its owner. The survivors are re-solved at the next settle.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/event_handler.h"
#include "sim/huge_pages.h"
#include "sim/ids.h"
#include "sim/time.h"

namespace sim {

class Simulation;

struct Use {
  ConstraintId constraint;
  double weight = 1.0;
};

// Told when one of its activities has finished all its work (during event processing, so it may
// start new activities at once; they join the next settle at the same timestamp).
class ActivityOwner {
 public:
  virtual ~ActivityOwner() = default;
  virtual void on_activity_done(ActivityId id, uint64_t tag) = 0;
  // Told when one of its activities failed (FluidModel::fail, or a constraint it used was taken
  // down with DownPolicy::kFail); the activity is already gone (its id is no longer active). It
  // may start or cancel activities. Owners that can see failures override this; the default
  // stops the program, since a failure nobody handles would leave the model silently wrong.
  virtual void on_activity_failed(ActivityId id, uint64_t tag);
  // A hint that the activity tagged `tag` will finish soon: an owner may prefetch the state its
  // on_activity_done will touch. Must not change anything.
  virtual void prefetch_done(uint64_t tag) const { (void)tag; }
  // What the activity tagged `tag` is, for deadlock reports ("a kernel of rank 3 on stream
  // 'compute'"); the default names the tag.
  virtual std::string describe_activity(uint64_t tag) const { return "activity tagged " + std::to_string(tag); }
};

// What a constraint taken down does to the activities using it (see the header comment).
enum class DownPolicy : uint8_t { kStall, kFail };

// Told when a constraint's load (sum of weight * rate over its activities) changes at a settle.
class ConstraintWatcher {
 public:
  virtual ~ConstraintWatcher() = default;
  virtual void on_load_change(ConstraintId c, Time now, double load, double effective_capacity) = 0;
};

inline constexpr double kUnbounded = std::numeric_limits<double>::infinity();

// Names constraints on demand (for reports), so that a million-link cluster keeps no string per
// constraint: the owner of a block of constraints answers for them (FluidModel::add_namer).
class ConstraintNamer {
 public:
  virtual ~ConstraintNamer() = default;
  virtual std::string constraint_name(ConstraintId c) const = 0;
};

class FluidModel : public EventHandler {
 public:
  explicit FluidModel(Simulation& sim);
  FluidModel(const FluidModel&) = delete;
  FluidModel& operator=(const FluidModel&) = delete;

  // --- constraints -----------------------------------------------------------------------------
  // `name` is kept only when not empty (small models, tests); big owners name theirs on demand.
  ConstraintId add_constraint(double capacity, std::string name = {});
  // Room for `more` constraints beyond those there are (one allocation for a big cluster).
  void reserve_constraints(size_t more);
  // Constraints [first, first + count) are named by `namer` (not owned; remove_namer before it
  // goes away).
  void add_namer(ConstraintId first, uint32_t count, const ConstraintNamer* namer);
  void remove_namer(const ConstraintNamer* namer);
  void set_capacity(ConstraintId c, double capacity);
  // Takes a constraint down (effective capacity 0) or brings it up. Going down with kFail fails
  // every activity that uses it now; `policy` does nothing when `up`.
  void set_up(ConstraintId c, bool up, DownPolicy policy = DownPolicy::kStall);
  void set_speed_factor(ConstraintId c, double factor);
  double effective_capacity(ConstraintId c) const { return constraints_[c.value].effective; }
  // Whether a running activity uses it: one bit per constraint, kept apart from the records, so
  // that asking touches no record (an owner may then put off changing an idle constraint's
  // capacity until it starts something there, without reading the record first).
  bool in_use(ConstraintId c) const { return (in_use_[c.value >> 6] >> (c.value & 63)) & 1u; }
  bool is_up(ConstraintId c) const { return settings_[c.value].up; }
  // Sum of weight * rate over the activities using it now, at their rates as of the last settle
  // (computed on demand, O(users): for tests and reports, not hot paths).
  double load(ConstraintId c) const;
  // Its name: as given, else from its namer, else "#<id>".
  std::string name(ConstraintId c) const;
  size_t num_constraints() const { return constraints_.size(); }
  // Watches every constraint whose `watched` flag is set (not owned).
  void set_watcher(ConstraintWatcher* w) { watcher_ = w; }
  // The watcher is told of changes from the current load on (not of the load it already has).
  void watch(ConstraintId c, bool on = true) {
    constraints_[c.value].watched = on;
    if (on) settings_[c.value].told_load = current_load(constraints_[c.value]);
  }

  // --- activities ------------------------------------------------------------------------------
  // Starts an activity now; its rate is decided at the next settle. work must be >= 0; an activity
  // with no constraint use and no bound, or with zero work, completes at the next settle. It takes
  // a free slot, or `slot` when given: one of reserve_slots', not running now.
  static constexpr uint32_t kAnySlot = 0xFFFFFFFFu;
  ActivityId start(double work, std::span<const Use> uses, double rate_bound, ActivityOwner* owner, uint64_t tag,
                   uint32_t slot = kAnySlot);
  // Keeps `n` new activity slots out of the free list, for starts that name them; returns the
  // first (they are consecutive). An owner that runs one activity at a time per stream gives each
  // stream its own slot, laid out in the order its events visit them: at 131k GPUs a slot taken
  // from the free list is a random cache miss (its record and its owner), a stream's own slot is
  // the next line of a sequential walk.
  uint32_t reserve_slots(uint32_t n);
  // Removes an unfinished activity (and its completion event) without telling its owner.
  void cancel(ActivityId a);
  // Removes an unfinished activity as cancel does, then tells its owner on_activity_failed (an
  // activity without owner is just removed).
  void fail(ActivityId a);
  double rate(ActivityId a) const { return activities_[a.value].rate; }
  double remaining(ActivityId a) const;  // as of now
  bool active(ActivityId a) const { return activities_[a.value].live; }
  size_t num_active() const { return num_live_; }

  // --- engine hooks ----------------------------------------------------------------------------
  void settle();                       // re-solve dirty components; called by Simulation
  void on_event(uint32_t index) override;  // completion event of activity `index` fired
  bool has_dirty() const { return !dirty_.empty(); }
  HandlerId handler() const { return handler_; }
  // Software pipelining across completion events (EventHandler::prefetch, from the run loop's
  // look at the queue): at 16k GPUs an activity's record, its owner and its constraints are cache
  // misses, so stage 0 fetches activity `a`'s record and owner, and the last stage, for the same
  // activity, its constraints' records and whatever its owner's on_activity_done will touch.
  // Neither changes anything (a stale or reused index just fetches a line for nothing).
  void prefetch(uint32_t a, int stage) const override {
    if (a >= activities_.size()) return;
    if (stage == 0) {
      prefetch_activity(a);
      __builtin_prefetch(&owners_[a]);
      return;
    }
    if (stage != kPrefetchStages - 1) return;
    const ActivityRec& r = activities_[a];
    if (!r.live) return;
    for (const UseRec& u : uses(r)) __builtin_prefetch(&constraints_[u.constraint]);
    if (owners_[a].owner) owners_[a].owner->prefetch_done(owners_[a].tag);
  }
  // Constraint c's record (for an owner that is about to start an activity on it; a hint).
  void prefetch_constraint(uint32_t c) const {
    if (c < constraints_.size()) __builtin_prefetch(&constraints_[c], 1);
  }
  // Appends one line per live activity that cannot progress (rate 0), for deadlock reports.
  void describe_stalled(std::string& out, size_t max_lines) const;
  uint64_t solves() const { return solves_; }
  uint64_t solved_activities() const { return solved_activities_; }

 private:
  // An activity's use of a constraint, seen from the constraint: which activity, which of its uses.
  struct UserRef {
    uint32_t activity;
    uint32_t use;
  };
  // A constraint's users: up to kInline in the record itself (a GPU's SM pool and HBM have one or
  // two: its kernel, sometimes two streams'), more on the heap. Starting and finishing a kernel
  // then touch the two constraint records and no separate lists (Llama 3 405B step on 16k GPUs,
  // expanded: see the commit that made it). 24 bytes, as a std::vector.
  class UserList {
   public:
    static constexpr uint32_t kInline = 2;
    UserList() = default;
    UserList(UserList&& o) noexcept : size_(o.size_), cap_(o.cap_) {
      if (cap_ > kInline) {
        heap_ = o.heap_;
        o.cap_ = kInline;
        o.size_ = 0;
        std::construct_at(&o.inline_[0]);  // the source's inline array is its active member again
      } else {
        for (uint32_t i = 0; i < size_; ++i) inline_[i] = o.inline_[i];
      }
    }
    UserList& operator=(UserList&&) = delete;
    UserList(const UserList&) = delete;
    UserList& operator=(const UserList&) = delete;
    ~UserList() {
      if (cap_ > kInline) delete[] heap_;
    }
    bool empty() const { return size_ == 0; }
    uint32_t size() const { return size_; }
    UserRef* begin() { return cap_ > kInline ? heap_ : inline_; }
    UserRef* end() { return begin() + size_; }
    const UserRef* begin() const { return cap_ > kInline ? heap_ : inline_; }
    const UserRef* end() const { return begin() + size_; }
    UserRef& operator[](uint32_t i) { return begin()[i]; }
    UserRef& back() { return begin()[size_ - 1]; }
    void pop_back() { --size_; }
    void push_back(UserRef u) {
      if (size_ == cap_) grow();
      begin()[size_++] = u;
    }

   private:
    void grow() {
      const uint32_t cap = cap_ * 2;
      auto* p = new UserRef[cap];
      const UserRef* from = begin();
      for (uint32_t i = 0; i < size_; ++i) p[i] = from[i];
      if (cap_ > kInline) delete[] heap_;
      heap_ = p;
      cap_ = cap;
    }
    uint32_t size_ = 0;
    uint32_t cap_ = kInline;
    union {
      UserRef inline_[kInline] = {};
      UserRef* heap_;
    };
  };
  static_assert(sizeof(UserList) == 24);
  // What the solver touches, in one cache line: at 16k GPUs the constraints far outgrow the
  // caches and are touched in random order, so each record costs one miss, not two (Llama 3 405B
  // step on 16k GPUs: -15%). Capacity is here too, so that a capacity change (a communication
  // kernel starting on a GPU) touches only this line while the constraint is `plain` (up, speed
  // 1); speed, up and the name live in settings_ and names_, read only when they change or for
  // reports, and so does the load last told to a watcher, read at each solve of a watched
  // constraint. Loads of unwatched constraints are not kept (load() sums them on demand).
  struct alignas(64) ConstraintRec {
    double effective = 0.0;  // capacity * speed when up, else 0
    double capacity = 0.0;
    UserList users;  // activities using this constraint (unordered)
    // solver scratch
    double remaining = 0.0;
    double weight_sum = 0.0;
    uint32_t mark = 0;
    bool watched = false;
    bool dirty = false;
    bool plain = true;  // up and speed 1: effective == capacity, settings_ need not be read
  };
  static_assert(sizeof(ConstraintRec) == 64);
  struct Settings {
    double speed = 1.0;
    double told_load = 0.0;  // watched constraints: the load last told to the watcher
    bool up = true;
  };
  struct UseRec {  // 16 bytes
    uint32_t constraint;
    uint32_t pos;  // index of this activity in constraint's users
    double weight;
  };
  // Up to kInlineUses uses (a kernel's SM pool and HBM, a flow inside a node) sit in the record
  // itself, so starting, solving and detaching an activity touch one 128-byte record, not a
  // record and a separate list (Llama 3 70B FSDP on 1,024 GPUs: about -9%); longer routes take a
  // region of use_pool_ of 2^k uses while they run and give it back when they end (a free list per
  // size, last freed first, so the region taken is likely cached; regions that stayed with their
  // slot left 50 MB of a 126 MB heap unused at 16k GPUs). Owner and tag live in owners_, read once,
  // at completion.
  static constexpr uint16_t kInlineUses = 4;
  struct alignas(64) ActivityRec {
    double remaining = 0.0;
    double rate = 0.0;
    double bound = kUnbounded;
    double new_rate = 0.0;  // solver scratch
    Time last_update;
    EventId completion;
    uint32_t mark = 0;  // solver scratch
    uint32_t uses_at = 0;  // the pool region, when num_uses > kInlineUses
    uint32_t num_uses = 0;
    uint8_t uses_capacity_log2 = 0;  // the pool region holds 2^this uses (when num_uses > kInlineUses)
    bool live = false;
    bool fixed = false;  // solver scratch
    bool reserved = false;  // a reserve_slots slot: never on the free list
    UseRec inline_uses[kInlineUses];
  };
  static_assert(sizeof(ActivityRec) == 128);
  struct OwnerRec {
    ActivityOwner* owner = nullptr;
    uint64_t tag = 0;
  };
  // Both lines of an activity's record (a hint; `a` must be a slot).
  void prefetch_activity(uint32_t a) const {
    const char* p = reinterpret_cast<const char*>(&activities_[a]);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + 64, 1);
  }
  UseRec* use_data(ActivityRec& r) { return r.num_uses <= kInlineUses ? r.inline_uses : use_pool_.data() + r.uses_at; }
  std::span<UseRec> uses(ActivityRec& r) { return {use_data(r), r.num_uses}; }
  std::span<const UseRec> uses(const ActivityRec& r) const {
    return {r.num_uses <= kInlineUses ? r.inline_uses : use_pool_.data() + r.uses_at, r.num_uses};
  }

  void mark_dirty(uint32_t c);
  void detach(uint32_t a);
  void remove(uint32_t a);  // cancels the completion event, then detaches
  void fail_users(uint32_t c);
  void solve_component(uint32_t seed_constraint);
  void apply_rate(uint32_t a, double new_rate);
  void notify_watchers();  // of the watched constraints of the component just solved
  void schedule_completion(uint32_t a);

  Simulation& sim_;
  HandlerId handler_;
  void set_effective(uint32_t c);  // from capacity and settings_; marks it dirty if used
  double current_load(const ConstraintRec& r) const;

  BigVector<ConstraintRec> constraints_;
  BigVector<Settings> settings_;  // per constraint
  std::vector<uint64_t> in_use_;  // per constraint, a bit: its users are not empty
  std::unordered_map<uint32_t, std::string> names_;  // the constraints given a name
  struct NamerRange {
    uint32_t first, count;
    const ConstraintNamer* namer;
  };
  std::vector<NamerRange> namers_;
  BigVector<ActivityRec> activities_;
  BigVector<OwnerRec> owners_;    // per activity slot
  BigVector<UseRec> use_pool_;    // the running activities' uses regions, and free ones
  std::array<std::vector<uint32_t>, 33> free_regions_;  // [k]: free regions of 2^k uses
  std::vector<uint32_t> free_activities_;
  std::vector<uint32_t> dirty_;
  std::vector<uint32_t> unconstrained_;  // new activities with no constraint use
  size_t num_live_ = 0;
  ConstraintWatcher* watcher_ = nullptr;
  uint32_t epoch_ = 0;
  uint64_t solves_ = 0;
  uint64_t solved_activities_ = 0;
  // solver scratch, kept to avoid allocation
  std::vector<uint32_t> comp_constraints_;
  std::vector<uint32_t> comp_activities_;
  std::vector<uint32_t> stack_;
  std::vector<std::pair<double, uint32_t>> heap_;
  std::vector<uint32_t> bounded_;
  // The users of a constraint failing with kFail, snapshot before their owners run (which may start
  // or cancel activities, or fail other constraints: each call uses the part past its own start).
  std::vector<std::pair<uint32_t, OwnerRec>> failing_;
};

}  // namespace sim
