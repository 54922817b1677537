// sim/radix_front_queue.h: EventQueue as radix-heap buckets for the far future plus a small
// sorted front for the near future, built so that the hot path touches memory only
// sequentially or at a few cache-resident places.
//
// Keys: the 128-bit pair (time, order), order = seq << kSlotBits | slot, as in
// radix_heap_queue.h: unique, and every key pushed is above the last key popped, so FIFO order
// among equal times is just key order.
//
// Layout:
// - front_: about front_max_ entries or fewer (more only when a refill takes a large bucket of one
//   time, below), sorted in descending key order; pop takes the back.
//   Every front entry is <= last_; a push below last_ is put in place: binary search for its leaf
//   of at most 64 entries, then within it, and only that leaf's tail moves (see Front).
// - buckets_: every other entry, in radix-heap buckets relative to last_ (Ahuja, Mehlhorn,
//   Orlin, Tarjan 1990): bucket by the highest kDigitBits-wide digit position where the key
//   differs from last_ and the key's digit there. Bucket order is key order. A bucket is a chain
//   of fixed-size blocks (kBlockEntries) from one pool with a free list, last freed first: no
//   bucket ever reallocates or copies, and a block freed by a spread or a refill is reused while
//   its lines are still cached.
// - Refill (when the front is empty): while the lowest bucket holds more than front_max_ entries
//   of more than one time, raise last_ to that bucket's floor (the least key it can hold: last_'s
//   digits above its level, its digit there, zeros below) and spread it over lower buckets (each
//   entry moves at least one digit position down); then take the lowest buckets whole while they
//   fit in front_max_, sort them into the front and raise last_ to their greatest key. Any key in
//   the range of the lowest bucket may become last_ without moving the entries of higher buckets,
//   which is what both steps use; the floor needs no scan for the least key, so a spread reads
//   its bucket once. A lowest bucket whose entries all have one time is taken whole, however
//   many it holds: it is already in key order (see below), and spreading it would only split it
//   by sequence digits, one pass per digit. In data-parallel runs thousands of ranks finish
//   identical kernels at the same nanosecond (Llama 3 405B step, 16k GPUs: 137.6 M entries
//   spread for 32.2 M pushes, 119 M of them in such buckets).
// - Sorting the front: a stable least-significant-digit radix sort on the time offset from the
//   least time, 8 bits per pass, as many passes as the time span needs (none when all times are
//   equal), of 8-byte (offset, index) values; whole entries move once, at the end. Stability
//   suffices for FIFO because, in the gathered buckets, entries of equal time
//   already appear in sequence order: they always share a bucket (the bucket of a key depends
//   only on its time unless its time equals last_'s, and then on its order, in order), pushes
//   append (a fresh seq is the largest), a spread moves entries in order into buckets that were
//   empty, and removing stale entries keeps order.
// Cancel and reschedule are lazy: each slot records its live entry's order and target; an
// entry is live iff slots_[slot].order == entry.order. Reschedule gives the slot a fresh order
// and places a new entry; cancel sets the order to kFreeOrder; the old entry goes stale where it
// is and is dropped when it reaches the back of the front. While nothing is stale (stale_ == 0)
// pop reads no slot at all. When stale entries outnumber live ones by more than kStaleSlack one
// sweep removes them all (paid for by the operations that made them: O(1) amortized each).
// Slot liveness is one bit per slot (pending_), set at push and cleared at pop and cancel: the
// bitmap is 1/192 the size of the slot table, so that random write stays in the L2 cache while
// the slot table itself is never written at pop; pop prefetches the bit's word kPopAhead entries
// ahead in the front. Free slots are taken in ring order (the next
// clear bit after the cursor), so pushes write the slot table sequentially instead of reusing
// the just-popped slot, whose line is cold; the table is kept at least twice the pending count,
// so a free bit is nearly always in the word at the cursor.
// Why this shape (tests/bench/bench_engine.cc, hold model at 10^6 pending): an entry is written
// at push, read and written once or twice by spreads, and sorted once inside the cache, where a
// pure radix heap moves it about log_16(span) times; appends to a bucket prefetch its tail for
// writing a few entries ahead, which turns the store misses of scattered appends (the dominant
// cost once the buckets leave the L2 cache) into background fetches.
// Memory: 24 bytes per entry (live or stale) + at most one partly filled block per non-empty
// bucket + 16 bytes and 1 bit per slot, at most 2 slots per pending event; the refill scratch and
// the front's leaves grow to the largest bucket of one time taken whole (about 56 bytes per
// entry). Freed blocks and vectors keep their memory, so a queue that has grown does not
// allocate again.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "sim/event_queue.h"
#include "sim/huge_pages.h"
#include "sim/radix_key.h"

