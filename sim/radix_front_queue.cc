#include "sim/radix_front_queue.h"

#include <algorithm>
#include <bit>
#include <cstdint>

#include "sim/error.h"

namespace sim {

RadixFrontQueue::RadixFrontQueue(uint64_t seq_limit, size_t stale_slack, size_t front_max)
    : seq_limit_(std::min(seq_limit, kMaxSeq)), stale_slack_(stale_slack), front_max_(std::max<size_t>(front_max, 1)) {}

void RadixFrontQueue::place(Key128 w, uint64_t target) {
  if (w < last_) {
    insert_front(w, target);
  } else {
    insert(w, target);
  }
}

void RadixFrontQueue::insert(Key128 w, uint64_t target) {
  const uint32_t b = bucket_of(w);
  std::vector<Entry>& v = buckets_[b];
  if (v.empty()) mark_nonempty(static_cast<int>(b));
  // Scattered appends miss on each new tail line once the buckets outgrow the L2 cache, and the
  // store buffer backs up behind the miss; fetching the line a few entries ahead hides it (hold
  // at 10^6 pending: about a third faster). A prefetch never faults, even past the allocation.
  const uintptr_t tail = reinterpret_cast<uintptr_t>(v.data() + v.size());
  __builtin_prefetch(reinterpret_cast<const void*>(tail + kPrefetchAhead * sizeof(Entry)), 1);
  v.push_back(Entry{key_part(w), order_part(w), target});
}

// The front is descending: the new entry goes after every greater key. Near-term pushes land
// near the back, so little moves.
void RadixFrontQueue::insert_front(Key128 w, uint64_t target) {
  size_t lo = 0;
  size_t hi = front_.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    if (wide(front_[mid]) < w) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  front_.insert(front_.begin() + static_cast<ptrdiff_t>(lo), Entry{key_part(w), order_part(w), target});
}

void RadixFrontQueue::mark_nonempty(int b) {
  nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
  summary_ |= uint64_t{1} << (b >> 6);
}

void RadixFrontQueue::clear_bucket(int b) {
  buckets_[b].clear();
  nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
  if (nonempty_[b >> 6] == 0) summary_ &= ~(uint64_t{1} << (b >> 6));
}

int RadixFrontQueue::lowest_bucket() const {
  if (summary_ == 0) return -1;
  const int w = std::countr_zero(summary_);
  return w * 64 + std::countr_zero(nonempty_[w]);
}

// Raises last_ to the bucket's least key and moves every entry to the bucket it belongs in
// relative to that (a lower one; the least entry itself goes to bucket 0). The bucket's buffer
// is swapped out first, so the moves never write into the vector being read.
void RadixFrontQueue::spread(int b) {
  Key128 least = kNone;
  for (const Entry& e : buckets_[b]) least = std::min(least, wide(e));
  last_ = least;
  spread_tmp_.swap(buckets_[b]);
  clear_bucket(b);
  for (const Entry& e : spread_tmp_) {
    const uint64_t key = e.key, order = e.order, target = e.target;
    insert(wide(key, order), target);
  }
  spread_tmp_.clear();
}

void RadixFrontQueue::refill() {
  for (;;) {
    const int b = lowest_bucket();
    SIM_ASSERT(b >= 0, "radix-front queue: live count without live entries");
    if (buckets_[b].size() <= front_max_) break;
    spread(b);
  }
  gathered_.clear();
  for (int b = lowest_bucket(); b >= 0; b = lowest_bucket()) {
    const std::vector<Entry>& v = buckets_[b];
    if (!gathered_.empty() && gathered_.size() + v.size() > front_max_) break;
    gathered_.insert(gathered_.end(), v.begin(), v.end());
    clear_bucket(b);
  }
  sort_into_front();
  last_ = wide(front_.front());
}

// Stable LSD radix sort of gathered_ on (time - least time), 8 bits a pass, written to front_
// in reverse, so front_ is descending and its back is the least key. Equal times keep their
// gathered order, which is sequence order (see the header).
void RadixFrontQueue::sort_into_front() {
  const size_t n = gathered_.size();
  uint64_t lo = ~uint64_t{0};
  uint64_t hi = 0;
  for (const Entry& e : gathered_) {
    lo = std::min(lo, e.key);
    hi = std::max(hi, e.key);
  }
  const int passes = static_cast<int>((std::bit_width(hi - lo) + 7) / 8);
  front_.resize(n);
  if (passes == 0) {
    std::reverse_copy(gathered_.begin(), gathered_.end(), front_.begin());
    return;
  }
  sort_tmp_.resize(n);
  std::vector<Entry>* src = &gathered_;
  std::vector<Entry>* dst = &sort_tmp_;
  for (int p = 0; p < passes; ++p) {
    const int shift = 8 * p;
    std::array<uint32_t, 257> start{};  // start[d + 1] counts digit d, then prefix sums
    for (const Entry& e : *src) ++start[((e.key - lo) >> shift & 0xFF) + 1];
    for (size_t d = 0; d < 256; ++d) start[d + 1] += start[d];
    if (p + 1 == passes) {
      for (const Entry& e : *src) front_[n - 1 - start[(e.key - lo) >> shift & 0xFF]++] = e;
    } else {
      for (const Entry& e : *src) (*dst)[start[(e.key - lo) >> shift & 0xFF]++] = e;
      std::swap(src, dst);
    }
  }
}

// Leaves the live minimum at the back of the front. Only when size_ > 0.
void RadixFrontQueue::settle_front() {
  for (;;) {
    if (front_.empty()) refill();
    if (stale_ == 0 || live(front_.back())) return;
    front_.pop_back();
    --stale_;
  }
}

// The next free slot at or after the cursor, in ring order (see the header). The table grows by
// doubling, always a multiple of 64 slots, so the bitmap has whole words.
uint32_t RadixFrontQueue::take_slot() {
  if (2 * (size_ + 1) > slots_.size()) {
    const size_t n = std::max<size_t>(64, 2 * slots_.size());
    SIM_ASSERT(n <= (size_t{1} << kSlotBits), "event queue: too many pending events");
    slots_.resize(n, Slot{kFreeOrder, 0});
    pending_.resize(n / 64, 0);
  }
  const size_t words = pending_.size();
  size_t w = cursor_ >> 6;
  uint64_t free = ~pending_[w] & (~uint64_t{0} << (cursor_ & 63));
  while (free == 0) {
    w = w + 1 == words ? 0 : w + 1;
    free = ~pending_[w];
  }
  const size_t at = w * 64 + static_cast<size_t>(std::countr_zero(free));
  pending_[w] |= uint64_t{1} << (at & 63);
  cursor_ = at + 1 == slots_.size() ? 0 : at + 1;
  return static_cast<uint32_t>(at);
}

uint64_t RadixFrontQueue::next_order(uint32_t slot) {
  if (next_seq_ >= seq_limit_) renumber();
  return (next_seq_++ << kSlotBits) | slot;
}

// Sequence numbers only matter relative to each other: when they run out, drop the stale
// entries, hand out 1..n in (time, seq) order and put everything back in buckets around
// last_ = (last popped time, 0), which is below every pending key. (A free slot may
// keep an old order that a new number repeats; no entry names it until a push rewrites it.)
void RadixFrontQueue::renumber() {
  std::vector<Entry> all;
  all.reserve(size_);
  for (const Entry& e : front_)
    if (live(e)) all.push_back(e);
  front_.clear();
  for (int b = 0; b < kBuckets; ++b) {
    if (buckets_[b].empty()) continue;
    for (const Entry& e : buckets_[b])
      if (live(e)) all.push_back(e);
    clear_bucket(b);
  }
  stale_ = 0;
  std::sort(all.begin(), all.end(), [](const Entry& a, const Entry& b) { return wide(a) < wide(b); });
  last_ = wide(popped_key_, 0);
  uint64_t seq = 1;
  for (const Entry& e : all) {
    const uint64_t order = (seq++ << kSlotBits) | slot_of(e.order);
    slots_[slot_of(order)].order = order;
    insert(wide(e.key, order), e.target);
  }
  next_seq_ = seq;
  SIM_ASSERT(next_seq_ < seq_limit_, "event queue: too many pending events to renumber");
}

// Removes every stale entry in place (order kept, bucket membership unchanged).
void RadixFrontQueue::compact() {
  const auto stale = [this](const Entry& e) { return !live(e); };
  front_.erase(std::remove_if(front_.begin(), front_.end(), stale), front_.end());
  for (int b = 0; b < kBuckets; ++b) {
    std::vector<Entry>& v = buckets_[b];
    if (v.empty()) continue;
    v.erase(std::remove_if(v.begin(), v.end(), stale), v.end());
    if (v.empty()) clear_bucket(b);
  }
  stale_ = 0;
}

uint32_t RadixFrontQueue::live_slot(EventId id) const {
  SIM_ASSERT(id.valid() && id.value < slots_.size() && pending(id.value),
             "event queue: id does not name a pending event");
  return id.value;
}

EventId RadixFrontQueue::push(Time t, EventTarget target) {
  const uint64_t key = radix::key_of(t);
  SIM_ASSERT(key >= popped_key_, "event queue: push before the last popped time");
  const uint32_t slot = take_slot();
  const uint64_t order = next_order(slot);  // may renumber; this slot is not live yet
  slots_[slot] = Slot{order, pack(target)};
  place(wide(key, order), pack(target));
  ++size_;
  return EventId(slot);
}

void RadixFrontQueue::reschedule(EventId id, Time t) {
  const uint32_t slot = live_slot(id);
  const uint64_t key = radix::key_of(t);
  SIM_ASSERT(key >= popped_key_, "event queue: reschedule before the last popped time");
  const uint64_t order = next_order(slot);  // may renumber, so the slot is written after
  Slot& s = slots_[slot];
  s.order = order;
  ++stale_;
  place(wide(key, order), s.target);
  if (stale_ > size_ + stale_slack_) compact();
}

void RadixFrontQueue::cancel(EventId id) {
  const uint32_t slot = live_slot(id);
  slots_[slot].order = kFreeOrder;
  set_free(slot);
  ++stale_;
  --size_;
  if (stale_ > size_ + stale_slack_) compact();
}

Time RadixFrontQueue::next_time() {
  SIM_ASSERT(size_ > 0, "event queue: next_time on an empty queue");
  settle_front();
  return radix::time_of(front_.back().key);
}

PoppedEvent RadixFrontQueue::pop() {
  SIM_ASSERT(size_ > 0, "event queue: pop on an empty queue");
  settle_front();
  const Entry e = front_.back();
  front_.pop_back();
  popped_key_ = e.key;
  set_free(slot_of(e.order));
  --size_;
  return PoppedEvent{radix::time_of(e.key), unpack(e.target), EventId(slot_of(e.order))};
}

}  // namespace sim
