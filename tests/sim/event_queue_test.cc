// Tests for every EventQueue implementation: the same cases run on each, including each with a
// tiny sequence-number limit so that renumbering happens constantly and must keep FIFO order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <ostream>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/event_queue.h"
#include "sim/radix_front_queue.h"
#include "sim/quaternary_heap_queue.h"
#include "sim/radix_heap_queue.h"

namespace sim {
namespace {

struct QueueFactory {
  const char* label;
  std::unique_ptr<EventQueue> (*make)();
};

std::unique_ptr<EventQueue> make_quaternary() { return make_event_queue(QueueKind::kQuaternaryHeap); }
std::unique_ptr<EventQueue> make_radix() { return make_event_queue(QueueKind::kRadixHeap); }
std::unique_ptr<EventQueue> make_radix_front() { return make_event_queue(QueueKind::kRadixFront); }
std::unique_ptr<EventQueue> make_quaternary_renumbering() { return std::make_unique<QuaternaryHeapQueue>(1024); }
std::unique_ptr<EventQueue> make_radix_renumbering() { return std::make_unique<RadixHeapQueue>(1024); }
std::unique_ptr<EventQueue> make_radix_front_renumbering() { return std::make_unique<RadixFrontQueue>(1024); }
std::unique_ptr<EventQueue> make_radix_front_compacting() {
  return std::make_unique<RadixFrontQueue>(RadixFrontQueue::kMaxSeq, 0);
}
// A front of 2 entries: almost every refill spreads buckets first.
std::unique_ptr<EventQueue> make_radix_front_tiny_front() {
  return std::make_unique<RadixFrontQueue>(RadixFrontQueue::kMaxSeq, RadixFrontQueue::kStaleSlack, 2);
}

void PrintTo(const QueueFactory& f, std::ostream* os) { *os << f.label; }

class EventQueueTest : public ::testing::TestWithParam<QueueFactory> {
 protected:
  std::unique_ptr<EventQueue> q_ = GetParam().make();
};

EventTarget target(uint32_t arg) { return EventTarget{HandlerId(7), arg}; }

std::vector<uint32_t> drain_args(EventQueue& q) {
  std::vector<uint32_t> out;
  while (!q.empty()) out.push_back(q.pop().target.arg);
  return out;
}

TEST_P(EventQueueTest, StartsEmpty) {
  EXPECT_TRUE(q_->empty());
  EXPECT_EQ(q_->size(), 0u);
  EXPECT_FALSE(q_->name().empty());
}

TEST_P(EventQueueTest, FifoAmongEqualTimes) {
  for (uint32_t i = 0; i < 100; ++i) q_->push(Time::ns(50), target(i));
  std::vector<uint32_t> want;
  for (uint32_t i = 0; i < 100; ++i) want.push_back(i);
  EXPECT_EQ(drain_args(*q_), want);
}

TEST_P(EventQueueTest, FifoForPushesAtTheCurrentTime) {
  // Events pushed at "now" while other now-events are pending go behind them.
  q_->push(Time::ns(10), target(0));
  q_->push(Time::ns(10), target(1));
  q_->push(Time::ns(20), target(9));
  EXPECT_EQ(q_->pop().target.arg, 0u);
  q_->push(Time::ns(10), target(2));
  q_->push(Time::ns(10), target(3));
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{1, 2, 3, 9}));
}

TEST_P(EventQueueTest, OrdersByTime) {
  std::mt19937_64 rng(3);
  std::multimap<int64_t, uint32_t> ref;
  for (uint32_t i = 0; i < 1000; ++i) {
    const int64_t t = static_cast<int64_t>(rng() % 5000) - 2500;  // negative times too
    q_->push(Time::ns(t), target(i));
    ref.emplace(t, i);
  }
  for (const auto& [t, arg] : ref) {
    ASSERT_EQ(q_->next_time(), Time::ns(t));
    const PoppedEvent e = q_->pop();
    EXPECT_EQ(e.time, Time::ns(t));
    EXPECT_EQ(e.target.arg, arg);
    EXPECT_EQ(e.target.handler, HandlerId(7));
  }
  EXPECT_TRUE(q_->empty());
}

