#include "sim/radix_front_queue.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <utility>

#include "sim/error.h"

namespace sim {

RadixFrontQueue::RadixFrontQueue(uint64_t seq_limit, size_t stale_slack, size_t front_max)
    : seq_limit_(std::min(seq_limit, kMaxSeq)),
      stale_slack_(std::min(stale_slack, kMaxStaleSlack)),
      front_max_(std::max<size_t>(front_max, 1)) {}

void RadixFrontQueue::place(Key128 w, uint64_t target) {
  if (w < last_) {
    insert_front(w, target);
  } else {
    insert(w, target);
  }
}

void RadixFrontQueue::insert(Key128 w, uint64_t target) {
  const uint32_t b = bucket_of(w);
  Bucket& bucket = buckets_[b];
  if (bucket.size == 0) {
    mark_nonempty(static_cast<int>(b));
    bucket.time = key_part(w);
    bucket.one_time = true;
  } else if (key_part(w) != bucket.time) {
    bucket.one_time = false;
  }
  if (bucket.room == 0) append_block(bucket);
  // Scattered appends miss on each new tail line once the buckets outgrow the L2 cache, and the
  // store buffer backs up behind the miss; fetching the line a few entries ahead hides it (hold
  // at 10^6 pending: about a third faster). A prefetch never faults, even past the allocation.
  __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(bucket.tail) + kPrefetchAhead * sizeof(Entry)), 1);
  *bucket.tail++ = Entry{key_part(w), order_part(w), target};
  --bucket.room;
  ++bucket.size;
}

uint32_t RadixFrontQueue::take_block() {
  if (free_blocks_ == kNoBlock) {
    chunks_.push_back(std::make_unique<Entry[]>(kBlockEntries * kBlocksPerChunk));
    for (size_t i = kBlocksPerChunk; i-- > 0;) {
      blocks_.push_back(chunks_.back().get() + i * kBlockEntries);
      next_block_.push_back(free_blocks_);
      free_blocks_ = static_cast<uint32_t>(blocks_.size() - 1);
    }
  }
  const uint32_t block = free_blocks_;
  free_blocks_ = next_block_[block];
  return block;
}

void RadixFrontQueue::free_block(uint32_t block) {
  next_block_[block] = free_blocks_;
  free_blocks_ = block;
}

void RadixFrontQueue::append_block(Bucket& bucket) {
  const uint32_t block = take_block();
  next_block_[block] = kNoBlock;
  if (bucket.last == kNoBlock) {
    bucket.head = block;
  } else {
    next_block_[bucket.last] = block;
  }
  bucket.last = block;
  bucket.tail = blocks_[block];
  bucket.room = kBlockEntries;
}

// The front is descending: the new entry goes after every greater key (Front::insert).
void RadixFrontQueue::insert_front(Key128 w, uint64_t target) {
  front_.insert(Entry{key_part(w), order_part(w), target});
}

void RadixFrontQueue::mark_nonempty(int b) {
  nonempty_[b >> 6] |= uint64_t{1} << (b & 63);
  summary_ |= uint64_t{1} << (b >> 6);
}

// Frees the bucket's blocks and marks it empty.
void RadixFrontQueue::clear_bucket(int b) {
  Bucket& bucket = buckets_[b];
  for (uint32_t block = bucket.head; block != kNoBlock;) {
    const uint32_t next = next_block_[block];
    free_block(block);
    block = next;
  }
  bucket = Bucket{};
  nonempty_[b >> 6] &= ~(uint64_t{1} << (b & 63));
  if (nonempty_[b >> 6] == 0) summary_ &= ~(uint64_t{1} << (b >> 6));
}

int RadixFrontQueue::lowest_bucket() const {
  if (summary_ == 0) return -1;
  const int w = std::countr_zero(summary_);
  return w * 64 + std::countr_zero(nonempty_[w]);
}