namespace sim {

class RadixFrontQueue final : public EventQueue {
 public:
  static constexpr int kSlotBits = 28;  // up to 268M slots
  // One below 2^(64 - kSlotBits), so no live order equals kFreeOrder (all ones).
  static constexpr uint64_t kMaxSeq = (uint64_t{1} << (64 - kSlotBits)) - 1;
  static constexpr size_t kStaleSlack = 1024;
  static constexpr size_t kMaxStaleSlack = size_t{1} << 30;  // a larger slack is taken as this
  // Front size: small enough that a sorted insert moves little and the sort runs in L1; large
  // enough to amortise a refill (hold benchmark: 64 is slower, 1024 makes pushes into the front
  // common at small pending counts).
  static constexpr size_t kFrontMax = 256;

  // seq_limit: renumber sequence numbers when they reach it; stale_slack: compact when stale
  // entries exceed live ones by more than this; front_max: the front's size (tests lower all
  // three to exercise renumbering, compaction and spreading with few events).
  explicit RadixFrontQueue(uint64_t seq_limit = kMaxSeq, size_t stale_slack = kStaleSlack,
                           size_t front_max = kFrontMax);

  EventId push(Time t, EventTarget target) override;
  void reschedule(EventId id, Time t) override;
  void cancel(EventId id) override;
  bool empty() const override { return size_ == 0; }
  size_t size() const override { return size_; }
  Time next_time() override;
  PoppedEvent pop() override;
  bool peek(size_t ahead, EventTarget& out) const override {
    if (front_.size() <= ahead) return false;
    out = unpack(front_.from_back(ahead).target);
    return true;
  }
  std::string_view name() const override { return "radix-front"; }

  // Entries held, live or stale (a test checks the bound on stale ones).
  size_t entries() const { return size_ + stale_; }

 private:
  __extension__ using Key128 = unsigned __int128;
  static constexpr uint64_t kFreeOrder = ~uint64_t{0};
  static constexpr uint64_t kSlotMask = (uint64_t{1} << kSlotBits) - 1;
  // 8-bit digits: at 10^6 pending an entry is spread about once before it reaches the front
  // (4-bit digits: about four times).
  static constexpr int kDigitBits = 8;
  static constexpr int kDigitsPerWord = 64 / kDigitBits;
  static constexpr int kBuckets = 2 * kDigitsPerWord << kDigitBits;  // 4096
  static constexpr int kMaskWords = kBuckets / 64;
  static_assert(kMaskWords <= 64, "one summary word indexes the mask words");
  // Appends prefetch the bucket's tail this many entries ahead (3 cache lines).
  static constexpr size_t kPrefetchAhead = 8;
  // Pop prefetches the liveness word of the entry this many places ahead in the front.
  static constexpr size_t kPopAhead = 8;
  // Push prefetches the slot this many places after the one it takes: the ring writes the slot
  // table (larger than the caches at 10^6 pending) in order, a new line every 4 slots.
  static constexpr size_t kSlotAhead = 32;
  // Bucket blocks: 168 entries = 4032 bytes = 63 cache lines, allocated 64 at a time (252 KiB)
  // when the free list runs out.
  static constexpr size_t kBlockEntries = 168;
  static constexpr size_t kBlocksPerChunk = 64;
  static constexpr uint32_t kNoBlock = ~uint32_t{0};

