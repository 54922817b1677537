// Tests of the run loop: event order, settle once per timestamp, horizon, pending-work reports,
// runs split at horizons, observers finished once, cancelled events.
#include "sim/simulation.h"

#include "sim/error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace sim {
namespace {

class Log : public EventHandler {
 public:
  explicit Log(Simulation& s) : s_(s) { id = s.add_handler(this); }
  void on_event(uint32_t arg) override {
    seen.push_back({s_.now(), arg});
    if (arg == 100) s_.schedule_after(Time::zero(), id, 101);  // same-time follow-up
  }
  HandlerId id;
  std::vector<std::pair<Time, uint32_t>> seen;

 private:
  Simulation& s_;
};

TEST(Simulation, EventsRunInTimeThenFifoOrder) {
  Simulation s(1);
  Log log(s);
  s.schedule_at(Time::ns(20), log.id, 1);
  s.schedule_at(Time::ns(10), log.id, 2);
  s.schedule_at(Time::ns(20), log.id, 3);
  s.schedule_at(Time::ns(10), log.id, 100);
  auto r = s.run();
  std::vector<std::pair<Time, uint32_t>> want = {
      {Time::ns(10), 2}, {Time::ns(10), 100}, {Time::ns(10), 101}, {Time::ns(20), 1}, {Time::ns(20), 3}};
  EXPECT_EQ(log.seen, want);
  EXPECT_EQ(r.events, 5u);
  EXPECT_EQ(r.end_time, Time::ns(20));
  EXPECT_FALSE(r.deadlocked);
}

TEST(Simulation, HorizonStopsBeforeLaterEvents) {
  Simulation s(1);
  Log log(s);
  s.schedule_at(Time::ns(5), log.id, 1);
  s.schedule_at(Time::ns(50), log.id, 2);
  auto r = s.run(Time::ns(10));
  EXPECT_TRUE(r.hit_horizon);
  EXPECT_EQ(log.seen.size(), 1u);
  auto r2 = s.run();
  EXPECT_EQ(log.seen.size(), 2u);
  EXPECT_EQ(r2.end_time, Time::ns(50));
}

class Waiter : public PendingWork {
 public:
  size_t pending_count() const override { return 1; }
  void describe_pending(std::string& out, size_t) const override { out += "  rank 3 all-reduce waits on rank 5\n"; }
};

TEST(Simulation, DrainedQueueWithPendingWorkIsADeadlock) {
  Simulation s(1);
  Waiter w;
  s.add_pending_work(&w);
  auto r = s.run();
  EXPECT_TRUE(r.deadlocked);
  EXPECT_NE(r.deadlock_report.find("rank 3 all-reduce waits on rank 5"), std::string::npos);
}

TEST(Simulation, RemovedPendingWorkIsNoLongerAsked) {
  // A workload that goes away before its simulation (a finished step) takes its pending work
  // with it: the next run of an empty queue is no deadlock, and nothing reads the gone object.
  Simulation s(1);
  {
    Waiter w;
    s.add_pending_work(&w);
    EXPECT_TRUE(s.run().deadlocked);
    s.remove_pending_work(&w);
  }
  EXPECT_FALSE(s.run().deadlocked);
}

TEST(Simulation, TwoSimulationsAreIndependent) {
  Simulation a(1), b(2);
  Log la(a), lb(b);
  a.schedule_at(Time::ns(3), la.id, 7);
  b.schedule_at(Time::ns(9), lb.id, 8);
  a.run();
  EXPECT_EQ(la.seen.size(), 1u);
  EXPECT_EQ(lb.seen.size(), 0u);
  EXPECT_EQ(a.now(), Time::ns(3));
  EXPECT_EQ(b.now(), Time::zero());
}

// Writes every record it sees as one line (times in whole seconds), and counts on_finish calls.
class RecordingObserver : public Observer {
 public:
  static std::string at(Time t) {
    return t.count_ns() % 1000000000 == 0 ? std::to_string(t.count_ns() / 1000000000)
                                          : std::to_string(t.count_ns()) + "ns";
  }
  void on_span(const SpanRecord& r, const NameTable& names) override {
    lines.push_back("span " + names.name(r.name) + " " + at(r.start) + " " + at(r.end));
  }
  void on_instant(const InstantRecord& r, const NameTable& names) override {
    lines.push_back("instant " + names.name(r.name) + " " + at(r.time));
  }
  void on_finish(Time end) override {
    lines.push_back("finish " + at(end));
    ++finishes;
  }
  std::vector<std::string> lines;
  int finishes = 0;
};

// A small model: events at 10, 20 and 50 s emit instants; the one at 10 s starts flow A (100 B),
// the one at 20 s flow B (30 B), both on one 1 B/s link; each flow emits a span when done.
class SplitModel : public EventHandler, public ActivityOwner {
 public:
  explicit SplitModel(Simulation& s) : s_(s) {
    id_ = s.add_handler(this);
    link_ = s.fluid().add_constraint(1.0);
    s.schedule_at(Time::sec(10), id_, 1);
    s.schedule_at(Time::sec(20), id_, 2);
    s.schedule_at(Time::sec(50), id_, 3);
  }
  void on_event(uint32_t e) override {
    InstantRecord r;
    const char* names[] = {"", "e1", "e2", "e3"};
    r.name = s_.observers().names().intern(names[e]);
    r.time = s_.now();
    s_.observers().instant(r);
    if (e == 1 || e == 2) {
      Use u{link_, 1.0};
      start_[e - 1] = s_.now();
      s_.fluid().start(e == 1 ? 100.0 : 30.0, {&u, 1}, kUnbounded, this, e - 1);
    }
  }
  void on_activity_done(ActivityId, uint64_t tag) override {
    SpanRecord r;
    r.name = s_.observers().names().intern(tag == 0 ? "A" : "B");
    r.start = start_[tag];
    r.end = s_.now();
    s_.observers().span(r);
  }

