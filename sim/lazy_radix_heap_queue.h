// sim/lazy_radix_heap_queue.h: EventQueue as a radix heap with lazy deletion.
//
// Same keys and buckets as radix_heap_queue.h: an entry's key is the 128-bit pair (time, order),
// order = seq << kSlotBits | slot, unique and monotone, so FIFO order among equal times comes out
// of the structure. Buckets go by the highest digit where a key differs from last_ (the last
// minimum taken) and the key's digit there; bucket order is key order.
// The difference: nothing records where an entry sits. RadixHeapQueue writes a slot's (bucket,
// index) on every move of its entry; here a refill is a sequential pass over one bucket, as in
// the minimal radix heap of perf-bench/pq2.cc. Instead each slot holds the order of its current
// entry (and the target). An entry is live iff slots_[slot_of(e)].order == e.order:
//   reschedule: a fresh order for the slot and a new entry; the old entry goes stale in place.
//   cancel:     the slot is freed (its order set to kFreeOrder); the entry goes stale in place.
// A freed slot reused by a later push gets a fresh order, so old entries of it stay stale.
// Minimum: the live entry of least key, in the lowest bucket that holds a live entry. The least
// entry held (live or stale) is tracked while a pop spreads a bucket, else found by a scan;
// while no stale entry exists it is the answer with no slot read at all, otherwise one slot read
// checks it and, only if stale, a second scan checks liveness just for entries that beat the
// best so far; a bucket holding only stale entries is dropped. next_time() finds and caches it
// without moving last_ (a refill would forbid the settle-phase pushes between the last pop and
// that minimum; see radix_heap_queue.h); pop() then sets last_ to it and spreads its bucket over
// lower buckets, dropping the entries below it, which are all stale. Invariant: every entry,
// live or stale, is >= last_.
// Stale entries are bounded: besides those dropped as time passes them, when stale entries
// outnumber live ones by more than kStaleSlack, one sweep over all buckets removes every stale
// entry (a liveness check per entry, no reordering). That sweep is paid for by the > size()
// reschedules and cancels that made the garbage, so each costs O(1) amortized, and the queue
// never holds more than 2 * size() + kStaleSlack entries however often the engine moves its
// completions (checked with 20M random reschedules over 5000 pending; the shared tests also run
// a copy with slack 0, compacting constantly). Renumbering also drops every stale entry.
// The target rides in the entry, so pop reads no slot while nothing is stale; the slot line is
// only written at pop and push, and prefetched for writing when the entry moves (see pop()).
// Measured (tests/bench/bench_engine.cc, noisy 2-core machine): about level with RadixHeapQueue
// on the hold model, 10-15 % faster at 10^6 pending, slower at 10^3-10^5 in the reschedule storm.
// Memory: 24 bytes per entry (live or stale) + 16 per slot (+ vector slack). Bucket vectors and
// the slot pool keep their capacity, so a grown queue does not allocate.
#pragma once

#include <array>
#include <bit>
#include <cstdint>
#include <vector>

#include "sim/event_queue.h"

namespace sim {

class LazyRadixHeapQueue final : public EventQueue {
 public:
  static constexpr int kSlotBits = 28;  // up to 268M slots
  // One below 2^(64 - kSlotBits), so no live order equals kFreeOrder (all ones).
  static constexpr uint64_t kMaxSeq = (uint64_t{1} << (64 - kSlotBits)) - 1;
  static constexpr size_t kStaleSlack = 1024;

  // seq_limit: renumber sequence numbers when they reach it; stale_slack: compact when stale
  // entries exceed live ones by more than this (tests lower both to exercise those paths).
  explicit LazyRadixHeapQueue(uint64_t seq_limit = kMaxSeq, size_t stale_slack = kStaleSlack);

  EventId push(Time t, EventTarget target) override;
  void reschedule(EventId id, Time t) override;
  void cancel(EventId id) override;
  bool empty() const override { return size_ == 0; }
  size_t size() const override { return size_; }
  Time next_time() override;
  PoppedEvent pop() override;
  std::string_view name() const override { return "lazy-radix-heap"; }

