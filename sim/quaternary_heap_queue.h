// sim/quaternary_heap_queue.h: EventQueue as an indexed 4-ary min-heap.
//
// Provides: push, pop, reschedule and cancel in O(log_4 n); next_time, size, empty in O(1).
// Layout: the heap is an array of 16-byte entries {time, order}, where order packs the sequence
// number above the slot index (order = seq << kSlotBits | slot). Comparing (time, order) is thus
// comparing (time, seq), since seqs are unique; the slot rides along for free and tells us whose
// heap position to update when an entry moves. The four children of a node share one 64-byte
// cache line (the array is 64-byte aligned and the root sits at index 3).
// Slots hold the event target and the entry's heap position; freed slots go on a free list, so
// once the pool has grown to the peak pending count nothing is allocated.
// Invariants: heap order on (time, order); slots_[slot_of(heap_[p])].pos == p for every live p;
// a free slot has pos == kFree. Sequence numbers are renumbered in (time, seq) order when they
// would overflow their bits, which keeps FIFO order among equal times forever.
// Fastest of the two below ~10^4 pending; above that each level is a cache miss (see
// radix_heap_queue.h).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <new>
#include <vector>

#include "sim/event_queue.h"

namespace sim {

// std::allocator with a fixed alignment, so heap child groups line up with cache lines.
template <class T, size_t kAlign>
struct AlignedAllocator {
  using value_type = T;
  template <class U>
  struct rebind {
    using other = AlignedAllocator<U, kAlign>;
  };
  AlignedAllocator() = default;
  template <class U>
  AlignedAllocator(const AlignedAllocator<U, kAlign>&) {}
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlign))); }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(kAlign)); }
  template <class U>
  bool operator==(const AlignedAllocator<U, kAlign>&) const { return true; }
};

class QuaternaryHeapQueue final : public EventQueue {
 public:
  static constexpr int kSlotBits = 28;  // up to 268M pending events
  static constexpr uint64_t kMaxSeq = uint64_t{1} << (64 - kSlotBits);

  // seq_limit: renumber sequence numbers when they reach it (tests lower it to exercise that).
  explicit QuaternaryHeapQueue(uint64_t seq_limit = kMaxSeq);

  EventId push(Time t, EventTarget target) override;
  void reschedule(EventId id, Time t) override;
  void cancel(EventId id) override;
  bool empty() const override { return heap_.size() == kRoot; }
  size_t size() const override { return heap_.size() - kRoot; }
  Time next_time() override;
  PoppedEvent pop() override;
  std::string_view name() const override { return "quaternary-heap"; }

 private:
  struct Entry {
    int64_t time;
    uint64_t order;  // seq << kSlotBits | slot
  };
  struct Slot {
    uint32_t pos;  // index in heap_, or kFree
    EventTarget target;
  };
  static constexpr uint32_t kFree = 0xFFFFFFFFu;
  static constexpr size_t kRoot = 3;  // heap_[0..2] are padding so child groups start at 4k
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;

  static bool less(const Entry& a, const Entry& b) {
    return a.time < b.time || (a.time == b.time && a.order < b.order);
  }
  static uint32_t slot_of(const Entry& e) { return static_cast<uint32_t>(e.order & kSlotMask); }
  uint64_t next_order(uint32_t slot);
  void renumber();
  void place(size_t p, const Entry& e) {
    heap_[p] = e;
    slots_[slot_of(e)].pos = static_cast<uint32_t>(p);
  }
  void sift_up(size_t p, Entry e);
  void sift_down(size_t p, Entry e);
  void remove_at(size_t p);
  uint32_t live_slot(EventId id) const;

  std::vector<Entry, AlignedAllocator<Entry, 64>> heap_;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  uint64_t next_seq_ = 0;
  uint64_t seq_limit_;
  Time last_time_ = Time::ns(std::numeric_limits<int64_t>::min());  // of the last pop
};

}  // namespace sim