TEST_P(EventQueueTest, ExtremeTimes) {
  q_->push(Time::infinite(), target(2));
  q_->push(Time::ns(std::numeric_limits<int64_t>::min()), target(0));
  q_->push(Time::zero(), target(1));
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{0, 1, 2}));
}

TEST_P(EventQueueTest, RescheduleEarlier) {
  q_->push(Time::ns(10), target(0));
  q_->push(Time::ns(20), target(1));
  const EventId c = q_->push(Time::ns(30), target(2));
  q_->reschedule(c, Time::ns(5));
  EXPECT_EQ(q_->next_time(), Time::ns(5));
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{2, 0, 1}));
}

TEST_P(EventQueueTest, RescheduleLater) {
  const EventId a = q_->push(Time::ns(10), target(0));
  q_->push(Time::ns(20), target(1));
  q_->push(Time::ns(30), target(2));
  EXPECT_EQ(q_->next_time(), Time::ns(10));
  q_->reschedule(a, Time::ns(25));
  EXPECT_EQ(q_->next_time(), Time::ns(20));
  const PoppedEvent first = q_->pop();
  EXPECT_EQ(first.target.arg, 1u);
  const PoppedEvent second = q_->pop();
  EXPECT_EQ(second.target.arg, 0u);
  EXPECT_EQ(second.time, Time::ns(25));
  EXPECT_EQ(second.id, a);
}

TEST_P(EventQueueTest, RescheduleTakesAFreshSequenceNumber) {
  const EventId a = q_->push(Time::ns(10), target(0));
  q_->push(Time::ns(10), target(1));
  q_->reschedule(a, Time::ns(10));  // same time, but now behind 1
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{1, 0}));
}

TEST_P(EventQueueTest, Cancel) {
  std::vector<EventId> ids;
  for (uint32_t i = 0; i < 10; ++i) ids.push_back(q_->push(Time::ns(100 + i), target(i)));
  q_->cancel(ids[0]);  // the minimum
  q_->cancel(ids[9]);  // the maximum
  q_->cancel(ids[4]);  // one in between
  EXPECT_EQ(q_->size(), 7u);
  EXPECT_EQ(q_->next_time(), Time::ns(101));
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{1, 2, 3, 5, 6, 7, 8}));
}

TEST_P(EventQueueTest, CancelAfterNextTime) {
  // next_time may cache the minimum; cancelling it must not leave a stale answer.
  const EventId a = q_->push(Time::ns(10), target(0));
  q_->push(Time::ns(20), target(1));
  EXPECT_EQ(q_->next_time(), Time::ns(10));
  q_->cancel(a);
  EXPECT_EQ(q_->next_time(), Time::ns(20));
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{1}));
}

TEST_P(EventQueueTest, PushBetweenLastPopAndNextTime) {
  // The run loop peeks at the next time, then settles and may schedule at the current time.
  q_->push(Time::ns(10), target(0));
  q_->push(Time::ns(50), target(3));
  EXPECT_EQ(q_->pop().time, Time::ns(10));
  EXPECT_EQ(q_->next_time(), Time::ns(50));
  q_->push(Time::ns(10), target(1));
  q_->push(Time::ns(30), target(2));
  EXPECT_EQ(q_->next_time(), Time::ns(10));
  EXPECT_EQ(drain_args(*q_), (std::vector<uint32_t>{1, 2, 3}));
}

TEST_P(EventQueueTest, SizeAndEmpty) {
  const EventId a = q_->push(Time::ns(1), target(0));
  q_->push(Time::ns(2), target(1));
  EXPECT_EQ(q_->size(), 2u);
  EXPECT_FALSE(q_->empty());
  q_->reschedule(a, Time::ns(3));
  EXPECT_EQ(q_->size(), 2u);
  q_->pop();
  EXPECT_EQ(q_->size(), 1u);
  q_->cancel(a);
  EXPECT_EQ(q_->size(), 0u);
  EXPECT_TRUE(q_->empty());
}

