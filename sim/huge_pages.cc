#include "sim/huge_pages.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sim {

namespace {
size_t rounded(size_t bytes) { return (bytes + kHugeThreshold - 1) / kHugeThreshold * kHugeThreshold; }
}  // namespace

void* map_huge(size_t bytes) {
#if defined(__linux__)
  void* p = mmap(nullptr, rounded(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  (void)madvise(p, rounded(bytes), MADV_HUGEPAGE);  // advice only: ignored where THP is off
  return p;
#else
  return ::operator new(bytes, std::align_val_t(64));
#endif
}

void unmap_huge(void* p, size_t bytes) {
#if defined(__linux__)
  munmap(p, rounded(bytes));
#else
  (void)bytes;
  ::operator delete(p, std::align_val_t(64));
#endif
}

}  // namespace sim
