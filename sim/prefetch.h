// sim/prefetch.h: cache hints for the hot paths (see EventHandler::prefetch): ask for every
// cache line of a range. A hint only: it changes nothing and may be dropped by the processor.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace sim {

inline constexpr uintptr_t kCacheLine = 64;

// Every line of [begin, end), for writing when `write`.
inline void prefetch_range(const void* begin, const void* end, bool write = false) {
  const auto last = reinterpret_cast<uintptr_t>(end);
  for (uintptr_t p = reinterpret_cast<uintptr_t>(begin) & ~(kCacheLine - 1); p < last; p += kCacheLine) {
    if (write)
      __builtin_prefetch(reinterpret_cast<const void*>(p), 1);
    else
      __builtin_prefetch(reinterpret_cast<const void*>(p), 0);
  }
}

// Runs body(i) for i = 0 .. n-1 in order, having called hint(j) for every j <= i + ahead first:
// the misses of items far apart in memory (a collective's members at 16k GPUs and more) overlap,
// in a window rather than all at once (a 131k-member group would evict its own first lines).
template <class Hint, class Body>
void for_each_prefetched(size_t n, size_t ahead, Hint&& hint, Body&& body) {
  for (size_t j = 0; j < std::min(ahead, n); ++j) hint(j);
  for (size_t i = 0; i < n; ++i) {
    if (i + ahead < n) hint(i + ahead);
    body(i);
  }
}

}  // namespace sim