// Slots are recycled: ids stay bounded however long a bounded pending set churns. (The heaps
// reuse the slot just freed; the radix-front queue takes slots in ring order from a table at
// least twice the pending count, 64 at the smallest.)
TEST_P(EventQueueTest, SlotReuse) {
  const EventId a = q_->push(Time::ns(1), target(0));
  const EventId b = q_->push(Time::ns(2), target(1));
  EXPECT_NE(a, b);
  EXPECT_EQ(q_->pop().id, a);
  q_->push(Time::ns(3), target(2));
  q_->cancel(b);
  q_->push(Time::ns(4), target(3));
  uint32_t max_id = 0;
  for (int i = 0; i < 1000; ++i) {
    const PoppedEvent e = q_->pop();
    const EventId id = q_->push(e.time + Time::ns(5), target(e.target.arg));
    EXPECT_TRUE(id.valid());
    max_id = std::max(max_id, id.value);
  }
  EXPECT_LT(max_id, 64u);
  EXPECT_EQ(q_->size(), 2u);
}

TEST_P(EventQueueTest, PopReportsIdAndTarget) {
  const EventId a = q_->push(Time::ns(5), EventTarget{HandlerId(3), 42});
  const PoppedEvent e = q_->pop();
  EXPECT_EQ(e.id, a);
  EXPECT_EQ(e.time, Time::ns(5));
  EXPECT_EQ(e.target.handler, HandlerId(3));
  EXPECT_EQ(e.target.arg, 42u);
}

TEST_P(EventQueueTest, PushBeforeLastPopIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  q_->push(Time::ns(100), target(0));
  q_->pop();
  EXPECT_DEATH(q_->push(Time::ns(99), target(1)), "last popped time");
}

TEST_P(EventQueueTest, CancelOfAFiredEventIsABug) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const EventId a = q_->push(Time::ns(100), target(0));
  q_->pop();
  EXPECT_DEATH(q_->cancel(a), "pending event");
}

// Random scripts of push / reschedule / cancel / pop / next_time against a std::multimap over
// (time, seq). Increments are small so that equal times are common, with rare large jumps so
// that high key bits change too.
void run_script(EventQueue& q, uint64_t seed, int ops) {
  std::mt19937_64 rng(seed);
  using Key = std::pair<int64_t, uint64_t>;  // (time, seq)
  std::map<Key, uint32_t> ref;               // -> arg
  std::map<uint32_t, std::pair<EventId, Key>> live;  // arg -> (id, key)
  uint64_t seq = 0;
  uint32_t next_arg = 0;
  int64_t now = static_cast<int64_t>(rng() % 2000000) - 1000000;

  auto draw_time = [&]() -> int64_t {
    const uint64_t r = rng() % 100;
    if (r < 30) return now;
    if (r < 90) return now + static_cast<int64_t>(rng() % 16);
    if (r < 98) return now + static_cast<int64_t>(rng() % 100000);
    return now + static_cast<int64_t>(rng() % (int64_t{1} << 50));
  };
  auto random_live = [&]() {
    auto it = live.lower_bound(static_cast<uint32_t>(rng() % next_arg));
    if (it == live.end()) it = live.begin();
    return it;
  };

  for (int step = 0; step < ops; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const uint64_t op = rng() % 100;
    if (op < 40 || live.empty()) {
      const int64_t t = draw_time();
      const uint32_t arg = next_arg++;
      const EventId id = q.push(Time::ns(t), target(arg));
      const Key k{t, seq++};
      ref.emplace(k, arg);
      live.emplace(arg, std::make_pair(id, k));
    } else if (op < 55) {
      auto it = random_live();
      const int64_t t = draw_time();
      q.reschedule(it->second.first, Time::ns(t));
      ref.erase(it->second.second);
      it->second.second = Key{t, seq++};
      ref.emplace(it->second.second, it->first);
    } else if (op < 65) {
      auto it = random_live();
      q.cancel(it->second.first);
      ref.erase(it->second.second);
      live.erase(it);
    } else if (op < 70) {
      ASSERT_EQ(q.next_time(), Time::ns(ref.begin()->first.first));
    } else {
      const PoppedEvent e = q.pop();
      const auto [k, arg] = *ref.begin();
      ASSERT_EQ(e.time, Time::ns(k.first));
      ASSERT_EQ(e.target.arg, arg);
      ASSERT_EQ(e.id, live.at(arg).first);
      ref.erase(ref.begin());
      live.erase(arg);
      now = k.first;
    }
    ASSERT_EQ(q.size(), ref.size());
    ASSERT_EQ(q.empty(), ref.empty());
  }
  while (!ref.empty()) {
    const PoppedEvent e = q.pop();
    ASSERT_EQ(e.time, Time::ns(ref.begin()->first.first));
    ASSERT_EQ(e.target.arg, ref.begin()->second);
    ref.erase(ref.begin());
  }
  ASSERT_TRUE(q.empty());
}

