// Tests of the fluid resource model: hand-solved max-min systems, the roofline of a kernel,
// progress under rate changes, stalls and deadlock reports, failures (constraints down with
// kFail, fail(id)), and seeded property tests (feasibility, bounds, max-min optimality, work
// conservation).
#include "sim/fluid.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <functional>
#include <random>
#include <vector>

#include "sim/simulation.h"

namespace sim {
namespace {

// Records the completion time of every activity by tag.
class Recorder : public ActivityOwner {
 public:
  explicit Recorder(Simulation& s) : sim_(s) {}
  void on_activity_done(ActivityId, uint64_t tag) override {
    if (done.size() <= tag) done.resize(tag + 1, Time::infinite());
    done[tag] = sim_.now();
  }
  std::vector<Time> done;

 private:
  Simulation& sim_;
};

TEST(FluidModel, SingleFlowTakesWorkOverCapacity) {
  Simulation s(1);
  Recorder rec(s);
  auto link = s.fluid().add_constraint(100.0);  // 100 B/s
  Use u{link, 1.0};
  s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 0);
  auto r = s.run();
  EXPECT_FALSE(r.deadlocked);
  EXPECT_EQ(rec.done[0], Time::sec(10));  // 1000 B / 100 B/s
}

// A reserved slot runs the activities started in it, one after another, and shares like any
// other; free-list starts never take it, even after it finished.
TEST(FluidModel, ReservedSlotsRunWhatIsStartedInThemAndStayOffTheFreeList) {
  Simulation s(1);
  Recorder rec(s);
  auto link = s.fluid().add_constraint(100.0);
  Use u{link, 1.0};
  const uint32_t first = s.fluid().reserve_slots(2);
  ActivityId a = s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 0, first + 1);
  EXPECT_EQ(a.value, first + 1);
  ActivityId b = s.fluid().start(500.0, {&u, 1}, kUnbounded, &rec, 1);  // a free-list start
  EXPECT_NE(b.value, first);
  EXPECT_NE(b.value, first + 1);
  s.run();
  // As TwoFlowsShareThenTheSurvivorSpeedsUp: 50 B/s each until flow 1 ends at 10 s, then flow 0's
  // last 500 B at 100 B/s: 15 s.
  EXPECT_EQ(rec.done[1], Time::sec(10));
  EXPECT_EQ(rec.done[0], Time::sec(15));
  // Both slots are free now; the next free-list start takes neither reserved slot, and the
  // reserved one runs again: 200 B alone at 100 B/s, 2 s after 15 s.
  ActivityId c = s.fluid().start(100.0, {&u, 1}, kUnbounded, &rec, 2);
  EXPECT_EQ(c.value, b.value);
  EXPECT_EQ(s.fluid().start(200.0, {&u, 1}, kUnbounded, &rec, 3, first + 1).value, first + 1);
  s.run();
  // Sharing again: 50 B/s each, flow 2 ends after 2 s (17 s), flow 3 has 100 B left at 100 B/s: 18 s.
  EXPECT_EQ(rec.done[2], Time::sec(17));
  EXPECT_EQ(rec.done[3], Time::sec(18));
}

TEST(FluidModel, TwoFlowsShareThenTheSurvivorSpeedsUp) {
  Simulation s(1);
  Recorder rec(s);
  auto link = s.fluid().add_constraint(100.0);
  Use u{link, 1.0};
  s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 0);
  s.fluid().start(500.0, {&u, 1}, kUnbounded, &rec, 1);
  s.run();
  // Both at 50 B/s: flow 1 ends at 500/50 = 10 s with flow 0 at 500 B left; alone at 100 B/s it
  // needs 5 s more: 15 s.
  EXPECT_EQ(rec.done[1], Time::sec(10));
  EXPECT_EQ(rec.done[0], Time::sec(15));
}

TEST(FluidModel, ClassicMaxMinThreeFlowsTwoLinks) {
  Simulation s(1);
  auto l1 = s.fluid().add_constraint(10.0);
  auto l2 = s.fluid().add_constraint(20.0);
  Use a[] = {{l1, 1.0}};
  Use b[] = {{l1, 1.0}, {l2, 1.0}};
  Use c[] = {{l2, 1.0}};
  auto fa = s.fluid().start(1e6, a, kUnbounded, nullptr, 0);
  auto fb = s.fluid().start(1e6, b, kUnbounded, nullptr, 1);
  auto fc = s.fluid().start(1e6, c, kUnbounded, nullptr, 2);
  s.fluid().settle();
  // l1 is the bottleneck at 10/2 = 5 for A and B; C gets what B leaves on l2: 20 - 5 = 15.
  EXPECT_DOUBLE_EQ(s.fluid().rate(fa), 5.0);
  EXPECT_DOUBLE_EQ(s.fluid().rate(fb), 5.0);
  EXPECT_DOUBLE_EQ(s.fluid().rate(fc), 15.0);
  EXPECT_DOUBLE_EQ(s.fluid().load(l1), 10.0);
  EXPECT_DOUBLE_EQ(s.fluid().load(l2), 20.0);
}

