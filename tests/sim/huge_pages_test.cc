// The big-array allocator: a vector grown across the 2 MiB threshold (ordinary blocks, then mapped
// ones) keeps every element, mapped blocks are 64-byte aligned for the 64-byte records, and
// freeing and reallocating works. Values are the index itself, so each check is independent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/huge_pages.h"

namespace sim {
namespace {

struct alignas(64) Record {
  uint64_t value = 0;
  char pad[56] = {};
};

TEST(HugePages, VectorGrownAcrossTheThresholdKeepsItsElements) {
  BigVector<Record> v;
  constexpr uint64_t kN = 3 * (kHugeThreshold / sizeof(Record));  // 6 MiB of records
  for (uint64_t i = 0; i < kN; ++i) {
    v.push_back(Record{i, {}});
    ASSERT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << "after " << i + 1 << " elements";
#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
    // A mapped block starts just past a 2 MiB boundary (so that it can be backed by huge pages).
    if (v.capacity() * sizeof(Record) >= kHugeThreshold) {
      ASSERT_LT(reinterpret_cast<uintptr_t>(v.data()) % kHugeThreshold, kMaxHugeColor) << "after " << i + 1 << " elements";
    }
#endif
  }
  for (uint64_t i = 0; i < kN; ++i) ASSERT_EQ(v[i].value, i);
  v.clear();
  v.shrink_to_fit();
  v.resize(kN / 2);
  for (uint64_t i = 0; i < kN / 2; ++i) ASSERT_EQ(v[i].value, 0u) << "value-initialised after reallocation";
}

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
TEST(HugePages, MappedBlocksStartAtDifferentOffsetsPastTheirBoundaries) {
  // Blocks that all began on a 2 MiB boundary would put element i of each in the same cache set.
  std::vector<BigVector<uint64_t>> blocks;
  std::vector<uintptr_t> offsets;
  for (int i = 0; i < 8; ++i) {
    blocks.emplace_back(kHugeThreshold / sizeof(uint64_t), uint64_t{1});
    const auto at = reinterpret_cast<uintptr_t>(blocks.back().data());
    EXPECT_EQ(at % 64, 0u);
    EXPECT_LT(at % kHugeThreshold, kMaxHugeColor);
    offsets.push_back(at % kHugeThreshold);
  }
  std::sort(offsets.begin(), offsets.end());
  EXPECT_GT(std::unique(offsets.begin(), offsets.end()) - offsets.begin(), 1);
}
#endif

TEST(HugePages, SmallBlocksAndCopiesAreIndependent) {
  BigVector<uint32_t> v(1000, 7);
  for (uint32_t x : v) ASSERT_EQ(x, 7u);
  BigVector<uint32_t> w = v;  // copies with the same allocator
  w[0] = 1;
  EXPECT_EQ(v[0], 7u);
  BigVector<uint32_t> big(kHugeThreshold, 3);  // 8 MiB, mapped
  BigVector<uint32_t> big_copy = big;
  big_copy[12345] = 4;
  EXPECT_EQ(big[12345], 3u);
  EXPECT_EQ(big_copy[12345], 4u);
}

}  // namespace
}  // namespace sim
