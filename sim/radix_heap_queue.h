// sim/radix_heap_queue.h: EventQueue as a radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990) over
// monotone keys.
//
// Key: the pair (time, order), compared as one 128-bit number, where order = seq << kSlotBits |
// slot as in quaternary_heap_queue.h. Keys are unique, and every key pushed is above the last key
// popped: its time is not earlier (the EventQueue contract, SIM_ASSERTed) and at an equal time its
// fresh seq is larger. So the pair is itself a monotone radix-heap key and FIFO order among equal
// times comes out of the structure, with no sorting and no special same-time bucket.
// Buckets: a radix heap on 4-bit digits rather than bits, so that an entry descends at least a
// whole digit per move (fewer moves, and each move costs a random write of its slot's position;
// in the hold benchmark 4-bit digits beat 2- and 8-bit ones).
// Bucket 0 holds the entry equal to last_ (the last minimum taken). Any other entry goes by the
// highest digit position L where its 128-bit key differs from last_ and its digit d there
// (d > last_'s digit): bucket 16 * L + d, with L = 0..15 the order half (same time as last_) and
// L = 16..31 the time half. Bucket order is key order, so the lowest non-empty bucket holds the
// minimum, and refilling a bucket sends each of its entries to a lower one.
// Complexity: push, cancel and reschedule O(1); pop amortized O(digit positions an entry
// descends, at most 32), in practice flat in the pending count: each refill scans one bucket sequentially,
// which is why it beats a comparison heap once the pending set leaves the cache.
// Slots hold only the entry's (bucket, index); the entry itself carries the target. Cancel and
// reschedule swap-remove in place. Freed slots are recycled; bucket vectors keep their capacity,
// so a grown queue does not allocate. Memory: 24 bytes per entry + 8 per slot (+ vector slack).
// next_time() does not refill (a refill would raise last_ to the minimum and forbid pushes
// between the last pop and that minimum, which the run loop makes during settle); it finds the
// minimum by scanning the lowest bucket and caches it for the next pop.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/event_queue.h"
#include "sim/radix_key.h"

namespace sim {

class RadixHeapQueue final : public EventQueue {
 public:
  static constexpr int kSlotBits = 28;  // up to 268M pending events
  static constexpr uint64_t kMaxSeq = uint64_t{1} << (64 - kSlotBits);

  // seq_limit: renumber sequence numbers when they reach it (tests lower it to exercise that).
  explicit RadixHeapQueue(uint64_t seq_limit = kMaxSeq);

  EventId push(Time t, EventTarget target) override;
  void reschedule(EventId id, Time t) override;
  void cancel(EventId id) override;
  bool empty() const override { return size_ == 0; }
  size_t size() const override { return size_; }
  Time next_time() override;
  PoppedEvent pop() override;
  std::string_view name() const override { return "radix-heap"; }

 private:
  // The target rides in the entry so that pop never touches per-slot memory, which would be a
  // cache miss per event at 10^6 pending; moving 24 instead of 16 bytes costs little in a
  // sequential refill.
  struct Entry {
    uint64_t key;    // time with the sign bit flipped, so unsigned order is time order
    uint64_t order;  // seq << kSlotBits | slot
    EventTarget target;
  };
  static constexpr int kDigitBits = 4;
  static constexpr int kDigitsPerWord = 64 / kDigitBits;
  static constexpr int kBuckets = 2 * kDigitsPerWord << kDigitBits;  // 512
  static constexpr int kMaskWords = kBuckets / 64;
  static constexpr uint32_t kFree = 0xFFFFFFFFu;
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;

  // One 128-bit compare: branch-free, which matters in the min scan of a refill.
  __extension__ using Key128 = unsigned __int128;
  static Key128 wide(const Entry& e) { return (static_cast<Key128>(e.key) << 64) | e.order; }
  static bool less(const Entry& a, const Entry& b) { return wide(a) < wide(b); }
  static uint32_t slot_of(const Entry& e) { return static_cast<uint32_t>(e.order & kSlotMask); }

  uint32_t bucket_of(uint64_t key, uint64_t order) const {
    return radix::bucket_of<kDigitBits>(key, order, last_.key, last_.order);
  }
  uint32_t bucket_of(const Entry& e) const { return bucket_of(e.key, e.order); }
  // Entries are built from scalars here rather than copied from a struct just written field by
  // field: such a copy is a wide load of narrow recent stores, which cannot be forwarded and so
  // waits until every store before it, pos_ misses included, has reached the cache.
  void insert(uint64_t key, uint64_t order, EventTarget target);
  Entry remove(uint32_t slot);  // takes the slot's entry out of its bucket; the slot stays live
  int lowest_bucket() const;    // lowest non-empty bucket; only when size_ > 0
  void find_min();
  void refill();
  uint64_t next_order(uint32_t slot);
  void renumber();
  uint32_t live_slot(EventId id) const;

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::array<uint64_t, kMaskWords> nonempty_{};  // bit b: buckets_[b] is not empty
  struct Pos {
    uint32_t bucket;  // kFree when the slot is not pending
    uint32_t index;   // in buckets_[bucket]
  };
  // Written on every move of an entry, so kept at 8 bytes a slot; the target lives in the entry.
  std::vector<Pos> pos_;
  std::vector<uint32_t> free_slots_;
  size_t size_ = 0;
  Entry last_{0, 0, {}};  // the last minimum taken; every pending entry is >= it
  bool min_known_ = false;
  Entry min_{0, 0, {}};  // the pending minimum, when min_known_
  uint64_t next_seq_ = 0;
  uint64_t seq_limit_;
};

}  // namespace sim
