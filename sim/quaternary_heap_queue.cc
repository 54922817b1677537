#include "sim/quaternary_heap_queue.h"

#include <algorithm>

#include "sim/error.h"

namespace sim {

namespace {
// Physical index p holds logical node p - 3; its children are 4p-8 .. 4p-5 and its parent p/4+2.
constexpr size_t first_child(size_t p) { return 4 * p - 8; }
constexpr size_t parent(size_t p) { return p / 4 + 2; }
}  // namespace

QuaternaryHeapQueue::QuaternaryHeapQueue(uint64_t seq_limit) : seq_limit_(std::min(seq_limit, kMaxSeq)) {
  heap_.resize(kRoot, Entry{0, 0});
}

uint64_t QuaternaryHeapQueue::next_order(uint32_t slot) {
  if (next_seq_ >= seq_limit_) renumber();
  return (next_seq_++ << kSlotBits) | slot;
}

// Sequence numbers only matter relative to each other, so when they run out we hand out fresh
// ones 0..n-1 in (time, seq) order. A sorted array is a valid heap, so no sifting is needed.
void QuaternaryHeapQueue::renumber() {
  std::sort(heap_.begin() + kRoot, heap_.end(), less);
  uint64_t seq = 0;
  for (size_t p = kRoot; p < heap_.size(); ++p) {
    Entry& e = heap_[p];
    e.order = (seq++ << kSlotBits) | slot_of(e);
    slots_[slot_of(e)].pos = static_cast<uint32_t>(p);
  }
  next_seq_ = seq;
  SIM_ASSERT(next_seq_ < seq_limit_, "event queue: too many pending events to renumber");
}

uint32_t QuaternaryHeapQueue::live_slot(EventId id) const {
  SIM_ASSERT(id.valid() && id.value < slots_.size() && slots_[id.value].pos != kFree,
             "event queue: id does not name a pending event");
  return id.value;
}

void QuaternaryHeapQueue::sift_up(size_t p, Entry e) {
  while (p > kRoot) {
    const size_t q = parent(p);
    if (!less(e, heap_[q])) break;
    place(p, heap_[q]);
    p = q;
  }
  place(p, e);
}

void QuaternaryHeapQueue::sift_down(size_t p, Entry e) {
  const size_t n = heap_.size();
  for (;;) {
    const size_t c = first_child(p);
    if (c >= n) break;
    size_t m = c;
    if (c + 3 < n) {
      // Full group (the common case): a tournament keeps the comparisons independent.
      const size_t a = less(heap_[c + 1], heap_[c]) ? c + 1 : c;
      const size_t b = less(heap_[c + 3], heap_[c + 2]) ? c + 3 : c + 2;
      m = less(heap_[b], heap_[a]) ? b : a;
    } else {
      for (size_t k = c + 1; k < n; ++k)
        if (less(heap_[k], heap_[m])) m = k;
    }
    if (!less(heap_[m], e)) break;
    place(p, heap_[m]);
    p = m;
  }
  place(p, e);
}

EventId QuaternaryHeapQueue::push(Time t, EventTarget target) {
  SIM_ASSERT(t >= last_time_, "event queue: push before the last popped time");
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    SIM_ASSERT(slots_.size() < (size_t{1} << kSlotBits), "event queue: too many pending events");
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(Slot{kFree, {}});
  }
  slots_[slot].target = target;
  const Entry e{t.count_ns(), next_order(slot)};
  heap_.push_back(e);
  sift_up(heap_.size() - 1, e);
  return EventId(slot);
}

void QuaternaryHeapQueue::reschedule(EventId id, Time t) {
  const uint32_t slot = live_slot(id);
  SIM_ASSERT(t >= last_time_, "event queue: reschedule before the last popped time");
  const Entry e{t.count_ns(), next_order(slot)};  // may renumber, so read pos after
  const size_t p = slots_[slot].pos;
  if (less(e, heap_[p]))
    sift_up(p, e);
  else
    sift_down(p, e);
}

void QuaternaryHeapQueue::remove_at(size_t p) {
  const Entry last = heap_.back();
  heap_.pop_back();
  if (p == heap_.size()) return;  // it was the last entry
  if (p > kRoot && less(last, heap_[parent(p)]))
    sift_up(p, last);
  else
    sift_down(p, last);
}

void QuaternaryHeapQueue::cancel(EventId id) {
  const uint32_t slot = live_slot(id);
  remove_at(slots_[slot].pos);
  slots_[slot].pos = kFree;
  free_slots_.push_back(slot);
}

Time QuaternaryHeapQueue::next_time() {
  SIM_ASSERT(!empty(), "event queue: next_time on an empty queue");
  return Time::ns(heap_[kRoot].time);
}

PoppedEvent QuaternaryHeapQueue::pop() {
  SIM_ASSERT(!empty(), "event queue: pop on an empty queue");
  const Entry top = heap_[kRoot];
  const uint32_t slot = slot_of(top);
  remove_at(kRoot);
  Slot& s = slots_[slot];
  s.pos = kFree;
  free_slots_.push_back(slot);
  last_time_ = Time::ns(top.time);
  return PoppedEvent{last_time_, s.target, EventId(slot)};
}

}  // namespace sim
