// sim/random.h: named, seeded random streams.
//
// Each purpose (failures, jitter, ECMP hashing, ...) draws from its own std::mt19937_64 whose seed
// is derived from (simulation seed, FNV-1a hash of the stream's name) through splitmix64. Adding a
// consumer with a new name therefore never shifts the values another stream produces, and the
// same (seed, name) gives the same sequence on every platform (mt19937_64 and these hashes are
// fully specified). Deriving a stream is O(length of name) plus the engine's seeding; keep the
// engine, do not re-derive per draw. No global state: each Simulation owns its RandomStreams.
#pragma once

#include <cstdint>
#include <random>
#include <string_view>

namespace sim {

// One step of Steele, Lea and Flood's splitmix64 finalizer: a bijective 64-bit mixer, so distinct
// inputs stay distinct and nearby inputs (seed 1, seed 2) give unrelated outputs.
constexpr uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// 64-bit FNV-1a of the bytes of name.
constexpr uint64_t hash_name(std::string_view name) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const char c : name) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001B3ull;
  }
  return h;
}

class RandomStreams {
 public:
  explicit RandomStreams(uint64_t seed) : seed_(seed) {}

  uint64_t seed() const { return seed_; }
  // The seed of stream `name`: the seed is mixed before the name hash is folded in, so that
  // (seed, name) pairs do not collide through a simple xor of the two.
  uint64_t stream_seed(std::string_view name) const { return splitmix64(splitmix64(seed_) ^ hash_name(name)); }
  std::mt19937_64 stream(std::string_view name) const { return std::mt19937_64(stream_seed(name)); }

 private:
  uint64_t seed_;
};

}  // namespace sim
