#include "sim/huge_pages.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdint>

// Under AddressSanitizer every block comes from operator new, so that the sanitizer sees the big
// arrays too (a mapped block is invisible to it).
#if defined(__SANITIZE_ADDRESS__)
#define CLUSTERSIM_PLAIN_BIG_BLOCKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLUSTERSIM_PLAIN_BIG_BLOCKS 1
#endif
#endif
#if !defined(__linux__) || !defined(MADV_HUGEPAGE)
#define CLUSTERSIM_PLAIN_BIG_BLOCKS 1
#endif

namespace sim {

namespace {
size_t rounded(size_t bytes) { return (bytes + kHugeThreshold - 1) / kHugeThreshold * kHugeThreshold; }

// Each block starts `color` bytes past its 2 MiB boundary, a multiple of 64 below 128 KiB drawn
// from the boundary's address. Blocks all starting on a boundary put element i of every per-rank
// or per-link array in the same cache set, where the event path reads several of them for one
// rank at once: they evicted each other from the L1 and L2 caches (Llama 3 405B step on 131,072
// GPUs: about 6% slower with more arrays on huge pages, before this offset).
size_t color_of(uintptr_t boundary) {
  return static_cast<size_t>(((boundary >> 21) * 0x9E3779B97F4A7C15ull) >> 53) * 64 % kMaxHugeColor;
}
}  // namespace

void* map_huge(size_t bytes) {
#if defined(CLUSTERSIM_PLAIN_BIG_BLOCKS)
  return ::operator new(bytes, std::align_val_t(64));
#else
  // mmap promises only page alignment, and a huge page needs a 2 MiB-aligned address: map 2 MiB
  // more, then give back the head before the first boundary and the tail after the block.
  const size_t len = rounded(bytes + kMaxHugeColor);
  void* raw = mmap(nullptr, len + kHugeThreshold, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = (start + kHugeThreshold - 1) / kHugeThreshold * kHugeThreshold;
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + len + kHugeThreshold;
  if (end > aligned + len) munmap(reinterpret_cast<void*>(aligned + len), end - (aligned + len));
  void* p = reinterpret_cast<void*>(aligned);
  (void)madvise(p, len, MADV_HUGEPAGE);  // advice only: ignored where THP is off
  return static_cast<char*>(p) + color_of(aligned);
#endif
}

void unmap_huge(void* p, size_t bytes) {
#if defined(CLUSTERSIM_PLAIN_BIG_BLOCKS)
  (void)bytes;
  ::operator delete(p, std::align_val_t(64));
#else
  const uintptr_t boundary = reinterpret_cast<uintptr_t>(p) / kHugeThreshold * kHugeThreshold;
  munmap(reinterpret_cast<void*>(boundary), rounded(bytes + kMaxHugeColor));
#endif
}

}  // namespace sim