TEST(FluidModel, RateBoundLeavesTheRestToOthers) {
  Simulation s(1);
  auto l = s.fluid().add_constraint(10.0);
  Use u{l, 1.0};
  auto bounded = s.fluid().start(1e6, {&u, 1}, 3.0, nullptr, 0);
  auto free = s.fluid().start(1e6, {&u, 1}, kUnbounded, nullptr, 1);
  s.fluid().settle();
  // Fair share would be 5, but the first is capped at 3; the second takes 10 - 3 = 7.
  EXPECT_DOUBLE_EQ(s.fluid().rate(bounded), 3.0);
  EXPECT_DOUBLE_EQ(s.fluid().rate(free), 7.0);
}

TEST(FluidModel, KernelRunsAtTheRoofline) {
  Simulation s(1);
  Recorder rec(s);
  auto sm = s.fluid().add_constraint(1000.0);  // FLOP/s
  auto hbm = s.fluid().add_constraint(100.0);  // B/s
  // Compute-bound: 5000 FLOP and 200 B -> max(5000/1000, 200/100) = 5 s.
  Use k1[] = {{sm, 5000.0}, {hbm, 200.0}};
  s.fluid().start(1.0, k1, kUnbounded, &rec, 0);
  s.run();
  EXPECT_EQ(rec.done[0], Time::sec(5));
  // Memory-bound: 100 FLOP and 1000 B -> max(0.1, 10) = 10 s, starting at 5 s.
  Use k2[] = {{sm, 100.0}, {hbm, 1000.0}};
  s.fluid().start(1.0, k2, kUnbounded, &rec, 1);
  s.run();
  EXPECT_EQ(rec.done[1], Time::sec(15));
}

TEST(FluidModel, WeightedUseLoadsAConstraintMoreThanOnce) {
  Simulation s(1);
  auto l = s.fluid().add_constraint(90.0);
  Use heavy{l, 2.0};
  Use light{l, 1.0};
  auto h = s.fluid().start(1e6, {&heavy, 1}, kUnbounded, nullptr, 0);
  auto g = s.fluid().start(1e6, {&light, 1}, kUnbounded, nullptr, 1);
  s.fluid().settle();
  // Common rate r: 2r + r = 90 -> r = 30 for both; load 60 + 30.
  EXPECT_DOUBLE_EQ(s.fluid().rate(h), 30.0);
  EXPECT_DOUBLE_EQ(s.fluid().rate(g), 30.0);
}

// Halves a constraint's capacity when its event fires.
class CapacityChanger : public EventHandler {
 public:
  CapacityChanger(Simulation& s, ConstraintId c, double cap) : s_(s), c_(c), cap_(cap) { id = s.add_handler(this); }
  void on_event(uint32_t arg) override {
    if (arg == 0) s_.fluid().set_capacity(c_, cap_);
    if (arg == 1) s_.fluid().set_up(c_, false);
    if (arg == 2) s_.fluid().set_up(c_, true);
  }
  HandlerId id;

 private:
  Simulation& s_;
  ConstraintId c_;
  double cap_;
};

TEST(FluidModel, CapacityChangeMidFlightReschedulesCompletion) {
  Simulation s(1);
  Recorder rec(s);
  auto l = s.fluid().add_constraint(100.0);
  CapacityChanger ch(s, l, 50.0);
  s.schedule_at(Time::sec(5), ch.id, 0);
  Use u{l, 1.0};
  s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 0);
  s.run();
  // 500 B done in the first 5 s at 100 B/s; the other 500 B at 50 B/s take 10 s: 15 s.
  EXPECT_EQ(rec.done[0], Time::sec(15));
}

TEST(FluidModel, DownConstraintStallsAndResumes) {
  Simulation s(1);
  Recorder rec(s);
  auto l = s.fluid().add_constraint(100.0, "link a->b");
  CapacityChanger ch(s, l, 0.0);
  s.schedule_at(Time::sec(2), ch.id, 1);  // down at 2 s
  s.schedule_at(Time::sec(7), ch.id, 2);  // up at 7 s
  Use u{l, 1.0};
  s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 0);
  s.run();
  // 200 B by 2 s, nothing for 5 s, then 800 B at 100 B/s: 7 + 8 = 15 s.
  EXPECT_EQ(rec.done[0], Time::sec(15));
}

TEST(FluidModel, DownForeverIsReportedAsDeadlock) {
  Simulation s(1);
  Recorder rec(s);
  auto l = s.fluid().add_constraint(100.0, "nic 3 up");
  CapacityChanger ch(s, l, 0.0);
  s.schedule_at(Time::sec(1), ch.id, 1);
  Use u{l, 1.0};
  s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 42);
  auto r = s.run();
  EXPECT_TRUE(r.deadlocked);
  EXPECT_NE(r.deadlock_report.find("nic 3 up"), std::string::npos) << r.deadlock_report;
  EXPECT_NE(r.deadlock_report.find("activity tagged 42 cannot progress"), std::string::npos) << r.deadlock_report;
  EXPECT_NE(r.deadlock_report.find("down"), std::string::npos) << r.deadlock_report;
}

