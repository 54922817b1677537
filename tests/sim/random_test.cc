// Tests for sim/random.h: named streams are reproducible and independent of each other.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "sim/random.h"

namespace sim {
namespace {

std::vector<uint64_t> draw(std::mt19937_64 g, int n) {
  std::vector<uint64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(g());
  return v;
}

TEST(RandomHelpers, KnownValues) {
  // FNV-1a 64 of "" is the offset basis; of "a" is a published test vector.
  EXPECT_EQ(hash_name(""), 0xCBF29CE484222325ull);
  EXPECT_EQ(hash_name("a"), 0xAF63DC4C8601EC8Cull);
  // splitmix64 seeded with 0: first output of the reference generator.
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  static_assert(hash_name("failures") != hash_name("jitter"));
}

TEST(RandomStreams, SameSeedAndNameGiveTheSameSequence) {
  const RandomStreams a(7), b(7);
  EXPECT_EQ(draw(a.stream("failures"), 100), draw(b.stream("failures"), 100));
  EXPECT_EQ(draw(a.stream("failures"), 100), draw(a.stream("failures"), 100));
}

TEST(RandomStreams, DifferentNamesDiffer) {
  const RandomStreams r(7);
  EXPECT_NE(draw(r.stream("failures"), 10), draw(r.stream("jitter"), 10));
  EXPECT_NE(draw(r.stream("ecmp"), 10), draw(r.stream("ecmq"), 10));
  EXPECT_NE(r.stream_seed("a"), r.stream_seed("b"));
}

TEST(RandomStreams, DifferentSeedsDiffer) {
  EXPECT_NE(draw(RandomStreams(1).stream("jitter"), 10), draw(RandomStreams(2).stream("jitter"), 10));
  EXPECT_EQ(RandomStreams(1).seed(), 1u);
}

TEST(RandomStreams, AddingAStreamDoesNotShiftAnother) {
  // Consumer "failures" alone, then interleaved with a new consumer "jitter": same values.
  const RandomStreams r(42);
  const std::vector<uint64_t> alone = draw(r.stream("failures"), 50);

  std::mt19937_64 failures = r.stream("failures");
  std::mt19937_64 jitter = r.stream("jitter");
  std::vector<uint64_t> with_other;
  for (int i = 0; i < 50; ++i) {
    jitter();
    jitter();
    with_other.push_back(failures());
  }
  EXPECT_EQ(alone, with_other);
}

}  // namespace
}  // namespace sim