// Raises last_ to the floor of bucket b (the lowest non-empty one) and moves every entry to the
// bucket it belongs in relative to that: a lower one, since each entry agrees with the floor at
// b's level and above.
void RadixFrontQueue::spread(int b) {
  const Bucket bucket = buckets_[b];
  last_ = bucket_floor(b);
  // No entry comes back to b, so its blocks can be freed as they are read (and reused at once by
  // the appends, while their lines are still cached): b is marked empty without freeing them.
  buckets_[b].head = kNoBlock;
  clear_bucket(b);
  for (uint32_t block = bucket.head; block != kNoBlock;) {
    const Entry* const end = block_end(bucket, block);
    // The bucket was written long ago and is read once: fetch the next block while this one is
    // spread (blocks are not adjacent, so the hardware prefetcher cannot guess it).
    if (next_block_[block] != kNoBlock) {
      const char* const ahead = reinterpret_cast<const char*>(blocks_[next_block_[block]]);
      for (size_t at = 0; at < kBlockEntries * sizeof(Entry); at += 64) __builtin_prefetch(ahead + at, 0, 2);
    }
    for (const Entry* e = blocks_[block]; e != end; ++e) {
      const uint64_t key = e->key, order = e->order, target = e->target;
      insert(wide(key, order), target);
    }
    const uint32_t next = next_block_[block];
    free_block(block);
    block = next;
  }
}

// The least key bucket b can hold, relative to last_: last_'s digits above b's level, b's digit
// at that level, zeros below (and order 0 for a time bucket).
RadixFrontQueue::Key128 RadixFrontQueue::bucket_floor(int b) const {
  constexpr int kTimeBase = kDigitsPerWord << kDigitBits;
  const bool in_time = b >= kTimeBase;
  const int level = (b - (in_time ? kTimeBase : 0)) >> kDigitBits;
  const uint64_t digit = static_cast<uint64_t>(b & ((1 << kDigitBits) - 1));
  const int low_bits = (level + 1) * kDigitBits;  // bits at and below the level
  const uint64_t keep = low_bits >= 64 ? 0 : ~uint64_t{0} << low_bits;
  const uint64_t word = in_time ? key_part(last_) : order_part(last_);
  const uint64_t floor = (word & keep) | digit << (level * kDigitBits);
  return in_time ? wide(floor, 0) : wide(key_part(last_), floor);
}

void RadixFrontQueue::refill() {
  for (;;) {
    const int b = lowest_bucket();
    SIM_ASSERT(b >= 0, "radix-front queue: live count without live entries");
    if (buckets_[b].size <= front_max_ || buckets_[b].one_time) break;
    spread(b);
  }
  gathered_.clear();
  for (int b = lowest_bucket(); b >= 0; b = lowest_bucket()) {
    const Bucket& bucket = buckets_[b];
    if (!gathered_.empty() && gathered_.size() + bucket.size > front_max_) break;
    for (uint32_t block = bucket.head; block != kNoBlock; block = next_block_[block])
      gathered_.insert(gathered_.end(), blocks_[block], block_end(bucket, block));
    clear_bucket(b);
  }
  sort_into_front();
  last_ = wide(front_.front());
}