TEST(FluidModel, ZeroWorkAndUnconstrainedActivitiesFinishAtOnceOrAtTheirBound) {
  Simulation s(1);
  Recorder rec(s);
  auto l = s.fluid().add_constraint(100.0);
  Use u{l, 1.0};
  s.fluid().start(0.0, {&u, 1}, kUnbounded, &rec, 0);
  s.fluid().start(50.0, {}, 10.0, &rec, 1);  // a pure delay: 50 / 10 = 5 s
  s.run();
  EXPECT_EQ(rec.done[0], Time::zero());
  EXPECT_EQ(rec.done[1], Time::sec(5));
}

TEST(FluidModel, CancelFreesCapacityForOthers) {
  Simulation s(1);
  Recorder rec(s);
  auto l = s.fluid().add_constraint(100.0);
  Use u{l, 1.0};
  auto victim = s.fluid().start(1e9, {&u, 1}, kUnbounded, &rec, 0);
  s.fluid().start(1000.0, {&u, 1}, kUnbounded, &rec, 1);
  s.fluid().settle();
  EXPECT_DOUBLE_EQ(s.fluid().rate(victim), 50.0);
  s.fluid().cancel(victim);
  s.run();
  EXPECT_EQ(rec.done[1], Time::sec(10));  // alone from t=0: 1000 / 100
  EXPECT_EQ(rec.done[0], Time::infinite());
}

// in_use says whether some running activity uses the constraint, whichever way its users come
// and go: a start sets it, the last user's end, cancel or failure clears it. Constraints 0-69, so
// that the bits span two words; flow X on 65, flow Y on 65 and 3, flow Z on 64 (100 B/s each).
TEST(FluidModel, InUseFollowsTheUsers) {
  Simulation s(1);
  Recorder rec(s);
  std::vector<ConstraintId> c;
  for (int i = 0; i < 70; ++i) c.push_back(s.fluid().add_constraint(100.0));
  for (ConstraintId x : c) EXPECT_FALSE(s.fluid().in_use(x));
  Use x{c[65], 1.0};
  Use y[2] = {{c[65], 1.0}, {c[3], 1.0}};
  Use z{c[64], 1.0};
  s.fluid().start(1000.0, {&x, 1}, kUnbounded, &rec, 0);
  auto fy = s.fluid().start(1000.0, y, kUnbounded, &rec, 1);
  auto fz = s.fluid().start(1000.0, {&z, 1}, kUnbounded, nullptr, 2);  // no owner: fail just removes it
  for (int i = 0; i < 70; ++i) EXPECT_EQ(s.fluid().in_use(c[i]), i == 3 || i == 64 || i == 65) << i;
  s.fluid().cancel(fy);  // 65 still has X
  EXPECT_FALSE(s.fluid().in_use(c[3]));
  EXPECT_TRUE(s.fluid().in_use(c[65]));
  s.fluid().fail(fz);
  EXPECT_FALSE(s.fluid().in_use(c[64]));
  s.run();  // X ends at 10 s
  EXPECT_EQ(rec.done[0], Time::sec(10));
  for (ConstraintId i : c) EXPECT_FALSE(s.fluid().in_use(i));
}

// A freed activity slot is reused by the next start; when the new activity uses more constraints
// than the slot held before, its uses must not spill into another activity's. Up to 4 uses sit in
// the activity's record, more in a pool region per slot (5 and 6 uses: 8 places each, adjacent),
// so: slot 0 holds a flow over links 0-4, slot 1 one over links 5-10; slot 0 is then reused by a
// flow over links 11-19 (needs a bigger region), and at last by one over link 0 alone (back in the
// record). Link i carries 10 (i + 1) B/s. Worked by hand: each flow is alone on its links, so its
// rate is its tightest link, 10 (first + 1) B/s, and each of its links carries that rate.
TEST(FluidModel, ReusedSlotWithMoreUsesKeepsOtherActivitiesIntact) {
  Simulation s(1);
  FluidModel& f = s.fluid();
  std::vector<ConstraintId> l;
  for (int i = 0; i < 20; ++i) l.push_back(f.add_constraint(10.0 * (i + 1)));
  auto over = [&](int first, int last) {
    std::vector<Use> u;
    for (int i = first; i <= last; ++i) u.push_back(Use{l[i], 1.0});
    return u;
  };
  const std::vector<Use> ua = over(0, 4), ub = over(5, 10), uc = over(11, 19), ud = over(0, 0);
  auto a = f.start(1e9, ua, kUnbounded, nullptr, 0);
  auto b = f.start(1e9, ub, kUnbounded, nullptr, 1);
  f.settle();
  f.cancel(a);
  auto c = f.start(1e9, uc, kUnbounded, nullptr, 2);
  EXPECT_EQ(c.value, a.value) << "the freed slot is reused";
  f.settle();
  EXPECT_DOUBLE_EQ(f.rate(b), 60.0);
  EXPECT_DOUBLE_EQ(f.rate(c), 120.0);
  for (int i = 5; i <= 10; ++i) EXPECT_DOUBLE_EQ(f.load(l[i]), 60.0) << "link " << i;
  for (int i = 11; i <= 19; ++i) EXPECT_DOUBLE_EQ(f.load(l[i]), 120.0) << "link " << i;
  // Ending b must detach it from links 5-10 (its uses still name them) and leave c alone.
  f.cancel(b);
  f.settle();
  for (int i = 5; i <= 10; ++i) EXPECT_DOUBLE_EQ(f.load(l[i]), 0.0) << "link " << i;
  EXPECT_DOUBLE_EQ(f.rate(c), 120.0);
  f.cancel(c);
  auto d = f.start(1e9, ud, kUnbounded, nullptr, 3);
  EXPECT_EQ(d.value, c.value);
  f.settle();
  EXPECT_DOUBLE_EQ(f.rate(d), 10.0);
  EXPECT_DOUBLE_EQ(f.load(l[0]), 10.0);
  for (int i = 11; i <= 19; ++i) EXPECT_DOUBLE_EQ(f.load(l[i]), 0.0) << "link " << i;
}

