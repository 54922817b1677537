#include "sim/lazy_radix_heap_queue.h"

#include <algorithm>
#include <bit>

#include "sim/error.h"

namespace sim {

namespace {
constexpr int kNoBucket = -1;
}

LazyRadixHeapQueue::LazyRadixHeapQueue(uint64_t seq_limit, size_t stale_slack)
    : seq_limit_(std::min(seq_limit, kMaxSeq)), stale_slack_(stale_slack) {}

uint32_t LazyRadixHeapQueue::bucket_of(Key128 w) const {
  const uint64_t hi = key_part(w) ^ key_part(last_);
  const uint64_t lo = order_part(w) ^ order_part(last_);
  if ((hi | lo) == 0) return 0;
  const bool in_time = hi != 0;
  const uint64_t diff = in_time ? hi : lo;
  const uint64_t word = in_time ? key_part(w) : order_part(w);
  const uint32_t base = in_time ? (kDigitsPerWord << kDigitBits) : 0;
  const int level = (63 - std::countl_zero(diff)) / kDigitBits;
  const uint32_t digit = static_cast<uint32_t>(word >> (level * kDigitBits)) & ((1u << kDigitBits) - 1);
  return base + (static_cast<uint32_t>(level) << kDigitBits) + digit;
}

void LazyRadixHeapQueue::insert(Key128 w, uint64_t target) {
  const uint32_t b = bucket_of(w);
  buckets_[b].push_back(Entry{key_part(w), order_part(w), target});
  nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
  if (min_known_ && w < min_) {
    min_ = w;
    min_target_ = target;
  }
  if (lo_known_ && w < lo_) {
    lo_ = w;
    lo_target_ = target;
  }
}

void LazyRadixHeapQueue::mark_stale(uint32_t slot) {
  if (min_known_ && order_part(min_) == slots_[slot].order) min_known_ = false;  // orders are unique
  ++stale_;
}

int LazyRadixHeapQueue::lowest_bucket() const {
  for (int w = 0; w < kMaskWords; ++w)
    if (nonempty_[w] != 0) return w * 64 + std::countr_zero(nonempty_[w]);
  return kNoBucket;
}

void LazyRadixHeapQueue::clear_bucket(int b) {
  buckets_[b].clear();
  nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
}

// The live entry of least key. The least entry held, live or stale (lo_), is known after most
// pops (tracked while spreading a bucket) and otherwise found by a branch-free scan of the
// lowest bucket. With no stale entry anywhere it is the answer, found without touching the slot
// table; otherwise one slot read checks it and, only if it is stale, a second scan checks
// liveness for each entry that would beat the best so far (about ln(size) slot reads for a
// bucket in random order). A bucket holding only stale entries is dropped.
void LazyRadixHeapQueue::find_min() {
  for (;;) {
    const int b = lowest_bucket();
    SIM_ASSERT(b != kNoBucket, "lazy radix heap: live count without live entries");
    const std::vector<Entry>& v = buckets_[b];
    if (!lo_known_) {
      size_t at = 0;
      Key128 best = wide(v[0]);
      for (size_t i = 1; i < v.size(); ++i) {
        const Key128 w = wide(v[i]);
        at = w < best ? i : at;
        best = w < best ? w : best;
      }
      lo_ = best;
      lo_target_ = v[at].target;
      lo_known_ = true;
    }
    if (stale_ == 0 || live(lo_)) {
      min_ = lo_;
      min_target_ = lo_target_;
      min_known_ = true;
      return;
    }
    Key128 best = kNone;
    size_t at = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const Key128 w = wide(v[i]);
      if (w < best && live(w)) {
        best = w;
        at = i;
      }
    }
    if (best != kNone) {
      min_ = best;
      min_target_ = v[at].target;
      min_known_ = true;
      return;
    }
    stale_ -= v.size();
    clear_bucket(b);
    lo_known_ = false;
  }
}

uint64_t LazyRadixHeapQueue::next_order(uint32_t slot) {
  if (next_seq_ >= seq_limit_) renumber();
  return (next_seq_++ << kSlotBits) | slot;
}

// Sequence numbers only matter relative to each other: when they run out, drop the stale
// entries, hand out 0..n-1 in (time, seq) order and rebuild the buckets around last_ = (last
// time, 0), which is still <= every pending key.
void LazyRadixHeapQueue::renumber() {
  std::vector<Entry> all;
  all.reserve(size_);
  for (std::vector<Entry>& v : buckets_) {
    for (const Entry& e : v)
      if (live(wide(e))) all.push_back(e);
    v.clear();
  }
  nonempty_ = {};
  stale_ = 0;
  min_known_ = false;
  lo_known_ = false;
  std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return wide(a) < wide(b); });
  last_ = wide(key_part(last_), 0);
  uint64_t seq = 0;
  for (const Entry& e : all) {
    const uint64_t order = (seq++ << kSlotBits) | slot_of(e.order);
    slots_[slot_of(order)].order = order;
    insert(wide(e.key, order), e.target);
  }
  next_seq_ = seq;
  SIM_ASSERT(next_seq_ < seq_limit_, "event queue: too many pending events to renumber");
}

