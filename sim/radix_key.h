// sim/radix_key.h: what the two radix queues (radix_heap_queue.h, radix_front_queue.h) share:
// the time half of their (time, order) key and the radix-heap bucket of a key.
#pragma once

#include <bit>
#include <cstdint>

#include "sim/time.h"

namespace sim::radix {

// Time with the sign bit flipped, so that unsigned order is time order (negative times too).
inline constexpr uint64_t kSignBit = uint64_t{1} << 63;
inline uint64_t key_of(Time t) { return static_cast<uint64_t>(t.count_ns()) ^ kSignBit; }
inline Time time_of(uint64_t key) { return Time::ns(static_cast<int64_t>(key ^ kSignBit)); }

// Bucket of the 128-bit key (key, order) relative to the reference (last_key, last_order),
// digits kDigitBits wide: 0 when the key equals the reference; otherwise, for the highest digit
// position L where they differ and the key's digit d there, base + (L << kDigitBits) + d, with
// base 0 when the times are equal (the difference is in the order half) and
// (64 / kDigitBits) << kDigitBits when they are not. Bucket order is key order for keys >= the
// reference (Ahuja, Mehlhorn, Orlin, Tarjan 1990).
template <int kDigitBits>
uint32_t bucket_of(uint64_t key, uint64_t order, uint64_t last_key, uint64_t last_order) {
  static_assert(64 % kDigitBits == 0, "digits must tile a 64-bit word");
  constexpr int kDigitsPerWord = 64 / kDigitBits;
  const uint64_t hi = key ^ last_key;
  const uint64_t lo = order ^ last_order;
  if ((hi | lo) == 0) return 0;
  const bool in_time = hi != 0;
  const uint64_t diff = in_time ? hi : lo;
  const uint64_t word = in_time ? key : order;
  const uint32_t base = in_time ? (kDigitsPerWord << kDigitBits) : 0;
  const int level = (63 - std::countl_zero(diff)) / kDigitBits;
  const uint32_t digit = static_cast<uint32_t>(word >> (level * kDigitBits)) & ((1u << kDigitBits) - 1);
  return base + (static_cast<uint32_t>(level) << kDigitBits) + digit;
}

}  // namespace sim::radix