// A constraint's user list holds two users in its record and grows to the heap beyond; removing
// users from the middle must keep the others' positions right. Ten flows share one 100 B/s link
// (10 B/s each); ending flows 1, 4 and 7 leaves seven at 100/7 B/s; then flows with 5, 6 and 9
// uses (pool regions of 8, 8 and 16 uses) start, end and start again, reusing freed regions: each
// alone on its own links of 10*(i+1) B/s runs at its slowest link's capacity.
TEST(FluidModel, UserListsAndUseRegionsSurviveGrowthAndReuse) {
  Simulation s(1);
  FluidModel& f = s.fluid();
  const ConstraintId shared = f.add_constraint(100.0);
  const ConstraintId pair = f.add_constraint(30.0);  // two users: its list stays in the record
  std::vector<ActivityId> flows;
  const Use one[] = {{shared, 1.0}};
  for (uint32_t i = 0; i < 10; ++i) flows.push_back(f.start(1e9, one, kUnbounded, nullptr, i));
  const Use on_pair[] = {{pair, 1.0}};
  const ActivityId p0 = f.start(1e9, on_pair, kUnbounded, nullptr, 10);
  const ActivityId p1 = f.start(1e9, on_pair, kUnbounded, nullptr, 11);
  f.settle();
  EXPECT_DOUBLE_EQ(f.rate(p0), 15.0);
  EXPECT_DOUBLE_EQ(f.load(pair), 30.0);
  for (ActivityId a : flows) EXPECT_DOUBLE_EQ(f.rate(a), 10.0);
  EXPECT_DOUBLE_EQ(f.load(shared), 100.0);
  for (uint32_t i : {1u, 4u, 7u}) f.cancel(flows[i]);
  f.settle();
  for (uint32_t i = 0; i < 10; ++i)
    if (i != 1 && i != 4 && i != 7) { EXPECT_DOUBLE_EQ(f.rate(flows[i]), 100.0 / 7.0) << "flow " << i; }
  EXPECT_DOUBLE_EQ(f.load(shared), 100.0);

  // Thousands more constraints: the records of `shared` (users on the heap) and `pair` (inline)
  // move when the array grows; both must keep their users.
  std::vector<ConstraintId> l;
  for (int i = 0; i < 30; ++i) l.push_back(f.add_constraint(10.0 * (i + 1)));
  for (int i = 0; i < 5000; ++i) f.add_constraint(1.0);
  EXPECT_DOUBLE_EQ(f.load(shared), 100.0);
  EXPECT_DOUBLE_EQ(f.load(pair), 30.0);
  f.cancel(p1);  // p0 alone on the pair: 30 B/s
  f.cancel(flows[0]);  // six left on the shared link: 100/6 B/s
  f.settle();
  EXPECT_DOUBLE_EQ(f.rate(p0), 30.0);
  EXPECT_DOUBLE_EQ(f.rate(flows[9]), 100.0 / 6.0);
  EXPECT_DOUBLE_EQ(f.load(shared), 100.0);
  auto route = [&](int first, int count) {
    std::vector<Use> u;
    for (int i = first; i < first + count; ++i) u.push_back(Use{l[i], 1.0});
    return u;
  };
  const std::vector<Use> r5 = route(0, 5), r6 = route(5, 6), r9 = route(11, 9);
  for (int round = 0; round < 3; ++round) {
    auto a = f.start(1e9, r5, kUnbounded, nullptr, 20);
    auto b = f.start(1e9, r6, kUnbounded, nullptr, 21);
    auto c = f.start(1e9, r9, kUnbounded, nullptr, 22);
    f.settle();
    EXPECT_DOUBLE_EQ(f.rate(a), 10.0) << "round " << round;   // link 0
    EXPECT_DOUBLE_EQ(f.rate(b), 60.0) << "round " << round;   // link 5
    EXPECT_DOUBLE_EQ(f.rate(c), 120.0) << "round " << round;  // link 11
    for (int i = 0; i < 20; ++i)
      EXPECT_DOUBLE_EQ(f.load(l[i]), i < 5 ? 10.0 : i < 11 ? 60.0 : 120.0) << "round " << round << " link " << i;
    // End them in a different order each round, so the regions come back in different orders.
    std::vector<ActivityId> order = {a, b, c};
    std::rotate(order.begin(), order.begin() + round, order.end());
    for (ActivityId x : order) f.cancel(x);
    f.settle();
    for (int i = 0; i < 20; ++i) EXPECT_DOUBLE_EQ(f.load(l[i]), 0.0) << "round " << round << " link " << i;
  }
}