 private:
  Simulation& s_;
  HandlerId id_;
  ConstraintId link_;
  Time start_[2];
};

TEST(Simulation, RunSplitAtHorizonsMatchesOneRunAndFinishesOnce) {
  // Worked by hand: A alone at 1 B/s from 10 s has 90 B left at 20 s; then A and B share at
  // 0.5 B/s: B's 30 B end at 20 + 60 = 80 s, when A has 90 - 30 = 60 B left; alone again, A ends
  // at 80 + 60 = 140 s.
  const std::vector<std::string> want = {"instant e1 10", "instant e2 20", "instant e3 50",
                                         "span B 20 80",  "span A 10 140", "finish 140"};
  Simulation one(1);
  RecordingObserver obs_one;
  one.observers().attach(&obs_one);
  SplitModel m_one(one);
  auto r = one.run();
  EXPECT_FALSE(r.deadlocked);
  EXPECT_EQ(obs_one.finishes, 0) << "run() does not finish the observers";
  one.finish();
  EXPECT_EQ(obs_one.lines, want);
  EXPECT_EQ(obs_one.finishes, 1);

  // Horizons: 15 s (between events), 50 s (an event's exact time: it runs), 80 s (B's completion
  // time exactly: it runs too), then to the end.
  Simulation split(1);
  RecordingObserver obs_split;
  split.observers().attach(&obs_split);
  SplitModel m_split(split);
  auto r1 = split.run(Time::sec(15));
  EXPECT_TRUE(r1.hit_horizon);
  EXPECT_EQ(split.now(), Time::sec(10));
  auto r2 = split.run(Time::sec(50));
  EXPECT_TRUE(r2.hit_horizon);
  EXPECT_EQ(split.now(), Time::sec(50));
  auto r3 = split.run(Time::sec(80));
  EXPECT_TRUE(r3.hit_horizon);
  EXPECT_EQ(split.now(), Time::sec(80));
  EXPECT_EQ(obs_split.finishes, 0);
  auto r4 = split.run();
  EXPECT_FALSE(r4.hit_horizon);
  EXPECT_FALSE(r4.deadlocked);
  EXPECT_EQ(r4.events, r.events);
  EXPECT_EQ(r4.end_time, r.end_time);
  EXPECT_EQ(obs_split.finishes, 0);
  split.finish();
  EXPECT_EQ(obs_split.lines, want);
  EXPECT_EQ(obs_split.finishes, 1);
}

TEST(Simulation, FinishTwiceFinishesOnce) {
  Simulation s(1);
  RecordingObserver obs;
  s.observers().attach(&obs);
  Log log(s);
  s.schedule_at(Time::ns(7), log.id, 1);
  s.run();
  s.finish();
  s.finish();
  EXPECT_EQ(obs.finishes, 1);
  EXPECT_EQ(obs.lines, std::vector<std::string>{"finish 7ns"});
  EXPECT_TRUE(s.finished());
}

TEST(Simulation, DestructorDoesNotFinish) {
  RecordingObserver obs;
  {
    Simulation s(1);
    s.observers().attach(&obs);
    s.run();
  }
  EXPECT_EQ(obs.finishes, 0);
}

TEST(SimulationDeathTest, RunAfterFinishIsABug) {
  Simulation s(1);
  s.finish();
  EXPECT_DEATH(s.run(), "after finish");
}

// Cancels an event from inside a handler at the same timestamp.
class Canceller : public EventHandler {
 public:
  explicit Canceller(Simulation& s) : s_(s) { id = s.add_handler(this); }
  void on_event(uint32_t arg) override {
    seen.push_back(arg);
    if (arg == 1) s_.cancel(victim);
  }
  HandlerId id;
  EventId victim;
  std::vector<uint32_t> seen;