TEST_P(EventQueueTest, MatchesReferenceOnRandomScripts) {
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::unique_ptr<EventQueue> q = GetParam().make();
    run_script(*q, seed, 20000);
    if (HasFatalFailure()) return;
  }
}

// The hold model at scale (20,000 pending, so the radix-front queue spreads buckets, gathers
// fronts and sorts them many times), with reschedules and cancels mixed in, against a std::map
// over (time, seq). Increments mix zero (same-time events), a few ns, and up to 10^9 ns.
TEST_P(EventQueueTest, HoldAtScaleMatchesReference) {
  if (std::string(GetParam().label).find("Renumbering") != std::string::npos)
    GTEST_SKIP() << "a sequence limit of 1024 cannot number 20,000 pending events";
  std::mt19937_64 rng(11);
  using Key = std::pair<int64_t, uint64_t>;
  std::map<Key, uint32_t> ref;
  std::vector<std::pair<EventId, Key>> by_arg;  // arg -> (id, key); key.second == kGone if not pending
  std::vector<uint32_t> live;                   // args pending, in no order
  std::vector<size_t> where;                    // arg -> index in live
  constexpr uint64_t kGone = ~uint64_t{0};
  uint64_t seq = 0;
  int64_t now = 0;
  auto increment = [&]() -> int64_t {
    const uint64_t r = rng() % 10;
    if (r < 2) return 0;
    if (r < 4) return static_cast<int64_t>(rng() % 64);
    return static_cast<int64_t>(rng() % 1000000000);
  };
  auto push = [&](int64_t t) {
    const uint32_t arg = static_cast<uint32_t>(by_arg.size());
    const EventId id = q_->push(Time::ns(t), target(arg));
    const Key k{t, seq++};
    ref.emplace(k, arg);
    by_arg.emplace_back(id, k);
    where.push_back(live.size());
    live.push_back(arg);
  };
  auto forget = [&](uint32_t arg) {
    const size_t i = where[arg];
    live[i] = live.back();
    where[live[i]] = i;
    live.pop_back();
    by_arg[arg].second.second = kGone;
  };
  for (int i = 0; i < 20000; ++i) push(increment());
  for (int step = 0; step < 60000; ++step) {
    const PoppedEvent e = q_->pop();
    const auto [k, arg] = *ref.begin();
    ASSERT_EQ(e.time, Time::ns(k.first)) << "step " << step;
    ASSERT_EQ(e.target.arg, arg) << "step " << step;
    ASSERT_EQ(e.id, by_arg[arg].first) << "step " << step;
    ref.erase(ref.begin());
    forget(arg);
    now = k.first;
    push(now + increment());
    if (step % 5 == 0) {
      const uint32_t a = live[rng() % live.size()];
      const int64_t t = now + increment();
      q_->reschedule(by_arg[a].first, Time::ns(t));
      ref.erase(by_arg[a].second);
      by_arg[a].second = Key{t, seq++};
      ref.emplace(by_arg[a].second, a);
    }
    if (step % 11 == 0) {
      const uint32_t a = live[rng() % live.size()];
      q_->cancel(by_arg[a].first);
      ref.erase(by_arg[a].second);
      forget(a);
      push(now + increment());
    }
    if (step % 7 == 0) {
      ASSERT_EQ(q_->next_time(), Time::ns(ref.begin()->first.first));
    }
    ASSERT_EQ(q_->size(), ref.size());
  }
}