TEST(FluidModel, ResolveTouchesOnlyTheChangedComponent) {
  Simulation s(1);
  // 1000 independent links, one flow each: 1000 components.
  std::vector<ConstraintId> links;
  for (int i = 0; i < 1000; ++i) links.push_back(s.fluid().add_constraint(100.0));
  for (int i = 0; i < 1000; ++i) {
    Use u{links[i], 1.0};
    s.fluid().start(1e9, {&u, 1}, kUnbounded, nullptr, i);
  }
  s.fluid().settle();
  uint64_t before = s.fluid().solved_activities();
  Use u{links[7], 1.0};
  s.fluid().start(1e9, {&u, 1}, kUnbounded, nullptr, 1000);
  s.fluid().settle();
  // Only link 7's component: its old flow and the new one.
  EXPECT_EQ(s.fluid().solved_activities() - before, 2u);
}

// --- failures ----------------------------------------------------------------------------------

// Runs scripted actions as events: at(t, f) runs f at simulated time t.
class Script : public EventHandler {
 public:
  explicit Script(Simulation& s) : s_(s) { id_ = s.add_handler(this); }
  void at(Time t, std::function<void()> f) {
    actions_.push_back(std::move(f));
    s_.schedule_at(t, id_, static_cast<uint32_t>(actions_.size() - 1));
  }
  void on_event(uint32_t i) override { actions_[i](); }

 private:
  Simulation& s_;
  HandlerId id_;
  std::vector<std::function<void()>> actions_;
};

// An activity that starts on idle constraints is solved at once (no settle visit); what joins or
// changes its constraints later in the same instant, or later on, must still re-solve it.

// Restarts a kernel (work 1, SM weight 1, HBM weight 1, bound 1) when one ends, `n` in all.
class KernelChain : public ActivityOwner {
 public:
  KernelChain(Simulation& s, ConstraintId sm, ConstraintId hbm, int n) : sim_(s), uses_{{{sm, 1.0}, {hbm, 1.0}}}, left_(n) {}
  void start() {
    --left_;
    sim_.fluid().start(1.0, uses_, 1.0, this, 0);
  }
  void on_activity_done(ActivityId, uint64_t) override {
    done.push_back(sim_.now());
    if (left_ > 0) start();
  }
  std::vector<Time> done;

 private:
  Simulation& sim_;
  std::array<Use, 2> uses_;
  int left_;
};

TEST(FluidModel, KernelsBackToBackShareWithAFlowThatJoinsMidway) {
  Simulation s(1);
  Script script(s);
  Recorder rec(s);
  auto sm = s.fluid().add_constraint(1.0);
  auto hbm = s.fluid().add_constraint(1.0);
  KernelChain chain(s, sm, hbm, 3);
  chain.start();
  Use f{hbm, 1.0};
  script.at(Time::ms(1500), [&] { s.fluid().start(1.0, {&f, 1}, kUnbounded, &rec, 0); });
  s.run();
  // Alone a kernel runs at its bound 1: kernel 1 ends at 1 s, kernel 2 starts at once. From 1.5 s
  // the flow shares the HBM: 2 rate <= 1, both at 0.5. Kernel 2 has 0.5 left: ends at 2.5 s, the
  // flow has 0.5 left; kernel 3 and the flow at 0.5 until the flow ends at 3.5 s; kernel 3 then
  // has 0.5 left at rate 1: 4 s.
  ASSERT_EQ(chain.done.size(), 3u);
  EXPECT_EQ(chain.done[0], Time::sec(1));
  EXPECT_EQ(chain.done[1], Time::ms(2500));
  EXPECT_EQ(chain.done[2], Time::sec(4));
  EXPECT_EQ(rec.done[0], Time::ms(3500));
}

TEST(FluidModel, AChangeInTheSameInstantReachesAnActivityStartedAlone) {
  Simulation s(1);
  Recorder rec(s);
  auto link = s.fluid().add_constraint(100.0);
  auto other = s.fluid().add_constraint(100.0);
  Use u{link, 1.0};
  Use v{other, 1.0};
  s.fluid().start(100.0, {&u, 1}, kUnbounded, &rec, 0);
  s.fluid().start(100.0, {&v, 1}, kUnbounded, &rec, 1);
  s.fluid().set_capacity(link, 25.0);  // before any settle: 100 B at 25 B/s
  s.fluid().set_up(other, false);      // down, stalled; brought up nowhere: never ends
  auto r = s.run();
  EXPECT_EQ(rec.done[0], Time::sec(4));
  EXPECT_EQ(rec.done.size(), 1u);
  EXPECT_TRUE(r.deadlocked);
}

// Records completions and failures by tag; `then` runs after a failure is recorded.
class FailRecorder : public ActivityOwner {
 public:
  explicit FailRecorder(Simulation& s) : sim_(s) {}
  void on_activity_done(ActivityId, uint64_t tag) override { set(done, tag); }
  void on_activity_failed(ActivityId id, uint64_t tag) override {
    EXPECT_FALSE(sim_.fluid().active(id)) << "a failed activity is gone when its owner hears of it";
    set(failed, tag);
    ++failures;
    if (then) then(tag);
  }
  Time done_at(uint64_t tag) const { return tag < done.size() ? done[tag] : Time::infinite(); }
  Time failed_at(uint64_t tag) const { return tag < failed.size() ? failed[tag] : Time::infinite(); }
  std::vector<Time> done, failed;
  int failures = 0;
  std::function<void(uint64_t)> then;

