// sim/huge_pages.h: an allocator for the model's big per-element arrays (constraints, activities,
// links), which at 100k GPUs run to tens or hundreds of megabytes and are touched in random order.
//
// Blocks of 2 MiB or more are mapped directly and advised for transparent huge pages
// (madvise(MADV_HUGEPAGE); Linux's default THP mode "madvise" uses huge pages only where asked),
// so that one TLB entry covers 2 MiB instead of 4 KiB and first touch takes one page fault per
// 2 MiB instead of 512. Llama 3 405B step on 131,072 GPUs, symmetric: about a third less user CPU
// and most of the system time gone (measured with glibc's hugetlb tunable, which does the same for
// every allocation). Smaller blocks, and systems without madvise, use the ordinary allocator;
// where the kernel has THP off the advice is ignored and nothing else changes. Contents and
// results are the same either way: this changes only how memory is mapped.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace sim {

// Maps `bytes` (>= kHugeThreshold) just past a 2 MiB boundary, advised for huge pages; throws
// std::bad_alloc on failure. Under AddressSanitizer, and without madvise, it is operator new.
void* map_huge(size_t bytes);
void unmap_huge(void* p, size_t bytes);
inline constexpr size_t kHugeThreshold = size_t{2} << 20;
// A mapped block starts this many bytes or fewer past its 2 MiB boundary (a multiple of 64 that
// differs from block to block: see map_huge in huge_pages.cc).
inline constexpr size_t kMaxHugeColor = size_t{128} << 10;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(size_t n) {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugeThreshold) return static_cast<T*>(map_huge(bytes));
    return static_cast<T*>(::operator new(bytes, std::align_val_t(alignof(T))));
  }
  void deallocate(T* p, size_t n) noexcept {
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugeThreshold) {
      unmap_huge(p, bytes);
    } else {
      ::operator delete(p, std::align_val_t(alignof(T)));
    }
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using BigVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace sim