  // Read and written as three 8-byte scalars (see pack()).
  struct Entry {
    uint64_t key;    // time with the sign bit flipped, so unsigned order is time order
    uint64_t order;  // seq << kSlotBits | slot
    uint64_t target;
  };
  // The front's storage: the descending run cut into leaves of at most kLeaf entries, each a
  // small sorted array, listed in order (order_[0] holds the largest keys, order_.back() the
  // least, whose last entry is the next to pop). An insert finds its leaf by binary search over
  // the leaves' least keys and moves at most one leaf's entries; a full leaf splits in two. A
  // single sorted array moved hundreds of entries per insert in dense runs (Llama 3 405B step,
  // 16k GPUs: a quarter of the events are inserted into a front of up to 4,111 entries, 174
  // entries moved on average, 4.5% of the run in memmove; 240 at 32k).
  class Front {
   public:
    static constexpr uint32_t kLeaf = 64;
    size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    // The entry `k` places from the back (0: the least key). Only for k < size().
    const Entry& from_back(size_t k) const {
      for (size_t o = order_.size(); o-- > 0;) {
        const Leaf& leaf = pool_[order_[o]];
        if (k < leaf.n) return leaf.e[leaf.n - 1 - k];
        k -= leaf.n;
      }
      return pool_[order_[0]].e[0];  // not reached for k < size()
    }
    const Entry& back() const {
      const Leaf& leaf = pool_[order_.back()];
      return leaf.e[leaf.n - 1];
    }
    const Entry& front() const { return pool_[order_.front()].e[0]; }  // the largest key
    void pop_back() {
      Leaf& leaf = pool_[order_.back()];
      --size_;
      if (--leaf.n == 0) {
        free_.push_back(order_.back());
        order_.pop_back();
      }
    }
    void clear() {
      for (uint32_t id : order_) free_.push_back(id);
      order_.clear();
      size_ = 0;
    }
    // Replaces the content with `sorted` (descending), or with `sorted` reversed when it is
    // ascending; leaves three-quarters full.
    void assign(const std::vector<Entry>& sorted, bool ascending = false) {
      clear();
      constexpr size_t kFill = kLeaf * 3 / 4;
      const size_t n = sorted.size();
      for (size_t at = 0; at < n; at += kFill) {
        const uint32_t id = take();
        Leaf& leaf = pool_[id];
        leaf.n = static_cast<uint32_t>(std::min(kFill, n - at));
        if (ascending) {
          const auto end = sorted.begin() + static_cast<ptrdiff_t>(n - at);
          std::reverse_copy(end - leaf.n, end, leaf.e.begin());
        } else {
          std::copy_n(sorted.begin() + static_cast<ptrdiff_t>(at), leaf.n, leaf.e.begin());
        }
        order_.push_back(id);
      }
      size_ = n;
    }
    // Puts `x` after every greater key.
    void insert(const Entry& x) {
      const Key128 w = wide(x);
      if (order_.empty()) {
        order_.push_back(take());
      }
      // The first leaf whose least key is below w (else the last leaf: w is the least of all).
      size_t lo = 0, hi = order_.size() - 1;
      while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        const Leaf& leaf = pool_[order_[mid]];
        if (wide(leaf.e[leaf.n - 1]) < w) hi = mid;
        else lo = mid + 1;
      }
      if (pool_[order_[lo]].n == kLeaf) {  // split: the upper half stays, the lower half follows
        const uint32_t id = take();
        Leaf& full = pool_[order_[lo]];
        Leaf& half = pool_[id];
        half.n = kLeaf / 2;
        full.n = kLeaf - kLeaf / 2;
        std::copy_n(full.e.begin() + full.n, half.n, half.e.begin());
        order_.insert(order_.begin() + static_cast<ptrdiff_t>(lo) + 1, id);
        if (wide(full.e[full.n - 1]) > w) ++lo;  // w belongs below the upper half
      }
      Leaf& leaf = pool_[order_[lo]];
      uint32_t at = 0, end = leaf.n;
      while (at < end) {
        const uint32_t mid = at + (end - at) / 2;
        if (wide(leaf.e[mid]) < w) end = mid;
        else at = mid + 1;
      }
      std::copy_backward(leaf.e.begin() + at, leaf.e.begin() + leaf.n, leaf.e.begin() + leaf.n + 1);
      leaf.e[at] = x;
      ++leaf.n;
      ++size_;
    }
    template <class F>
    void for_each(F f) const {
      for (uint32_t id : order_)
        for (uint32_t i = 0; i < pool_[id].n; ++i) f(pool_[id].e[i]);
    }
    // Drops the entries `drop` says to, keeping order.
    template <class P>
    void remove_if(P drop) {
      size_t kept_leaves = 0;
      size_ = 0;
      for (uint32_t id : order_) {
        Leaf& leaf = pool_[id];
        uint32_t out = 0;
        for (uint32_t i = 0; i < leaf.n; ++i)
          if (!drop(leaf.e[i])) leaf.e[out++] = leaf.e[i];
        leaf.n = out;
        size_ += out;
        if (out == 0) free_.push_back(id);
        else order_[kept_leaves++] = id;
      }
      order_.resize(kept_leaves);
    }

   private:
    struct Leaf {
      uint32_t n = 0;
      std::array<Entry, kLeaf> e;
    };
    uint32_t take() {
      if (free_.empty()) {
        pool_.emplace_back();
        return static_cast<uint32_t>(pool_.size() - 1);
      }
      const uint32_t id = free_.back();
      free_.pop_back();
      pool_[id].n = 0;
      return id;
    }
    std::vector<Leaf> pool_;
    std::vector<uint32_t> free_;   // leaves not in use, last freed first
    std::vector<uint32_t> order_;  // the leaves in use, largest keys first
    size_t size_ = 0;
  };
  // A bucket is a chain of fixed-size blocks, appended at the tail block. `one_time`: every entry
  // appended since the bucket was last empty has time `time` (entries made stale since may
  // remain; they are dropped at the back of the front as usual). 32 bytes, two to a line.
  struct Bucket {
    Entry* tail = nullptr;  // next free entry of the tail block
    uint64_t time = 0;      // the key part of the first entry appended
    uint32_t head = kNoBlock;
    uint32_t last = kNoBlock;  // the tail block
    // Entries held, live or stale: below 2^32, since live ones have a slot each (< 2^kSlotBits)
    // and stale ones are compacted once they outnumber them by more than the slack (<= 2^30).
    uint32_t size = 0;
    uint16_t room = 0;  // free entries left in the tail block; 0: the next append takes a block
    bool one_time = true;
  };
  static_assert(sizeof(Bucket) == 32);
  static_assert(kBlockEntries <= UINT16_MAX);
  struct Slot {
    uint64_t order;  // of the slot's live entry; kFreeOrder when never used or cancelled
    uint64_t target;
  };