  // Entries held, live or stale (tests check the bound on stale ones).
  size_t entries() const { return size_ + stale_; }

 private:
  struct Slot {
    uint64_t order;  // the order of the slot's live entry; kFreeOrder when not pending
    EventTarget target;
  };
  static constexpr int kDigitBits = 4;
  static constexpr int kDigitsPerWord = 64 / kDigitBits;
  static constexpr int kBuckets = 2 * kDigitsPerWord << kDigitBits;  // 512
  static constexpr int kMaskWords = kBuckets / 64;
  static constexpr uint64_t kFreeOrder = ~uint64_t{0};
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
  static constexpr uint64_t kSignBit = uint64_t{1} << 63;

  // A key as one 128-bit number: time (sign bit flipped, so unsigned order is time order) in the
  // high half, order = seq << kSlotBits | slot in the low half; compared in one branch-free step.
  // last_, min_ and lo_ are kept as Key128 (two 8-byte words), so no 16-byte load reads two
  // recent 8-byte stores: that cannot be store-forwarded and waits for the store buffer to drain.
  __extension__ using Key128 = unsigned __int128;
  static constexpr Key128 kNone = ~Key128{0};  // above every live key: no live order is all ones
  static Key128 wide(uint64_t key, uint64_t order) { return (static_cast<Key128>(key) << 64) | order; }
  static uint64_t key_part(Key128 w) { return static_cast<uint64_t>(w >> 64); }
  static uint64_t order_part(Key128 w) { return static_cast<uint64_t>(w); }
  static uint32_t slot_of(uint64_t order) { return static_cast<uint32_t>(order & kSlotMask); }
  static uint32_t slot_of(Key128 w) { return slot_of(order_part(w)); }
  static uint64_t key_of(Time t) { return static_cast<uint64_t>(t.count_ns()) ^ kSignBit; }
  static Time time_of(uint64_t key) { return Time::ns(static_cast<int64_t>(key ^ kSignBit)); }

  // An entry as held: the key's two words and the target, so that pop need not read the slot (a
  // cache miss at 10^6 pending) while no stale entry exists.
  struct Entry {
    uint64_t key;
    uint64_t order;
    uint64_t target;
  };
  // Bit copies, not shifts: the target is then stored as one 8-byte word wherever it goes, and
  // the caller's 8-byte read of PoppedEvent::target forwards from that store. (Two 4-byte
  // stores read as 8 bytes cannot forward and would wait for the store buffer to drain.)
  static_assert(sizeof(EventTarget) == sizeof(uint64_t));
  static uint64_t pack(EventTarget t) { return std::bit_cast<uint64_t>(t); }
  static EventTarget unpack(uint64_t p) { return std::bit_cast<EventTarget>(p); }
  static Key128 wide(const Entry& e) { return wide(e.key, e.order); }

  bool live(Key128 w) const { return slots_[slot_of(w)].order == order_part(w); }
  uint32_t bucket_of(Key128 w) const;
  void insert(Key128 w, uint64_t target);
  void mark_stale(uint32_t slot);  // the slot's entry goes stale; drops the cached minimum if it
  int lowest_bucket() const;       // lowest non-empty bucket, -1 if none
  void clear_bucket(int b);
  void find_min();  // only when size_ > 0
  uint64_t next_order(uint32_t slot);
  void renumber();
  void compact();
  uint32_t live_slot(EventId id) const;

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::array<uint64_t, kMaskWords> nonempty_{};  // bit b: buckets_[b] is not empty
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  size_t size_ = 0;   // live entries
  size_t stale_ = 0;  // stale entries still in buckets
  Key128 last_ = 0;  // the last minimum taken; every entry held is >= it
  bool min_known_ = false;
  Key128 min_ = 0;  // the live minimum, when min_known_
  uint64_t min_target_ = 0;
  bool lo_known_ = false;
  Key128 lo_ = 0;  // the least entry held, live or stale, when lo_known_
  uint64_t lo_target_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t seq_limit_;
  size_t stale_slack_;
};

}  // namespace sim