 private:
  void set(std::vector<Time>& v, uint64_t tag) {
    if (v.size() <= tag) v.resize(tag + 1, Time::infinite());
    v[tag] = sim_.now();
  }
  Simulation& sim_;
};

// The system of the tests below: a 100 B/s link shared by flow A (100 B, tag 0, link only) and
// flow B (200 B, tag 1, link and a 1000 B/s side constraint that only B uses). Both run at
// 50 B/s (the link is the bottleneck); at 0.5 s A has done 25 B and has 75 B left, B 175 B.
struct TwoFlows {
  explicit TwoFlows(Simulation& s) : rec(s), script(s) {
    FluidModel& f = s.fluid();
    link = f.add_constraint(100.0, "link");
    side = f.add_constraint(1000.0, "side of b");
    Use ua[] = {{link, 1.0}};
    Use ub[] = {{link, 1.0}, {side, 1.0}};
    a = f.start(100.0, ua, kUnbounded, &rec, 0);
    b = f.start(200.0, ub, kUnbounded, &rec, 1);
  }
  FailRecorder rec;
  Script script;
  ConstraintId link, side;
  ActivityId a, b;
};

TEST(FluidModelFailure, DownWithFailFailsTheUsersAndTheSurvivorSpeedsUp) {
  Simulation s(1);
  TwoFlows t(s);
  t.script.at(Time::ms(500), [&] { s.fluid().set_up(t.side, false, DownPolicy::kFail); });
  auto r = s.run();
  // B fails when the side goes down, at 0.5 s; A's 75 B left then run alone at 100 B/s: 0.75 s
  // more, done at 1.25 s.
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(t.rec.failures, 1);
  EXPECT_EQ(t.rec.failed_at(1), Time::ms(500));
  EXPECT_EQ(t.rec.done_at(1), Time::infinite());
  EXPECT_EQ(t.rec.done_at(0), Time::ms(1250));
  EXPECT_EQ(s.fluid().num_active(), 0u);
  EXPECT_DOUBLE_EQ(s.fluid().effective_capacity(t.side), 0.0) << "the constraint stays down";
  EXPECT_FALSE(s.fluid().in_use(t.side)) << "its failed user left it";
  EXPECT_DOUBLE_EQ(s.fluid().load(t.link), 0.0);
  EXPECT_DOUBLE_EQ(s.fluid().load(t.side), 0.0);
}

TEST(FluidModelFailure, DownWithStallLeavesTheUsersStalledAndReportsADeadlock) {
  Simulation s(1);
  TwoFlows t(s);
  t.script.at(Time::ms(500), [&] { s.fluid().set_up(t.side, false, DownPolicy::kStall); });
  auto r = s.run();
  // B stalls at 0.5 s (rate 0, 175 B left, no callback); A gets the whole link and ends at
  // 0.5 + 75 / 100 = 1.25 s; then the queue drains with B pending.
  EXPECT_EQ(t.rec.failures, 0);
  EXPECT_EQ(t.rec.done_at(0), Time::ms(1250));
  EXPECT_EQ(t.rec.done_at(1), Time::infinite());
  EXPECT_TRUE(s.fluid().active(t.b));
  EXPECT_DOUBLE_EQ(s.fluid().rate(t.b), 0.0);
  EXPECT_DOUBLE_EQ(s.fluid().remaining(t.b), 175.0);
  EXPECT_TRUE(r.deadlocked);
  EXPECT_EQ(r.end_time, Time::ms(1250));
  EXPECT_NE(r.deadlock_report.find("activity tagged 1 cannot progress"), std::string::npos) << r.deadlock_report;
  EXPECT_NE(r.deadlock_report.find("'side of b' is down"), std::string::npos) << r.deadlock_report;
}

TEST(FluidModelFailure, DownWithStallThenUpResumesWithTheWorkLeft) {
  Simulation s(1);
  TwoFlows t(s);
  t.script.at(Time::ms(500), [&] { s.fluid().set_up(t.side, false); });  // kStall is the default
  t.script.at(Time::sec(2), [&] { s.fluid().set_up(t.side, true); });
  auto r = s.run();
  // A ends at 1.25 s as above. B has 175 B left from 0.5 s; stalled until 2 s, then alone on the
  // link at min(100, 1000) = 100 B/s: 1.75 s more, done at 3.75 s.
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(t.rec.failures, 0);
  EXPECT_EQ(t.rec.done_at(0), Time::ms(1250));
  EXPECT_EQ(t.rec.done_at(1), Time::ms(3750));
}

