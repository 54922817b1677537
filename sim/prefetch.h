// sim/prefetch.h: cache hints for the hot paths (see EventHandler::prefetch): ask for every
// cache line of a range. A hint only: it changes nothing and may be dropped by the processor.
#pragma once

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

}  // namespace sim
