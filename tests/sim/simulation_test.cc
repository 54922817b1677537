// Tests of the run loop: event order, settle once per timestamp, horizon, pending-work reports.
#include "sim/simulation.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace sim