TEST(FluidModelFailure, OwnerMayStartWorkFromTheFailureCallback) {
  Simulation s(1);
  TwoFlows t(s);
  ActivityId retry;
  t.rec.then = [&](uint64_t tag) {
    if (tag != 1) return;
    Use u{t.link, 1.0};
    retry = s.fluid().start(25.0, {&u, 1}, kUnbounded, &t.rec, 2);  // a 25 B retry on the link only
  };
  t.script.at(Time::ms(500), [&] { s.fluid().set_up(t.side, false, DownPolicy::kFail); });
  auto r = s.run();
  // At 0.5 s B fails and the retry starts; A (75 B left) and the retry share the link at 50 B/s:
  // the retry ends at 0.5 + 25 / 50 = 1.0 s with A at 50 B left, which then runs alone at
  // 100 B/s: done at 1.5 s. The retry reuses B's slot, so B's cancelled completion event (due at
  // 4 s) must not fire for it.
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(retry.value, t.b.value) << "the retry took B's freed slot";
  EXPECT_EQ(t.rec.failed_at(1), Time::ms(500));
  EXPECT_EQ(t.rec.done_at(2), Time::ms(1000));
  EXPECT_EQ(t.rec.done_at(0), Time::ms(1500));
  EXPECT_EQ(r.end_time, Time::ms(1500));
}

TEST(FluidModelFailure, CallbackMayCancelOtherVictimsAndReuseTheirSlots) {
  // Flows B1 (tag 1) and B2 (tag 2) use only the 100 B/s side constraint, 1000 B each (50 B/s
  // each). At 0.5 s the side goes down with kFail. B1 is failed first; its owner cancels B2 and
  // starts C (tag 3, 25 B on a 100 B/s link of its own), which takes B2's freed slot, and D (tag 4,
  // 10 B on the side, now down). B2 is then skipped: it was cancelled, and its slot now holds C
  // (another tag, not on the side). D was not a user when the side went down: it stalls, and runs
  // when the side is back up at 2 s.
  // Worked by hand: C alone on its link: 0.5 + 25 / 100 = 0.75 s. D alone on the side from 2 s:
  // 2 + 10 / 100 = 2.1 s.
  Simulation s(1);
  FluidModel& f = s.fluid();
  FailRecorder rec(s);
  Script script(s);
  auto side = f.add_constraint(100.0, "side");
  auto link = f.add_constraint(100.0, "link");
  Use us{side, 1.0}, ul{link, 1.0};
  f.start(1000.0, {&us, 1}, kUnbounded, &rec, 1);
  auto b2 = f.start(1000.0, {&us, 1}, kUnbounded, &rec, 2);
  ActivityId c;
  rec.then = [&](uint64_t tag) {
    ASSERT_EQ(tag, 1u) << "only B1 fails";
    f.cancel(b2);
    c = f.start(25.0, {&ul, 1}, kUnbounded, &rec, 3);
    f.start(10.0, {&us, 1}, kUnbounded, &rec, 4);
  };
  script.at(Time::ms(500), [&] { f.set_up(side, false, DownPolicy::kFail); });
  script.at(Time::sec(2), [&] { f.set_up(side, true); });
  auto r = s.run();
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(c.value, b2.value) << "C took B2's freed slot";
  EXPECT_EQ(rec.failures, 1);
  EXPECT_EQ(rec.failed_at(1), Time::ms(500));
  EXPECT_EQ(rec.failed_at(2), Time::infinite());
  EXPECT_EQ(rec.done_at(2), Time::infinite());
  EXPECT_EQ(rec.done_at(3), Time::ms(750));
  EXPECT_EQ(rec.done_at(4), Time::ms(2100));
}

TEST(FluidModelFailure, FailOneActivity) {
  Simulation s(1);
  TwoFlows t(s);
  t.script.at(Time::ms(500), [&] { s.fluid().fail(t.b); });
  auto r = s.run();
  // As with the side down: B's owner hears at 0.5 s, A ends at 0.5 + 75 / 100 = 1.25 s; the side
  // constraint is untouched (still up).
  EXPECT_FALSE(r.deadlocked) << r.deadlock_report;
  EXPECT_EQ(t.rec.failures, 1);
  EXPECT_EQ(t.rec.failed_at(1), Time::ms(500));
  EXPECT_EQ(t.rec.done_at(0), Time::ms(1250));
  EXPECT_DOUBLE_EQ(s.fluid().effective_capacity(t.side), 1000.0);
}

TEST(FluidModelFailure, FailWithoutOwnerJustRemoves) {
  Simulation s(1);
  Recorder rec(s);
  auto l = s.fluid().add_constraint(100.0);
  Use u{l, 1.0};
  auto orphan = s.fluid().start(1e9, {&u, 1}, kUnbounded, nullptr, 7);
  s.fluid().start(100.0, {&u, 1}, kUnbounded, &rec, 0);
  s.fluid().settle();
  s.fluid().fail(orphan);
  auto r = s.run();
  EXPECT_FALSE(r.deadlocked);
  EXPECT_EQ(rec.done[0], Time::sec(1));  // alone from t=0: 100 / 100
}

TEST(FluidModelFailure, CancelAlsoCancelsTheCompletionEvent) {
  // A (100 B alone on 100 B/s) is due at 1 s; cancelled at 0.5 s, and B (100 B) started in its
  // freed slot then ends at 0.5 + 1 = 1.5 s, not at A's old 1 s.
  Simulation s(1);
  Recorder rec(s);
  Script script(s);
  auto l = s.fluid().add_constraint(100.0);
  Use u{l, 1.0};
  auto a = s.fluid().start(100.0, {&u, 1}, kUnbounded, &rec, 0);
  ActivityId b;
  script.at(Time::ms(500), [&] {
    s.fluid().cancel(a);
    b = s.fluid().start(100.0, {&u, 1}, kUnbounded, &rec, 1);
  });
  auto r = s.run();
  EXPECT_FALSE(r.deadlocked);
  EXPECT_EQ(b.value, a.value);
  ASSERT_EQ(rec.done.size(), 2u);
  EXPECT_EQ(rec.done[0], Time::infinite());
  EXPECT_EQ(rec.done[1], Time::ms(1500));
  EXPECT_EQ(r.events, 2u);  // the script's event and B's completion
}