// Removes every stale entry, bucket by bucket, in place (bucket membership does not change).
void LazyRadixHeapQueue::compact() {
  for (int b = 0; b < kBuckets; ++b) {
    std::vector<Entry>& v = buckets_[b];
    if (v.empty()) continue;
    v.erase(std::remove_if(v.begin(), v.end(), [this](const Entry& e) { return !live(wide(e)); }), v.end());
    if (v.empty()) nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
  }
  stale_ = 0;
  if (lo_known_ && !live(lo_)) lo_known_ = false;
}

uint32_t LazyRadixHeapQueue::live_slot(EventId id) const {
  SIM_ASSERT(id.valid() && id.value < slots_.size() && slots_[id.value].order != kFreeOrder,
             "event queue: id does not name a pending event");
  return id.value;
}

EventId LazyRadixHeapQueue::push(Time t, EventTarget target) {
  const uint64_t key = key_of(t);
  SIM_ASSERT(key >= key_part(last_), "event queue: push before the last popped time");
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    SIM_ASSERT(slots_.size() < (size_t{1} << kSlotBits), "event queue: too many pending events");
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(Slot{kFreeOrder, {}});
  }
  const uint64_t order = next_order(slot);  // may renumber; this slot is not live yet
  slots_[slot] = Slot{order, target};
  insert(wide(key, order), pack(target));
  ++size_;
  return EventId(slot);
}

void LazyRadixHeapQueue::reschedule(EventId id, Time t) {
  const uint32_t slot = live_slot(id);
  const uint64_t key = key_of(t);
  SIM_ASSERT(key >= key_part(last_), "event queue: reschedule before the last popped time");
  const uint64_t order = next_order(slot);  // may renumber, so mark the old entry after
  mark_stale(slot);
  Slot& s = slots_[slot];
  s.order = order;
  insert(wide(key, order), pack(s.target));
  if (stale_ > size_ + stale_slack_) compact();
}

void LazyRadixHeapQueue::cancel(EventId id) {
  const uint32_t slot = live_slot(id);
  mark_stale(slot);
  slots_[slot].order = kFreeOrder;
  free_slots_.push_back(slot);
  --size_;
  if (stale_ > size_ + stale_slack_) compact();
}

Time LazyRadixHeapQueue::next_time() {
  SIM_ASSERT(size_ > 0, "event queue: next_time on an empty queue");
  if (!min_known_) find_min();
  return time_of(key_part(min_));
}

// Raises last_ to the live minimum m and spreads its bucket, the lowest non-empty one, over the
// buckets below. (No entry lies in a lower bucket: it would be below m, and find_min drops
// lower buckets that hold only stale entries; entries pushed since are >= m.) Entries above m
// share with it every digit down to and including the one that placed them, so each moves at
// least one digit position down; entries below m are stale and are dropped. The least entry
// moved is the next lo_. Each moved entry's slot line is prefetched for writing: the slot table
// is written only at push and pop, but a cold slot line then costs a store miss that backs up
// the store buffer; RadixHeapQueue gets the same warming as a side effect of its pos_ writes.
PoppedEvent LazyRadixHeapQueue::pop() {
  SIM_ASSERT(size_ > 0, "event queue: pop on an empty queue");
  if (!min_known_) find_min();
  const Key128 m = min_;
  const uint64_t target = min_target_;
  const uint32_t slot = slot_of(m);
  slots_[slot].order = kFreeOrder;  // a store: nothing waits for it
  const int b = lowest_bucket();
  last_ = m;
  std::vector<Entry>& v = buckets_[b];
  Key128 next = kNone;
  uint64_t next_target = 0;
  if (v.size() > 1) {
    // Non-empty bits gathered locally rather than by a read-modify-write of nonempty_ per entry,
    // which would chain the iterations through memory.
    std::array<uint64_t, kMaskWords> bits{};
    size_t below = 0;
    for (const Entry& e : v) {
      // Read as three scalars and written back from them: see Key128 in the header.
      const uint64_t key = e.key, order = e.order, tgt = e.target;
      const Key128 w = wide(key, order);
      if (w <= m) {
        below += w != m;
        continue;
      }
      next_target = w < next ? tgt : next_target;
      next = w < next ? w : next;
      const uint32_t t = bucket_of(w);
      buckets_[t].push_back(Entry{key, order, tgt});
      // The slot line is written when this entry pops (and by the push that reuses the slot);
      // fetching it now, off the critical path, keeps that store from stalling the store buffer
      // behind a miss (hold at 10^6 pending: about 200 ns per hold without, 100-150 with).
      __builtin_prefetch(&slots_[slot_of(order)], 1);
      bits[t >> 6] |= uint64_t{1} << (t & 63);
    }
    stale_ -= below;
    // Word by word on purpose: a vectorised merge would read 16 bytes just written as 8.
    for (int w = 0; w <= (b >> 6); ++w)
      if (bits[w] != 0) nonempty_[w] |= bits[w];
  }
  clear_bucket(b);
  free_slots_.push_back(slot);
  --size_;
  min_known_ = false;
  lo_known_ = next != kNone;
  lo_ = next;
  lo_target_ = next_target;
  if (lo_known_) __builtin_prefetch(&slots_[slot_of(next)], 1);
  return PoppedEvent{time_of(key_part(m)), unpack(target), EventId(slot)};
}

}  // namespace sim