// Sorts gathered_ into front_, descending, so the back is the least key. Entries all of one time
// are in sequence order already (see the header), however many: reversing them is the sort.
// Fast path (at most 256 entries spanning less than 2^56 ns, i.e. always at the default front
// size): an LSD radix sort of 8-byte values (time - least time) << 8 | index into gathered_, in
// as many passes of at most 8 bits as the time span needs; the passes are stable, so equal times
// keep their gathered order, which is sequence order (see the header), and only the last step
// moves whole entries. Otherwise a comparison sort of indices on the full (time, order) key.
void RadixFrontQueue::sort_into_front() {
  const size_t n = gathered_.size();
  uint64_t lo = ~uint64_t{0};
  uint64_t hi = 0;
  for (const Entry& e : gathered_) {
    lo = std::min(lo, e.key);
    hi = std::max(hi, e.key);
  }
  const int span_bits = std::bit_width(hi - lo);
  if (span_bits == 0) {
    front_.assign(gathered_, /*ascending=*/true);
    return;
  }
  sorted_.resize(n);
  if (n > 256 || span_bits > 56) {
    sort_index_.resize(n);
    for (size_t i = 0; i < n; ++i) sort_index_[i] = i;
    std::sort(sort_index_.begin(), sort_index_.end(),
              [this](uint64_t a, uint64_t b) { return wide(gathered_[a]) > wide(gathered_[b]); });
    for (size_t i = 0; i < n; ++i) sorted_[i] = gathered_[sort_index_[i]];
    front_.assign(sorted_);
    return;
  }
  // As few passes of at most 8 bits as the span needs, the bits split evenly between them: fewer
  // counters to clear and sum than 8 bits a pass (an 18-bit span: 3 passes of 64 counters).
  const int passes = (span_bits + 7) / 8;
  const int digit_bits = (span_bits + passes - 1) / passes;
  const size_t bins = size_t{1} << digit_bits;
  const uint64_t mask = bins - 1;
  sort_index_.resize(n);
  sort_tmp_.resize(n);
  for (size_t i = 0; i < n; ++i) sort_index_[i] = (gathered_[i].key - lo) << 8 | i;
  std::array<uint32_t, 7 * 256> count;  // pass p: count[p * bins + digit]
  for (int p = 0; p < passes; ++p) {
    uint32_t* const c = count.data() + p * bins;
    const int shift = 8 + p * digit_bits;
    std::fill_n(c, bins, 0);
    for (const uint64_t v : sort_index_) ++c[v >> shift & mask];
    uint32_t sum = 0;  // counts -> first position of each digit
    for (size_t d = 0; d < bins; ++d) sum += std::exchange(c[d], sum);
  }
  std::vector<uint64_t>* src = &sort_index_;
  std::vector<uint64_t>* dst = &sort_tmp_;
  for (int p = 0; p + 1 < passes; ++p) {
    uint32_t* const c = count.data() + p * bins;
    const int shift = 8 + p * digit_bits;
    for (const uint64_t v : *src) (*dst)[c[v >> shift & mask]++] = v;
    std::swap(src, dst);
  }
  uint32_t* const c = count.data() + (passes - 1) * bins;
  const int shift = 8 + (passes - 1) * digit_bits;
  for (const uint64_t v : *src) sorted_[n - 1 - c[v >> shift & mask]++] = gathered_[v & 0xFF];
  front_.assign(sorted_);
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
// doubling, a power of two and at least 64 slots, so the bitmap has whole words.
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
  // The table size is a power of two (64, doubled), so the mask wraps the ring.
  __builtin_prefetch(&slots_[(at + kSlotAhead) & (slots_.size() - 1)], 1);
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
  front_.for_each([&](const Entry& e) {
    if (live(e)) all.push_back(e);
  });
  front_.clear();
  for (int b = 0; b < kBuckets; ++b) {
    const Bucket& bucket = buckets_[b];
    if (bucket.size == 0) continue;
    for (uint32_t block = bucket.head; block != kNoBlock; block = next_block_[block])
      for (const Entry* e = blocks_[block]; e != block_end(bucket, block); ++e)
        if (live(*e)) all.push_back(*e);
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
  front_.remove_if(stale);
  // In each bucket, live entries move forward over the stale ones (the write position never
  // passes the read position), then the blocks after the last written one are freed.
  for (int b = 0; b < kBuckets; ++b) {
    Bucket& bucket = buckets_[b];
    if (bucket.size == 0) continue;
    uint32_t out_block = bucket.head;
    Entry* out = blocks_[out_block];
    size_t kept = 0;
    for (uint32_t block = bucket.head; block != kNoBlock; block = next_block_[block]) {
      for (const Entry* e = blocks_[block]; e != block_end(bucket, block); ++e) {
        if (stale(*e)) continue;
        if (out == blocks_[out_block] + kBlockEntries) {
          out_block = next_block_[out_block];
          out = blocks_[out_block];
        }
        *out++ = *e;
        ++kept;
      }
    }
    if (kept == 0) {
      clear_bucket(b);
      continue;
    }
    for (uint32_t block = next_block_[out_block]; block != kNoBlock;) {
      const uint32_t next = next_block_[block];
      free_block(block);
      block = next;
    }
    next_block_[out_block] = kNoBlock;
    bucket.last = out_block;
    bucket.tail = out;
    bucket.room = static_cast<uint16_t>(blocks_[out_block] + kBlockEntries - out);
    bucket.size = static_cast<uint32_t>(kept);
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
  // Clearing the popped slot's liveness bit is a random write; start fetching the bit of an
  // entry a few pops ahead (the front is sorted, so it is known now).
  if (front_.size() >= kPopAhead) {
    const uint32_t ahead = slot_of(front_.from_back(kPopAhead - 1).order);
    __builtin_prefetch(&pending_[ahead >> 6], 1);
  }
  popped_key_ = e.key;
  set_free(slot_of(e.order));
  --size_;
  return PoppedEvent{radix::time_of(e.key), unpack(e.target), EventId(slot_of(e.order))};
}

}  // namespace sim