// An owner that does not override on_activity_failed.
class CompletionOnly : public ActivityOwner {
 public:
  void on_activity_done(ActivityId, uint64_t) override {}
};

TEST(FluidModelFailureDeathTest, UnhandledFailureStopsTheProgram) {
  Simulation s(1);
  CompletionOnly owner;
  auto l = s.fluid().add_constraint(100.0);
  Use u{l, 1.0};
  auto a = s.fluid().start(100.0, {&u, 1}, kUnbounded, &owner, 3);
  EXPECT_DEATH(s.fluid().fail(a), "does not handle failures");
  EXPECT_DEATH(s.fluid().set_up(l, false, DownPolicy::kFail), "does not handle failures");
}

// --- property tests on seeded random systems ---------------------------------------------------

struct RandomSystem {
  std::vector<ConstraintId> constraints;
  std::vector<ActivityId> activities;
  std::vector<std::vector<Use>> uses;
  std::vector<double> bounds;
};

RandomSystem make_random_system(Simulation& s, std::mt19937_64& rng, int nc, int na) {
  RandomSystem sys;
  std::uniform_real_distribution<double> cap(1.0, 100.0), w(0.5, 3.0), coin(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, nc - 1), hops(1, 4);
  for (int i = 0; i < nc; ++i) sys.constraints.push_back(s.fluid().add_constraint(cap(rng)));
  for (int a = 0; a < na; ++a) {
    std::vector<Use> u;
    int h = hops(rng);
    for (int k = 0; k < h; ++k) {
      auto c = sys.constraints[pick(rng)];
      if (std::none_of(u.begin(), u.end(), [&](const Use& x) { return x.constraint == c; }))
        u.push_back(Use{c, w(rng)});
    }
    double bound = coin(rng) < 0.2 ? cap(rng) / 4 : kUnbounded;
    sys.activities.push_back(s.fluid().start(1e9, u, bound, nullptr, a));
    sys.uses.push_back(u);
    sys.bounds.push_back(bound);
  }
  return sys;
}

TEST(FluidModelProperty, FeasibleBoundedAndMaxMinOptimal) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation s(seed);
    std::mt19937_64 rng(seed);
    auto sys = make_random_system(s, rng, 12, 30);
    s.fluid().settle();
    auto& f = s.fluid();
    std::vector<double> load(sys.constraints.size(), 0.0);
    for (size_t a = 0; a < sys.activities.size(); ++a) {
      double r = f.rate(sys.activities[a]);
      ASSERT_GE(r, 0.0);
      ASSERT_LE(r, sys.bounds[a] * (1 + 1e-9));
      for (auto& u : sys.uses[a]) load[u.constraint.value] += u.weight * r;
    }
    for (size_t c = 0; c < sys.constraints.size(); ++c)
      ASSERT_LE(load[c], f.effective_capacity(sys.constraints[c]) * (1 + 1e-9)) << "constraint " << c;
    // Max-min: each activity below its bound has a saturated constraint on which no other
    // activity runs faster (it could not grow without taking from someone no richer).
    for (size_t a = 0; a < sys.activities.size(); ++a) {
      double r = f.rate(sys.activities[a]);
      if (r >= sys.bounds[a] * (1 - 1e-9)) continue;
      bool has_bottleneck = false;
      for (auto& u : sys.uses[a]) {
        size_t c = u.constraint.value;
        if (load[c] < f.effective_capacity(u.constraint) * (1 - 1e-9)) continue;
        bool richest = true;
        for (size_t b = 0; b < sys.activities.size(); ++b) {
          for (auto& ub : sys.uses[b])
            if (ub.constraint.value == c && f.rate(sys.activities[b]) > r * (1 + 1e-9)) richest = false;
        }
        if (richest) has_bottleneck = true;
      }
      EXPECT_TRUE(has_bottleneck) << "activity " << a << " rate " << r;
    }
  }
}

TEST(FluidModelProperty, WorkIsConservedOnOneLink) {
  // Any mix of flows on one link of capacity C finishes the last byte at sum(work)/C: the link
  // never idles while work remains (rounding adds at most 1 ns per completion).
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    Simulation s(seed);
    Recorder rec(s);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<double> work(1e3, 1e6);
    auto l = s.fluid().add_constraint(1e6);
    Use u{l, 1.0};
    double total = 0;
    int n = 25;
    for (int i = 0; i < n; ++i) {
      double w = work(rng);
      total += w;
      s.fluid().start(w, {&u, 1}, kUnbounded, &rec, i);
    }
    s.run();
    Time last = *std::max_element(rec.done.begin(), rec.done.end());
    double expect_ns = total / 1e6 * 1e9;
    EXPECT_NEAR(static_cast<double>(last.count_ns()), expect_ns, n + 1.0);
  }
}

}  // namespace
}  // namespace sim
