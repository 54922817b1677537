// The big-array allocator: a vector grown across the 2 MiB threshold (ordinary blocks, then mapped
// ones) keeps every element, mapped blocks are 64-byte aligned for the 64-byte records, and
// freeing and reallocating works. Values are the index itself, so each check is independent.
#include <gtest/gtest.h>

#include <cstdint>

#include "sim/huge_pages.h"

namespace sim {
namespace {

struct alignas(64) Record {
  uint64_t value = 0;
  char pad[56] = {};
};

TEST(HugePages, VectorGrownAcrossTheThresholdKeepsItsElements) {
  BigVector<Record> v;
  constexpr uint64_t kN = 3 * (kHugeThreshold / sizeof(Record));  // ends in a 6 MiB block
  for (uint64_t i = 0; i < kN; ++i) {
    v.push_back(Record{i, {}});
    ASSERT_EQ(reinterpret_cast<uintptr_t>(v.data()) % 64, 0u) << "after " << i + 1 << " elements";
  }
  for (uint64_t i = 0; i < kN; ++i) ASSERT_EQ(v[i].value, i);
  v.clear();
  v.shrink_to_fit();
  v.resize(kN / 2);
  for (uint64_t i = 0; i < kN / 2; ++i) ASSERT_EQ(v[i].value, 0u) << "value-initialised after reallocation";
}

TEST(HugePages, SmallBlocksUseTheOrdinaryAllocator) {
  BigVector<uint32_t> v(1000, 7);
  for (uint32_t x : v) ASSERT_EQ(x, 7u);
  BigVector<uint32_t> w = v;  // copies with the same allocator
  w[0] = 1;
  EXPECT_EQ(v[0], 7u);
}

}  // namespace
}  // namespace sim