INSTANTIATE_TEST_SUITE_P(EventQueue, EventQueueTest,
                         ::testing::Values(QueueFactory{"QuaternaryHeap", make_quaternary},
                                           QueueFactory{"RadixHeap", make_radix},
                                           QueueFactory{"RadixFront", make_radix_front},
                                           QueueFactory{"QuaternaryHeapRenumbering", make_quaternary_renumbering},
                                           QueueFactory{"RadixHeapRenumbering", make_radix_renumbering},
                                           QueueFactory{"RadixFrontRenumbering", make_radix_front_renumbering},
                                           QueueFactory{"RadixFrontCompacting", make_radix_front_compacting},
                                           QueueFactory{"RadixFrontTinyFront", make_radix_front_tiny_front}),
                         [](const ::testing::TestParamInfo<QueueFactory>& info) { return std::string(info.param.label); });

// Sequence numbers renumbered every few pushes, with same-time events spanning renumberings.
template <class Queue>
void check_fifo_across_renumbering() {
  Queue q(16);
  uint32_t pushed = 0, popped = 0;
  for (; pushed < 10; ++pushed) q.push(Time::ns(5), target(pushed));
  for (int round = 0; round < 50; ++round) {
    for (int k = 0; k < 3; ++k) q.push(Time::ns(5), target(pushed++));
    for (int k = 0; k < 3; ++k) ASSERT_EQ(q.pop().target.arg, popped++);
  }
  while (!q.empty()) ASSERT_EQ(q.pop().target.arg, popped++);
  EXPECT_EQ(popped, pushed);
}

TEST(EventQueueRenumber, QuaternaryHeapKeepsFifo) { check_fifo_across_renumbering<QuaternaryHeapQueue>(); }
TEST(EventQueueRenumber, RadixHeapKeepsFifo) { check_fifo_across_renumbering<RadixHeapQueue>(); }
TEST(EventQueueRenumber, RadixFrontKeepsFifo) { check_fifo_across_renumbering<RadixFrontQueue>(); }