 private:
  Simulation& s_;
};

TEST(Simulation, CancelledEventsNeverReachTheirHandler) {
  for (QueueKind q : {QueueKind::kQuaternaryHeap, QueueKind::kRadixHeap, QueueKind::kRadixFront}) {
    SCOPED_TRACE(static_cast<int>(q));
    Simulation s(1, q);
    Canceller c(s);
    s.schedule_at(Time::ns(10), c.id, 1);                  // cancels event 3 from its handler
    EventId before = s.schedule_at(Time::ns(5), c.id, 2);  // cancelled before the run
    c.victim = s.schedule_at(Time::ns(10), c.id, 3);       // same time as its canceller, later
    EventId later = s.schedule_at(Time::ns(30), c.id, 4);  // cancelled between split runs
    s.schedule_at(Time::ns(40), c.id, 5);
    s.cancel(before);
    auto r1 = s.run(Time::ns(20));
    EXPECT_TRUE(r1.hit_horizon);
    s.cancel(later);
    auto r2 = s.run();
    EXPECT_EQ(c.seen, (std::vector<uint32_t>{1, 5}));
    EXPECT_EQ(r2.events, 2u);
    EXPECT_EQ(r2.end_time, Time::ns(40));
  }
}

}  // namespace
}  // namespace sim

namespace sim {
namespace {

// Time arithmetic saturates: 2^62 + 2^62 = 2^63 does not fit int64 and becomes infinite() instead
// of wrapping to a negative (past) time; products likewise.
TEST(TimeArithmetic, SaturatesInsteadOfWrapping) {
  const Time big = Time::ns(Time::kMaxFinite);
  EXPECT_TRUE((big + big).is_infinite());
  EXPECT_TRUE((Time::infinite() + Time::ns(1)).is_infinite());
  EXPECT_TRUE((big * 3).is_infinite());
  EXPECT_EQ((Time::ns(-Time::kMaxFinite) - big).count_ns(), std::numeric_limits<int64_t>::min());
  EXPECT_EQ((Time::ns(5) + Time::ns(7)).count_ns(), 12);
  EXPECT_EQ((Time::ns(5) * -3).count_ns(), -15);
  Time t = big;
  t += big;
  EXPECT_TRUE(t.is_infinite());
}

// An event at or past 2^62 ns (a rate near zero made a duration of centuries) is a clear user
// error, not an assertion.
TEST(TimeArithmetic, AnEventPastTheRangeIsAUserError) {
  struct Nop : EventHandler {
    void on_event(uint32_t) override {}
  } nop;
  Simulation s(1);
  const HandlerId h = s.add_handler(&nop);
  s.schedule_at(Time::from_seconds(1e30), h, 0);  // saturates at 2^62 ns
  try {
    s.run();
    ADD_FAILURE() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("146 years"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace sim
