#include "sim/radix_heap_queue.h"

#include <algorithm>
#include <bit>

#include "sim/error.h"

namespace sim {

RadixHeapQueue::RadixHeapQueue(uint64_t seq_limit) : seq_limit_(std::min(seq_limit, kMaxSeq)) {}

void RadixHeapQueue::insert(uint64_t key, uint64_t order, EventTarget target) {
  const uint32_t b = bucket_of(key, order);
  std::vector<Entry>& v = buckets_[b];
  pos_[order & kSlotMask] = Pos{b, static_cast<uint32_t>(v.size())};
  v.push_back(Entry{key, order, target});
  nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
}

RadixHeapQueue::Entry RadixHeapQueue::remove(uint32_t slot) {
  const uint32_t b = pos_[slot].bucket;
  const uint32_t i = pos_[slot].index;
  std::vector<Entry>& v = buckets_[b];
  const Entry e = v[i];
  if (i + 1 != v.size()) {
    v[i] = v.back();
    pos_[slot_of(v[i])].index = i;
  }
  v.pop_back();
  if (v.empty()) nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
  if (min_known_ && e.order == min_.order) min_known_ = false;  // orders are unique
  return e;
}

int RadixHeapQueue::lowest_bucket() const {
  for (int w = 0; w < kMaskWords; ++w)
    if (nonempty_[w] != 0) return w * 64 + std::countr_zero(nonempty_[w]);
  return -1;
}

void RadixHeapQueue::find_min() {
  const std::vector<Entry>& v = buckets_[lowest_bucket()];
  size_t best = 0;
  Key128 m = wide(v[0]);
  for (size_t i = 1; i < v.size(); ++i) {
    const Key128 w = wide(v[i]);
    best = w < m ? i : best;
    m = w < m ? w : m;
  }
  min_ = v[best];
  min_known_ = true;
}

// Raises last_ to the minimum and spreads the lowest bucket over the buckets below it (its
// entries share with the new last_ every digit down to and including the one that placed them,
// so each moves at least one digit position down).
// The minimum lands alone in bucket 0.
void RadixHeapQueue::refill() {
  const int b = lowest_bucket();
  if (!min_known_) find_min();
  last_ = min_;
  std::vector<Entry>& v = buckets_[b];
  // insert() inlined, with the non-empty bits gathered locally rather than by a read-modify-write
  // of nonempty_ per entry, which would chain the iterations through memory.
  std::array<uint64_t, kMaskWords> bits{};
  for (const Entry& e : v) {
    const uint32_t t = bucket_of(e);
    std::vector<Entry>& dst = buckets_[t];
    pos_[slot_of(e)] = Pos{t, static_cast<uint32_t>(dst.size())};
    dst.push_back(e);
    bits[t >> 6] |= uint64_t{1} << (t & 63);
  }
  v.clear();
  nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
  // Word by word on purpose: a vectorised merge would read 16 bytes just written as 8, and that
  // failed store forwarding waits for the store buffer (full of pos_ misses) to drain.
  for (int w = 0; w <= (b >> 6); ++w)
    if (bits[w] != 0) nonempty_[w] |= bits[w];
}

uint64_t RadixHeapQueue::next_order(uint32_t slot) {
  if (next_seq_ >= seq_limit_) renumber();
  return (next_seq_++ << kSlotBits) | slot;
}

// Sequence numbers only matter relative to each other: when they run out, hand out 0..n-1 in
// (time, seq) order and rebuild the buckets around last_ = (last time, 0), which is still <=
// every pending key.
void RadixHeapQueue::renumber() {
  std::vector<Entry> all;
  all.reserve(size_);
  for (std::vector<Entry>& v : buckets_) {
    all.insert(all.end(), v.begin(), v.end());
    v.clear();
  }
  nonempty_ = {};
  std::sort(all.begin(), all.end(), less);
  last_.order = 0;
  uint64_t seq = 0;
  for (Entry& e : all) {
    e.order = (seq++ << kSlotBits) | slot_of(e);
    insert(e.key, e.order, e.target);
  }
  next_seq_ = seq;
  min_known_ = false;
  SIM_ASSERT(next_seq_ < seq_limit_, "event queue: too many pending events to renumber");
}

uint32_t RadixHeapQueue::live_slot(EventId id) const {
  SIM_ASSERT(id.valid() && id.value < pos_.size() && pos_[id.value].bucket != kFree,
             "event queue: id does not name a pending event");
  return id.value;
}

EventId RadixHeapQueue::push(Time t, EventTarget target) {
  const uint64_t key = radix::key_of(t);
  SIM_ASSERT(key >= last_.key, "event queue: push before the last popped time");
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    SIM_ASSERT(pos_.size() < (size_t{1} << kSlotBits), "event queue: too many pending events");
    slot = static_cast<uint32_t>(pos_.size());
    pos_.push_back(Pos{kFree, 0});
  }
  const uint64_t order = next_order(slot);
  insert(key, order, target);
  ++size_;
  if (min_known_ && wide(Entry{key, order, target}) < wide(min_)) min_ = Entry{key, order, target};
  return EventId(slot);
}

void RadixHeapQueue::reschedule(EventId id, Time t) {
  const uint32_t slot = live_slot(id);
  const uint64_t key = radix::key_of(t);
  SIM_ASSERT(key >= last_.key, "event queue: reschedule before the last popped time");
  const uint64_t order = next_order(slot);  // may renumber, so remove after
  const EventTarget target = remove(slot).target;
  insert(key, order, target);
  if (min_known_ && wide(Entry{key, order, target}) < wide(min_)) min_ = Entry{key, order, target};
}

void RadixHeapQueue::cancel(EventId id) {
  const uint32_t slot = live_slot(id);
  remove(slot);
  pos_[slot].bucket = kFree;
  free_slots_.push_back(slot);
  --size_;
}

Time RadixHeapQueue::next_time() {
  SIM_ASSERT(size_ > 0, "event queue: next_time on an empty queue");
  if (!min_known_) find_min();
  return radix::time_of(min_.key);
}

PoppedEvent RadixHeapQueue::pop() {
  SIM_ASSERT(size_ > 0, "event queue: pop on an empty queue");
  if (buckets_[0].empty()) refill();
  const Entry e = buckets_[0].back();
  buckets_[0].pop_back();
  nonempty_[0] &= ~uint64_t{1};
  const uint32_t slot = slot_of(e);
  pos_[slot].bucket = kFree;
  free_slots_.push_back(slot);
  --size_;
  min_known_ = false;
  return PoppedEvent{radix::time_of(e.key), e.target, EventId(slot)};
}

}  // namespace sim