// Radix-front specifics: a bucket holding many blocks (2,000 entries of one far bucket, 168 per
// block) is compacted in place when cancels make stale entries outnumber live ones (slack 0), and
// then spread. Order after that is worked out here: survivors i % 3 == 0 at 10^9 + 7i ns, those
// with i % 6 == 0 moved to 2*10^9 + i ns, so the order is i = 3, 9, 15, ... then 0, 6, 12, ...
TEST(EventQueueRadixFront, CompactionAcrossBlocksKeepsOrderAndBoundsStale) {
  RadixFrontQueue q(RadixFrontQueue::kMaxSeq, /*stale_slack=*/0);
  constexpr uint32_t kN = 2000;
  std::vector<EventId> ids;
  for (uint32_t i = 0; i < kN; ++i) ids.push_back(q.push(Time::ns(1'000'000'000 + 7 * int64_t{i}), target(i)));
  for (uint32_t i = 0; i < kN; ++i) {
    if (i % 3 == 0) continue;
    q.cancel(ids[i]);
    ASSERT_LE(q.entries(), 2 * q.size()) << "after cancelling " << i;  // stale <= live + slack
  }
  for (uint32_t i = 0; i < kN; i += 6) {
    q.reschedule(ids[i], Time::ns(2'000'000'000 + int64_t{i}));
    ASSERT_LE(q.entries(), 2 * q.size()) << "after rescheduling " << i;
  }
  std::vector<uint32_t> expected;
  for (uint32_t i = 3; i < kN; i += 6) expected.push_back(i);
  for (uint32_t i = 0; i < kN; i += 6) expected.push_back(i);
  EXPECT_EQ(drain_args(q), expected);
}

// Inserts at both ends of the front. After one refill the front holds times 1000, 2000, ...,
// 256000 ns (last_ is 256000); pushes just under last_ go to its far end and pushes just after
// the last pop to its near end, 600 of each (its first and last leaves split again and again). Times are distinct and all pushes are known here, so the pop order
// is just ascending time: 1001, then the near pushes 1002.., interleaved with the refilled ones.
TEST(EventQueueRadixFront, InsertsAtBothEndsOfTheFrontKeepTimeOrder) {
  RadixFrontQueue q;
  std::vector<int64_t> times;
  for (int64_t i = 1; i <= 256; ++i) times.push_back(1000 * i);
  for (int64_t t : times) q.push(Time::ns(t), target(static_cast<uint32_t>(t)));
  ASSERT_EQ(q.pop().time, Time::ns(1000));  // refills the front with all 256
  for (int64_t k = 0; k < 600; ++k) {
    times.push_back(255'000 + 1 + k);  // far end: between 255000 and 256000
    q.push(Time::ns(times.back()), target(static_cast<uint32_t>(times.back())));
    times.push_back(1000 + 1 + k);  // near end: between the last pop and 2000
    q.push(Time::ns(times.back()), target(static_cast<uint32_t>(times.back())));
  }
  times.erase(times.begin());  // 1000 was popped
  std::sort(times.begin(), times.end());
  std::vector<uint32_t> expected(times.begin(), times.end());
  EXPECT_EQ(drain_args(q), expected);
}

// A front that stays small while inserts keep landing at its far end (its first leaf fills and
// splits while the last one drains). After the refill (256 entries, 1000..256000 ns)
// and 200 pops, 56 remain; then 500 times: push 255000 + 1 + k (just under last_ = 256000, so
// at the far end) and pop the least. Each pop must be the least time pending, worked out here.
TEST(EventQueueRadixFront, FarInsertsIntoASmallFrontKeepTimeOrder) {
  RadixFrontQueue q;
  std::multiset<int64_t> pending;
  for (int64_t i = 1; i <= 256; ++i) {
    q.push(Time::ns(1000 * i), target(static_cast<uint32_t>(i)));
    pending.insert(1000 * i);
  }
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(q.pop().time, Time::ns(*pending.begin()));
    pending.erase(pending.begin());
  }
  for (int64_t k = 0; k < 500; ++k) {
    q.push(Time::ns(255'001 + k), target(0));
    pending.insert(255'001 + k);
    ASSERT_EQ(q.pop().time, Time::ns(*pending.begin())) << "round " << k;
    pending.erase(pending.begin());
  }
  while (!pending.empty()) {
    ASSERT_EQ(q.pop().time, Time::ns(*pending.begin()));
    pending.erase(pending.begin());
  }
  EXPECT_TRUE(q.empty());
}

// A large front with inserts anywhere inside it: after the refill (256 entries, 1000..256000 ns)
// 3,000 pushes at distinct pseudo-random times between the last pop and last_ (so all into the
// front, splitting its leaves in the middle). peek(k) must then name the k-th least pending time
// for k < 20 (across leaf boundaries). Then four in five of them are cancelled with no stale
// slack (stale entries soon outnumber live ones, so compaction runs over the front's leaves), and
// the drain must be in ascending time. Both worked out here from a sorted map.
TEST(EventQueueRadixFront, InsertsInsideALargeFrontKeepOrderAndPeek) {
  RadixFrontQueue q(RadixFrontQueue::kMaxSeq, /*stale_slack=*/0);
  std::map<int64_t, uint32_t> pending;  // time -> target arg
  for (uint32_t i = 1; i <= 256; ++i) {
    q.push(Time::ns(1000 * int64_t{i}), target(i));
    pending[1000 * int64_t{i}] = i;
  }
  ASSERT_EQ(q.pop().time, Time::ns(1000));
  pending.erase(1000);
  uint64_t x = 12345;
  std::vector<std::pair<EventId, int64_t>> pushed;
  for (uint32_t k = 0; k < 3000; ++k) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int64_t t = 1001 + static_cast<int64_t>((x >> 33) % 254'998);  // inside (1000, 256000)
    while (pending.count(t)) ++t;                                   // distinct times
    const uint32_t arg = 1000 + k;
    pushed.emplace_back(q.push(Time::ns(t), target(arg)), t);
    pending[t] = arg;
  }
  ASSERT_EQ(q.next_time(), Time::ns(pending.begin()->first));
  auto it = pending.begin();
  for (size_t k = 0; k < 20; ++k, ++it) {
    EventTarget t;
    ASSERT_TRUE(q.peek(k, t)) << k;
    EXPECT_EQ(t.arg, it->second) << "peek " << k;
  }
  for (size_t k = 0; k < pushed.size(); ++k) {
    if (k % 5 == 0) continue;
    q.cancel(pushed[k].first);
    pending.erase(pushed[k].second);
    ASSERT_LE(q.entries(), 2 * q.size()) << "after cancelling " << k;
  }
  std::vector<uint32_t> expected;
  for (const auto& [t, arg] : pending) expected.push_back(arg);
  EXPECT_EQ(drain_args(q), expected);
}

// Thousands of events at one time (data-parallel ranks finishing identical kernels): a bucket of
// one time is taken into the front whole, however large. Order is worked out here: pushes
// alternate 5000 ns (even k) and 9000 ns (odd k), 3,000 each; every 7th is cancelled and every
// 11th (not cancelled) moved to 9000 ns, which puts it after every 9000 ns push. After the first
// pop (now 5000 ns, the front holding the 5000 ns bucket), 100 pushes at 5000 ns follow every
// earlier 5000 ns event, and 100 at 7000 ns fall between the two times. Run with the default
// front, with a front of 2 (where every bucket of more than 2 is large), with sequence numbers
// renumbered whenever they reach 6,100 (5,143 live after the cancels: the reschedules and the
// pushes below pass it again and again) and with no stale slack and a front of 2 (compacting
// whenever stale entries outnumber live ones). The 5000 ns bucket goes into the front whole, so
// after the first pop the front holds its 3,000 entries (live and stale) less the one popped, and
// peek sees 2,000 places ahead; spread instead, the front would hold at most front_max entries.
void check_one_time_buckets(RadixFrontQueue& q) {
  constexpr uint32_t kN = 6000;
  std::vector<EventId> ids;
  for (uint32_t k = 0; k < kN; ++k) ids.push_back(q.push(Time::ns(k % 2 == 0 ? 5000 : 9000), target(k)));
  std::vector<uint32_t> at5000, at9000, moved;
  for (uint32_t k = 0; k < kN; ++k) {
    if (k % 7 == 0) {
      q.cancel(ids[k]);
    } else if (k % 11 == 0) {
      q.reschedule(ids[k], Time::ns(9000));
      moved.push_back(k);
    } else {
      (k % 2 == 0 ? at5000 : at9000).push_back(k);
    }
  }
  const PoppedEvent first = q.pop();
  ASSERT_EQ(first.time, Time::ns(5000));
  ASSERT_EQ(first.target.arg, at5000.front());
  EventTarget ahead;
  EXPECT_TRUE(q.peek(2000, ahead));
  std::vector<uint32_t> expected(at5000.begin() + 1, at5000.end());
  for (uint32_t k = 0; k < 100; ++k) {
    q.push(Time::ns(5000), target(kN + k));
    expected.push_back(kN + k);
  }
  for (uint32_t k = 0; k < 100; ++k) q.push(Time::ns(7000), target(kN + 100 + k));
  for (uint32_t k = 0; k < 100; ++k) expected.push_back(kN + 100 + k);
  // 8,000 pushes at 20000 ns, each cancelled at once: stale entries then outnumber live ones by
  // more than the default slack, so the queue compacts its front and buckets (changing no order).
  for (uint32_t k = 0; k < 8000; ++k) q.cancel(q.push(Time::ns(20000), target(kN + 200 + k)));
  expected.insert(expected.end(), at9000.begin(), at9000.end());
  expected.insert(expected.end(), moved.begin(), moved.end());
  EXPECT_EQ(drain_args(q), expected);
}

TEST(EventQueueRadixFront, LargeBucketsOfOneTimeKeepFifo) {
  RadixFrontQueue q;
  check_one_time_buckets(q);
}

TEST(EventQueueRadixFront, LargeBucketsOfOneTimeKeepFifoWithATinyFront) {
  RadixFrontQueue q(RadixFrontQueue::kMaxSeq, RadixFrontQueue::kStaleSlack, 2);
  check_one_time_buckets(q);
}

TEST(EventQueueRadixFront, LargeBucketsOfOneTimeKeepFifoAcrossRenumbering) {
  RadixFrontQueue q(/*seq_limit=*/6100);
  check_one_time_buckets(q);
}

TEST(EventQueueRadixFront, LargeBucketsOfOneTimeKeepFifoAcrossCompaction) {
  RadixFrontQueue q(RadixFrontQueue::kMaxSeq, /*stale_slack=*/0, 2);
  check_one_time_buckets(q);
}

TEST(EventQueueFactory, DefaultIsAvailable) {
  const std::unique_ptr<EventQueue> q = make_event_queue(kDefaultQueue);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->name(), "radix-front");
}

}  // namespace
}  // namespace sim