  static Key128 wide(uint64_t key, uint64_t order) { return (static_cast<Key128>(key) << 64) | order; }
  static Key128 wide(const Entry& e) { return wide(e.key, e.order); }
  static uint64_t key_part(Key128 w) { return static_cast<uint64_t>(w >> 64); }
  static uint64_t order_part(Key128 w) { return static_cast<uint64_t>(w); }
  static uint32_t slot_of(uint64_t order) { return static_cast<uint32_t>(order & kSlotMask); }
  // Bit copies, not shifts: the target is stored as one 8-byte word wherever it goes, and the
  // caller's 8-byte read of PoppedEvent::target forwards from that store. (Two 4-byte stores
  // read as 8 bytes cannot forward and would wait for the store buffer to drain.)
  static_assert(sizeof(EventTarget) == sizeof(uint64_t));
  static uint64_t pack(EventTarget t) { return std::bit_cast<uint64_t>(t); }
  static EventTarget unpack(uint64_t p) { return std::bit_cast<EventTarget>(p); }

  bool live(const Entry& e) const { return slots_[slot_of(e.order)].order == e.order; }
  bool pending(uint32_t slot) const { return (pending_[slot >> 6] >> (slot & 63) & 1) != 0; }
  void set_free(uint32_t slot) { pending_[slot >> 6] &= ~(uint64_t{1} << (slot & 63)); }
  uint32_t bucket_of(Key128 w) const {
    return radix::bucket_of<kDigitBits>(key_part(w), order_part(w), key_part(last_), order_part(last_));
  }
  void place(Key128 w, uint64_t target);       // into the front or a bucket
  void insert(Key128 w, uint64_t target);      // into a bucket; only when w > last_
  void insert_front(Key128 w, uint64_t target);
  uint32_t take_block();
  void free_block(uint32_t block);
  void append_block(Bucket& bucket);
  Entry* block_end(const Bucket& bucket, uint32_t block) const {
    return block == bucket.last ? bucket.tail : blocks_[block] + kBlockEntries;
  }
  void mark_nonempty(int b);
  void clear_bucket(int b);
  int lowest_bucket() const;  // lowest non-empty bucket, -1 if none
  Key128 bucket_floor(int b) const;
  void spread(int b);
  void refill();              // only when the front is empty and something is held
  void sort_into_front();     // gathered_ -> front_, descending
  void settle_front();        // drops stale entries at the back until the live minimum is there
  uint32_t take_slot();
  uint64_t next_order(uint32_t slot);
  void renumber();
  void compact();
  uint32_t live_slot(EventId id) const;

  std::array<Bucket, kBuckets> buckets_;
  std::vector<Entry*> blocks_;          // block id -> its entries, inside chunks_
  std::vector<uint32_t> next_block_;    // the next block of a bucket's chain, or of the free list
  uint32_t free_blocks_ = kNoBlock;     // free list, last freed first (its lines are likely cached)
  std::vector<std::unique_ptr<Entry[]>> chunks_;
  std::array<uint64_t, kMaskWords> nonempty_{};  // bit b: buckets_[b] is not empty
  uint64_t summary_ = 0;                         // bit w: nonempty_[w] != 0
  Front front_;                                  // descending; every entry <= last_
  std::vector<Entry> gathered_;                  // refill scratch, capacity kept
  std::vector<Entry> sorted_;                    // gathered_ sorted, descending, before the front takes it
  std::vector<uint64_t> sort_index_, sort_tmp_;  // sort scratch, capacity kept  // refill scratch, capacity kept
  BigVector<Slot> slots_;
  std::vector<uint64_t> pending_;  // bit s: slot s holds a pending event
  size_t cursor_ = 0;              // take_slot() looks for a free slot from here, in ring order
  size_t size_ = 0;    // live entries
  size_t stale_ = 0;   // stale entries still held
  Key128 last_ = 0;    // bucket reference: every bucket entry is > it, every front entry <= it
  uint64_t popped_key_ = 0;  // time of the last pop; no push may be earlier
  uint64_t next_seq_ = 1;
  uint64_t seq_limit_;
  size_t stale_slack_;
  size_t front_max_;
};

}  // namespace sim
